"""`execrl eval --prompt evalplus` and `--engine`: EvalPlus's instruct protocol (its prompt, the
reply begun with its response prefix, its end strings, the sanitised program) and the engine
that generates, through the CLI on a tiny model the test builds."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cli_helpers import run_execrl
from execrl.eval.prompt_style import EVALPLUS_INSTRUCTION, EVALPLUS_RESPONSE, STYLES
from execrl.eval.sanitize import sanitize
from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)
from execrl.models.prompting.chat import format_prompt

TASKS = [
    {
        "task_id": "t/0",
        "prompt": "def add(a, b):\n",
        "entry_point": "add",
        "canonical_solution": "    return a + b\n",
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
    },
    {
        "task_id": "t/1",
        "prompt": "def neg(x):\n",
        "entry_point": "neg",
        "canonical_solution": "    return -x\n",
        "test": "def check(candidate):\n    assert candidate(2) == -2\n",
    },
]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# --- the sanitiser: expected programs written out by hand -------------------------------------


def test_sanitize_keeps_imports_and_what_the_entry_point_reaches():
    answer = (
        "import math\n"
        "def helper(x):\n    return x + 1\n"
        "def unused():\n    return 0\n"
        "SCALE = 3\n"
        "def f(a):\n    return helper(a) * SCALE\n"
        "print(f(2))\n"
        "assert f(1) == 6\n"
        'if __name__ == "__main__":\n    f(3)\n'
    )
    assert sanitize(answer, "f") == (
        "import math\n"
        "def helper(x):\n    return x + 1\n"
        "SCALE = 3\n"
        "def f(a):\n    return helper(a) * SCALE\n"
    )


def test_sanitize_keeps_decorators_and_classes_the_entry_point_names():
    answer = (
        "from functools import lru_cache\n"
        "class Box:\n    pass\n"
        "@lru_cache(None)\ndef f(n):\n    return Box() if n else None\n"
        "f(1)\n"
    )
    assert sanitize(answer, "f") == (
        "from functools import lru_cache\n"
        "class Box:\n    pass\n"
        "@lru_cache(None)\ndef f(n):\n    return Box() if n else None\n"
    )


def test_sanitize_ends_at_the_closing_fence_and_drops_a_cut_off_tail():
    # the reply continues an open ```python fence: prose after the closing fence is not code
    assert sanitize("def f():\n    return 1\n```\nThis returns 1.", "f") == (
        "def f():\n    return 1\n"
    )
    # a token limit cut the last statement: the complete definition before it stays
    assert sanitize("def f():\n    return 1\nprint(f(", "f") == "def f():\n    return 1\n"
    assert sanitize("no code at all (", "f") == ""


def test_sanitize_without_an_entry_point_keeps_every_definition():
    assert sanitize("def a():\n    return 1\na()\ndef b():\n    return 2\n", None) == (
        "def a():\n    return 1\ndef b():\n    return 2\n"
    )


# --- the prompt ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chat_tokenizer():
    tokenizer = train_bpe_tokenizer(["def f():\n    return 1\n"] * 5, vocab_size=300)
    tokenizer.chat_template = CHATML
    return tokenizer


def test_the_reply_prefix_begins_the_assistant_turn(chat_tokenizer):
    style = STYLES["evalplus"]
    prompt = TASKS[0]["prompt"]
    user = f"{EVALPLUS_INSTRUCTION}\n```\n{prompt.strip()}\n```\n"
    text = format_prompt(chat_tokenizer, user, chat=True, reply_prefix=style.reply_prefix(True))
    assert text == (
        f"<|im_start|>user\n{user}<|im_end|>\n"
        f"<|im_start|>assistant\n{EVALPLUS_RESPONSE}\n```python\n"
    )


def test_a_template_that_drops_the_reply_is_refused():
    tokenizer = train_bpe_tokenizer(["x"] * 5, vocab_size=260)
    tokenizer.chat_template = (
        "{% for m in messages if m['role'] == 'user' %}{{ m['content'] }}{% endfor %}"
    )
    with pytest.raises(ValueError, match="drops the assistant's reply"):
        format_prompt(tokenizer, "hi", chat=True, reply_prefix="Sure:\n")


# --- through the CLI -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    corpus = [t["prompt"] + t["canonical_solution"] for t in TASKS] * 10
    tokenizer = train_bpe_tokenizer(corpus, vocab_size=300)
    shape = TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64)
    return save_pretrained(
        new_llama(tokenizer, shape, seed=0), tokenizer, tmp_path_factory.mktemp("m")
    )


@pytest.fixture
def bench(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    return f"jsonl:{path}"


def _eval(*args: str) -> subprocess.CompletedProcess[str]:
    return run_execrl("eval", *args, "--workers", "1", "--json")


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_evalplus_prompt_grades_the_sanitised_answer(tmp_path, bench, tiny_model):
    out = tmp_path / "out"
    proc = _eval("--model", str(tiny_model), "--benchmark", bench, "--prompt", "evalplus",
                 "--max-new-tokens", "24", "--out-dir", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((out / "samples.meta.json").read_text())
    assert meta["prompt"] == "evalplus"
    samples = _lines(out / "samples.jsonl")
    assert len(samples) == len(TASKS)
    by_id = {t["task_id"]: t for t in TASKS}
    for s in samples:  # no chat template: EvalPlus's direct completion, then the sanitiser
        task = by_id[s["task_id"]]
        answer = task["prompt"].strip() + "\n" + s["raw"]
        assert s["solution"] == sanitize(answer, task["entry_point"])
    # a resume with the other style would mix two protocols' answers: refused
    again = _eval("--model", str(tiny_model), "--benchmark", bench, "--out-dir", str(out))
    assert again.returncode == 2 and "prompt" in again.stderr


def test_engine_hf_and_loop_give_the_same_greedy_answers(tmp_path, bench, tiny_model):
    raws = []
    for engine in ("loop", "hf"):
        out = tmp_path / engine
        proc = _eval("--model", str(tiny_model), "--benchmark", bench, "--engine", engine,
                     "--max-new-tokens", "16", "--out-dir", str(out))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        raws.append([s["raw"] for s in _lines(out / "samples.jsonl")])
    assert raws[0] == raws[1]


def test_prompt_is_refused_for_episodes(bench, tiny_model):
    proc = _eval("--model", str(tiny_model), "--benchmark", bench, "--prompt", "evalplus",
                 "--env", "self_correct")  # fmt: skip
    assert proc.returncode == 2
    assert "--prompt evalplus with --env self_correct" in proc.stderr
