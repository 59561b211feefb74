"""`execrl train` with LoRA, then `execrl eval` on its final/: merged by default, and an adapter
alone (run.merge_lora = false) loads on its base."""

import json

import pytest
import torch

from execrl.cli import main
from execrl.models.loading.loading import load_policy
from execrl.tasks.jsonl import write_tasks

from .conftest import tasks


def _train(model_dir, tmp_path, name: str, *extra: str) -> dict:
    tasks_file = tmp_path / "tasks.jsonl"
    write_tasks(tasks_file, tasks(4))
    sets = [f"model.path={str(model_dir)!r}", f"data.train='jsonl:{tasks_file}'",
            f"data.heldout='jsonl:{tasks_file}'", "data.heldout_samples=1", "run.steps=1",
            "rl.group_size=2", "rl.groups_per_step=2", "rl.dynamic_sampling=false",
            "sampling.max_new_tokens=6", "sandbox.workers=1", "optim.lr=0.05",
            "model.lora_r=2",
            # a reward that varies between random completions, so the adapter learns something
            "reward.tree={type='length', target=0, per_unit=0.01, unit='chars'}", "model.lora_targets=['q_proj', 'v_proj']",
            f"run.out_dir={str(tmp_path)!r}", f"run.name={name!r}", *extra]  # fmt: skip
    assert main(["train", *sum((["--set", s] for s in sets), [])]) == 0
    return json.loads((tmp_path / name / "summary.json").read_text())


def _eval(final, out, capsys) -> dict:
    capsys.readouterr()
    code = main(["eval", "--model", str(final), "--out-dir", str(out), "--workers", "1", "--json"])
    assert code == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_lora_runs_final_evaluates_merged_or_as_an_adapter_on_its_base(
    tiny_model_dir, tmp_path, capsys
):
    pytest.importorskip("peft")
    merged = _train(tiny_model_dir, tmp_path, "merged")
    adapter = _train(tiny_model_dir, tmp_path, "adapter", "run.merge_lora=false")
    merged_dir, adapter_dir = tmp_path / "merged" / "final", tmp_path / "adapter" / "final"
    assert (merged_dir / "config.json").is_file() and not (
        merged_dir / "adapter_config.json"
    ).exists()
    assert (adapter_dir / "adapter_config.json").is_file() and not (
        adapter_dir / "config.json"
    ).exists()

    for final, summary in ((merged_dir, merged), (adapter_dir, adapter)):
        result = _eval(final, tmp_path / f"eval-{final.parent.name}", capsys)
        assert result["pass@1"] == summary["heldout_pass@1_after"]

    # the same seeded run, saved both ways: the adapter on its base is the merged model, and
    # training moved it away from the base (the adapter was not dropped on load)
    base = load_policy(str(tiny_model_dir)).model.state_dict()
    one = load_policy(str(merged_dir)).model.state_dict()
    two = load_policy(str(adapter_dir)).model.state_dict()
    assert one.keys() == two.keys() == base.keys()
    assert all(torch.allclose(one[k], two[k], atol=1e-6) for k in one)
    assert any(not torch.equal(one[k], base[k]) for k in one if "q_proj" in k)
