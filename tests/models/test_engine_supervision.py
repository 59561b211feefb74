"""Engine fault tolerance (`SupervisedEngine`): a dead or hung engine is detected, restarted from
the current weights, and the call retried with the same draws; a bad request is not a fault.

The engine here is execrl's own decode loop on a private copy of the policy (as vLLM holds its
own copy), with the two faults a separate engine process has injected by the test: it dies
mid-call (alive() turns False and the call never returns, as vLLM's client blocks when its
engine process is killed) or it hangs (alive, no answer). The same supervision with a real
vLLM engine process killed (SIGKILL) and stopped (SIGSTOP) mid-step is
tests/models/test_vllm_fault_tolerance.py (marked vllm).
"""

import copy
import threading

import pytest
import torch

from execrl.models import SamplingParams, encode_prompts, load_policy
from execrl.models.engines.engine import InProcessEngine, RolloutEngine, SupervisedEngine


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return load_policy(str(tiny_model_dir))


class FaultyEngine:
    """The "loop" engine on its own copy of the weights (loaded at start, replaced by
    sync_weights), whose next calls can be made to die or hang."""

    def __init__(self, model, tokenizer, faults: list[str]) -> None:
        self.inner = InProcessEngine("loop", copy.deepcopy(model), tokenizer)
        self.name = "loop"
        self.faults = faults  # shared by every engine the factory starts: "die", "hang", "ok"
        self.dead = False
        self.killed = threading.Event()

    def generate(self, prompt_ids, params, *, n):
        fault = self.faults.pop(0) if self.faults else "ok"
        if fault == "die":
            self.dead = True
        if fault in ("die", "hang"):
            torch.randint(0, 2**31 - 1, (len(prompt_ids),))  # vLLM draws its seeds, then waits
            self.killed.wait()  # blocked until the supervisor kills the engine
            raise ConnectionError("engine gone")
        return self.inner.generate(prompt_ids, params, n=n)

    def sync_weights(self, model) -> None:
        self.inner.sync_weights(copy.deepcopy(model))

    def alive(self) -> bool:
        return not self.dead

    def kill(self) -> None:
        self.dead = True
        self.killed.set()

    def close(self) -> None:
        self.inner.close()


def supervised(policy, faults, **options):
    starts = []

    def start(model):
        starts.append(model)
        return FaultyEngine(model, policy.tokenizer, faults)

    logs = []
    engine = SupervisedEngine(start, policy.model, poll_s=0.05, log=logs.append, **options)
    return engine, starts, logs


def _same(a, b) -> None:
    assert [c.prompt_index for c in a] == [c.prompt_index for c in b]
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x.token_ids, y.token_ids) and torch.equal(x.logprobs, y.logprobs)


def moved(model):
    """A copy of `model` with every weight changed, as an optimizer step changes them."""
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return other


def expected_from(model, tokenizer, ids, params, seed):
    torch.manual_seed(seed)
    return InProcessEngine("loop", model, tokenizer).generate(ids, params, n=3)


IDS_PARAMS = (["def add(a, b):\n", "x"], SamplingParams(temperature=1.0, max_new_tokens=8))


def test_a_dead_engine_is_restarted_with_the_current_weights_and_the_same_draws(policy):
    texts, params = IDS_PARAMS
    ids = encode_prompts(policy.tokenizer, texts)
    faults = []
    engine, starts, logs = supervised(policy, faults)
    assert isinstance(engine, RolloutEngine) and engine.name == "loop"
    current = moved(policy.model)
    engine.sync_weights(current)  # the trainer's update, pushed before the engine dies
    faults.append("die")
    torch.manual_seed(11)
    got = engine.generate(ids, params, n=3)
    assert len(starts) == 2 and starts[1] is current and engine.restarts == 1
    # what the fault-free call on the current weights gives, draw for draw (not the old weights)
    _same(got, expected_from(current, policy.tokenizer, ids, params, 11))
    stale = expected_from(policy.model, policy.tokenizer, ids, params, 11)
    assert any(not torch.equal(a.logprobs, b.logprobs) for a, b in zip(got, stale, strict=True))
    assert "died during generate" in logs[0] and "retrying its 2 prompts" in logs[0]


@pytest.mark.parametrize(
    "fault, message",
    [("hang", "no answer in 0.5 s (hung)"), ("dead between calls", "dead before generate")],
)
def test_a_hung_engine_or_one_dead_since_the_last_call_is_restarted(policy, fault, message):
    texts, params = IDS_PARAMS
    ids = encode_prompts(policy.tokenizer, texts)
    engine, starts, logs = supervised(policy, [fault], timeout_s=0.5)
    if fault == "dead between calls":
        engine.engine.dead = True  # its process exited while the trainer was updating
    torch.manual_seed(12)
    got = engine.generate(ids, params, n=3)
    assert len(starts) == 2 and message in logs[0]
    _same(got, expected_from(policy.model, policy.tokenizer, ids, params, 12))


def test_a_weight_push_to_a_dead_engine_restarts_it_from_the_pushed_weights(policy):
    texts, params = IDS_PARAMS
    ids = encode_prompts(policy.tokenizer, texts)
    engine, starts, _ = supervised(policy, [])
    engine.engine.dead = True
    current = moved(policy.model)
    engine.sync_weights(current)
    assert len(starts) == 2 and starts[1] is current
    torch.manual_seed(14)
    _same(
        engine.generate(ids, params, n=3), expected_from(current, policy.tokenizer, ids, params, 14)
    )


def test_an_engine_that_keeps_failing_stops_the_run_with_what_to_do(policy):
    ids = encode_prompts(policy.tokenizer, IDS_PARAMS[0])
    engine, starts, logs = supervised(policy, ["die", "die", "die"], restarts=2)
    with pytest.raises(RuntimeError, match="failed 3 times in a row") as info:
        engine.generate(ids, IDS_PARAMS[1], n=2)
    assert "execrl train --resume" in str(info.value) and len(starts) == 3 and len(logs) == 2
    assert not engine.engine.alive()  # the last one is killed, not left running


def test_a_bad_request_is_the_callers_error_not_an_engine_fault(policy):
    ids = encode_prompts(policy.tokenizer, IDS_PARAMS[0])
    engine, starts, logs = supervised(policy, [])
    with pytest.raises(ValueError, match="must be >= 1"):
        engine.generate(ids, IDS_PARAMS[1], n=0)
    assert len(starts) == 1 and not logs  # nothing restarted for a bad request


def test_supervision_settings_are_checked():
    with pytest.raises(ValueError, match="timeout_s=0"):
        SupervisedEngine(lambda m: None, None, timeout_s=0)
