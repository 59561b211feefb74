"""`execrl sft` end to end: on the embedded default (a tiny build of it), then `execrl train`
from its final/ directory; resume equal to an uninterrupted run; loss on completion tokens only;
LoRA merged into final/; errors before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from execrl.cli import main

PAIRS = [
    {"prompt": f"# return {i}\ndef f():\n", "completion": f"    return {i}\n"} for i in range(8)
]


@pytest.fixture(scope="module")
def default_model(tmp_path_factory):
    """A tiny build of the embedded default, where `model.path = "default"` finds it."""
    from execrl.models.default import DefaultRecipe, build_default_model, synthetic_tasks
    from execrl.models.sft import SFTSettings
    from execrl.models.tiny import TinyLlamaShape

    recipe = DefaultRecipe(
        shape=TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64),
        vocab_size=300, sft=SFTSettings(steps=1, batch_size=4, warmup=1),
    )  # fmt: skip
    cache = tmp_path_factory.mktemp("default")
    return build_default_model(cache, synthetic_tasks(0, 16, 1, "train"), recipe,
                               log=lambda m: None)  # fmt: skip


@pytest.fixture
def on_default(default_model, monkeypatch):
    monkeypatch.setenv("EXECRL_DEFAULT_MODEL_DIR", str(default_model))


def sets(*items: str) -> list[str]:
    return sum((["--set", s] for s in items), [])


def sft_args(tmp_path: Path, name: str, *extra: str) -> list[str]:
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
    return ["sft", *sets(f"data.train={str(data)!r}", "model.path='default'", "run.steps=4",
                         "run.batch_size=4", "optim.lr=0.01", f"run.out_dir={str(tmp_path)!r}",
                         f"run.name={name!r}", *extra)]  # fmt: skip


def weights(model_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(model_dir / "model.safetensors")


def test_sft_then_train_from_its_output(on_default, default_model, tmp_path, capsys):
    assert main(sft_args(tmp_path, "warm")) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    final = Path(summary["final"])
    assert (final / "config.json").is_file() and (final / "tokenizer.json").is_file()
    assert summary["loss_last"] < summary["loss_first"]  # four steps on eight pairs
    before, after = weights(default_model), weights(final)
    assert any(not torch.equal(before[k], after[k]) for k in before)
    rows = [json.loads(x) for x in (tmp_path / "warm" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    small = ["data.n_train=4", "data.n_heldout=2", "data.heldout_samples=1", "run.steps=1",
             "rl.group_size=2", "rl.groups_per_step=2", "sampling.max_new_tokens=8",
             "sandbox.workers=1", f"run.out_dir={str(tmp_path)!r}", "run.name='rl'",
             f"model.path={str(final)!r}"]  # fmt: skip
    assert main(["train", *sets(*small)]) == 0
    trained = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert trained["steps"] == 1


def test_resume_continues_as_an_uninterrupted_run(on_default, tmp_path, capsys):
    assert main(sft_args(tmp_path, "whole")) == 0
    assert main(sft_args(tmp_path, "cut", "run.steps=2")) == 0
    assert main(["sft", "--resume", str(tmp_path / "cut"), *sets("run.steps=4")]) == 0
    capsys.readouterr()
    whole, resumed = weights(tmp_path / "whole" / "final"), weights(tmp_path / "cut" / "final")
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    losses = lambda run: [json.loads(x)["loss"] for x in (tmp_path / run / "metrics.jsonl").open()]  # noqa: E731
    assert losses("cut") == losses("whole")
    assert main(["sft", "--resume", str(tmp_path / "cut"), *sets("optim.lr=1.0")]) == 2
    assert "cannot change optim.lr" in capsys.readouterr().err


def test_loss_is_on_completion_tokens_only():
    """Labels are -100 over the prompt: a batch of one pair, prompt 3 tokens, completion 2."""
    from execrl.models.sft import collate_sft

    batch = collate_sft([([5, 6, 7, 8, 9], 3), ([5, 6], 1)], pad_id=0)
    assert batch["labels"].tolist() == [[-100, -100, -100, 8, 9], [-100, 6, -100, -100, -100]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]


def test_lora_sft_final_is_a_merged_model(on_default, tmp_path, capsys):
    lora = ["model.lora_r=4", "model.lora_targets=['q_proj', 'v_proj']"]
    assert main(sft_args(tmp_path, "lora", *lora)) == 0
    final = Path(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["final"])
    assert (final / "config.json").is_file() and not (final / "adapter_config.json").exists()
    assert not any("lora" in k for k in weights(final))


def test_chat_messages_and_bad_examples(on_default, tmp_path, capsys):
    data = tmp_path / "bad.jsonl"
    data.write_text(json.dumps({"prompt": "x"}) + "\n")
    args = ["sft", *sets(f"data.train={str(data)!r}", f"run.out_dir={str(tmp_path)!r}")]
    assert main(args) == 2
    assert "bad.jsonl:1: an SFT example needs string 'prompt' and 'completion'" in (
        capsys.readouterr().err
    )
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x = 1"}]
    data.write_text(json.dumps({"messages": msgs}) + "\n")
    assert main(args) == 2  # the tiny default has no chat template
    assert "bad.jsonl:1: chat messages need a tokenizer with a chat template" in (
        capsys.readouterr().err
    )
    assert main(["sft", *sets("data.train='x.jsonl'", "run.steps=0")]) == 2
    assert "run.steps must be positive" in capsys.readouterr().err
