"""Expected outputs for EvalPlus tasks: each reference solution run on each input, in the sandbox.

EvalPlus stores inputs only and computes expected outputs by running the reference
(`evalplus/evaluate.py`, `get_groundtruth`), recording each call's time for the time limits.
Here the reference runs in the sandbox as a stdio program with a small driver appended: the
driver decodes each input, times the call, and prints the output as tagged JSON. The sandbox
returns at most `STDOUT_KEPT` bytes of stdout per run, so the driver prints outputs only while
they fit, and outputs that did not fit are fetched again, alone or in slices.

This module is the pure part (the driver, batching, parsing); the sandbox layer runs it
(`execrl.sandbox.reference_runner.sandbox_runner`), so tasks never imports the sandbox.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from execrl.tasks.errors import TaskDataError
from execrl.tasks.values import from_json, to_json

STDOUT_KEPT = 60_000  # under the sandbox's 64 KiB of kept stdout
MARK = "\x1eEXECRL\t"
BATCH_ITEMS = 200
BATCH_BYTES = 4 << 20
MAX_NODES = 2_000_000  # execrl.sandbox.plain.MAX_NODES: the largest value a run can return
TOO_BIG = "OutputTooLarge"


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


# Runs reference programs and returns their outputs; injected so that tests and callers choose.
ReferenceRunner = Callable[[Sequence[ReferenceRun]], dict[str, ReferenceOutputs]]

DRIVER = r"""

def __execrl_driver():
    import base64, contextlib, hashlib, io, json, math, sys, time

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
    out, used = sys.stdout, 0
    for i, args in req["items"]:
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
        except Exception as exc:
            msg = ascii(str(exc)[:500])[1:-1].replace("\\t", " ")
            if str(exc) == "OutputTooLarge":
                msg = "OutputTooLarge"
            out.write("%s%d\tERR\t%s: %s\n" % (req["mark"], i, type(exc).__name__, msg))
            continue
        digest = hashlib.sha256(text.encode()).hexdigest()
        if req["piece"]:
            text = text[req["piece"][0]:req["piece"][1]]
        head = "%s%d\t%r\t%d\t%s\t" % (req["mark"], i, dt, len(text), digest)
        if used + len(head) + len(text) + 200 > req["budget"]:
            text = "\x15"  # did not fit: the parent asks again
        used += len(head) + len(text) + 1
        out.write(head + text + "\n")


__execrl_driver()
"""


def request(run: ReferenceRun, items: list[int], piece: tuple[int, int] | None) -> str:
    return json.dumps(
        {
            "entry": run.entry_point,
            "items": [[i, to_json(list(run.inputs[i]))] for i in items],
            "not_none": run.not_none,
            "mark": MARK,
            "budget": STDOUT_KEPT,
            "piece": piece,
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


@dataclass
class Pending:
    run: ReferenceRun
    texts: dict[int, str]
    seconds: dict[int, float]
    digests: dict[int, str]
    lengths: dict[int, int]
    errors: list[str]
    excluded: dict[int, str]


def parse_stdout(p: Pending, stdout: str, items: list[int], piece: bool) -> list[int]:
    """Record what a run printed; return the items that did not fit (or were cut off)."""
    missing = []
    reported: set[int] = set()
    for line in stdout.split("\n")[:-1]:  # the last piece is unterminated, if anything
        if not line.startswith(MARK):
            continue
        i_s, rest = line[len(MARK) :].split("\t", 1)
        i = int(i_s)
        reported.add(i)
        if rest.endswith(f": {TOO_BIG}"):
            p.excluded[i] = (
                f"the reference's output has over {MAX_NODES:,} values, or an integer of over "
                "4,200 digits (past Python's int-to-str limit)"
            )
            continue
        if rest.startswith("ERR\t"):
            p.errors.append(f"{p.run.key}: the reference solution failed on input {i}: {rest[4:]}")
            continue
        dt, n, digest, text = rest.split("\t", 3)
        p.seconds.setdefault(i, float(dt))  # the first run's time: later ones are refetches
        p.digests[i] = digest
        if not piece:
            p.lengths[i] = int(n)
        if text == "\x15":
            if piece:
                raise TaskDataError(f"{p.run.key}: a slice of output {i} did not fit")
            missing.append(i)
        elif piece:
            p.texts[i] = p.texts.get(i, "") + text
        else:
            p.texts[i] = text
    unreported = [i for i in items if i not in reported]
    if unreported and (piece or len(items) == 1):
        p.errors.append(f"{p.run.key}: the reference printed no output for input {unreported[0]}")
        return missing
    return missing + unreported


def second_round(missing: list[tuple[Pending, int]]) -> list[Any]:
    """Outputs that did not fit: small ones re-batched by their known length, large ones
    fetched in slices, each slice a run of its own."""
    piece = STDOUT_KEPT - 1000
    work: list[Any] = []
    batch: dict[int, tuple[Pending, list[int], int]] = {}
    for p, i in missing:
        if i not in p.lengths:  # cut off before it was reported: run it alone
            work.append((p, [i], None))
            continue
        n = p.lengths[i] + 120
        if n >= piece:
            work.extend((p, [i], (a, a + piece)) for a in range(0, p.lengths[i], piece))
            continue
        _, items, used = batch.get(id(p), (p, [], 0))
        if used + n > piece:
            work.append((p, items, None))
            items, used = [], 0
        batch[id(p)] = (p, items + [i], used + n)
    work.extend((p, items, None) for p, items, _ in batch.values() if items)
    return work


def finish(p: Pending) -> ReferenceOutputs:
    outputs: list[Any] = []
    seconds: list[float] = []
    for i in range(len(p.run.inputs)):
        if i in p.excluded:
            outputs.append(None)
            seconds.append(0.0)
            continue
        text = p.texts.get(i)
        if text is None or hashlib.sha256(text.encode()).hexdigest() != p.digests.get(i):
            raise TaskDataError(f"{p.run.key}: the output of the reference on input {i} was lost")
        outputs.append(from_json(json.loads(text)))
        seconds.append(p.seconds[i])
    return ReferenceOutputs(tuple(outputs), tuple(seconds), dict(sorted(p.excluded.items())))


def progress_bar(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc="reference outputs",
        unit="run",
        file=sys.stderr,
        disable=not (enabled and sys.stderr.isatty()),
    )
