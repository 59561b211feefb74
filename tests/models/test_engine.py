"""The rollout-engine interface: the in-process engines are `sample` itself, draw for draw."""

import importlib.util

import pytest
import torch

from execrl.models import SamplingParams, encode_prompts, load_policy, sample
from execrl.models.engines.engine import RolloutEngine
from execrl.models.engines.engine_factory import make_engine


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return load_policy(str(tiny_model_dir))


def _same(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.prompt_index == y.prompt_index and x.finish == y.finish and x.text == y.text
        assert torch.equal(x.prompt_ids, y.prompt_ids)
        assert torch.equal(x.token_ids, y.token_ids)
        assert torch.equal(x.logprobs, y.logprobs)  # bit for bit, not approximately


@pytest.mark.parametrize("name", ["loop", "hf"])
def test_a_seeded_engine_gives_exactly_what_sample_gives(policy, name):
    # prompts of different lengths (left padding), a stop sequence, and a batch split in two
    ids = encode_prompts(policy.tokenizer, ["def add(a, b):\n", "x", "def neg(x):\n    return"])
    params = SamplingParams(
        temperature=0.8, top_p=0.9, max_new_tokens=12, stop=("\n\n",), batch_size=4, engine=name
    )
    torch.manual_seed(123)
    expected = sample(policy.model, policy.tokenizer, ids, params, n=3)
    engine = make_engine(name, policy.model, policy.tokenizer)
    assert isinstance(engine, RolloutEngine) and engine.name == name
    torch.manual_seed(123)
    got = engine.generate(ids, params, n=3)
    assert [c.prompt_index for c in got] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    _same(got, expected)
    # and the draws differ under another seed: the comparison above can fail
    torch.manual_seed(124)
    other = engine.generate(ids, params, n=3)
    assert any(not torch.equal(a.token_ids, b.token_ids) for a, b in zip(other, got, strict=True))


def test_the_engine_decides_the_decoder_not_the_params(policy):
    # params that name "loop" given to the "hf" engine still run HF generate: sampled hf and loop
    # draws differ (different RNG use), so equality with the "hf" sample shows which one ran
    ids = encode_prompts(policy.tokenizer, ["def add(a, b):\n"])
    loop_params = SamplingParams(temperature=1.0, max_new_tokens=10, engine="loop")
    hf_params = SamplingParams(temperature=1.0, max_new_tokens=10, engine="hf")
    torch.manual_seed(5)
    expected = sample(policy.model, policy.tokenizer, ids, hf_params, n=4)
    torch.manual_seed(5)
    got = make_engine("hf", policy.model, policy.tokenizer).generate(ids, loop_params, n=4)
    _same(got, expected)
    torch.manual_seed(5)
    loop = sample(policy.model, policy.tokenizer, ids, loop_params, n=4)
    assert any(not torch.equal(a.token_ids, b.token_ids) for a, b in zip(loop, got, strict=True))


def test_sync_weights_makes_the_next_generate_use_the_new_weights(policy, tiny_model_dir):
    ids = encode_prompts(policy.tokenizer, ["def add(a, b):\n"])
    params = SamplingParams(temperature=0, max_new_tokens=6)
    engine = make_engine("loop", policy.model, policy.tokenizer)
    before = engine.generate(ids, params, n=1)[0]
    other = load_policy(str(tiny_model_dir)).model
    with torch.no_grad():
        for p in other.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    engine.sync_weights(other)
    after = engine.generate(ids, params, n=1)[0]
    expected = sample(other, policy.tokenizer, ids, params, n=1)[0]
    _same([after], [expected])
    assert not torch.equal(after.logprobs, before.logprobs)


def test_unknown_engine_and_bad_calls_are_errors_naming_the_field(policy):
    with pytest.raises(ValueError, match="sampling.engine = 'sglang'"):
        make_engine("sglang", policy.model, policy.tokenizer)
    with pytest.raises(ValueError, match="takes no engine options"):
        make_engine("loop", policy.model, policy.tokenizer, gpu_memory_utilization=0.5)
    with pytest.raises(ValueError, match="takes no engine options"):  # in a process of its own
        make_engine("hf", policy.model, policy.tokenizer, device="cpu", gpu_memory_utilization=0.5)
    engine = make_engine("loop", policy.model, policy.tokenizer)
    ids = encode_prompts(policy.tokenizer, ["x"])
    with pytest.raises(ValueError, match="n "):
        engine.generate(ids, SamplingParams(max_new_tokens=2), n=0)
    engine.close()
    with pytest.raises(RuntimeError, match="closed"):
        engine.generate(ids, SamplingParams(max_new_tokens=2), n=1)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_the_vllm_engine_without_vllm_is_a_config_error_before_any_model_loads():
    from execrl.rl.config.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="sampling.engine = 'vllm' needs vLLM"):
        load_config(None, ["sampling.engine='vllm'"])
