"""A GGUF file holds the model its metadata declares, checked before any model is built.

transformers builds the architecture the metadata declares and fills it with whatever tensors
the file has: a 38 KB file declaring a 69B-parameter model builds that model (out of memory),
and a file holding 1 of its 20 tensors becomes a mostly random model with a logged warning. So,
before building anything: every declared block has tensors; the architecture is instantiated on
the meta device (shapes only, no memory); every parameter it needs is found in the file, under
the name transformers would load it from, with as many values as the parameter has; and the
file's tensors hold at least as many values as the model. `gguf_header` has already checked
that every tensor's bytes lie inside the file.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from execrl.models.loading.gguf_header import GgufHeader


class ClaimError(ValueError):
    """The file declares a model its tensors do not hold (the message names what is missing)."""


def check_blocks(header: GgufHeader) -> None:
    """Every declared block has tensors: checked before transformers reads the config, and it
    bounds the layers the meta device builds."""
    declared = header.fields.get(f"{header.architecture}.block_count")
    if not isinstance(declared, int):
        return  # the architecture has no blocks to count (transformers will say if it needs)
    present = {t.name.split(".")[1] for t in header.tensors if t.name.startswith("blk.")}
    if declared > len(present) or any(str(i) not in present for i in range(declared)):
        raise ClaimError(
            f"it declares {declared} blocks but holds tensors for {len(present)} "
            f"({header.architecture}.block_count does not match its tensors)"
        )


def check_claims(header: GgufHeader, config: Any) -> None:
    """Raise ClaimError unless the file's tensors are the model its metadata declares.

    config: transformers' config of the file (the one the conversion then builds, read once)."""
    check_blocks(header)
    model = _meta_model(config)
    held = {t.name: t.numel for t in header.tensors}
    for hf_name, param, gguf_names in _parameter_sources(model, config, header.architecture):
        absent = [g for g in gguf_names if g not in held]
        if absent:
            raise ClaimError(
                f"it has no tensor {absent[0]} (parameter {hf_name} of its {config.model_type} "
                f"architecture); it holds {len(held)} tensors and is incomplete"
            )
        values = sum(held[g] for g in gguf_names)
        if values != param.numel():
            raise ClaimError(
                f"tensor {', '.join(gguf_names)} holds {values:,} values, but parameter "
                f"{hf_name} of the declared architecture has {param.numel():,} {tuple(param.shape)}"
            )
    # Parameters transformers' name map does not know (some MoE experts) are not in the loop.
    needed = sum(p.numel() for p in model.parameters())  # a tied embedding counted once
    if needed > sum(held.values()):
        raise ClaimError(
            f"it declares a model of {needed:,} parameters, but its tensors hold "
            f"{sum(held.values()):,} values"
        )


def _meta_model(config: Any) -> Any:
    """The declared architecture, built with shapes and no storage."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


def _parameter_sources(
    model: Any, config: Any, architecture: str
) -> Iterator[tuple[str, Any, list[str]]]:
    """(HF name, parameter, the GGUF tensor names it is loaded from) for every parameter whose
    source transformers' own name map knows; the rest the after-loading check covers."""
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
    )

    processor = TENSOR_PROCESSORS.get(architecture, TensorProcessor)(config=config.to_dict())
    sources: dict[str, list[str]] = defaultdict(list)
    for gguf_name, hf_name in get_gguf_hf_weights_map(model, processor).items():
        sources[hf_name].append(gguf_name)  # fused parameters (gate and up) have two
    for hf_name, param in model.named_parameters():  # a tied output matrix is left out
        if hf_name in sources:
            yield hf_name, param, sorted(sources[hf_name])
