"""The lean Llama/Qwen2 decode forward reproduces the Hugging Face forward it replaces."""

import pytest
import torch
from torch import nn

from execrl.models.engines import decode as decode_module
from execrl.models.engines.decode import decode
from execrl.models.engines.lean_llama import LeanLlama

_SHAPE = dict(
    vocab_size=97,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,  # grouped-query attention, as the embedded default
    max_position_embeddings=64,
)


def _llama(**extra):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return _spread(LlamaForCausalLM(LlamaConfig(**_SHAPE, **extra)).eval())


def _qwen2(**extra):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(1)
    return _spread(Qwen2ForCausalLM(Qwen2Config(**_SHAPE, **extra)).eval())


def _spread(model):
    # The default init (std 0.02) gives near-uniform logits, where a mistake in attention or
    # rope would hardly move them; larger weights and biases make every term count.
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3 if p.dim() > 1 else 0.5)
    return model


def _prompts():
    # three rows, left-padded to width 6: lengths 6, 3 and 1
    ids = torch.tensor([[5, 9, 11, 3, 7, 8], [0, 0, 0, 4, 12, 30], [0, 0, 0, 0, 0, 41]])
    return ids, (ids != 0).long()


def _reference_logits(model, ids, attention):
    """Logits (B, V) at the last position of the full sequence, by the model's own forward."""
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=attention, position_ids=positions)
    return out.logits[:, -1]


@pytest.mark.parametrize("build", [_llama, _qwen2, lambda: _llama(attention_bias=True)])
def test_prefill_and_steps_match_the_full_forward(build):
    model = build()
    lean = LeanLlama.of(model)
    assert lean is not None
    ids, attention = _prompts()
    logits = lean.prefill(ids, attention, budget=4)
    assert torch.allclose(logits, _reference_logits(model, ids, attention), atol=1e-4)
    for _ in range(4):
        token = logits.argmax(-1)
        ids = torch.cat([ids, token[:, None]], 1)
        attention = torch.cat([attention, torch.ones_like(attention[:, :1])], 1)
        logits = lean.step(token)
        assert torch.allclose(logits, _reference_logits(model, ids, attention), atol=1e-4)


@pytest.mark.parametrize("lean", [True, False])
def test_expanded_prefill_continues_each_row_from_its_prompt(lean):
    # three distinct prompts prefilled once, then five rows continuing them (a group sharing a
    # prompt); each row then takes its own tokens, and must match the full forward of its
    # own sequence
    model = _llama()
    forward = LeanLlama.of(model) if lean else decode_module._ModelForward(model)
    ids, attention = _prompts()
    forward.prefill(ids, attention, 3)
    rows = torch.tensor([2, 0, 2, 1, 0])
    forward.expand(rows)
    ids, attention = ids[rows], attention[rows]
    for step in range(3):
        token = torch.tensor([17, 23, 5 + step, 40, 9])
        ids = torch.cat([ids, token[:, None]], 1)
        attention = torch.cat([attention, torch.ones_like(attention[:, :1])], 1)
        logits = forward.step(token)
        assert torch.allclose(logits, _reference_logits(model, ids, attention), atol=1e-4)


def test_decode_of_a_repeated_prompt_equals_decode_of_distinct_copies(monkeypatch):
    # greedy, so every copy of a prompt must take the same tokens as the prompt decoded alone
    model = _llama()
    ids, attention = _prompts()
    rows = torch.tensor([0, 0, 1, 2, 1, 2])
    kw = dict(temperature=0.0, top_p=1.0, max_new_tokens=6, eos_ids=[96], pad_id=0)
    shared = decode(model, ids[rows], attention[rows], **kw)
    alone = decode(model, ids, attention, **kw)
    assert torch.equal(shared[0], alone[0][rows])
    assert torch.allclose(shared[1], alone[1][rows], atol=1e-5)


def _decode(model, seed, temperature):
    ids, attention = _prompts()
    torch.manual_seed(seed)
    return decode(
        model,
        ids,
        attention,
        temperature=temperature,
        top_p=0.9,
        max_new_tokens=8,
        eos_ids=[96],
        pad_id=0,
    )


def _same_decode_as_the_generic_path(model, monkeypatch, temperature):
    lean_tokens, lean_logps, lean_ends = _decode(model, seed=3, temperature=temperature)
    monkeypatch.setattr(decode_module.LeanLlama, "of", classmethod(lambda cls, m: None))
    tokens, logps, ends = _decode(model, seed=3, temperature=temperature)
    assert torch.equal(lean_tokens, tokens)
    assert torch.allclose(lean_logps, logps, atol=1e-4)
    assert lean_ends == ends


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_decode_gives_the_same_tokens_and_logprobs_as_the_generic_path(monkeypatch, temperature):
    _same_decode_as_the_generic_path(_llama(), monkeypatch, temperature)


def test_anything_it_does_not_reproduce_keeps_the_generic_path():
    class LoraLike(nn.Linear):  # PEFT's and quantisers' layers subclass or wrap Linear
        pass

    assert LeanLlama.of(_qwen2(use_sliding_window=True, sliding_window=4)) is None
    assert LeanLlama.of(_llama(rope_scaling={"rope_type": "dynamic", "factor": 2.0})) is None
    assert LeanLlama.of(_llama(hidden_act="gelu")) is None
    adapted = _llama()
    adapted.model.layers[1].self_attn.q_proj = LoraLike(32, 32)
    assert LeanLlama.of(adapted) is None
    swapped = _llama()
    swapped.model.layers[0].mlp.down_proj = nn.Identity()
    assert LeanLlama.of(swapped) is None
    assert LeanLlama.of(_llama()) is not None


def _lora(model, *, targets=("q_proj", "v_proj", "gate_proj", "down_proj")):
    """`model` under PEFT LoRA with non-zero B (PEFT starts B at zero: the delta would vanish)."""
    peft = pytest.importorskip("peft")
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.1, target_modules=list(targets))
    adapted = peft.get_peft_model(model, config)
    with torch.no_grad():
        for name, p in adapted.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3)
    return adapted.eval()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_lora_policy_decodes_on_the_lean_path_as_peft_computes_it(monkeypatch, temperature):
    # LoRA used to leave the lean path; merged into the lean weights, it must still decode
    # what PEFT's own layers (W x + scaling B A x) give, greedy and sampled with one seed
    model = _lora(_llama())
    assert LeanLlama.of(model) is not None
    _same_decode_as_the_generic_path(model, monkeypatch, temperature)


def test_the_lean_lora_forward_follows_updates_and_the_disabled_adapter():
    model = _lora(_llama())
    ids, attention = _prompts()
    lean = LeanLlama.of(model).prefill(ids, attention, budget=1)
    assert torch.allclose(lean, _reference_logits(model, ids, attention), atol=1e-4)
    with torch.no_grad():  # an optimizer step on the adapter: the next decode sees it
        for name, p in model.named_parameters():
            if "lora_A" in name:
                p.add_(0.1)
    lean = LeanLlama.of(model).prefill(ids, attention, budget=1)
    assert torch.allclose(lean, _reference_logits(model, ids, attention), atol=1e-4)
    with model.disable_adapter():  # the KL reference of a LoRA run: the base model
        lean = LeanLlama.of(model).prefill(ids, attention, budget=1)
        assert torch.allclose(lean, _reference_logits(model, ids, attention), atol=1e-4)


def test_peft_layers_it_does_not_reproduce_keep_the_generic_path():
    peft = pytest.importorskip("peft")
    assert LeanLlama.of(_lora(_llama(), targets=("q_proj", "lm_head"))) is None
    kept = peft.LoraConfig(r=2, target_modules=["q_proj"], modules_to_save=["lm_head"])
    assert LeanLlama.of(peft.get_peft_model(_llama(), kept)) is None
    dora = peft.LoraConfig(r=2, target_modules=["q_proj"], use_dora=True)
    assert LeanLlama.of(peft.get_peft_model(_llama(), dora)) is None
    ia3 = peft.IA3Config(target_modules=["k_proj", "down_proj"], feedforward_modules=["down_proj"])
    assert LeanLlama.of(peft.get_peft_model(_llama(), ia3)) is None
