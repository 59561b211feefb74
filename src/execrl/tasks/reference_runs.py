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
from pathlib import Path
from typing import Any, Protocol

from execrl.tasks import values
from execrl.tasks.errors import TaskDataError
from execrl.tasks.values import MAX_NODES, loads, to_json

MARK = "\x1eEXECRL\t"
BATCH_ITEMS = 500  # inputs sent to one run; it may stop early (the soft budgets below)
BATCH_BYTES = 4 << 20  # of encoded inputs sent to one run
SOFT_BYTES = 32 << 20  # a run starts no further input once it has printed this much
SOFT_SECONDS = 10.0  # or once it has run this long
# A run's stdout cap: the sandbox's cap on what a candidate's run may return (its channel,
# 256 MiB), so an output too large to come back here could not come back from a candidate.
OUTPUT_CAP = 256 << 20
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


# The driver encodes with execrl's one tagged JSON (`values`), shipped as its text: the run imports
# nothing of execrl's. Its limits are EvalPlus's: any depth, `max_nodes` parts (the sandbox's
# MAX_NODES, the largest value a candidate's run can return), and a dict subclass (Counter,
# defaultdict, OrderedDict: EvalPlus compares with ==) as its own `items` say.
DRIVER = (
    f"__execrl_values = {Path(values.__file__).read_text(encoding='utf-8')!r}\n"
    + r"""

def __execrl_driver():
    import contextlib, io, json, sys, time

    values = {"__name__": "execrl_values"}
    exec(compile(__execrl_values, "<execrl values>", "exec"), values)
    to_json, from_json, NotPlainData = values["to_json"], values["from_json"], values["NotPlainData"]

    def big_int(tree):
        stack = [tree]
        while stack:
            x = stack.pop()
            if type(x) is list:
                stack.extend(x)
            elif type(x) is dict:
                stack.extend(x.values())
            elif type(x) is int and x.bit_length() > 14_000:
                return True
        return False

    def encoded(value, max_nodes):
        try:
            tree = to_json(value, (values["UNBOUNDED"], max_nodes, lambda d: d.items()))
        except NotPlainData as exc:
            if str(exc) == values["TOO_LARGE"]:
                raise OverflowError("OutputTooLarge") from None
            raise TypeError(str(exc)) from None
        # An int over 14,000 bits (~4,200 digits, near Python's int-to-str limit of 4,300) is too
        # large for JSON: the dump refuses ints of 4,215 digits or more, and only an output that
        # holds one is walked to find whether it is over 14,000 bits.
        limit = sys.get_int_max_str_digits()
        sys.set_int_max_str_digits(4_214)
        try:
            return json.dumps(tree, separators=(",", ":"), allow_nan=False)
        except ValueError:
            if big_int(tree):
                raise OverflowError("OutputTooLarge") from None
        finally:
            sys.set_int_max_str_digits(limit)
        return json.dumps(tree, separators=(",", ":"), allow_nan=False)

    req = json.loads(sys.stdin.read())
    with contextlib.redirect_stdout(io.StringIO()):  # what the reference prints is not output
        exec(compile(__execrl_source, "<reference>", "exec"), globals())
    fn = globals()[req["entry"]]
    out, used, start, mark = sys.stdout, 0, time.monotonic(), req["mark"]
    for k, (i, args) in enumerate(req["items"]):
        if k and (used >= req["soft_bytes"] or time.monotonic() - start >= req["soft_s"]):
            break  # the parent sends the inputs not started to another run
        args = from_json(args)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                t0 = time.perf_counter()
                value = fn(*args)
                dt = time.perf_counter() - t0
            if req["not_none"]:
                value = value is not None
            text = encoded(value, req["max_nodes"])
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
)


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
