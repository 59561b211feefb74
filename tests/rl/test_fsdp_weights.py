"""The weight push of a sharded policy (`rl.parallel.fsdp.unit_weights`): the whole model's names
and values, gathered one FSDP unit at a time, on a tiny Llama in a process group of one."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor

from execrl.models.engines.weights import plain_weights
from execrl.rl import setup
from execrl.rl.parallel import dist
from execrl.rl.parallel.fsdp import full_state_dict, unit_weights

from .conftest import tasks, tiny_config


def _gathered_units(model) -> set[str]:
    """The units holding a whole (not DTensor) parameter now: FSDP swaps a unit's parameters
    for whole tensors while it is gathered, back to shards when it is freed."""
    units = [name for name, m in model.named_modules() if isinstance(m, FSDPModule)]
    held = set()
    for name, p in model.named_parameters():
        if not isinstance(p, DTensor):
            held.add(max((u for u in units if name.startswith(u)), key=len))
    return held


@pytest.mark.parametrize("extra", [[], ["model.lora_r=4"]], ids=["full", "lora"])
def test_the_push_of_a_sharded_policy_is_its_whole_state_dict_one_unit_at_a_time(
    tiny_model_dir, tmp_path, extra
):
    config = tiny_config(tiny_model_dir, tmp_path, "dist.strategy='fsdp'", *extra)
    with dist.group_of_one(True):
        model = setup.build(config, tasks(), []).policy.model
        with torch.no_grad():  # adapters that change the weights (B starts at 0)
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.fill_(0.05)
        whole = setup.policy_of(config, "cpu").model
        whole.load_state_dict(full_state_dict(model))
        expected = dict(plain_weights(whole))  # `whole` is not trained after
        held, pushed = [], {}
        for name, tensor in unit_weights(model):
            held.append(_gathered_units(model))
            pushed[name] = tensor.clone()
        after = _gathered_units(model)
    assert list(pushed) != [] and set(pushed) == set(expected)
    for name, tensor in expected.items():
        torch.testing.assert_close(pushed[name], tensor, rtol=0, atol=0, msg=name)
    assert all(len(units) == 1 for units in held)  # one unit whole at each tensor, never two
    assert len({frozenset(u) for u in held}) == 3  # the two layers and the root, in turn
    assert after == set()  # and every unit sharded again
    if extra:  # the merge reached the pushed weights and left the policy unmerged
        q = "model.layers.0.self_attn.q_proj.weight"
        assert not torch.equal(pushed[q], whole.get_base_model().get_parameter(q))
