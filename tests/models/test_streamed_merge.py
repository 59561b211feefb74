"""A LoRA policy's weights stream to an engine merged one matrix at a time
(`models.engines.weights.plain_weights`), equal bit for bit to PEFT's merge of the whole model,
without a copy of the whole model and without touching the policy's own weights."""

from __future__ import annotations

import pytest
import torch

from execrl.models.engines.weights import _merged_copy, plain_name, plain_weights
from execrl.models.loading.loading import LoraSpec, load_policy


@pytest.fixture
def lora_policy(tiny_model_dir):
    policy = load_policy(str(tiny_model_dir), lora=LoraSpec(r=4, alpha=8))
    torch.manual_seed(0)
    with torch.no_grad():  # B starts at zero: give every adapter a delta
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    return policy.model


def test_streamed_weights_equal_peft_merge_bit_for_bit(lora_policy):
    whole = _merged_copy(lora_policy)  # merging then unmerging moves W by its rounding...
    before = {n: t.clone() for n, t in lora_policy.state_dict().items()}
    streamed = list(plain_weights(lora_policy))
    assert [n for n, _ in streamed] == list(whole)
    for name, t in streamed:
        assert torch.equal(t, whole[name]), name
    base = {plain_name(n): t for n, t in before.items()}
    changed = [n for n, t in streamed if not torch.equal(t, base[n])]
    assert changed  # the adapters are in the merged weights...
    for name, t in lora_policy.state_dict().items():  # ...streaming leaves W as it was
        assert torch.equal(t, before[name]), name


def test_peft_merge_and_unmerge_moves_the_frozen_weights_and_streaming_does_not(lora_policy):
    """Why the push no longer merges in place: W + d - d is not W in floating point, so every
    push moved a LoRA policy's frozen matrices by a rounding error."""
    before = {n: t.clone() for n, t in lora_policy.state_dict().items()}
    list(plain_weights(lora_policy))
    assert all(torch.equal(t, before[n]) for n, t in lora_policy.state_dict().items())
    _merged_copy(lora_policy)
    assert not all(torch.equal(t, before[n]) for n, t in lora_policy.state_dict().items())


def test_only_adapted_matrices_are_new_tensors(lora_policy):
    live = {t.data_ptr() for t in lora_policy.state_dict().values()}
    fresh = [n for n, t in plain_weights(lora_policy) if t.data_ptr() not in live]
    assert fresh and all(n.endswith("_proj.weight") for n in fresh), fresh


def test_the_consumer_keeps_its_grad_mode_between_pairs(lora_policy):
    modes = [torch.is_grad_enabled() for _ in plain_weights(lora_policy)]
    assert all(modes)
