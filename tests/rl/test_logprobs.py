"""Teacher-forced log-probabilities: keeping only the completion columns' logits and running a
shared prompt once change nothing but the time."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from execrl.models.engines.hf_forward import forward_params
from execrl.rl.objective.logprobs import _can_share, _keep_logits, _unwrap, collate, token_stats


def can_share(model, batch) -> bool:
    inner = _unwrap(model)
    return _can_share(inner, forward_params(inner), batch)


class _NoKeep(torch.nn.Module):
    """The same model behind a forward without `logits_to_keep`: the LM head runs everywhere."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids, output_hidden_states=False):
        return self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            output_hidden_states=output_hidden_states,
        )


def _batch():
    prompts = [torch.tensor([5, 6, 7]), torch.tensor([8])]
    completions = [torch.tensor([9, 10]), torch.tensor([11, 12, 13, 14])]
    return collate(prompts, completions, pad_id=0)  # P = 3, T = 4


def test_kept_columns_equal_full_logits(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    assert _keep_logits(forward_params(model), 5) == {"logits_to_keep": 5}
    assert _keep_logits(forward_params(_NoKeep(model)), 5) == {}
    batch = _batch()
    kept = token_stats(model, batch, 0.7, entropy=True, hidden=True)
    full = token_stats(_NoKeep(model), batch, 0.7, entropy=True, hidden=True)
    assert kept.logp.shape == (2, 4)
    assert torch.allclose(kept.logp, full.logp, atol=1e-6)
    assert torch.allclose(kept.entropy, full.entropy, atol=1e-6)
    assert torch.equal(kept.hidden, full.hidden)
    # and both equal a hand-indexed full forward: token i of row 1 is scored at column 3 + i - 1
    with torch.no_grad():
        logits = model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
        ).logits
    expected = torch.log_softmax(logits[1, 2] / 0.7, -1)[11]
    assert torch.allclose(kept.logp[1, 0], expected, atol=1e-6)


def test_entropy_enters_the_graph_only_when_asked(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    metric = token_stats(model, _batch(), entropy=True)
    bonus = token_stats(model, _batch(), entropy=True, entropy_grad=True)
    assert metric.logp.requires_grad
    assert not metric.entropy.requires_grad
    assert bonus.entropy.requires_grad
    assert torch.allclose(metric.entropy, bonus.entropy.detach())


def _grouped_batch():
    # two prompts of different lengths, each with completions of different lengths, rows
    # interleaved (groups need not be contiguous): P = 3, T = 4
    a, b = torch.tensor([5, 6, 7]), torch.tensor([8, 9])
    prompts = [a, b, a, b, a]
    completions = [
        torch.tensor(c) for c in ([9, 10], [11, 12, 13, 14], [15], [16, 17], [18, 19, 20])
    ]
    return collate(prompts, completions, pad_id=0)


def test_collate_finds_the_distinct_prompts():
    shared = _grouped_batch().shared
    assert shared.row_prompt.tolist() == [0, 1, 0, 1, 0]
    assert shared.input_ids.tolist() == [[5, 6, 7], [0, 8, 9]]
    assert shared.attention_mask.tolist() == [[1, 1, 1], [0, 1, 1]]
    assert shared.position_ids.tolist() == [[0, 1, 2], [0, 0, 1]]
    assert _batch().shared is None  # no prompt repeats: nothing to share


def _qwen2_model():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=40, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)  # fmt: skip
    return Qwen2ForCausalLM(config)


@pytest.mark.parametrize("which", ["llama", "qwen2"])
def test_shared_prompt_forward_equals_the_per_row_forward(tiny_model_dir, which):
    model = (
        AutoModelForCausalLM.from_pretrained(tiny_model_dir) if which == "llama" else _qwen2_model()
    )
    with torch.no_grad():  # larger weights, so a wrong position or mask would show
        for p in model.parameters():
            p.normal_(0, 0.3 if p.dim() > 1 else 0.5)
    batch = _grouped_batch()
    assert can_share(model, batch) and not can_share(_NoKeep(model), batch)

    def run(m):
        model.zero_grad()
        stats = token_stats(m, batch, 0.8, entropy=True, entropy_grad=True, hidden=True)
        mask = batch.token_mask
        (stats.logp * mask).sum().backward(retain_graph=True)
        ((stats.entropy * mask).sum() + stats.hidden.pow(2).mean()).backward()
        return stats, [p.grad.clone() for p in model.parameters()]

    shared, g_shared = run(model)  # the prompt pass once per distinct prompt
    full, g_full = run(_NoKeep(model))  # _NoKeep takes no cache: every row runs its prompt
    mask = batch.token_mask.bool()
    assert torch.allclose(shared.logp[mask], full.logp[mask], atol=1e-5)
    assert torch.allclose(shared.entropy[mask], full.entropy[mask], atol=1e-5)
    assert torch.allclose(shared.hidden[mask], full.hidden[mask], atol=1e-5)
    for a, b in zip(g_shared, g_full, strict=True):
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-4)


class _NoCacheBack(torch.nn.Module):
    """Takes the cache arguments but returns no cache (as with gradient checkpointing on)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids, use_cache=False, cache=None,
                output_hidden_states=False):  # fmt: skip
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                          position_ids=position_ids, output_hidden_states=output_hidden_states)  # fmt: skip


def test_a_model_that_returns_no_cache_falls_back_to_the_per_row_forward(
    tiny_model_dir, monkeypatch
):
    from execrl.rl.objective import logprobs

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    batch = _grouped_batch()
    assert can_share(_NoCacheBack(model), batch)
    calls = []
    full = logprobs._full_forward
    monkeypatch.setattr(logprobs, "_full_forward", lambda *a: calls.append(1) or full(*a))
    got = token_stats(_NoCacheBack(model), batch)
    assert calls == [1]  # the shared path found no cache and ran every row instead
    want = token_stats(_NoKeep(model), batch)
    mask = batch.token_mask.bool()
    assert torch.allclose(got.logp[mask], want.logp[mask], atol=1e-6)
