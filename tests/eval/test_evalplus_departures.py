"""Where execrl's MBPP+ verdicts differ from EvalPlus's own, pinned: found by grading every 6th
MBPP+ task's reference and 14 variants of it (returned types swapped, prints, eval, deep
recursion, a raised recursion limit, a `__main__` block, numpy) through both harnesses
(`benchmarks/evalplus_departures.py`: 945 programs, base and plus). Two classes differ, both
programs EvalPlus passes and execrl fails (docs/benchmarks.md, "Benchmarks and tasks"):

- a program that imports numpy: EvalPlus runs programs in its own environment, where numpy is
  installed (EvalPlus depends on it); execrl's runs see the standard library alone.
- a numerically right value of a type that is not plain data (`decimal.Decimal`,
  `fractions.Fraction`, numpy scalars): EvalPlus compares it with `==`; execrl lets only plain
  data out of the sandbox (a returned object could lie about its equality)."""

from __future__ import annotations

import pytest
from tests.eval import test_evalplus_agreement as agreement

from execrl.eval.evaluate import evaluate, result_record
from execrl.eval.samples import Sample
from execrl.sandbox.reference_runner import sandbox_runner
from execrl.tasks import load_benchmark

evalplus = agreement.evalplus  # the fixture: EvalPlus's own evaluator
TASK = "Mbpp/82"  # volume_sphere(r): a float


def _departures(reference: str) -> dict[str, str]:
    wrap = "\n\n_entry = volume_sphere\n\n\ndef volume_sphere(r):\n"
    return {
        "reference": reference,
        "numpy_import": "import numpy as np\n" + reference,
        "decimal": reference + wrap + "    import decimal\n    return decimal.Decimal(_entry(r))\n",
    }


def test_numpy_and_non_plain_numbers_pass_evalplus_and_fail_execrl(
    evalplus,
    sandbox,
    tmp_path,
    monkeypatch,
):
    from tests.conftest import shared_data_dir

    data = shared_data_dir()
    if data is None:
        pytest.skip("no benchmark data")
    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path))
    (task,) = load_benchmark("mbpp+", data, ids=[TASK], reference_runner=sandbox_runner())
    p = agreement._problems(data, "mbpp", [TASK], evalplus)[TASK]
    variants = _departures(task.reference)
    theirs = {}
    for name, code in variants.items():
        status, _ = evalplus.check(
            "mbpp", code, p["plus_input"], p["entry_point"], expected=p["plus"],
            atol=p["atol"], ref_time=p["plus_time"],
        )  # fmt: skip
        theirs[name] = status == evalplus.passed
    samples = [Sample(TASK, code, name, {}) for name, code in variants.items()]
    ours = {
        r.sample.where: (rec["plus_passed"], r.result.message)
        for r in evaluate(samples, [task], "solution", sandbox)
        for rec in [result_record(r)]
    }
    assert theirs == {"reference": True, "numpy_import": True, "decimal": True}
    assert ours["reference"][0] is True
    assert ours["numpy_import"][0] is False and "No module named 'numpy'" in ours["numpy_import"][1]
    assert (
        ours["decimal"][0] is False and "'Decimal', which is not plain data" in ours["decimal"][1]
    )
