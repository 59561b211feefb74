"""Whether this torch can use the device a user named, asked before any model loads (torch
itself only finds out when a tensor moves there, as an AssertionError)."""

from __future__ import annotations


def device_problem(device: str) -> str | None:
    """What is wrong with `device` here ("cuda", "cuda:1", "cpu", "auto"), or None."""
    if not device.startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return (
            f"{device!r}, but this torch cannot use a GPU (built without CUDA, or none visible); "
            "use 'cpu', or 'auto' (a GPU when there is one)"
        )
    index = device.partition(":")[2]
    if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
        return f"{device!r}, but this machine has {torch.cuda.device_count()} GPU(s) (cuda:0 ...)"
    return None


def native_bfloat16(device: str) -> bool:
    """Whether `device` ("cpu", "cuda", "cuda:N", "auto") multiplies bfloat16 matrices in
    hardware: a GPU that supports bfloat16, or a CPU whose oneDNN has native bf16 (avx512_bf16 or
    AMX). An AVX2-only CPU emulates it: a bfloat16 matmul ran there at 0.5 GFLOP/s against
    float32's 30, while one with avx512_bf16 ran at 262 against 72 (docs/results/qwen-cpu.md)."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def auto_dtype(device: str, lora: bool, this_machine: bool = True) -> str:
    """`model.dtype = "auto"`: bfloat16 when the run trains LoRA adapters (mixed precision: the
    adapters, their optimizer and the loss stay in float32) on a device with native bfloat16,
    else float32. Training every weight stays in float32: execrl keeps no float32 master copy,
    and small AdamW steps would round away on 16-bit weights. For another machine
    (`this_machine` false, `execrl plan` of a GPU recipe) a GPU ("cuda", or "auto") is assumed to
    have it, and a CPU is taken to be this one."""
    if not lora:
        return "float32"
    if not this_machine and device != "cpu":
        return "bfloat16"
    return "bfloat16" if native_bfloat16(device) else "float32"
