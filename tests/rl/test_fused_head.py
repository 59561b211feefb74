"""The LM head fused with the log-softmax, and the chunked log-softmax, against the whole
vocabulary's log-softmax at once (rl.logprob_head = "full", the unoptimised path): the same
log-probs, entropies, hidden states and gradients to float32 rounding (atol 1e-5 on values,
1e-4 on gradients), with and without shared prompts, LoRA, and a trainable untied head."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from execrl.models import LoraSpec
from execrl.models.loading.loading import _with_lora
from execrl.rl.config.config import ConfigError, load_config
from execrl.rl.objective import fused_head
from execrl.rl.objective.logprobs import collate, resolve_head, token_stats
from execrl.rl.update.learner_settings import LearnerSettings


def _qwen2(vocab: int = 40):
    """A Qwen2 with its own (untied) output matrix, as the converted Qwen2.5-Coder has."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=48,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, tie_word_embeddings=False)  # fmt: skip
    return Qwen2ForCausalLM(config)


def _spread(model):
    """Larger weights, so a wrong column, position or gradient term would show."""
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3 if p.dim() > 1 else 0.5)
    return model


def _batches():
    a, b = torch.tensor([5, 6, 7]), torch.tensor([8, 9])
    completions = [torch.tensor(c) for c in ([9, 10], [11, 12, 13, 14], [15], [16, 17], [18])]
    shared = collate([a, b, a, b, a], completions, pad_id=0)  # rows repeat their prompts
    alone = collate([a, b, torch.tensor([4]), torch.tensor([3, 2]), torch.tensor([1])],
                    completions, pad_id=0)  # fmt: skip
    assert shared.shared is not None and alone.shared is None
    return {"shared": shared, "alone": alone}


def _run(model, batch, head: str):
    """Values and every trainable parameter's gradient of a loss that reads logp and hidden."""
    model.zero_grad()
    stats = token_stats(model, batch, 0.8, entropy=True, hidden=True, head=head)
    weights = torch.linspace(-1, 1, stats.logp.numel()).view_as(stats.logp)
    ((stats.logp * weights * batch.token_mask).sum() + stats.hidden.pow(2).mean()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    return stats, grads


@pytest.mark.parametrize("which", ["llama", "qwen2", "qwen2-lora"])
@pytest.mark.parametrize("layout", ["shared", "alone"])
@pytest.mark.parametrize("head", ["fused", "chunked"])
def test_the_head_gives_the_full_paths_numbers(tiny_model_dir, which, layout, head,
                                               monkeypatch):  # fmt: skip
    # chunks of 2 positions: a batch of 10 real tokens crosses several chunk boundaries
    monkeypatch.setattr(fused_head, "CHUNK_ELEMENTS", 2 * 300)
    if which == "llama":
        model = _spread(AutoModelForCausalLM.from_pretrained(tiny_model_dir))
    else:
        model = _spread(_qwen2())
    if which == "qwen2-lora":  # adapters on every projection, the base frozen
        model = _with_lora(model, LoraSpec(4, 8, 0.0, ("q_proj", "k_proj", "v_proj", "o_proj",
                                                       "gate_proj", "up_proj", "down_proj")))  # fmt: skip
        with torch.no_grad():  # B = 0 at first: give the adapters a gradient path of their own
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.1)
    assert resolve_head(model, head) == head
    batch = _batches()[layout]
    got, got_grads = _run(model, batch, head)
    want, want_grads = _run(model, batch, "full")
    mask = batch.token_mask.bool()
    assert torch.allclose(got.logp[mask], want.logp[mask], atol=1e-5)
    assert torch.allclose(got.entropy[mask], want.entropy[mask], atol=1e-5)
    assert torch.allclose(got.hidden[mask], want.hidden[mask], atol=1e-5)
    assert not got.entropy.requires_grad and got.logp.requires_grad
    assert (got.logp[~mask] == 0).all()  # padding is not scored
    if which != "qwen2-lora":  # the head trains (tied to the embedding in the tiny llama)
        head = model.get_output_embeddings().weight
        assert head.requires_grad and head.grad.abs().sum() > 0
    assert got_grads.keys() == want_grads.keys()
    for name, g in got_grads.items():
        assert torch.allclose(g, want_grads[name], atol=1e-4, rtol=1e-4), name


def test_no_grad_scoring_and_a_temperature_of_zero_match(tiny_model_dir):
    model = _spread(_qwen2())
    batch = _batches()["shared"]
    mask = batch.token_mask.bool()
    with torch.no_grad():
        for temperature in (0.0, 1.3):
            got = token_stats(model, batch, temperature, head="fused").logp
            want = token_stats(model, batch, temperature, head="full").logp
            assert torch.allclose(got[mask], want[mask], atol=1e-5)


class _Wrapped(torch.nn.Module):
    """A model that does something after its head (here nothing, but it cannot be known)."""

    def __init__(self, model):
        super().__init__()
        self.inner = model

    def forward(self, **kwargs):
        return self.inner(**kwargs)


def test_the_head_is_chosen_once_from_what_the_model_allows(tiny_model_dir):
    model = _qwen2()
    assert resolve_head(model, "fused") == "fused"
    assert resolve_head(model, "fused", entropy_grad=True) == "full"  # the bonus's gradient
    assert resolve_head(_Wrapped(model), "fused") == "chunked"  # no known plain head
    gemma_like = _qwen2()
    gemma_like.config.model_type = "gemma2"  # soft-caps its logits after the head
    assert resolve_head(gemma_like, "fused") == "chunked"
    with pytest.raises(ValueError, match="rl.logprob_head 'fast'"):
        resolve_head(model, "fast")


def test_the_head_is_execrl_trains_config(tmp_path):
    assert LearnerSettings.of(load_config(None, [])).logprob_head == "fused"
    settings = LearnerSettings.of(load_config(None, ["rl.logprob_head='full'"]))
    assert settings.logprob_head == "full"
    with pytest.raises(ConfigError, match="rl.logprob_head = 'fast'; choose one of fused"):
        load_config(None, ["rl.logprob_head='fast'"])
