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
