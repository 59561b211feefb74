"""A rollout engine in a process of its own (`models.engines.remote_engine`), here on the CPU beside
the trainer: it draws what the same engine draws in the trainer's process, takes the weights the
trainer pushes over the gloo weight group, and a dead engine process fails the call naming its
device, never a hang."""

import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from execrl.models import SamplingParams, encode_prompts, load_policy
from execrl.models.engines.engine import EngineFailure, RolloutEngine
from execrl.models.engines.engine_factory import make_engine
from execrl.models.engines.remote_engine import RemoteEngine
from execrl.models.engines.weights import plain_weights

DEADLINE_S = 60  # a healthy call here takes well under a second


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return load_policy(str(tiny_model_dir))


@pytest.fixture(scope="module")
def remote(policy):
    engine = RemoteEngine("loop", policy.model, policy.tokenizer, "cpu")
    yield engine
    engine.close()


def _prompts(policy):
    return encode_prompts(policy.tokenizer, ["def add(a, b):\n", "x", "def neg(x):\n    return"])


def _draws(engine: RolloutEngine, prompt_ids, params, seed: int):
    torch.manual_seed(seed)
    got = engine.generate(prompt_ids, params, n=3)
    return got, torch.random.get_rng_state()  # where the engine left the trainer's generator


def _same(a, b) -> bool:
    return all(
        x.prompt_index == y.prompt_index and x.finish == y.finish and x.text == y.text
        and torch.equal(x.token_ids, y.token_ids) and torch.equal(x.logprobs, y.logprobs)
        for x, y in zip(a, b, strict=True)
    )  # fmt: skip


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_remote_engine_draws_what_the_same_engine_draws_in_process(policy, remote, temperature):
    params = SamplingParams(temperature=temperature, max_new_tokens=12, stop=("\n\n",))
    local = make_engine("loop", policy.model, policy.tokenizer)
    ids = _prompts(policy)
    expected, expected_rng = _draws(local, ids, params, seed=7)
    got, rng = _draws(remote, ids, params, seed=7)
    assert _same(got, expected)  # bit for bit: the same weights, draws and threads
    assert torch.equal(rng, expected_rng)  # the trainer's generator goes on as if colocated
    if temperature:  # another seed draws otherwise: the comparison above can fail
        other, _ = _draws(remote, ids, params, seed=8)
        assert not _same(other, got)


@pytest.mark.slow
def test_a_remote_hf_engine_draws_what_hf_generate_draws_in_process(policy):
    params = SamplingParams(temperature=0.8, max_new_tokens=12)
    engine = RemoteEngine("hf", policy.model, policy.tokenizer, "cpu")
    try:
        got = _draws(engine, _prompts(policy), params, seed=11)
    finally:
        engine.close()
    local = make_engine("hf", policy.model, policy.tokenizer)
    expected = _draws(local, _prompts(policy), params, seed=11)
    assert _same(got[0], expected[0]) and torch.equal(got[1], expected[1])


def test_pushed_weights_reach_the_engine_process(policy, remote, tiny_model_dir):
    ids = _prompts(policy)
    params = SamplingParams(temperature=0.0, max_new_tokens=8)
    changed = load_policy(str(tiny_model_dir)).model
    with torch.no_grad():
        for p in changed.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    local = make_engine("loop", changed, policy.tokenizer)
    before = remote.generate(ids, params, n=1)
    remote.sync_weights(changed)
    after = remote.generate(ids, params, n=1)
    expected = local.generate(ids, params, n=1)
    assert _same(after, expected) and not _same(after, before)
    # one tensor pushed as zeros: the engine samples from it (the test above can fail)
    zeroed = "model.layers.0.mlp.down_proj.weight"
    remote.weights = lambda m: ((n, torch.zeros_like(t) if n == zeroed else t)
                                for n, t in plain_weights(m))  # fmt: skip
    try:
        remote.sync_weights(changed)
        assert not _same(remote.generate(ids, params, n=1), expected)
    finally:
        remote.weights = plain_weights
    remote.sync_weights(changed)
    assert _same(remote.generate(ids, params, n=1), expected)


def test_a_push_the_engine_cannot_load_fails_naming_the_weight_and_the_engine_lives_on(
    policy, remote
):
    ids = _prompts(policy)
    params = SamplingParams(temperature=0.0, max_new_tokens=4)
    remote.weights = lambda m: [("model.no_such.weight", torch.ones(3)), *plain_weights(m)]
    try:
        with pytest.raises(RuntimeError, match="no_such.weight.*not in the engine's model"):
            remote.sync_weights(policy.model)
    finally:
        remote.weights = plain_weights
    remote.sync_weights(policy.model)  # the rest of that push was received: still in step
    local = make_engine("loop", policy.model, policy.tokenizer)
    assert _same(remote.generate(ids, params, n=1), local.generate(ids, params, n=1))


def test_a_dead_engine_process_fails_the_call_naming_its_device_never_hangs(policy):
    """Killed in the middle of a generate (one of seconds: 4096 rows of up to 120 tokens): the
    waiting call raises within the deadline, naming the engine, its device and its exit code."""
    engine = RemoteEngine("loop", policy.model, policy.tokenizer, "cpu")
    try:
        ids = encode_prompts(policy.tokenizer, ["x"] * 64)
        params = SamplingParams(temperature=1.0, max_new_tokens=120, code_end=False)
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(engine.generate, ids, params, n=64)
            threading.Timer(1.0, os.kill, (engine.process.pid, signal.SIGKILL)).start()
            with pytest.raises(EngineFailure) as failure:
                call.result(timeout=DEADLINE_S)
        message = str(failure.value)
        assert "'loop' rollout engine process on cpu" in message and "during generate" in message
        assert "exit code -9" in message and not engine.alive()
    finally:
        engine.kill()


@pytest.mark.slow
def test_a_supervised_remote_engine_restarts_from_the_last_pushed_weights(policy, tiny_model_dir):
    """make_engine(device=...) supervises the engine process as it does vLLM: killed, it is
    started again from the weights last pushed (not the start's), and the call is repeated
    with the same draws."""
    model = load_policy(str(tiny_model_dir)).model
    engine = make_engine("loop", model, policy.tokenizer, device="cpu", poll_s=0.2)
    try:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.5)
        engine.sync_weights(model)
        os.kill(engine.engine.process.pid, signal.SIGKILL)
        ids = _prompts(policy)
        params = SamplingParams(temperature=0.8, max_new_tokens=12)
        got, rng = _draws(engine, ids, params, seed=3)
        expected, expected_rng = _draws(make_engine("loop", model, policy.tokenizer), ids,
                                        params, seed=3)  # fmt: skip
        assert engine.restarts == 1
        assert _same(got, expected) and torch.equal(rng, expected_rng)
    finally:
        engine.close()


TRAINER = """
import sys, time
from execrl.models import load_policy
from execrl.models.engines.remote_engine import RemoteEngine

if __name__ == "__main__":
    policy = load_policy(sys.argv[1])
    engine = RemoteEngine("loop", policy.model, policy.tokenizer, "cpu")
    print(engine.process.pid, engine.directory, flush=True)
    time.sleep(600)
"""


def _running(pid: int) -> bool:
    """Alive and not a zombie (a container's init may not reap an orphan)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_the_engine_process_ends_when_its_trainer_is_killed(tiny_model_dir, tmp_path):
    import subprocess
    import sys
    import time

    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    trainer = subprocess.Popen([sys.executable, str(script), str(tiny_model_dir)],
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        pid, directory = trainer.stdout.readline().split()
        engine_pid = int(pid)
        assert _running(engine_pid)
        trainer.kill()  # SIGKILL: no close, no atexit
        trainer.wait(DEADLINE_S)
        deadline = time.monotonic() + DEADLINE_S
        while _running(engine_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _running(engine_pid)
        assert not Path(directory).exists()  # the policy it wrote is not left behind
    finally:
        trainer.kill()
