"""The `[model]` of a run: which model it trains, in what dtype, on which device, and with
which adapters; its fields documented once here, and checked when the config loads
(`check_model`), before any model loads."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from execrl.models.device import auto_dtype, device_problem
from execrl.rl.files.toml_config import ConfigError


@dataclass
class ModelConfig:
    path: str = (
        "default"  # HF-format directory, hub id, or "default" (embedded, built on first use)
    )
    # float32 | bfloat16 | float16 | auto. With LoRA (lora_r > 0) a 16-bit dtype is mixed
    # precision, on a CPU as on a GPU: the frozen base weights in it (half the memory) and its
    # matmuls, the adapters, their gradients and AdamW state in float32 (PEFT keeps them so),
    # the log-softmax and loss in float32. A CPU without avx512_bf16 or AMX (AVX2 only) has no
    # fast bfloat16 GEMM: there float32 is faster (benchmarks/update_speed.py measures both).
    # Full fine-tuning in 16 bits on a CPU is refused: execrl keeps no float32 master copy, and
    # small AdamW steps round away on 16-bit weights. "auto": bfloat16 for LoRA on a device
    # with native bf16, else float32 (`models.device.auto_dtype`), chosen when the config loads
    # and recorded so in the run's config.toml
    dtype: str = "float32"
    device: str = "auto"  # cpu | cuda | auto (cuda when available)
    pad_token: str = ""  # set when the tokenizer has none, e.g. its eos token
    chat: str = "auto"  # auto (use the chat template if there is one) | on | off
    lora_r: int = 0  # LoRA rank; 0 trains all weights (LoRA needs `pip install 'execrl[lora]'`)
    lora_alpha: int = 16
    lora_targets: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    # torch's CPU threads; 0 chooses from the cores free at start (`models.threads`), unless
    # OMP_NUM_THREADS is set. A run saves the count it used, so a resumed run keeps it
    threads: int = 0


def resolve_dtype(model: ModelConfig, this_machine: bool) -> None:
    """model.dtype = "auto" made concrete, once, before anything reads it."""
    if model.dtype == "auto":
        model.dtype = auto_dtype(model.device, model.lora_r > 0, this_machine)


def check_model(model: ModelConfig, where: str, this_machine: bool) -> None:
    """The device exists here, a 16-bit dtype has float32 adapters over it on a CPU, the thread
    count is possible; errors name the field and what to set."""
    problem = device_problem(model.device) if this_machine else None
    if problem:
        raise ConfigError(f"{where}: model.device = {problem}")
    if this_machine and _sixteen_bit_full_on_cpu(model):
        raise ConfigError(
            f"{where}: model.dtype = {model.dtype!r} with full fine-tuning on a CPU: "
            "execrl keeps no float32 master weights, so small AdamW steps round away; set "
            "model.dtype = 'float32', or train LoRA adapters (model.lora_r = 16), which stay in "
            "float32 over the 16-bit base"
        )
    if model.threads < 0:
        raise ConfigError(f"{where}: model.threads must be at least 0 (0: chosen at start)")


def _sixteen_bit_full_on_cpu(model: ModelConfig) -> bool:
    """A 16-bit model.dtype training every weight on a CPU (`ModelConfig.dtype`)."""
    if model.dtype == "float32" or model.lora_r:
        return False
    if model.device == "auto":
        return not torch.cuda.is_available()
    return model.device == "cpu"
