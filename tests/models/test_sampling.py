import pytest
import torch

from execrl.models import SamplingParams, encode_prompts, load_policy, sample


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return load_policy(str(tiny_model_dir))


def test_behaviour_logprobs_match_a_forward_pass(policy):
    # prompts of different lengths: the shorter one is left-padded during generation
    ids = encode_prompts(policy.tokenizer, ["def add(a, b):\n", "x"])
    torch.manual_seed(0)
    out = sample(
        policy.model, policy.tokenizer, ids, SamplingParams(temperature=0.7, max_new_tokens=12), n=2
    )
    assert [c.prompt_index for c in out] == [0, 0, 1, 1]
    for c in out:
        full = torch.cat([c.prompt_ids, c.token_ids])[None]
        with torch.no_grad():
            logits = policy.model(full).logits[0].float() / 0.7
        start = c.prompt_ids.numel() - 1
        lp = torch.log_softmax(logits, -1)[start : start + c.n_tokens].gather(
            1, c.token_ids[:, None]
        )[:, 0]
        assert torch.allclose(lp, c.logprobs, atol=1e-4)


def test_token_budget_sets_truncation(policy):
    ids = encode_prompts(policy.tokenizer, ["def neg(x):\n"])
    torch.manual_seed(1)
    out = sample(policy.model, policy.tokenizer, ids, SamplingParams(max_new_tokens=5), n=8)
    for c in out:
        assert c.n_tokens <= 5
        assert c.truncated == (c.finish == "length")
        if c.truncated:
            assert c.n_tokens == 5
        else:
            assert c.token_ids[-1].item() == policy.tokenizer.eos_token_id


def test_stop_sequence_ends_and_is_cut(policy):
    # every text contains some character: stopping at each of many one-byte strings ends at once
    ids = encode_prompts(policy.tokenizer, ["def add(a, b):\n"])
    stops = tuple(chr(c) for c in range(32, 127)) + ("\n",)
    torch.manual_seed(2)
    out = sample(
        policy.model, policy.tokenizer, ids, SamplingParams(max_new_tokens=30, stop=stops), n=6
    )
    stopped = [c for c in out if c.finish == "stop"]
    assert stopped
    for c in stopped:
        assert not any(s in c.text for s in stops)
        assert c.n_tokens < 30


def test_greedy_is_deterministic(policy):
    ids = encode_prompts(policy.tokenizer, ["def add(a, b):\n"])
    params = SamplingParams(temperature=0, max_new_tokens=8)
    a = sample(policy.model, policy.tokenizer, ids, params, n=2)
    b = sample(policy.model, policy.tokenizer, ids, params, n=1)
    assert torch.equal(a[0].token_ids, a[1].token_ids) and torch.equal(
        a[0].token_ids, b[0].token_ids
    )


def test_bad_sampling_params():
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)


def test_the_decode_loop_and_hf_generate_agree_greedily(policy):
    # left padding, eos ends and the budget: same tokens, same behaviour log-probabilities
    ids = encode_prompts(policy.tokenizer, ["def add(a, b):\n", "x", "def neg(x):\n    return"])
    out = {
        engine: sample(
            policy.model,
            policy.tokenizer,
            ids,
            SamplingParams(temperature=0, max_new_tokens=10, engine=engine),
        )
        for engine in ("loop", "hf")
    }
    for a, b in zip(out["loop"], out["hf"], strict=True):
        assert torch.equal(a.token_ids, b.token_ids) and a.finish == b.finish
        assert torch.allclose(a.logprobs, b.logprobs, atol=1e-4)


def test_sampling_frequencies_follow_the_probabilities():
    from execrl.models.engines.decode import _pick

    # 20000 draws from p = (0.1, 0.6, 0.0, 0.3): each count's standard deviation is at most
    # sqrt(20000 * 0.25) ~ 71, so 400 is over 5 sigma; a zero-probability token is never drawn
    p = torch.tensor([0.1, 0.6, 0.0, 0.3])
    torch.manual_seed(1)
    token, _ = _pick(torch.log(p).repeat(20000, 1), 1.0, 1.0)
    counts = torch.bincount(token, minlength=4)
    assert counts[2] == 0
    assert (counts - 20000 * p).abs().max() < 400, counts


def test_top_p_keeps_the_smallest_nucleus():
    from execrl.models.engines.decode import _pick

    # probabilities 0.5, 0.3, 0.2: top_p 0.6 keeps the first two, never the third
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]])).repeat(400, 1)
    torch.manual_seed(0)
    token, logp = _pick(logits, 1.0, 0.6)
    assert set(token.tolist()) == {0, 1}
    assert torch.allclose(logp, torch.log(torch.tensor([0.5, 0.3]))[token])
    with pytest.raises(ValueError, match="engine"):
        SamplingParams(engine="vllm")
