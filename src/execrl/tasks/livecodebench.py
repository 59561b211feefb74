"""LiveCodeBench code generation (`livecodebench/code_generation_lite`, releases v1-v6).

Each record: `question_id`, `question_title`, `question_content`, `platform`, `contest_id`,
`contest_date` (ISO), `starter_code`, `difficulty`, `public_test_cases` (a JSON string of
`{"input", "output", "testtype"}`), `private_test_cases` (the same JSON, or in later releases
base64(zlib(pickle(that JSON string)))) and `metadata` (a JSON string; `func_name` for
functional problems).

Tests are the public cases then the private ones, graded as lcb_runner does (checker
`livecodebench`, `sandbox/grading/checkers.py`):
- `stdin` problems: a whole program reading stdin; output compared line by line, each line
  stripped, a differing line passing if it is equal as a list of Decimals.
- `functional` problems (LeetCode): the program defines `class Solution`; one instance per run
  (lcb_runner makes one per problem), its `func_name` method called with the arguments, each
  one line of the input JSON-decoded; the expected output is JSON-decoded; a returned tuple
  counts as a list.
lcb_runner puts a block of imports (its `import_string`: `from typing import *`,
`from collections import *`, `heapq`, `bisect`, `itertools`, `functools`, `math`, ... and
`sys.setrecursionlimit(50000)`) before every program it runs, call-based and stdin alike; here
it is the task's `prelude`, put before every program the task grades (`Task.with_prelude`), so
a reference written for LiveCodeBench that uses `List` or `deque` without importing them passes
as there. The prompt shows the block too. As there, a program that starts with
`from __future__ import ...` is then a syntax error. lcb_runner runs stdin programs inside its
own process with `input`/`sys.stdin` patched; here the program runs as itself. lcb_runner gives
each test 6 s by default; here the same per test.

Options (`livecodebench:PATH?since=2024-08-01&until=2025-02-01`): `since` and `until` keep the
problems whose `contest_date` falls in [since, until] (dates, inclusive), so a window after a
model's training cut-off can be chosen, as LiveCodeBench's own `--start_date/--end_date` do.
`tests=public` grades on the public tests alone (default `public,private`). A record without
private tests (exports that strip them leave the field out, null or empty) is refused unless
`tests=public` is given: LiveCodeBench scores on the private tests, and a figure from a few
public ones is not comparable; naming the option puts it in every summary that names the
benchmark.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

from execrl.tasks.contest_source import HubSource, Record, json_value, named, scaled_limits
from execrl.tasks.errors import TaskDataError
from execrl.tasks.restricted_pickle import decode_b64_zlib_pickle
from execrl.tasks.schema import CallTests, Compare, StdioCase, StdioTests, Task, Tests
from execrl.tasks.sources import field, make_task

HUB = HubSource(
    "json",
    "train",
    data_files="hf://datasets/livecodebench/code_generation_lite/test6.jsonl",
)
OPTIONS = ("since", "until", "tests")
GROUPS = ("public", "private")
PER_TEST_S = 6.0  # lcb_runner's default timeout per test (run_test(timeout=6))
# The modules of lcb_runner's `import_string`, in its order (`LCB_IMPORTS`).
_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
            "statistics", "itertools", "functools", "operator", "io", "sys", "json", "builtins",
            "typing")  # fmt: skip
COMPARE = Compare(checker="livecodebench")


def read_livecodebench(records: list[Record], options: dict[str, str]) -> list[Task]:
    since = _date_option(options, "since")
    until = _date_option(options, "until")
    groups = _groups(options)
    tasks = []
    for where, rec in records:
        where = named(where, rec.get("question_id"))
        when = _contest_date(where, rec)
        if (since and when < since) or (until and when > until):
            continue
        tasks.append(_task(where, rec, when, groups))
    if not tasks:
        raise TaskDataError(
            f"livecodebench: no problem has a contest_date in the window {since}..{until}"
        )
    return tasks


def _groups(options: dict[str, str]) -> tuple[str, ...]:
    text = options.get("tests", "public,private")
    groups = tuple(g.strip() for g in text.split(",") if g.strip())
    if not groups or any(g not in GROUPS for g in groups):
        raise TaskDataError(f"livecodebench: tests={text!r}; choose among public,private")
    return groups


def _date_option(options: dict[str, str], key: str) -> date | None:
    value = options.get(key)
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise TaskDataError(f"livecodebench: {key}={value!r} is not a date (YYYY-MM-DD)") from None


def _contest_date(where: str, rec: dict[str, Any]) -> date:
    text = field(where, rec, "contest_date")
    try:
        return datetime.fromisoformat(text).date()
    except ValueError:
        raise TaskDataError(f"{where}: contest_date {text!r} is not an ISO date") from None


def private_cases(where: str, rec: dict[str, Any]) -> list[Any]:
    """The private test cases: plain JSON in early releases, else base64+zlib+pickle (read with
    an unpickler that builds plain built-in data only). None where the record has none (an
    export that strips them leaves the field out, null or empty)."""
    raw = rec.get("private_test_cases")
    if raw is None or raw == "" or raw == []:
        return None
    if not isinstance(raw, (str, list)):
        raise TaskDataError(f"{where}: private_test_cases should be text or a list of test cases")
    if isinstance(raw, list):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        pass
    try:
        decoded = decode_b64_zlib_pickle(raw)
    except ValueError as exc:
        raise TaskDataError(f"{where}: private_test_cases cannot be decoded: {exc}") from None
    if isinstance(decoded, str):
        try:
            decoded = json.loads(decoded)
        except json.JSONDecodeError as exc:
            raise TaskDataError(
                f"{where}: private_test_cases decode to text that is not JSON: {exc.msg}"
            ) from None
    return decoded


def _cases(where: str, what: str, cases: Any) -> list[dict[str, str]]:
    if not isinstance(cases, list):
        raise TaskDataError(f"{where}: {what} should be a list of test cases")
    for i, case in enumerate(cases):
        if not (
            isinstance(case, dict)
            and isinstance(case.get("input"), str)
            and isinstance(case.get("output"), str)
            and case.get("testtype") in ("stdin", "functional")
        ):
            raise TaskDataError(
                f"{where}: {what}[{i}] needs string 'input' and 'output' and a 'testtype' of "
                "'stdin' or 'functional'"
            )
    return cases


def _private(where: str, rec: dict[str, Any], public: list[dict[str, str]]) -> list[Any]:
    """The private cases; a record without them is refused rather than graded on its few public
    cases as if it were the benchmark (LiveCodeBench's scores are on the private tests)."""
    cases = private_cases(where, rec)
    if not cases and public:
        raise TaskDataError(
            f"{where}: no private_test_cases (this export strips them; LiveCodeBench scores "
            "on them). Use the full release (livecodebench/code_generation_lite), or grade "
            "on the public tests alone, naming it so: 'livecodebench:PATH?tests=public'"
        )
    return _cases(where, "private_test_cases", cases or [])


def _tests(where: str, cases: list[dict[str, str]], func_name: str | None) -> Tests:
    kinds = {c["testtype"] for c in cases}
    if len(kinds) > 1:
        raise TaskDataError(f"{where}: the problem mixes stdin and functional test cases")
    if kinds == {"stdin"}:
        return StdioTests(tuple(StdioCase(c["input"], c["output"]) for c in cases), COMPARE)
    if not func_name:
        raise TaskDataError(f"{where}: functional tests but no metadata.func_name")
    inputs, expected = [], []
    for i, c in enumerate(cases):
        try:
            inputs.append(tuple(json.loads(line) for line in c["input"].split("\n")))
            expected.append(json.loads(c["output"]))
        except json.JSONDecodeError as exc:
            raise TaskDataError(
                f"{where}: test {i} is not JSON, one argument a line: {exc.msg}"
            ) from None
    return CallTests(tuple(inputs), tuple(expected), COMPARE)


def _task(where: str, rec: dict[str, Any], when: date, groups: tuple[str, ...]) -> Task:
    qid = field(where, rec, "question_id")
    content = field(where, rec, "question_content")
    starter = rec.get("starter_code") or ""
    meta = json_value(where, rec, "metadata", {})
    func_name = meta.get("func_name") if isinstance(meta, dict) else None
    public = _cases(where, "public_test_cases", json_value(where, rec, "public_test_cases"))
    private = []
    if "private" in groups:
        private = _private(where, rec, public)
    cases = (public if "public" in groups else []) + private
    if not cases:
        raise TaskDataError(f"{where}: the problem has no test cases")
    tests = _tests(where, cases, func_name)
    functional = isinstance(tests, CallTests)
    return make_task(
        where,
        id=str(qid),
        prompt=_prompt(content, starter, functional),
        tests=tests,
        entry_point=f"Solution.{func_name}" if functional else None,
        visible_tests=_tests(where, public, func_name) if public else None,
        time_limits=scaled_limits(PER_TEST_S, len(tests), factor=1.0),
        prelude=LCB_IMPORTS,
        metadata={
            "source": "livecodebench",
            "title": rec.get("question_title"),
            "platform": rec.get("platform"),
            "contest_id": rec.get("contest_id"),
            "contest_date": when.isoformat(),
            "difficulty": rec.get("difficulty"),
            "starter_code": starter,
        },
    )


# lcb_runner's `import_string`, the same modules in the same order: put before every program it
# runs (call-based and stdin), so solutions may use `List`, `deque`, `gcd`, ... unimported.
LCB_IMPORTS = "\n".join(
    [f"from {m} import *" for m in _MODULES] + [f"import {m}" for m in _MODULES if m not in ("builtins", "typing")]
    + ["sys.setrecursionlimit(50000)"]
)  # fmt: skip


def _prompt(content: str, starter: str, functional: bool) -> str:
    """The question, then (in one fence) the imports lcb_runner adds to every program and, for
    LeetCode problems, the starter code: `execrl eval` and `eval-samples` add the import lines a
    solution lacks from its prompt, which is how lcb_runner's implicit imports reach the run."""
    head = f"{content.rstrip()}\n\n"
    if functional:
        return (
            head + "Complete the method of `Solution` (it is called with the arguments); these "
            f"imports are available:\n```python\n{LCB_IMPORTS}\n\n{starter.rstrip()}\n```\n"
        )
    return (
        head + "Write a whole Python program that reads the input from stdin and writes the answer "
        f"to stdout; these imports are available:\n```python\n{LCB_IMPORTS}\n```\n"
    )
