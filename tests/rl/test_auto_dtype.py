"""`model.dtype = "auto"`: bfloat16 for LoRA where the device multiplies it in hardware, float32
otherwise, chosen once when the config loads (hand-derived cases; the CPU's answer patched)."""

import pytest

from execrl.models import device as device_module
from execrl.rl.config.config import load_config, to_toml

LORA = ["model.lora_r=16", "model.device='cpu'", "model.dtype='auto'"]


@pytest.fixture(params=[True, False], ids=["native-bf16", "avx2-only"])
def cpu_bf16(request, monkeypatch):
    monkeypatch.setattr(device_module, "native_bfloat16", lambda device: request.param)
    return request.param


def test_lora_gets_bfloat16_only_where_the_cpu_has_it(cpu_bf16):
    config = load_config(None, LORA)
    assert config.model.dtype == ("bfloat16" if cpu_bf16 else "float32")
    # the run's config.toml records the choice, so a resume or a reader sees what ran
    assert f'dtype = "{config.model.dtype}"' in to_toml(config)


def test_training_every_weight_stays_float32(cpu_bf16):
    config = load_config(None, ["model.device='cpu'", "model.dtype='auto'"])
    assert config.model.dtype == "float32"


def test_another_machine_gpu_assumed_and_cpu_is_this_one(cpu_bf16):
    gpu = load_config(None, ["model.lora_r=16", "model.device='cuda'", "model.dtype='auto'"],
                      this_machine=False)  # fmt: skip
    assert gpu.model.dtype == "bfloat16"
    cpu = load_config(None, LORA, this_machine=False)
    assert cpu.model.dtype == ("bfloat16" if cpu_bf16 else "float32")


def test_native_bfloat16_on_a_cpu_is_onednn_s_answer():
    import torch

    expected = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    assert device_module.native_bfloat16("cpu") is expected


def test_an_unknown_dtype_still_names_the_choices():
    with pytest.raises(Exception, match="auto"):
        load_config(None, ["model.dtype='bf16'"])


def test_execrl_plan_of_a_cpu_lora_recipe_plans_the_chosen_dtype(cpu_bf16, capsys):
    import json
    from pathlib import Path

    from execrl.cli import main

    # a recipe whose model plan knows by name (no converted file needed)
    recipe = Path(__file__).resolve().parents[2] / "configs" / "qwen2.5-coder-0.5b-lora-mbpp.toml"
    argv = ["--set", "model.device='cpu'", "--set", "model.dtype='auto'", "--json"]
    assert main(["plan", "--config", str(recipe), *argv]) == 0
    settings = json.loads(capsys.readouterr().out)["settings"]
    assert settings["dtype"] == ("bfloat16" if cpu_bf16 else "float32")


def test_execrl_sft_resolves_it_the_same_way(cpu_bf16):
    from execrl.rl.sft.config import load_sft_config

    config = load_sft_config(None, ["data.train='x.jsonl'", *LORA])
    assert config.model.dtype == ("bfloat16" if cpu_bf16 else "float32")
