"""`execrl plan` through the CLI: the table, the verdict, the suggestions, a config's settings,
and one-line errors (status 2) for what a person can fix."""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from pathlib import Path

import pytest

from execrl.cli import main
from execrl.rl.config.config import TrainConfig

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "qwen2.5-coder-0.5b-lora-mbpp.toml"


def _plan_json(capsys, *argv: str) -> dict:
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_7b_full_fine_tune_does_not_fit_one_80_gib_device_and_fsdp_is_offered(capsys):
    # 104 GiB of weights, gradients and AdamW moments, 12 GiB of activations
    assert main(["plan", "--model", "7b", "--device-memory", "80GiB"]) == 0
    out = capsys.readouterr().out
    assert "params" in out and "optimizer (AdamW moments)" in out and "activations" in out
    assert "does not fit" in out
    # four, not two: execrl gathers the whole policy for the batch's log-probs (rl.parallel.fsdp)
    assert "fits with fsdp on 4 devices" in out and "fits with LoRA r=16" in out


def test_fsdp_on_8_devices_fits_and_is_per_device(capsys):
    one = _plan_json(capsys, "--model", "7b", "--device-memory", "80GiB")
    eight = _plan_json(capsys, "--model", "7b", "--strategy", "fsdp", "--devices", "8",
                       "--device-memory", "80GiB")  # fmt: skip
    states = lambda p: [c["device_bytes"] for c in p["components"]][:3]  # noqa: E731
    assert states(one) == [28 * 10**9, 28 * 10**9, 56 * 10**9]
    assert states(eight) == [x // 8 for x in states(one)]
    assert one["fits"] is False and eight["fits"] is True


def test_a_config_gives_the_settings_and_a_flag_overrides_them(capsys):
    planned = _plan_json(capsys, "--config", str(RECIPE), "--device-memory", "24GiB")
    settings = planned["settings"]
    assert planned["model"] == "Qwen2.5-Coder-0.5B"  # its hub id, known without a download
    assert (settings["lora_r"], settings["dtype"], settings["micro_batch"]) == (16, "bfloat16", 4)
    assert settings["completion_len"] == 512 and settings["generation_rows"] == 64
    assert planned["fits"] is True
    full = _plan_json(capsys, "--config", str(RECIPE), "--lora-r", "0", "--set", "rl.kl_coef=0.1")
    assert full["settings"]["lora_r"] == 0 and full["settings"]["reference"] is True
    # the config's activation checkpointing is planned (in one process as under FSDP)
    assert settings["activation_checkpointing"] is False
    ac = _plan_json(capsys, "--config", str(RECIPE), "--set", "dist.activation_checkpointing=true")
    assert ac["settings"]["activation_checkpointing"] is True


def test_an_engine_on_a_device_of_its_own_takes_nothing_of_the_trainers(capsys):
    # sampling.engine_devices: the KV cache (and a vLLM share) live on the engine's device
    here = _plan_json(capsys, "--config", str(RECIPE), "--device-memory", "24GiB")
    there = _plan_json(capsys, "--config", str(RECIPE), "--device-memory", "24GiB",
                       "--set", "sampling.engine_devices=['cuda:1']")  # fmt: skip
    names = lambda p: {c["name"] for c in p["components"]}  # noqa: E731
    assert "generation KV cache" in names(here) and "generation KV cache" not in names(there)
    assert there["settings"]["generation_rows"] == 0 and there["settings"]["engine_share"] == 0
    vllm = _plan_json(capsys, "--config", str(RECIPE), "--device-memory", "24GiB", "--set",
                      "sampling.engine='vllm'", "--set", "sampling.engine_devices=['cuda:1']")  # fmt: skip
    assert "vLLM engine" not in names(vllm)


def test_a_colocated_vllm_engine_takes_the_configured_share(capsys):
    """sampling.engine_memory is what the run gives vLLM (gpu_memory_utilization) and what the
    plan counts on the trainer's device; --engine-share overrides it."""
    vllm = ("--config", str(RECIPE), "--device-memory", "80GiB", "--set", "sampling.engine='vllm'")
    engine = lambda p: [c["device_bytes"] for c in p["components"] if c["name"] == "vLLM engine"]  # noqa: E731
    assert engine(_plan_json(capsys, *vllm)) == [int(0.5 * 80 * 2**30)]  # the default
    assert engine(_plan_json(capsys, *vllm, "--set", "sampling.engine_memory=0.3")) == [
        int(0.3 * 80 * 2**30)
    ]
    assert engine(_plan_json(capsys, *vllm, "--engine-share", "0.2")) == [int(0.2 * 80 * 2**30)]


@pytest.mark.parametrize(
    ("argv", "says"),
    [(["--model", "7b", "--device-memory", "80"], "--device-memory '80': give a size with its unit"),
     (["--model", "nosuch"], "model 'nosuch': no config.json there or in the Hugging Face cache"),
     (["--model", "7b", "--strategy", "ddp", "--devices", "2", "--cpu-offload"], "cpu offload is FSDP's"),
     (["--set", "rl.micro_batch_size=2"], "--set changes a config: give --config too"),
     (["--config", str(RECIPE), "--set", "rl.nosuch=1"], "rl.nosuch")],
)  # fmt: skip
def test_what_a_person_can_fix_is_one_line_and_status_2(capsys, argv, says):
    assert main(["plan", *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert says in err


def test_devices_left_without_a_chunk_of_groups_are_named(capsys):
    # 16 groups in chunks of 8: two chunks for sixteen processes
    assert main(["plan", "--config", str(RECIPE), "--devices", "16"]) == 0
    out = capsys.readouterr().out
    assert "note: 14 of 16 processes generate nothing" in out and "set it to 1 or less" in out


RECIPES = sorted(RECIPE.parent.glob("qwen*.toml"))


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_a_gpu_recipe_states_the_memory_its_plan_gives(path, capsys):
    """A recipe's header gives its `execrl plan` command and the peak that command prints; the
    two may not drift apart."""
    comments = [line[1:].strip() for line in path.read_text().splitlines() if line.startswith("#")]
    header = "\n".join(comments).replace("\\\n", " ")  # a command continued over lines
    command = re.search(r"^execrl plan --config \S+ (.*)$", header, re.MULTILINE)
    stated = re.search(r"(\d+\.(\d+)) GiB at (?:the update's|its) peak", " ".join(header.split()))
    assert command and stated, "the header gives no execrl plan command or no peak"
    sections = {f.name for f in dataclasses.fields(TrainConfig)}
    if "dist" in tomllib.loads(path.read_text()) and "dist" not in sections:
        pytest.skip("[dist] (dist.strategy = 'fsdp') arrives with FSDP, issue 31 items 1-3")
    planned = _plan_json(capsys, "--config", str(path), *command[1].split())
    assert round(planned["peak_bytes"] / 2**30, len(stated[2])) == float(stated[1])


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--micro-batch", "0"), ("--lora-r", "-1"), ("--prompt-tokens", "-1"), ("--devices", "0"),
     ("--completion-tokens", "-1"), ("--tflops", "0"), ("--engine-share", "-0.5")],
)  # fmt: skip
def test_an_impossible_number_is_refused_never_planned(capsys, flag, value):
    """A number no run can have is an error naming its flag, not a plan of a fallback or a
    negative size."""
    assert main(["plan", "--model", "7b", "--device-memory", "80GiB", flag, value]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and flag in err, err
