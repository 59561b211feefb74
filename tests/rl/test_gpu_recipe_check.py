"""benchmarks/gpu_recipe_check.py refuses, clearly and before anything loads, where there is no
GPU: CI runs this, never the check itself; and its verdict, on a CPU with CUDA's queries stood in
for."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_recipe_check.py"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_recipe_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gpu_check_refuses_without_a_gpu(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _script().main(["--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "needs a CUDA GPU" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_the_gpu_check_fails_a_run_whose_pass_rate_did_not_move(tiny_model_dir, tmp_path, capsys,
                                                                 monkeypatch):  # fmt: skip
    """The check's own plumbing on a CPU, torch's CUDA queries stood in for: it trains through
    `execrl train`, reads the summary's held-out pass@1 before and after, asks `execrl plan`,
    and fails (status 1) a random model whose pass@1 stayed at 0."""
    import torch

    for name, value in (("is_available", True), ("reset_peak_memory_stats", None),
                        ("max_memory_allocated", 1), ("get_device_name", "stand-in")):  # fmt: skip
        monkeypatch.setattr(torch.cuda, name, lambda *a, value=value: value)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: SimpleNamespace(total_memory=2**30))  # fmt: skip
    config = tmp_path / "cpu.toml"
    config.write_text(f"[model]\npath = {str(tiny_model_dir)!r}\ndevice = 'cpu'\n"
                      "[rl]\ngroup_size = 2\ngroups_per_step = 2\ndynamic_sampling = false\n"
                      "[sampling]\nmax_new_tokens = 8\n[data]\nheldout_samples = 1\n"
                      "[sandbox]\nworkers = 1\n[run]\ntrackers = 'none'\n")  # fmt: skip
    module = _script()
    status = module.main(["--config", str(config), "--steps", "1", "--heldout", "2",
                          "--out", str(tmp_path / "runs")])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 1 and "DID NOT MOVE" in out
    verdict = json.loads(out.strip().splitlines()[-1])
    assert verdict["heldout_before"] == verdict["heldout_after"] == 0.0
    assert verdict["within"] and verdict["planned_bytes"] > verdict["peak_bytes"] == 1
