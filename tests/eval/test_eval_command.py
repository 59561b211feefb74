"""`execrl eval` end to end: a tiny random HF model saved by the test, and a local
OpenAI-compatible server started by the test; resuming; bad input."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cli_helpers import run_execrl
from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)

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
        "prompt": "from typing import List\n\n\ndef total(xs: List[int]) -> int:\n",
        "entry_point": "total",
        "canonical_solution": "    return sum(xs)\n",
        "test": "def check(candidate):\n    assert candidate([2, 3]) == 5\n",
    },
]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_execrl(*args, cwd=cwd)


@pytest.fixture
def bench(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    return f"jsonl:{path}"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    corpus = [t["prompt"] + t["canonical_solution"] for t in TASKS] * 10
    tokenizer = train_bpe_tokenizer(corpus, vocab_size=300)
    shape = TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64)
    return save_pretrained(
        new_llama(tokenizer, shape, seed=0), tokenizer, tmp_path_factory.mktemp("m")
    )


class FakeServer:
    """An OpenAI-compatible server: /v1/completions continues a prompt with `answers[entry]`,
    /v1/chat/completions answers in a markdown fence. Records every request body."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.requests: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append({"path": self.path, **body})
                text = body.get("prompt") or body["messages"][-1]["content"]
                answer = next(a for name, a in owner.answers.items() if f"def {name}(" in text)
                if self.path.endswith("/chat/completions"):
                    # The function as the prompt shows it, without its imports, and the body.
                    shown = text.rsplit("```python\n", 1)[1].split("```")[0]
                    code = "".join(
                        line for line in shown.splitlines(keepends=True)
                        if not line.startswith(("from ", "import "))
                    )  # fmt: skip
                    whole = f"Here it is:\n```python\n{code.strip()}\n{answer}```\n"
                    choices = [
                        {"index": i, "message": {"content": whole}} for i in range(body["n"])
                    ]
                else:
                    choices = [{"index": i, "text": answer} for i in range(body["n"])]
                data = json.dumps({"choices": choices}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def server():
    s = FakeServer({"add": "    return a + b\n", "total": "    return 0\n"})
    yield s
    s.close()


def _summary(proc) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_eval_on_a_tiny_local_hf_model(tmp_path, bench, tiny_model):
    out = tmp_path / "out"
    args = ["eval", "--model", str(tiny_model), "--benchmark", bench, "-n", "2", "-k", "1,2"]
    args += ["--max-new-tokens", "6", "--out-dir", str(out), "--json", "--device", "cpu"]
    summary = _summary(run(*args))
    assert summary["n_tasks"] == 2 and summary["n_samples"] == 4
    assert 0 <= summary["pass@1"] <= summary["pass@2"] <= 1
    assert sum(summary["verdicts"].values()) == 4
    samples = _lines(out / "samples.jsonl")
    assert [(s["task_id"], s["completion_id"]) for s in samples] == [
        ("t/0", 0), ("t/0", 1), ("t/1", 0), ("t/1", 1)
    ]  # fmt: skip
    # A code prompt with plain completion: the program is the prompt followed by the completion.
    for s in samples:
        prompt = next(t["prompt"] for t in TASKS if t["task_id"] == s["task_id"])
        assert s["solution"] == prompt + s["raw"]
    assert len(_lines(out / "results.jsonl")) == 4
    assert json.loads((out / "summary.json").read_text())["n_samples"] == 4
    # A second run finds every sample and generates none.
    again = run(*args)
    assert "generated 0 samples (4 from an earlier run)" in again.stderr
    assert _lines(out / "samples.jsonl") == samples


def test_eval_against_a_local_openai_server(tmp_path, bench, server):
    out = tmp_path / "out"
    model = f"openai:{server.url}#tiny-coder"
    summary = _summary(run("eval", "--model", model, "--benchmark", bench, "-n", "3",
                           "--temperature", "0.8", "--out-dir", str(out), "--json"))  # fmt: skip
    assert summary["pass@1"] == 0.5 and summary["n_samples"] == 6
    assert summary["verdicts"]["WRONG_ANSWER"] == 3
    assert [r["path"] for r in server.requests] == ["/v1/completions"] * 2
    assert all(r["n"] == 3 and r["temperature"] == 0.8 and r["model"] == "tiny-coder"
               for r in server.requests)  # fmt: skip
    assert "\ndef " in server.requests[0]["stop"]  # EvalPlus's stops for code prompts
    results = _lines(out / "results.jsonl")
    assert [r["passed"] for r in results] == [True] * 3 + [False] * 3


def test_an_interrupted_run_resumes_with_what_is_missing(tmp_path, bench, server):
    out = tmp_path / "out"
    args = ["eval", "--model", f"openai:{server.url}#m", "--benchmark", bench, "-n", "2"]
    args += ["--temperature", "0.8", "--out-dir", str(out), "--json"]
    _summary(run(*args))
    path = out / "samples.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    # Killed while writing: the last sample is lost and the one before it torn.
    path.write_text("".join(lines[:2]) + lines[2][:15])
    server.requests.clear()
    summary = _summary(run(*args))
    assert summary["n_samples"] == 4 and summary["pass@1"] == 0.5
    assert [(r["n"], "total" in r["prompt"]) for r in server.requests] == [(2, True)]
    assert [(s["task_id"], s["completion_id"]) for s in _lines(path)] == [
        ("t/0", 0), ("t/0", 1), ("t/1", 0), ("t/1", 1)
    ]  # fmt: skip
    # Resuming with other settings would mix samples: an error, unless --restart.
    other = run(*args[:-3], "--temperature", "0.2", "--out-dir", str(out))
    assert other.returncode == 2 and "temperature: 0.8 then, 0.2 now" in other.stderr
    # ... and other stop rules would too: a sample cut at a loop is not the uncut one
    other = run(*args, "--repeat-ngram", "0")
    assert other.returncode == 2 and "repeat_ngram: 32 then, 0 now" in other.stderr
    assert _summary(run(*args, "--restart"))["n_samples"] == 4


def test_chat_mode_extracts_the_fenced_function_and_adds_the_prompts_imports(
    tmp_path, bench, server
):
    out = tmp_path / "out"
    proc = run("eval", "--model", f"openai:{server.url}#m", "--chat", "on", "--benchmark", bench,
               "--out-dir", str(out), "--json")  # fmt: skip
    summary = _summary(proc)
    assert summary["pass@1"] == 0.5 and server.requests[0]["path"] == "/v1/chat/completions"
    total = _lines(out / "samples.jsonl")[1]
    assert total["raw"].startswith("Here it is:")
    assert total["solution"].startswith("from typing import List\n")
    assert "```" not in total["solution"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--model", "openai:http://localhost:1"], "openai:URL#MODEL"),
        (["--model", "/nonexistent/model"], "does not exist"),
        (["--model", "openai:http://127.0.0.1:9/v1#m", "-n", "2", "-k", "1,5"], "between 1 and n"),
        (["--model", "openai:http://127.0.0.1:9/v1#m", "--benchmark", "nope"], "nope"),
        (
            [
                "--model",
                "openai:http://127.0.0.1:9/v1#m",
                "--benchmark",
                "jsonl:/nonexistent.jsonl",
            ],
            "nonexistent",
        ),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path, extra, message):
    proc = run("eval", "--out-dir", str(tmp_path / "o"), *extra)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_unreachable_server_is_an_error_not_a_score(tmp_path, bench, monkeypatch):
    from execrl.models.engines import backends

    monkeypatch.setattr(backends.OpenAIGenerator, "retries", 0)
    gen = backends.OpenAIGenerator("http://127.0.0.1:9", "m")
    with pytest.raises(backends.ServerError, match="is the server running"):
        gen.generate(["def f():\n"], 1, backends.GenerationParams())
