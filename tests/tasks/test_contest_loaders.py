"""The contest-data loaders on fixtures written to each dataset's published schema
(tests/fixtures/contest/build.py): what each record becomes, date windows, parquet, the online
route, and the errors for bad records (each naming the file and the record)."""

from __future__ import annotations

import base64
import json
import os
import pickle
import zlib
from pathlib import Path

import pytest

from execrl.tasks import load_benchmark
from execrl.tasks.contest_source import HubSource, Spec, load_records
from execrl.tasks.errors import TaskDataError
from execrl.tasks.restricted_pickle import (
    UnsafePickle,
    decode_b64_zlib_pickle,
    decompress_capped,
    plain_loads,
)
from execrl.tasks.schema import AssertTests, CallTests, StdioTests

FIXTURES = Path(__file__).parents[1] / "fixtures" / "contest"
NAMES = ("livecodebench", "apps", "taco", "codecontests", "kodcode", "primeintellect")


def fixture(name: str) -> str:
    return f"{name}:{FIXTURES / (name + '.jsonl')}"


def records(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines()]


def write(tmp_path: Path, name: str, recs: list[dict]) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return f"{name}:{path}"


def test_livecodebench_stdin_and_functional_tests():
    tasks = {t.id: t for t in load_benchmark(fixture("livecodebench"))}
    assert set(tasks) == {"abc371_a", "1", "2051A", "3555"}
    stdin = tasks["abc371_a"]
    assert isinstance(stdin.tests, StdioTests) and stdin.entry_point is None
    # one public case, then the two pickled private ones, in order
    assert [c.stdin for c in stdin.tests.cases] == ["1 2\n", "10 20\n", "-5 5\n"]
    assert stdin.tests.compare.checker == "livecodebench"
    assert len(stdin.visible_tests) == 1
    leetcode = tasks["1"]
    assert isinstance(leetcode.tests, CallTests)
    assert leetcode.entry_point == "Solution.twoSum"
    # each input line is one JSON argument: "[2, 7, 11, 15]\n9" -> ([2, 7, 11, 15], 9)
    assert leetcode.tests.inputs[0] == ([2, 7, 11, 15], 9)
    assert leetcode.tests.expected == ([0, 1], [1, 2], [0, 1])
    assert leetcode.time_limits["tests"].test_wall_s == 6.0  # lcb_runner's per-test timeout
    assert stdin.metadata["contest_date"] == "2024-09-14"
    # lcb_runner's import block goes before every program, stdin and call-based alike
    for task in (stdin, leetcode):
        assert task.with_prelude("x = 1").startswith("from string import *\n")
        assert "from typing import *" in task.prelude and task.prelude.endswith("(50000)")


def test_livecodebench_date_window_keeps_contests_inside_it():
    ids = lambda spec: [t.id for t in load_benchmark(fixture("livecodebench") + spec)]  # noqa: E731
    assert ids("?since=2024-08-01") == ["abc371_a", "2051A", "3555"]
    assert ids("?until=2024-09-14") == ["abc371_a", "1", "3555"]  # inclusive
    assert ids("?since=2024-01-01&until=2024-12-31") == ["abc371_a", "3555"]
    with pytest.raises(TaskDataError, match="no problem has a contest_date"):
        load_benchmark(fixture("livecodebench") + "?since=2030-01-01")
    with pytest.raises(TaskDataError, match="not a date"):
        load_benchmark(fixture("livecodebench") + "?since=yesterday")
    with pytest.raises(TaskDataError, match="unknown option 'after'; known: since, until"):
        load_benchmark(fixture("livecodebench") + "?after=2024-01-01")


def test_apps_and_taco_call_and_stdio_shapes():
    apps = {t.id: t for t in load_benchmark(fixture("apps"))}
    assert isinstance(apps["4000"].tests, StdioTests)
    assert apps["4001"].entry_point == "count_vowels"
    assert apps["4001"].tests.expected == ([2], [0])  # APPS' wrapped outputs, kept as stored
    assert apps["4002"].entry_point == "Solution.twoSum"  # the starter code is LeetCode's
    # APPS' harness prepends its imports to every program; the reference is run the same way
    assert apps["4000"].reference.startswith("import sys\nimport time\n")
    assert apps["4000"].reference.endswith(
        "from heapq import *\na, b = map(int, input().split())\nprint(a + b)\n"
    )
    assert apps["4000"].time_limits["tests"].test_wall_s == 4.0
    taco = load_benchmark(fixture("taco"))
    assert [t.id for t in taco] == ["0", "1"]  # TACO has no ids: the row number
    # "1 second", scaled by TIME_FACTOR 2; "256 megabytes"
    assert taco[0].time_limits["tests"].test_wall_s == 2.0
    assert taco[0].time_limits["tests"].memory_mb == 256
    assert [t.id for t in load_benchmark(fixture("apps") + "?difficulty=interview")] == ["4002"]


def test_codecontests_groups_limits_and_parquet_agree():
    tasks = load_benchmark(fixture("codecontests"))
    circle = tasks[0]
    assert circle.id == "1000_A. Circle Area"
    assert len(circle.tests) == 4 and len(circle.visible_tests) == 1
    assert circle.tests.compare.checker == "codecontests"
    assert circle.reference.startswith("import math")  # the Python 3 one, not the C++ one
    assert circle.metadata["solutions_by_language"] == {"cpp": 1, "python3": 1}
    assert circle.time_limits["tests"].test_wall_s == 3.0  # 1.5 s x 2
    assert tasks[1].time_limits["tests"].test_wall_s == 4.0  # null: 2 s x 2
    parquet = load_benchmark(f"codecontests:{FIXTURES / 'codecontests.parquet'}")
    assert parquet == tasks
    public_only = load_benchmark(fixture("codecontests") + "?tests=public")
    assert [len(t.tests) for t in public_only] == [1, 1]


def test_kodcode_pytest_file_becomes_one_statement_per_test():
    tasks = {t.id: t for t in load_benchmark(fixture("kodcode"))}
    simple = tasks["Leetcode_1_I"].tests
    assert isinstance(simple, AssertTests)
    assert simple.statements == (
        "_kodcode_run(test_simple, (), _kodcode_fixture_params)",
        "_kodcode_run(test_spaces, (), _kodcode_fixture_params)",
    )
    assert "from solution import" not in simple.setup
    prime = tasks["Prefill_7_C"].tests
    assert prime.statements[0] == (
        "_kodcode_run(test_values, ('n', 'expected'), _kodcode_fixture_params)"
    )
    assert prime.statements[1].endswith("self=TestPrime())")


def test_primeintellect_both_test_types():
    tasks = {t.id: t for t in load_benchmark(fixture("primeintellect"))}
    assert isinstance(tasks["vfc_1001"].tests, StdioTests)
    assert tasks["vfc_1001"].reference.startswith("a, b = map(int")  # unfenced
    assert tasks["vfc_1002"].entry_point == "count_vowels"
    assert tasks["vfc_1002"].tests.inputs == (("hello",), ("sky",))


def test_hub_route_reads_the_same_records():
    """`NAME:hf` goes through datasets.load_dataset; here a stand-in serving the fixture."""
    calls = []

    def load_dataset(path, **kwargs):
        calls.append((path, kwargs))
        return records("apps")

    hub = HubSource("json", "train", data_files="hf://datasets/codeparrot/apps/test.jsonl")
    got = load_records("apps", Spec("hf", {}), hub, load_dataset)
    assert [r for _, r in got] == records("apps")
    assert calls == [("json", {"split": "train", "data_files": hub.data_files})]
    load_records("apps", Spec("hf:me/apps-copy@valid", {}), hub, load_dataset)
    assert calls[-1] == ("me/apps-copy", {"split": "valid"})


# ---- bad records: clear errors naming the file and the record ----


def test_missing_field_names_file_line_and_record(tmp_path):
    recs = records("livecodebench")
    del recs[1]["question_content"]
    spec = write(tmp_path, "livecodebench", recs)
    with pytest.raises(TaskDataError) as err:
        load_benchmark(spec)
    assert f"{tmp_path}/livecodebench.jsonl:2 (1): record has no field 'question_content'" in str(
        err.value
    )


def test_corrupt_private_test_blob_names_the_record(tmp_path):
    recs = records("livecodebench")
    recs[0]["private_test_cases"] = recs[0]["private_test_cases"][:-12] + "!!!!"
    with pytest.raises(TaskDataError, match=r"livecodebench.jsonl:1 \(abc371_a\): private_test"):
        load_benchmark(write(tmp_path, "livecodebench", recs))
    recs[0]["private_test_cases"] = base64.b64encode(zlib.compress(b"junk")[:-3]).decode()
    with pytest.raises(TaskDataError, match="truncated"):
        load_benchmark(write(tmp_path, "livecodebench", recs))


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("touch /tmp/execrl-pwned-by-pickle",))


def test_a_private_test_pickle_cannot_run_code(tmp_path):
    """A record's private tests are a pickle; one that names os.system is an error naming the
    record, and nothing runs."""
    marker = Path("/tmp/execrl-pwned-by-pickle")
    marker.unlink(missing_ok=True)
    recs = records("livecodebench")
    recs[0]["private_test_cases"] = base64.b64encode(
        zlib.compress(pickle.dumps(_RunsCode()))
    ).decode()
    with pytest.raises(TaskDataError, match=r"\(abc371_a\).*names posix.system"):
        load_benchmark(write(tmp_path, "livecodebench", recs))
    assert not marker.exists()


def test_restricted_unpickler_admits_plain_builtins_only():
    value = {"a": [1, 2.5, None, True], "b": ("x", b"y", b""), "c": {1, 2}, "d": frozenset({3})}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):  # protocols < 4 name set by a global
        assert plain_loads(pickle.dumps(value, protocol=protocol)) == value
    assert plain_loads(pickle.dumps(1 + 2j)) == 1 + 2j
    for bad in (Path("/"), os.getcwd, _RunsCode, bytearray(b"x")):
        with pytest.raises(UnsafePickle):
            plain_loads(pickle.dumps(bad, protocol=2))
    with pytest.raises(ValueError, match="not a readable pickle"):
        plain_loads(b"\x80\x04junk")
    bomb = zlib.compress(b"\0" * (1 << 20))
    with pytest.raises(ValueError, match="more than 1000 bytes"):
        decompress_capped(bomb, limit=1000)
    with pytest.raises(ValueError, match="not valid base64"):
        decode_b64_zlib_pickle("@@@")


@pytest.mark.parametrize(
    ("name", "edit", "message"),
    [
        ("livecodebench", lambda r: r.update(public_test_cases="[]", private_test_cases="[]"),
         "no test cases"),
        ("apps", lambda r: r.update(input_output=json.dumps({"inputs": [], "outputs": []})),
         "empty test list"),
        ("codecontests", lambda r: [r[g].update(input=[], output=[]) for g in
                                    ("public_tests", "private_tests", "generated_tests")],
         "empty test list"),
        ("kodcode", lambda r: r.update(test="from solution import f\n"), "no test_\\* function"),
        ("primeintellect", lambda r: r.update(verification_info=json.dumps({"test_cases": []})),
         "test_cases is empty"),
    ],
)  # fmt: skip
def test_an_empty_test_list_is_an_error_naming_the_record(tmp_path, name, edit, message):
    recs = records(name)
    edit(recs[0])
    with pytest.raises(TaskDataError, match=rf"{name}.jsonl:1 \(.+\).*{message}"):
        load_benchmark(write(tmp_path, name, recs))


def test_bad_spec_errors():
    with pytest.raises(TaskDataError, match="give the data as apps:PATH"):
        load_benchmark("apps:")
    with pytest.raises(TaskDataError, match="apps:PATH"):
        load_benchmark("apps")
    with pytest.raises(FileNotFoundError, match="no such file /nope.jsonl"):
        load_benchmark("taco:/nope.jsonl")


def test_record_limits_are_capped_and_a_malformed_limit_names_the_record(tmp_path):
    """A record's limits were taken as given (a TACO record asked for 48 h and 976 GiB a test)
    and a malformed one raised a bare ValueError. Scaled limits are capped at
    MAX_TEST_S / MAX_MEMORY_MB (raised or lowered with `?max_test_s=&max_memory_mb=`), and every
    limit the loader cannot read is a TaskDataError naming the file, the record and the field."""
    from execrl.tasks.contest_source import MAX_MEMORY_MB, MAX_TEST_S

    taco = records("taco")[0]
    huge = {**taco, "time_limit": "172800 seconds", "memory_limit": "1000000 megabytes"}
    contest = records("codecontests")[0]
    contest_huge = {**contest, "time_limit": {"seconds": 10**6}, "memory_limit_bytes": 1 << 50}
    prime = records("primeintellect")[0]
    prime_huge = {**prime, "metadata": json.dumps({"time_limit": "99999 seconds"})}
    for name, rec in (
        ("taco", huge),
        ("codecontests", contest_huge),
        ("primeintellect", prime_huge),
    ):
        (task,) = load_benchmark(write(tmp_path, name, [rec]))
        limit = task.time_limits["tests"]
        assert limit.test_wall_s == MAX_TEST_S, (name, limit)
        assert limit.wall_s <= MAX_TEST_S * len(task.tests) + 1, (name, limit)
        assert limit.memory_mb in (None, MAX_MEMORY_MB), (name, limit)
    (raised,) = load_benchmark(
        write(tmp_path, "taco", [huge]) + "?max_test_s=100&max_memory_mb=8192"
    )
    assert raised.time_limits["tests"].test_wall_s == 100
    assert raised.time_limits["tests"].memory_mb == 8192
    malformed = [
        ("taco", {**taco, "time_limit": "1.2.3 seconds"}, r"taco.jsonl:1 \(0\).*time_limit"),
        ("taco", {**taco, "memory_limit": ". megabytes"}, r"taco.jsonl:1 \(0\).*memory_limit"),
        ("taco", {**taco, "time_limit": "0 seconds"}, r"taco.jsonl:1 \(0\).*time_limit"),
        (
            "codecontests",
            {**contest, "time_limit": {"seconds": "one"}},
            r"codecontests.jsonl:1 \(1000_A. Circle Area\).*time_limit",
        ),
        (
            "codecontests",
            {**contest, "memory_limit_bytes": -5},
            r"codecontests.jsonl:1 \(1000_A. Circle Area\).*memory_limit_bytes",
        ),
        (
            "primeintellect",
            {**prime, "metadata": json.dumps({"time_limit": "1e400 seconds"})},
            r"primeintellect.jsonl:1 \(vfc_1001\).*time_limit",
        ),
    ]
    apps = records("apps")[0]
    info = json.loads(prime["verification_info"])
    info["test_cases"][0]["type"] = ["stdin_stdout"]
    malformed += [  # other fields of the wrong type: a TaskDataError too, never a TypeError
        ("apps", {**apps, "starter_code": -1}, r"apps.jsonl:1 \(4000\).*starter_code"),
        ("codecontests", {**contest, "solutions": -1}, r"\(1000_A. Circle Area\).*solutions"),
        ("primeintellect", {**prime, "verification_info": json.dumps(info)}, r"\(vfc_1001\)"),
    ]
    for name, rec, says in malformed:
        with pytest.raises(TaskDataError, match=says):
            load_benchmark(write(tmp_path, name, [rec]))
    with pytest.raises(TaskDataError, match="max_test_s"):
        load_benchmark(write(tmp_path, "taco", [taco]) + "?max_test_s=forever")


def test_a_pickle_is_bounded_by_the_objects_it_builds_not_its_bytes(tmp_path):
    """Shared references cost 2 bytes each in a pickle (BINGET) and a pointer, a stack slot
    and more once loaded: a record within the byte cap could ask for tens of GiB. The pickle's
    object graph is bounded before anything is built; over the bound is an error naming the
    record."""
    from execrl.tasks.restricted_pickle import MAX_PICKLE_OPS

    shared: list[int] = []
    blob = pickle.dumps([shared] * (MAX_PICKLE_OPS + 1), protocol=4)
    assert len(blob) < 3 * MAX_PICKLE_OPS  # small on disk, as the attack is
    recs = records("livecodebench")
    recs[0]["private_test_cases"] = base64.b64encode(zlib.compress(blob)).decode()
    with pytest.raises(TaskDataError, match=r"\(abc371_a\).*more than .* objects"):
        load_benchmark(write(tmp_path, "livecodebench", recs))
    # The same through the JSON text the pickle holds (LiveCodeBench's layout): 3 bytes a list.
    lists = "[" + "[]," * MAX_PICKLE_OPS + "[]]"
    recs[0]["private_test_cases"] = base64.b64encode(zlib.compress(pickle.dumps(lists))).decode()
    with pytest.raises(TaskDataError, match=r"\(abc371_a\).*more than .* values"):
        load_benchmark(write(tmp_path, "livecodebench", recs))
    with pytest.raises(ValueError, match="more than 10 objects"):
        plain_loads(pickle.dumps([shared] * 11), max_ops=10)
    assert plain_loads(pickle.dumps("x" * 10_000_000)) == "x" * 10_000_000  # bytes are not ops


@pytest.mark.parametrize("stripped", ["absent", None, "", "[]"])
def test_a_record_without_private_tests_is_never_graded_as_the_benchmark(tmp_path, stripped):
    """An export that strips LiveCodeBench's private tests leaves problems with a few public
    ones: refused with what to do, unless the benchmark is named `?tests=public`, which then
    grades every problem on its public tests alone (the name says so wherever it is shown)."""
    recs = records("livecodebench")
    for rec in recs:
        if stripped == "absent":
            del rec["private_test_cases"]
        else:
            rec["private_test_cases"] = stripped
    spec = write(tmp_path, "livecodebench", recs)
    with pytest.raises(TaskDataError, match=r"\(abc371_a\): no private_test_cases.*\?tests=public"):
        load_benchmark(spec)
    tasks = {t.id: t for t in load_benchmark(spec + "?tests=public")}
    assert [c.stdin for c in tasks["abc371_a"].tests.cases] == ["1 2\n"]
    assert tasks["1"].tests.expected == ([0, 1],)


def test_tests_option_picks_livecodebench_groups():
    public = {t.id: t for t in load_benchmark(fixture("livecodebench") + "?tests=public")}
    private = {t.id: t for t in load_benchmark(fixture("livecodebench") + "?tests=private")}
    assert [c.stdin for c in public["abc371_a"].tests.cases] == ["1 2\n"]
    assert [c.stdin for c in private["abc371_a"].tests.cases] == ["10 20\n", "-5 5\n"]
    with pytest.raises(TaskDataError, match="tests='hidden'; choose among public,private"):
        load_benchmark(fixture("livecodebench") + "?tests=hidden")
