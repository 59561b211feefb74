"""What a Hugging Face causal LM's forward takes and returns, across transformers versions.

transformers 5 renamed the cache argument and output from `past_key_values` to `cache`, and not
every model takes `logits_to_keep`; callers read the forward's signature once and ask here.
"""

from __future__ import annotations

import inspect
from typing import Any


def forward_params(module: Any) -> frozenset[str]:
    """The keyword names `module.forward` declares (empty where it cannot be read)."""
    forward = getattr(module, "forward", None)
    if forward is None:
        return frozenset()
    try:
        return frozenset(inspect.signature(forward).parameters)
    except (TypeError, ValueError):
        return frozenset()


def cache_keyword(params: frozenset[str]) -> str:
    return "cache" if "cache" in params else "past_key_values"


def cache_of(out: Any) -> Any:
    """The KV cache a forward returned, or None."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def class_name(module: Any) -> str:
    """The module's class; under FSDP (`rl.parallel.fsdp`) the one `fully_shard` derived FSDP<Class>
    from, adding only its hooks."""
    from torch.distributed.fsdp import FSDPModule

    cls = type(module)
    if isinstance(module, FSDPModule):
        cls = next(base for base in cls.__bases__ if base is not FSDPModule)
    return cls.__name__
