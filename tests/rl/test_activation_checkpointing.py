"""dist.activation_checkpointing in one process (no FSDP): Hugging Face's gradient
checkpointing recomputes each layer in backward, and the update is the one without it."""

from __future__ import annotations

import json

import pytest
import torch

from execrl.cli import main
from execrl.rl import setup
from execrl.rl.parallel.fsdp import decoder_layers

from .conftest import tasks, tiny_config
from .fsdp_helpers import batches


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_one_process_recomputes_each_layer_and_updates_the_same(tiny_model_dir, tmp_path, lora):
    """A decoder layer's MLP runs again in backward once per micro-batch with the option, never
    without (where the forward shares each prompt's pass instead); the weights after the update
    agree."""
    calls, trained = {}, {}
    extra = ("model.lora_r=4",) if lora else ()
    for on in ("false", "true"):
        config = tiny_config(tiny_model_dir, tmp_path / on, *extra,
                             f"dist.activation_checkpointing={on}")  # fmt: skip
        built = setup.build(config, tasks(), [])
        seen: list[bool] = []  # whether each call ran inside backward (autograd's graph task)
        mlp = decoder_layers(built.learner.model)[0].mlp
        mlp.register_forward_pre_hook(
            lambda *_, seen=seen: seen.append(torch._C._current_graph_task_id() != -1)
        )
        mine, denominator = batches(built.policy.tokenizer.pad_token_id, values=False)
        built.learner.update(mine, denominator)
        calls[on] = sum(seen)
        trained[on] = {n: p.detach().clone() for n, p in built.learner.model.named_parameters()
                       if p.requires_grad}  # fmt: skip
    assert calls == {"false": 0, "true": len(mine)}
    assert trained["true"].keys() == trained["false"].keys()
    for name, weight in trained["false"].items():
        assert torch.allclose(trained["true"][name], weight, atol=1e-4), name


def test_execrl_train_checkpoints_a_one_process_run_and_finishes(tiny_model_dir, tmp_path,
                                                                 monkeypatch):  # fmt: skip
    """Through `execrl train --set dist.activation_checkpointing=true` with the hf engine (HF
    generate on the policy itself): the policy is checkpointed, and since checkpointing acts in
    training mode only, generation keeps its KV cache and the steps update."""
    checkpointed = []
    enable = setup.checkpoint_layers
    monkeypatch.setattr(setup, "checkpoint_layers",
                        lambda model: (checkpointed.append(model), enable(model)))  # fmt: skip
    settings = [f"model.path={str(tiny_model_dir)!r}", f"run.out_dir={str(tmp_path)!r}",
                "run.name='run'", "data.heldout=''", "data.n_train=8", "run.steps=2",
                "rl.group_size=2", "rl.groups_per_step=2", "rl.dynamic_sampling=false",
                "sampling.max_new_tokens=6", "sampling.engine='hf'", "sandbox.workers=1",
                "dist.activation_checkpointing=true"]  # fmt: skip
    assert main(["train", *sum((["--set", s] for s in settings), [])]) == 0
    assert len(checkpointed) == 1 and decoder_layers(checkpointed[0])[0].gradient_checkpointing
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["skipped_update"] for r in rows] == [0.0, 0.0]
