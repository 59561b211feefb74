"""`execrl eval-samples` end to end, through the command's entry point (`execrl.cli.main`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cli_helpers import run_execrl

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_execrl(*args, cwd=cwd)


def run_eval(*args: str) -> subprocess.CompletedProcess[str]:
    return run("eval-samples", *args)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


TASKS = [
    {
        "task_id": "t/0",
        "prompt": "def add(a, b):\n",
        "entry_point": "add",
        "canonical_solution": "    return a + b\n",
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n",
    },
    {
        "task_id": "t/1",
        "prompt": "def neg(a):\n",
        "entry_point": "neg",
        "canonical_solution": "    return -a\n",
        "test": "def check(candidate):\n    assert candidate(2) == -2\n",
    },
]


@pytest.fixture
def tasks_file(tmp_path):
    return write_jsonl(tmp_path / "tasks.jsonl", TASKS)


def test_summary_output_and_pass_at_k(tmp_path, tasks_file):
    samples = write_jsonl(
        tmp_path / "samples.jsonl",
        [
            {"task_id": "t/0", "completion": "    return a + b\n"},
            {"task_id": "t/1", "completion": "    return a\n"},
            {"task_id": "t/0", "completion": "    return a - b\n"},
            {"task_id": "t/1", "completion": "    return -a\n"},
        ],
    )
    out = tmp_path / "results.jsonl"
    proc = run_eval(
        str(samples), "--benchmark", f"jsonl:{tasks_file}", "--output", str(out), "--json"
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["benchmark"] == f"jsonl:{tasks_file}"
    assert summary["n_tasks"] == 2 and summary["n_samples"] == 4
    # each task: n=2, c=1 -> pass@1 = 0.5, pass@2 = 1
    assert summary["pass@1"] == pytest.approx(0.5) and summary["pass@2"] == pytest.approx(1.0)
    assert summary["verdicts"]["PASSED"] == 2 and summary["verdicts"]["WRONG_ANSWER"] == 2
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["task_id"], r["passed"], r["verdict"]) for r in lines] == [
        ("t/0", True, "PASSED"),
        ("t/1", False, "WRONG_ANSWER"),
        ("t/0", False, "WRONG_ANSWER"),
        ("t/1", True, "PASSED"),
    ]
    assert [r["completion_id"] for r in lines] == [0, 0, 1, 1]
    assert lines[1]["tests"][0]["exception"] == "AssertionError"


def test_evalplus_solution_format_is_detected(tmp_path, tasks_file):
    samples = write_jsonl(
        tmp_path / "s.jsonl", [{"task_id": "t/0", "solution": "def add(a, b):\n    return b + a\n"}]
    )
    proc = run_eval(str(samples), "--benchmark", f"jsonl:{tasks_file}", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["pass@1"] == 1.0


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "empty"),
        (
            '{"task_id": "t/0", "completion": "    return a + b\\n"}\n{"task_id": "t/0", "completion": \n',
            ":2",
        ),
        ('{"task_id": "t/9", "completion": "    return 1\\n"}\n', "t/9"),
        ('{"task_id": "t/0"}\n', "completion"),
        ('["not", "an", "object"]\n', "object"),
    ],
)
def test_bad_samples_files_fail_clearly(tmp_path, tasks_file, content, message):
    samples = tmp_path / "bad.jsonl"
    samples.write_text(content)
    out = tmp_path / "results.jsonl"
    proc = run_eval(
        str(samples), "--benchmark", f"jsonl:{tasks_file}", "--output", str(out), "--json"
    )
    assert proc.returncode != 0
    assert message in proc.stderr and str(samples) in proc.stderr, proc.stderr
    assert "pass@" not in proc.stdout
    assert not out.exists()


def test_unknown_task_ids_can_be_ignored_and_counted(tmp_path, tasks_file):
    samples = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"task_id": "t/0", "completion": "    return a + b\n"},
            {"task_id": "nope", "completion": "x"},
        ],
    )
    proc = run_eval(
        str(samples), "--benchmark", f"jsonl:{tasks_file}", "--ignore-unknown", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert summary["ignored_unknown"] == 1 and summary["n_samples"] == 1


@pytest.mark.parametrize(
    "change, message",
    [
        ({"test": "def helper():\n    pass\n"}, "check"),
        ({"entry_point": None}, "entry_point"),
        ({"entry_point": ""}, "entry_point"),
    ],
)
def test_bad_tasks_files_fail_clearly(tmp_path, change, message):
    bad = [dict(TASKS[0], **change)]
    if change.get("entry_point", "x") is None:
        del bad[0]["entry_point"]
    tasks = write_jsonl(tmp_path / "tasks.jsonl", bad)
    samples = write_jsonl(
        tmp_path / "s.jsonl", [{"task_id": "t/0", "completion": "    return a + b\n"}]
    )
    proc = run_eval(str(samples), "--benchmark", f"jsonl:{tasks}", "--json")
    assert proc.returncode != 0
    assert message in proc.stderr and str(tasks) in proc.stderr, proc.stderr
    assert "pass@" not in proc.stdout


def test_unknown_benchmark(tmp_path):
    samples = write_jsonl(tmp_path / "s.jsonl", [{"task_id": "t/0", "completion": "x"}])
    proc = run_eval(str(samples), "--benchmark", "no-such-bench")
    assert proc.returncode != 0 and "no-such-bench" in proc.stderr


def test_bundled_example_on_humaneval(tmp_path):
    out = tmp_path / "r.jsonl"
    proc = run_eval(
        str(ROOT / "examples" / "humaneval_samples.jsonl"),
        "--benchmark",
        "humaneval",
        "--json",
        "--output",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert summary["n_tasks"] == 164 and summary["n_samples"] == 328
    # every canonical completion passes; no wrong or hacked completion does
    assert summary["verdicts"]["PASSED"] == 164 and summary["pass@1"] == pytest.approx(0.5)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(r["passed"] == (r["completion_id"] == 0) for r in rows)


def test_sandbox_doctor_and_bench():
    doctor = run("sandbox", "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    layers = json.loads(doctor.stdout)["layers"]
    assert {r["layer"] for r in layers if r["active"]} == {
        "network",
        "filesystem",
        "uid",
        "rlimits",
        "audit",
    }
    bench = run(
        "sandbox", "bench", "--benchmark", "humaneval", "--repeat", "1", "--workers", "2", "--json"
    )
    assert bench.returncode == 0, bench.stderr
    out = json.loads(bench.stdout)
    assert out["executions"] == 164 and out["all_passed"] is True and out["exec_per_s"] > 0
    # Masked runs are counted per cause (none here), and how memory and keyrings are held.
    assert out["sandbox_errors"] == {} and out["possible_hacks"] == 0
    report = json.loads(doctor.stdout)
    assert report["memory"]["mode"] in ("cgroup v1", "cgroup v2", "rlimit")
    assert "refused" in report["keyrings"]


def test_execrl_eval_asks_each_call_to_stop_on_a_block_in_its_tasks_language(tmp_path):
    """`execrl eval` on a mix of python and sql tasks generates them in separate calls, each
    whose stop rule closes on its own language's block (`code_language`)."""
    from execrl.eval.generation import GenerationMeta, SamplesFile, generate_missing
    from execrl.models.engines.backends import GenerationParams
    from execrl.tasks.schema import CallTests, Task

    seen: list[tuple[str, int]] = []

    class Recording:
        chat = True

        def generate(self, prompts, n, params):
            seen.append((params.code_language, len(prompts)))
            return [["```\nx\n```"] * n for _ in prompts]

    tests = CallTests(((1,),), (1,))
    work = [Task("p/0", "Write f.", tests, "f"), Task("q/0", "Count rows.", tests, language="sql"),
            Task("p/1", "Write g.", tests, "g")]  # fmt: skip
    meta = GenerationMeta("m", "mix", 1, 0.0, 1.0, 8, True, code_end=True)
    made = generate_missing(Recording(), work, SamplesFile(tmp_path / "s.jsonl", meta),
                            GenerationParams(code_end=True))  # fmt: skip
    assert made == 3 and sorted(seen) == [("python", 2), ("sql", 1)]
