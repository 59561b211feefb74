"""End to end: `execrl serve-policy` in its own process with a tiny model that has a chat
template; two calls of one episode; the recorded ids extend each other and the recorded
log-probabilities are the model's own."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading

import pytest
import torch

from execrl.cli import main
from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)

from .conftest import CORPUS
from .test_policy_server import get, messages, post
from .test_trajectory import APPEND_ONLY


@pytest.fixture(scope="module")
def chat_model_dir(tmp_path_factory):
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    tokenizer.chat_template = APPEND_ONLY
    shape = TinyLlamaShape(hidden=32, layers=2, heads=2, kv_heads=1, intermediate=64,
                           max_positions=256)  # fmt: skip
    return save_pretrained(
        new_llama(tokenizer, shape, seed=0), tokenizer, tmp_path_factory.mktemp("chat")
    )


def start(argv: list[str]) -> tuple[subprocess.Popen, str, list[str]]:
    """The server process, its base URL and what it printed up to the line that says it (with
    $EXECRL_POLICY_TOKEN unset: the token it generated)."""
    env = {k: v for k, v in os.environ.items() if k != "EXECRL_POLICY_TOKEN"}
    process = subprocess.Popen([sys.executable, "-m", "execrl.cli", "serve-policy", *argv],
                               stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    lines: queue.Queue = queue.Queue()
    seen: list[str] = []
    threading.Thread(target=lambda: [lines.put(x) for x in process.stderr], daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=120)
        except queue.Empty:
            process.kill()
            raise AssertionError(f"serve-policy printed no address: {seen}") from None
        seen.append(line)
        if "serving" in line:
            return process, line.split(" at ")[1].split("/v1")[0], seen


def test_serve_policy_records_an_episode_end_to_end(chat_model_dir, tmp_path):
    """With $EXECRL_POLICY_TOKEN unset, a token is generated and printed, and only calls that
    carry it are served (`test_policy_server`: who may call into which episode)."""
    record = tmp_path / "rec"
    process, url, seen = start(["--model", str(chat_model_dir), "--port", "0", "--max-new-tokens",
                                "12", "--record-dir", str(record), "--device", "cpu"])  # fmt: skip
    try:
        printed = [x for x in seen if "calls must carry this token" in x]
        assert printed, seen
        auth = {"Authorization": f"Bearer {printed[0].split()[-1]}"}
        base = url + "/e/ep-1/v1"
        body = {"messages": messages("def add(a, b):")}
        assert post(base + "/chat/completions", body)[0] == 401
        assert post(base + "/chat/completions", body, {"Authorization": "Bearer no"})[0] == 401
        assert get(url + "/episodes/ep-1")[0] == 401
        assert get(base + "/models")[1]["data"][0]["id"] == "policy"
        _, one = post(base + "/chat/completions", {"messages": messages("def add(a, b):")}, auth)
        first = one["choices"][0]["message"]["content"]
        _, two = post(base + "/chat/completions",
                      {"messages": messages("def add(a, b):", first, "print(5)")}, auth)  # fmt: skip
        assert two["execrl"]["extends"] in ("exact", "shown")
        _, shown = get(url + "/episodes/ep-1", auth)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    calls = [json.loads(x) for x in (record / "calls.jsonl").read_text().splitlines()]
    assert [c["call"] for c in calls] == [0, 1] and calls[0]["text"] == first
    # the second call was given the first call's ids and its sampled ids, then the new turn
    head = calls[0]["prompt_ids"] + calls[0]["token_ids"]
    assert calls[1]["prompt_ids"][: len(head)] == head
    [episode] = [json.loads(x) for x in (record / "episodes.jsonl").read_text().splitlines()]
    assert episode == shown and episode["calls"] == 2
    [segment] = episode["segments"]
    assert segment["token_ids"] == calls[1]["prompt_ids"] + calls[1]["token_ids"]
    policy = [i for i, m in enumerate(segment["loss_mask"]) if m]
    assert len(policy) == len(calls[0]["token_ids"]) + len(calls[1]["token_ids"])
    # the recorded behaviour log-probabilities are the model's own at temperature 1
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(chat_model_dir)
    ids = torch.tensor([segment["token_ids"]])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)  # (L-1, V)
    own = [logp[i - 1, segment["token_ids"][i]].item() for i in policy]
    recorded = [segment["logprobs"][i] for i in policy]
    assert max(abs(a - b) for a, b in zip(own, recorded, strict=True)) < 1e-4


def test_serve_policy_refuses_bad_options_before_loading(capsys, tmp_path):
    assert main(["serve-policy", "--engine", "vllm"]) == 2
    assert "--engine 'vllm'" in capsys.readouterr().err
    assert main(["serve-policy", "--model", str(tmp_path / "nothing")]) == 2
    assert "nothing" in capsys.readouterr().err


def test_a_port_in_use_is_an_error_that_says_what_to_do(chat_model_dir, capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["serve-policy", "--model", str(chat_model_dir), "--port", str(port)]
        assert main([*argv, "--device", "cpu"]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_the_token_flag_names_its_default(capsys):
    with pytest.raises(SystemExit):
        main(["serve-policy", "--help"])
    assert "(default EXECRL_POLICY_TOKEN)" in " ".join(capsys.readouterr().out.split())
