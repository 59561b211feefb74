"""A resumed run's first rollouts come from the checkpoint's policy on every engine: one that
holds its own copy of the weights (vLLM) was built from the model before the checkpoint was
loaded, and sampled from the base model until the first update pushed new weights."""

from __future__ import annotations

import copy

import torch

from execrl.models.engines.engine import InProcessEngine
from execrl.rl import run as run_module
from execrl.rl.run import train

from .conftest import LetterE, tasks, tiny_config


class CopyingEngine:
    """Like vLLM: samples from its own copy of the weights, taken when it is built and
    replaced only by `sync_weights`. Records the copy's weights at each `generate`."""

    name = "loop"

    def __init__(self, model, tokenizer) -> None:
        self.own = copy.deepcopy(model)
        self.inner = InProcessEngine("loop", self.own, tokenizer)
        self.sampled_with: list[dict[str, torch.Tensor]] = []

    def generate(self, prompt_ids, params, *, n):
        self.sampled_with.append({k: v.clone() for k, v in self.own.state_dict().items()})
        return self.inner.generate(prompt_ids, params, n=n)

    def sync_weights(self, model) -> None:
        self.own.load_state_dict(model.state_dict())

    def close(self) -> None:
        self.inner.close()


def test_a_resumed_run_samples_its_first_step_from_the_checkpoint(
    tiny_model_dir, tmp_path, monkeypatch
):
    engines: list[CopyingEngine] = []

    def make(name, model, tokenizer, **options):
        engines.append(CopyingEngine(model, tokenizer))
        return engines[-1]

    monkeypatch.setattr(run_module, "make_engine", make)
    stopped = tiny_config(tiny_model_dir, tmp_path, "run.steps=2", "rl.dynamic_sampling=false")
    train(stopped, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    run_dir = tmp_path / "run"
    saved = torch.load(run_dir / "checkpoint" / "state.pt", weights_only=False)["model"]
    resumed = tiny_config(tiny_model_dir, tmp_path / "ignored", f"run.resume={str(run_dir)!r}",
                          "run.steps=3")  # fmt: skip
    train(resumed, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    first = engines[-1].sampled_with[0]
    changed = [k for k in saved if not torch.equal(saved[k], engines[0].sampled_with[0][k])]
    assert changed, "two steps of training changed no weight: the test would prove nothing"
    assert all(torch.equal(first[k], saved[k]) for k in saved), "sampled from the base model"
