"""Where execrl's MBPP+ verdicts differ from EvalPlus's own: every STEP-th task's reference and
variants of it (returned types swapped, output printed, `eval`, deep recursion, a raised
recursion limit, a `__main__` block, numpy) graded by both harnesses, base and plus apart.
Prints each variant whose verdicts differ, then one JSON line: variants compared, those that
differ, grouped by variant kind. `tests/eval/test_evalplus_departures.py` pins what it finds.

    EXECRL_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/evalplus_departures.py --step 6
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Lines run on the reference's return value `out` before it is returned.
ON_RETURN = {
    "prints_each": "print(out)",
    "decimal": "import decimal\n    if type(out) is float: out = decimal.Decimal(out)",
    "fraction": "import fractions\n    if type(out) is float: out = fractions.Fraction(out)",
    "numpy_scalar": "import numpy\n    if type(out) is float: out = numpy.float64(out)",
    "eval_call": "out = eval('_entry(*args)')",
    "tuple_for_list": "if type(out) is list: out = tuple(out)",
    "list_for_tuple": "if type(out) is tuple: out = list(out)",
    "bool_for_int": "if type(out) is int and out in (0, 1): out = bool(out)",
    "int_for_bool": "if type(out) is bool: out = int(out)",
    "deep_975": "_d = lambda n: 0 if n == 0 else 1 + _d(n - 1)\n    _d(975)",
}


def variants(reference: str, entry: str) -> dict[str, str]:
    wrap = f"\n\n_entry = {entry}\n\n\ndef {entry}(*args):\n    out = _entry(*args)\n"
    out = {
        "reference": reference,
        "numpy_import": "import numpy as np\n" + reference,
        "setrecursionlimit": "import sys\nsys.setrecursionlimit(100000)\n" + reference,
        "main_block": reference + "\n\nif __name__ == '__main__':\n    raise SystemExit(1)\n",
        "module_print": reference + "\nprint('x' * 100)\n",
    }
    for name, line in ON_RETURN.items():
        out[name] = reference + wrap + f"    {line}\n    return out\n"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", type=int, default=6, help="every STEP-th MBPP+ task")
    args = parser.parse_args()
    import evalplus.data.mbpp as ep_mbpp
    import evalplus.eval as ep_eval
    from evalplus.gen.util import trusted_exec
    from tests.conftest import shared_data_dir
    from tests.eval.test_evalplus_agreement import _problems

    from execrl.eval.evaluate import evaluate, result_record
    from execrl.eval.samples import Sample
    from execrl.sandbox import Sandbox
    from execrl.sandbox.reference_runner import sandbox_runner
    from execrl.tasks import load_benchmark

    ep = types.SimpleNamespace(
        not_none=ep_eval.MBPP_OUTPUT_NOT_NONE_TASKS,
        deserialize=ep_mbpp.mbpp_deserialize_inputs,
        trusted_exec=trusted_exec,
    )
    data = shared_data_dir()
    os.environ["EXECRL_CACHE_DIR"] = tempfile.mkdtemp(prefix="execrl-departures-")
    tasks = load_benchmark("mbpp+", data, reference_runner=sandbox_runner())[:: args.step]
    problems = _problems(data, "mbpp", [t.id for t in tasks], ep)
    samples, theirs = [], {}
    for task in tasks:
        p = problems[task.id]
        for name, code in variants(task.reference or "", p["entry_point"]).items():
            samples.append(Sample(task.id, code, name, {}))
            theirs[(task.id, name)] = tuple(
                ep_eval.untrusted_check(
                    "mbpp", code, p[f"{g}_input"], p["entry_point"], expected=p[g],
                    atol=p["atol"], ref_time=p[f"{g}_time"],
                )[0] == ep_eval.PASS
                for g in ("base", "plus")
            )  # fmt: skip
    differ: collections.Counter[str] = collections.Counter()
    with Sandbox(workers=2) as sandbox:
        for r in evaluate(samples, tasks, "solution", sandbox):
            rec = result_record(r)
            ours = (rec["base_passed"], rec["plus_passed"])
            if ours != theirs[(r.sample.task_id, r.sample.where)]:
                differ[r.sample.where] += 1
                print(r.sample.task_id, r.sample.where, "evalplus", theirs[(r.sample.task_id, r.sample.where)],
                      "execrl", ours, r.result.message[:100])  # fmt: skip
    print(json.dumps({"tasks": len(tasks), "variants": len(theirs), "differ": dict(differ),
                      "load": os.getloadavg()[0]}))  # fmt: skip


if __name__ == "__main__":
    main()
