"""Expected outputs for EvalPlus tasks: each reference solution run once on each input.

EvalPlus stores inputs only and computes expected outputs by running the reference
(`evalplus/evaluate.py`, `get_groundtruth`), recording each call's time for the time limits.
Here the reference runs in the sandbox as a stdio program with a small driver appended: the
driver decodes each input, times the call, and prints one line per input, the output as tagged
JSON. The whole stdout comes back (`OUTPUT_CAP`, far over the 64 KiB the sandbox keeps of an
ordinary run), so an output of tens of megabytes is computed once and read once: HumanEval/15's
references print 147 MB in all. A run starts no further input once it has printed `SOFT_BYTES`
or run `SOFT_SECONDS`; the parent sends the inputs it never started to a later run, so an input
is computed twice only when its own run dies on it (a limit), to find which input did it.

This module is the pure part (the driver, batching, reading what a run printed, deciding what
runs next); the sandbox layer runs it (`execrl.sandbox.reference_runner.sandbox_runner`), so
tasks never imports the sandbox.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from execrl.tasks.errors import TaskDataError
from execrl.tasks.values import loads, to_json

MARK = "\x1eEXECRL\t"
BATCH_ITEMS = 500  # inputs sent to one run; it may stop early (the soft budgets below)
BATCH_BYTES = 4 << 20  # of encoded inputs sent to one run
SOFT_BYTES = 32 << 20  # a run starts no further input once it has printed this much
SOFT_SECONDS = 10.0  # or once it has run this long
# A run's stdout cap: the sandbox's cap on what a candidate's run may return (its channel,
# 256 MiB), so an output too large to come back here could not come back from a candidate.
OUTPUT_CAP = 256 << 20
MAX_NODES = 2_000_000  # execrl.sandbox.run.plain.MAX_NODES: the largest value a run can return
TOO_BIG = "OutputTooLarge"
# The run verdicts that mean the reference needs more than the sandbox gives any program: the
# input is left out (a candidate could not be graded on it either), never an error.
LIMIT_VERDICTS = ("TIMEOUT", "MEMORY_LIMIT", "OUTPUT_LIMIT")


@dataclass(frozen=True, slots=True)
class ReferenceRun:
    """Run `program`'s `entry_point` on each input; `not_none` keeps only `output is not None`."""

    key: str
    program: str
    entry_point: str
    inputs: tuple[tuple[Any, ...], ...]
    not_none: bool = False


@dataclass(frozen=True, slots=True)
class ReferenceOutputs:
    outputs: tuple[Any, ...]  # None at the excluded inputs
    seconds: tuple[float, ...]
    # Inputs whose reference run exceeds what the sandbox lets any program do (its memory or
    # time limit, or an output over MAX_NODES values, which no candidate could return either),
    # with the reason: they cannot be graded here, so loaders leave them out and record them.
    excluded: dict[int, str] = field(default_factory=dict)
    # Each output as the tagged JSON its run printed ("null" where excluded), when a runner
    # has it: a cache stores it as it is, rather than encoding a hundred megabytes again.
    texts: tuple[str, ...] = ()


Done = Callable[[str, ReferenceOutputs], None]


class ReferenceRunner(Protocol):
    """Runs reference programs and returns their outputs by `ReferenceRun.key`; injected so
    that tests and callers choose. `on_done`, if given, gets each run's outputs as soon as all
    its inputs are in, so a caller can keep them (a cache) before the rest finish."""

    def __call__(
        self, runs: Sequence[ReferenceRun], on_done: Done | None = None
    ) -> dict[str, ReferenceOutputs]: ...


DRIVER = r"""

def __execrl_driver():
    import base64, contextlib, io, json, math, sys, time

    budget = [0]

    def enc(v):
        budget[0] -= 1
        if budget[0] < 0:
            raise OverflowError("OutputTooLarge")
        t = type(v)
        if t is int and v.bit_length() > 14_000:  # over ~4,200 digits: JSON cannot carry it
            raise OverflowError("OutputTooLarge")
        if v is None or t is bool or t is int or t is str:
            return v
        if t is float:
            return v if math.isfinite(v) else {"$f": repr(v)}
        if t is list:
            return [enc(x) for x in v]
        if t is tuple:
            return {"$t": [enc(x) for x in v]}
        if isinstance(v, dict):  # Counter, defaultdict, OrderedDict: EvalPlus compares with ==
            return {"$d": [[enc(k), enc(x)] for k, x in v.items()]}
        if t is set or t is frozenset:
            return {"$s" if t is set else "$fs": [enc(x) for x in v]}
        if t is bytes:
            return {"$b": base64.b64encode(v).decode()}
        if t is complex:
            return {"$c": [enc(v.real), enc(v.imag)]}
        raise TypeError("returned a value of type %r, which is not plain data" % t.__name__)

    def dec(v):
        if isinstance(v, list):
            return [dec(x) for x in v]
        if not isinstance(v, dict):
            return v
        ((tag, body),) = v.items()
        return {
            "$t": lambda: tuple(dec(x) for x in body),
            "$d": lambda: {dec(k): dec(x) for k, x in body},
            "$s": lambda: {dec(x) for x in body},
            "$fs": lambda: frozenset(dec(x) for x in body),
            "$f": lambda: float(body),
            "$b": lambda: base64.b64decode(body),
            "$c": lambda: complex(dec(body[0]), dec(body[1])),
        }[tag]()

    req = json.loads(sys.stdin.read())
    with contextlib.redirect_stdout(io.StringIO()):  # what the reference prints is not output
        exec(compile(__execrl_source, "<reference>", "exec"), globals())
    fn = globals()[req["entry"]]
    out, used, start, mark = sys.stdout, 0, time.monotonic(), req["mark"]
    for k, (i, args) in enumerate(req["items"]):
        if k and (used >= req["soft_bytes"] or time.monotonic() - start >= req["soft_s"]):
            break  # the parent sends the inputs not started to another run
        args = dec(args)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                t0 = time.perf_counter()
                value = fn(*args)
                dt = time.perf_counter() - t0
            if req["not_none"]:
                value = value is not None
            budget[0] = req["max_nodes"]
            text = json.dumps(enc(value), separators=(",", ":"), allow_nan=False)
            line = "%s%d\t%r\t%d\t%s\n" % (mark, i, dt, len(text), text)
        except Exception as exc:
            msg = ascii(str(exc)[:500])[1:-1].replace("\\t", " ")
            if str(exc) == "OutputTooLarge":
                msg = "OutputTooLarge"
            line = "%s%d\tERR\t%s: %s\n" % (mark, i, type(exc).__name__, msg)
        out.write(line)
        out.flush()  # in the pipe before the next input: a run killed on it loses no line
        used += len(line)
        value = text = line = None  # not held while the next input runs


__execrl_driver()
"""


def request(run: ReferenceRun, items: list[int]) -> str:
    """The driver's stdin: which inputs to run, and its budgets."""
    return json.dumps(
        {
            "entry": run.entry_point,
            "items": [[i, to_json(list(run.inputs[i]))] for i in items],
            "not_none": run.not_none,
            "mark": MARK,
            "soft_bytes": SOFT_BYTES,
            "soft_s": SOFT_SECONDS,
            "max_nodes": MAX_NODES,
        }
    )


def batches(run: ReferenceRun) -> list[list[int]]:
    batches: list[list[int]] = [[]]
    size = 0
    for i, args in enumerate(run.inputs):
        n = len(json.dumps(to_json(list(args))))
        if batches[-1] and (len(batches[-1]) >= BATCH_ITEMS or size + n > BATCH_BYTES):
            batches.append([])
            size = 0
        batches[-1].append(i)
        size += n
    return [b for b in batches if b]


@dataclass(slots=True)
class Pending:
    """One reference's outputs as its runs report them."""

    run: ReferenceRun
    outputs: dict[int, Any] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)
    seconds: dict[int, float] = field(default_factory=dict)
    excluded: dict[int, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    open_runs: int = 0  # runs of this reference sent and not yet read

    def complete(self) -> bool:
        return self.open_runs == 0 and not self.errors


def record(p: Pending, stdout: str, items: list[int]) -> list[int]:
    """Record each input a run reported on; return the run's inputs it did not report, in
    order. A line cut off by the end of the output (the run was killed) does not count."""
    reported: set[int] = set()
    wanted = set(items)
    for line in stdout.split("\n")[:-1]:  # the last piece is unterminated, if anything
        if not line.startswith(MARK):
            continue
        i_s, rest = line[len(MARK) :].split("\t", 1)
        i = int(i_s)
        if i not in wanted or i in reported:
            raise TaskDataError(f"{p.run.key}: the reference run reported input {i} unasked")
        reported.add(i)
        if rest.startswith("ERR\t"):
            error = rest[4:]
            if error.endswith(f": {TOO_BIG}"):
                p.excluded[i] = (
                    f"the reference's output has over {MAX_NODES:,} values, or an integer of "
                    "over 4,200 digits (past Python's int-to-str limit)"
                )
            elif error.startswith("MemoryError"):
                p.excluded[i] = "the reference ran out of the run's memory"
            else:
                p.errors.append(f"{p.run.key}: the reference solution failed on input {i}: {error}")
            continue
        dt, n, text = rest.split("\t", 2)
        if len(text) != int(n):
            raise TaskDataError(f"{p.run.key}: the output of the reference on input {i} was cut")
        p.outputs[i] = loads(text)
        p.texts[i] = text
        p.seconds[i] = float(dt)
    return [i for i in items if i not in reported]


def follow_up(p: Pending, items: list[int], unreported: list[int], failure: str) -> list[list[int]]:
    """What to run next after a run of `items` that left `unreported` undone.

    `failure` is "" when the run ended normally: it stopped at its soft budget and never
    started the rest. Otherwise the run died (a limit, a crash) on its first unreported input,
    since the driver runs them in order: that input runs again alone, unless it already was
    the first of its run, and the others it never started go on together."""
    if not unreported:
        return []
    if not failure:
        if len(unreported) == len(items):  # the driver always runs its first input
            p.errors.append(f"{p.run.key}: the reference printed no output for input {items[0]}")
            return []
        return [unreported]
    culprit, rest = unreported[0], unreported[1:]
    again = [[culprit]] if culprit != items[0] else []
    if culprit == items[0]:
        verdict = failure.split(" ", 1)[0]
        if verdict in LIMIT_VERDICTS:
            p.excluded[culprit] = f"the reference hit a sandbox limit: {failure}"
        else:
            p.errors.append(f"{p.run.key}: the reference did not run on input {culprit}: {failure}")
            return []
    return again + ([rest] if rest else [])


def finish(p: Pending) -> ReferenceOutputs:
    outputs: list[Any] = []
    seconds: list[float] = []
    texts: list[str] = []
    for i in range(len(p.run.inputs)):
        if i in p.excluded:
            outputs.append(None)
            seconds.append(0.0)
            texts.append("null")
        elif i in p.outputs:
            outputs.append(p.outputs[i])
            seconds.append(p.seconds[i])
            texts.append(p.texts[i])
        else:
            raise TaskDataError(f"{p.run.key}: the output of the reference on input {i} was lost")
    excluded = dict(sorted(p.excluded.items()))
    return ReferenceOutputs(tuple(outputs), tuple(seconds), excluded, tuple(texts))


def raise_errors(pending: Sequence[Pending]) -> None:
    errors = [e for p in pending for e in p.errors]
    if errors:
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise TaskDataError("; ".join(errors[:5]) + more)


def progress_bar(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc="expected outputs",
        unit="input",
        file=sys.stderr,
        disable=not (enabled and sys.stderr.isatty()),
    )
