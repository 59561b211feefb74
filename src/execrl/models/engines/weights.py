"""The policy's weights as an engine with its own copy (vLLM) loads them: (name, tensor) pairs
under the base model's own Hugging Face names, a LoRA policy's adapters merged in.

A `WeightSource` yields them from the trainer's module. `plain_weights` is the source of a
process that holds the whole module (one process, "ddp"): its state dict. A sharded policy
(dist.strategy = "fsdp") has its own source, `rl.parallel.fsdp.unit_weights`, which gathers one
decoder layer at a time and yields copies of its tensors, so a consumer may keep one past its layer
(vLLM holds a layer's weights until the layer is complete) and never sees a freed one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

WeightSource = Callable[[Any], Iterable[tuple[str, torch.Tensor]]]

# a file of `write_shards` is closed once it holds this many bytes
SHARD_BYTES = 1 << 30
INDEX = "model.safetensors.index.json"


def unwrap(model: Any) -> Any:
    """The HF model under a DistributedDataParallel wrapper."""
    return getattr(model, "module", model)


def base_model(model: Any) -> Any:
    """The plain HF model: under DDP, and under PEFT's wrapper for a LoRA policy."""
    model = unwrap(model)
    return model.get_base_model() if hasattr(model, "peft_config") else model


def plain_name(name: str) -> str:
    """A PEFT state-dict name as the base model names it."""
    return name.removeprefix("base_model.model.").replace(".base_layer.", ".")


def is_adapter(name: str) -> bool:
    """A LoRA adapter's own tensor: already in the merged weight, never pushed."""
    return ".lora_" in name


def plain_weights(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """The whole module's weights, one pair at a time. A LoRA policy's adapted matrices come
    merged as they are reached (W + delta W, a new tensor each, as PEFT's merge computes it),
    the rest as the live tensors: the whole merged model was once cloned before a push, 2.35 GiB
    for Qwen2.5-Coder-0.5B in float32 on top of the step's peak. A consumer that keeps a
    tensor past the next update copies it."""
    model = unwrap(model)
    if not hasattr(model, "peft_config"):
        yield from ((name, t.detach()) for name, t in model.state_dict().items())
        return
    if not _plain_lora(model):  # DoRA, modules_to_save, other tuners: PEFT's own merge
        yield from _merged_copy(model).items()
        return
    adapted = {
        f"{name}.base_layer.weight": module
        for name, module in model.named_modules()
        if hasattr(module, "get_delta_weight") and hasattr(module, "base_layer")
    }
    for name, t in model.state_dict().items():
        if is_adapter(name):
            continue
        module = adapted.get(name)
        yield plain_name(name), t.detach() if module is None else _merged(module, t)


def _merged(module: Any, weight: torch.Tensor) -> torch.Tensor:
    """W plus each active adapter's delta W (scaled B A), as `merge_adapter` would add them."""
    merged = weight.detach()
    with torch.no_grad():  # not around the generator's yields: the grad mode is the thread's
        for adapter in module.active_adapters:
            if adapter in module.lora_A:
                merged = merged + module.get_delta_weight(adapter).to(weight.dtype)
    return merged


def _plain_lora(model: Any) -> bool:
    """Adapters whose merge is W + delta W for each adapted matrix and nothing else."""
    return all(
        str(getattr(c, "peft_type", "")).endswith("LORA")
        and not getattr(c, "use_dora", False)
        and not getattr(c, "modules_to_save", None)
        for c in model.peft_config.values()
    )


def _merged_copy(model: Any) -> dict[str, torch.Tensor]:
    model.merge_adapter()
    try:
        return {
            plain_name(name): t.detach().clone()  # unmerging changes the weight in place
            for name, t in model.state_dict().items()
            if not is_adapter(name)
        }
    finally:
        model.unmerge_adapter()


def write_shards(directory: Path, weights: Iterable[tuple[str, torch.Tensor]],
                 shard_bytes: int = SHARD_BYTES) -> list[Path]:  # fmt: skip
    """The weights as safetensors files of about `shard_bytes` each, with the Hugging Face
    index that names each tensor's file: what `from_pretrained` and vLLM load. Each tensor is
    copied to the CPU as it comes, so at most one file's worth is held at once. Files of an
    earlier write that this one does not replace are removed."""
    from safetensors.torch import save_file

    written: list[Path] = []
    weight_map: dict[str, str] = {}
    held: dict[str, torch.Tensor] = {}
    size = total = 0

    def flush() -> None:
        nonlocal held, size, total
        path = directory / f"model-{len(written) + 1:05d}.safetensors"
        save_file(held, str(path), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(held, path.name))
        written.append(path)
        total += size
        held, size = {}, 0

    for name, tensor in weights:
        # a copy of its own: a tied weight's two names would share storage, which
        # safetensors refuses, and a sharded source frees its layer after it
        held[name] = tensor.detach().to("cpu", copy=True).contiguous()
        size += tensor.numel() * tensor.element_size()
        if size >= shard_bytes:
            flush()
    if held or not written:
        flush()
    for stale in directory.glob("*.safetensors"):
        if stale not in written:
            stale.unlink()
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / INDEX).write_text(json.dumps(index, indent=2) + "\n")
    return written


def save_policy(directory: Path, model: Any, tokenizer: Any, weights: WeightSource) -> None:
    """The policy in Hugging Face format, as an engine with its own copy loads it at start: the
    base model's config and generation config, the weights as `weights` yields them (a LoRA
    policy merged, a sharded one gathered a unit at a time), and the tokenizer."""
    plain = base_model(model)
    plain.config.save_pretrained(directory)
    if getattr(plain, "generation_config", None) is not None:
        plain.generation_config.save_pretrained(directory)
    write_shards(directory, weights(model))
    tokenizer.save_pretrained(directory)
