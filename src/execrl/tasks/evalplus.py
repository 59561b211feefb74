"""HumanEval+ (v0.1.10) and MBPP+ (v0.2.0) with EvalPlus's semantics (Liu et al., NeurIPS 2023).

Reproduced from evalplus 0.3.x (`evalplus/evaluate.py`, `evalplus/eval/__init__.py`,
`evalplus/data/mbpp.py`, `evalplus/eval/_special_oracle.py`):
- inputs only are stored; each expected output is the reference (`prompt + canonical_solution`)
  run on the input (here in the sandbox, `reference_runs`), and MBPP+ inputs are first converted
  back to tuples, sets and complex numbers per task (`mbpp_deserialize_inputs`);
- base and plus inputs are graded apart: "plus" means both pass; `Task.base_tests` holds the
  base tests and `Task.tests` the base tests then the plus tests;
- comparison: == first, then np.allclose with the task's atol (1e-6 for float outputs when it is
  0) and rtol 1e-7, with set comparison, "not None" and other special oracles by entry point;
- time limits: each input may take max(1 s, 4 x the reference's time); a group (base or plus)
  may take min(60 s, the sum of those) + 1 s.

Departures, because the sandbox grades one test at a time with one limit per test: the per-test
limit of a group is the largest of its per-input limits, and the 1e-6 float tolerance applies to
float expected values alone (EvalPlus keeps it for the rest of the run once it has seen one).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.tasks.errors import NoSuchTask, TaskDataError
from execrl.tasks.limit_caps import capped
from execrl.tasks.reference_runs import (
    ReferenceOutputs,
    ReferenceRun,
    ReferenceRunner,
)
from execrl.tasks.schema import AssertTests, CallTests, Compare, Task, TimeLimit
from execrl.tasks.sources import DataFile, cache_dir, field, make_task, read_records
from execrl.tasks.values import loads, to_json

HUMANEVAL_PLUS = DataFile("humanevalplus", "HumanEvalPlus-v0.1.10.jsonl.gz")
MBPP_PLUS = DataFile("mbppplus", "MbppPlus-v0.2.0.jsonl.gz")

MIN_TIME_LIMIT = 1.0  # evalplus/config.py DEFAULT_MIN_TIME_LIMIT
GT_TIME_LIMIT_FACTOR = 4.0  # DEFAULT_GT_TIME_LIMIT_FACTOR
TIMEOUT_PER_TASK = 60.0  # EVALPLUS_TIMEOUT_PER_TASK's default
GROUND_TRUTH_VERSION = 5  # bump when the way expected outputs are computed changes

MBPP_OUTPUT_NOT_NONE_TASKS = ("check_str", "text_match_three", "text_starta_endb")
MBPP_OUTPUT_SET_EQ_TASKS = (
    "similar_elements",  # Mbpp/2
    "find_char_long",  # Mbpp/7
    "common_in_nested_lists",  # Mbpp/111
    "extract_singly",  # Mbpp/140
    "larg_nnum",  # Mbpp/232
    "intersection_array",  # Mbpp/249
    "find_dissimilar",  # Mbpp/579
    "Diff",  # Mbpp/769
)


@dataclass(frozen=True, slots=True)
class Problem:
    task_id: str
    dataset: str  # "humaneval" or "mbpp", as EvalPlus names them
    prompt: str
    entry_point: str
    reference: str
    base_inputs: tuple[tuple[Any, ...], ...]
    plus_inputs: tuple[tuple[Any, ...], ...]
    atol: float
    where: str
    # sha256 of the inputs as the file stores them (JSON, before the MBPP conversion, which
    # depends on the task id alone): the cache key, without encoding the converted inputs again.
    inputs_digest: str


def _tuples(x: Any) -> Any:
    return tuple(_tuples(i) for i in x) if isinstance(x, list) else x


def mbpp_deserialize_inputs(task_id: str, inputs: list[Any]) -> list[Any]:
    """JSON has no tuples, sets or complex numbers: EvalPlus's per-task conversion, verbatim."""
    n = int(task_id.split("/")[-1])
    if n in (2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616,
             630, 726, 740, 744, 809):  # fmt: skip
        return [[tuple(lst) for lst in inp] for inp in inputs]
    if n in (63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780):
        return [[[tuple(lst) for lst in lst_lst] for lst_lst in inp] for inp in inputs]
    if n in (75, 413, 444, 753):
        return [[[tuple(lst) for lst in inp[0]]] + [inp[1]] for inp in inputs]
    if n in (106, 750):
        return [[inp[0]] + [tuple(inp[1])] for inp in inputs]
    if n == 115:
        return [
            [[set(item) if isinstance(item, list) and len(item) else {} for item in inp[0]]]
            for inp in inputs
        ]
    if n == 124:
        return [(float(inp[0]), complex(inp[1])) for inp in inputs]
    if n in (250, 405, 446, 617, 720, 763, 808):
        return [[tuple(inp[0])] + [inp[1]] for inp in inputs]
    if n in (259, 401, 445):
        inputs = [[[tuple(lst) for lst in lst_lst] for lst_lst in inp] for inp in inputs]
        return [[tuple(lst) for lst in inp] for inp in inputs]
    if n == 278:
        inputs = [
            [[tuple(item) if isinstance(item, list) else item for item in inp[0]]] for inp in inputs
        ]
        return [[tuple(lst) for lst in inp] for inp in inputs]
    if n == 307:
        return [[tuple(inp[0])] + [inp[1], inp[2]] for inp in inputs]
    if n == 722:
        return [[{key: tuple(value) for key, value in inp[0].items()}] + inp[1:] for inp in inputs]
    if n == 252:
        return [[complex(inp[0])] for inp in inputs]
    if n in (580, 615, 791):
        return [_tuples(inp) for inp in inputs]
    return inputs


def read_problems(path: Path, dataset: str) -> list[Problem]:
    problems = []
    for where, rec in read_records(path):
        task_id = field(where, rec, "task_id")
        base = field(where, rec, "base_input", list)
        plus = field(where, rec, "plus_input", (list, dict))
        if plus == {}:  # Mbpp/793 stores its empty plus_input as {}
            plus = []
        elif isinstance(plus, dict):
            raise TaskDataError(f"{where}: field 'plus_input' should be a list of inputs")
        digest = hashlib.sha256(json.dumps([base, plus]).encode()).hexdigest()
        if dataset == "mbpp":
            base, plus = (
                mbpp_deserialize_inputs(task_id, base),
                mbpp_deserialize_inputs(task_id, plus),
            )
        for inp in (*base, *plus):
            if not isinstance(inp, list | tuple):
                raise TaskDataError(f"{where}: an input of {task_id} is not an argument list")
        prompt = field(where, rec, "prompt")
        problems.append(
            Problem(
                task_id=task_id,
                dataset=dataset,
                prompt=prompt,
                entry_point=field(where, rec, "entry_point"),
                reference=prompt + field(where, rec, "canonical_solution"),
                base_inputs=tuple(tuple(i) for i in base),
                plus_inputs=tuple(tuple(i) for i in plus),
                atol=float(field(where, rec, "atol", int | float)),
                where=where,
                inputs_digest=digest,
            )
        )
    return problems


# -- special oracles (evalplus/eval/_special_oracle.py), run in the trusted parent -------------


def _surface_area(base_edge: float, height: float) -> int:  # Mbpp/581
    slant_height = math.sqrt((base_edge / 2) ** 2 + height**2)
    return round(base_edge**2 + 4 * (base_edge * slant_height) / 2)


def _digit_distance_nums(num1: int, num2: int) -> int:  # Mbpp/558
    a, b = str(num1), str(num2)
    width = max(len(a), len(b))
    return sum(abs(int(x) - int(y)) for x, y in zip(a.zfill(width), b.zfill(width), strict=True))


def _expected(p: Problem, inp: tuple[Any, ...], out: Any) -> tuple[str, Any]:
    """(oracle, expected value) for one input, as `Compare.oracle` reads them."""
    if p.dataset == "humaneval" and p.entry_point == "find_zero":
        return "evalplus_poly_root", list(inp[0])
    if p.dataset == "mbpp":
        if p.entry_point == "surface_Area":
            return "evalplus_or_close", (out, _surface_area(*inp))
        if p.entry_point == "digit_distance_nums":
            return "evalplus_or_equal", (out, _digit_distance_nums(*inp))
        if p.entry_point in MBPP_OUTPUT_SET_EQ_TASKS:
            return "evalplus_set", out
    return "evalplus", out


def time_limit(seconds: tuple[float, ...]) -> TimeLimit:
    limits = [max(MIN_TIME_LIMIT, GT_TIME_LIMIT_FACTOR * t) for t in seconds]
    # the reference's times are read from a file: capped (`limit_caps`)
    return TimeLimit(
        **capped({"wall_s": min(TIMEOUT_PER_TASK, sum(limits)) + 1, "test_wall_s": max(limits)})
    )


_NOT_NONE_SETUP = """\
def _evalplus_not_none(out, exp):
    if type(out) is bool:
        return out == exp
    return exp == (out is not None)

_inputs = {inputs!r}
_expected = {expected!r}
"""


def build_task(p: Problem, gt: ReferenceOutputs, source: str) -> Task:
    # Inputs the sandbox cannot run the reference on are left out, and recorded.
    excluded = gt.excluded
    keep = [i for i in range(len(gt.outputs)) if i not in excluded]
    n_base = sum(1 for i in keep if i < len(p.base_inputs))
    everything = p.base_inputs + p.plus_inputs
    inputs = tuple(everything[i] for i in keep)
    gt = ReferenceOutputs(tuple(gt.outputs[i] for i in keep), tuple(gt.seconds[i] for i in keep))
    limits = {"base": time_limit(gt.seconds[:n_base])}
    if len(inputs) > n_base:
        limits["plus"] = time_limit(gt.seconds[n_base:])
    limits["tests"] = TimeLimit(
        wall_s=sum(t.wall_s for t in limits.values()),
        test_wall_s=max(t.test_wall_s or 0 for t in limits.values()),
    )
    strict = True
    if p.dataset == "mbpp" and p.entry_point in MBPP_OUTPUT_NOT_NONE_TASKS:
        # The reference returns re.Match objects, which cannot leave the sandbox: the check
        # runs there, as trusted test code, with the expected `is not None` values.
        setup = _NOT_NONE_SETUP.format(inputs=list(inputs), expected=list(gt.outputs))
        statements = tuple(
            f"assert _evalplus_not_none(candidate(*_inputs[{i}]), _expected[{i}])"
            for i in range(len(inputs))
        )
        tests: Any = AssertTests(setup=setup, statements=statements)
        base: Any = AssertTests(setup=setup, statements=statements[:n_base])
        strict = False
    else:
        pairs = [_expected(p, inp, out) for inp, out in zip(inputs, gt.outputs, strict=True)]
        oracle = pairs[0][0] if pairs else "evalplus"
        cmp = Compare(atol=p.atol, oracle=oracle)
        expected = tuple(e for _, e in pairs)
        tests = CallTests(inputs=inputs, expected=expected, compare=cmp)
        base = tests[:n_base]
    return make_task(
        p.where,
        id=p.task_id,
        prompt=p.prompt,
        tests=tests,
        base_tests=base,
        entry_point=p.entry_point,
        reference=p.reference,
        time_limits=limits,
        strict_returns=strict,
        metadata={
            "source": source,
            "atol": p.atol,
            "n_base": n_base,
            "n_plus": len(inputs) - n_base,
            # index into base_input + plus_input -> why it is not a test here
            "excluded_inputs": dict(excluded),
        },
    )


def _cache_path(data: Path, p: Problem) -> Path:
    h = hashlib.sha256()
    h.update(f"{GROUND_TRUTH_VERSION}\0{p.task_id}\0{p.reference}\0".encode())
    h.update(p.inputs_digest.encode())
    name = p.task_id.replace("/", "_")
    return (
        cache_dir()
        / "groundtruth"
        / data.name.split(".")[0]
        / f"{name}-{h.hexdigest()[:16]}.json.gz"
    )


def ground_truth(
    data: Path, problems: list[Problem], runner: ReferenceRunner | None
) -> dict[str, ReferenceOutputs]:
    """Expected outputs and reference times, from the cache or computed and cached."""
    found: dict[str, ReferenceOutputs] = {}
    todo = []
    for p in problems:
        path = _cache_path(data, p)
        try:
            with gzip.open(path, "rt", encoding="utf-8") as f:
                d = json.loads(f.readline())  # `_save`: this line, then the outputs
                outputs = loads(f.read())
            excluded = {int(k): v for k, v in d["excluded"].items()}
            found[p.task_id] = ReferenceOutputs(tuple(outputs), tuple(d["seconds"]), excluded)
        except (OSError, EOFError, ValueError, KeyError):
            todo.append(p)
    if todo:
        runs = [
            ReferenceRun(
                key=p.task_id,
                program=p.reference,
                entry_point=p.entry_point,
                inputs=p.base_inputs + p.plus_inputs,
                not_none=p.dataset == "mbpp" and p.entry_point in MBPP_OUTPUT_NOT_NONE_TASKS,
            )
            for p in todo
        ]
        if runner is None:
            raise TaskDataError(
                f"{data}: the expected outputs of {len(todo)} task(s) are not cached yet; they "
                "come from running each reference in the sandbox: pass reference_runner="
                "execrl.sandbox.reference_runner.sandbox_runner() (execrl's commands do)"
            )
        by_id = {p.task_id: p for p in todo}
        # Each task is cached as soon as its outputs are in: a failure loses none of them.
        found.update(runner(runs, on_done=lambda key, gt: _save(data, by_id[key], gt)))
    return found


def _save(data: Path, p: Problem, gt: ReferenceOutputs) -> None:
    path = _cache_path(data, p)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    outputs = (
        "[" + ",".join(gt.texts) + "]"
        if len(gt.texts) == len(gt.outputs)
        else json.dumps(to_json(list(gt.outputs)), separators=(",", ":"))
    )
    head = {"seconds": list(gt.seconds), "excluded": {str(k): v for k, v in gt.excluded.items()}}
    # Level 1: HumanEval/130's outputs are 114 MB of JSON, which level 9 takes a minute on.
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as f:
        f.write(json.dumps(head) + "\n" + outputs)
    tmp.replace(path)


def load_evalplus(
    path: Path,
    dataset: str,
    source: str,
    ids: Collection[str] | None = None,
    runner: ReferenceRunner | None = None,
) -> list[Task]:
    problems = read_problems(path, dataset)
    if ids is not None:
        unknown = set(ids) - {p.task_id for p in problems}
        if unknown:
            where = f"{path} ({source})"
            raise NoSuchTask(where, sorted(unknown)[0], [p.task_id for p in problems])
        problems = [p for p in problems if p.task_id in ids]
    gt = ground_truth(path, problems, runner)
    return [build_task(p, gt[p.task_id], source) for p in problems]
