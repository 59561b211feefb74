"""Loading a Hugging Face causal LM and its tokenizer, optionally with LoRA, and a frozen reference.

A model is named by a local directory in Hugging Face format, by a GGUF file (converted once to
such a directory, `execrl.models.loading.gguf`), by the name of a known model fetched with
`execrl models get` (`execrl.models.loading.registry`), by a hub id (`org/name`, for users online;
honours `HF_HUB_OFFLINE`), or by `"default"`, the embedded default model that execrl builds
itself on first use (`execrl.models.loading.default`).
"""

from __future__ import annotations

import copy
import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from execrl.models.loading.adapter import ADAPTER_CONFIG, adapter_base, merged_adapter
from execrl.models.loading.gguf import ensure_converted, is_gguf
from execrl.models.loading.registry import KNOWN_MODELS, fetched_dir, known_model

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True, slots=True)
class LoraSpec:
    """Low-rank adapters through PEFT (`pip install 'execrl[lora]'`)."""

    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(slots=True)
class Policy:
    """A causal LM with the tokenizer it was trained with."""

    model: Any  # transformers.PreTrainedModel, or a peft.PeftModel wrapping one
    tokenizer: Any  # transformers.PreTrainedTokenizerBase, with a pad token
    name: str  # what the user asked for: a path, a hub id or "default"

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def resolve_model_path(name: str) -> tuple[str, bool]:
    """(what to hand to `from_pretrained`, whether to load from local files only: a directory,
    or a hub id in the cache while the hub cannot be reached)."""
    if name == "default":
        from execrl.models.loading.default import ensure_default_model

        return str(ensure_default_model()), True
    if known_model(name) is not None:
        return str(fetched_dir(name)), True
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file() and not (path / ADAPTER_CONFIG).is_file():
            raise FileNotFoundError(
                f"model directory {path} has no config.json: save the model there with "
                "`model.save_pretrained(dir)` and `tokenizer.save_pretrained(dir)`"
            )
        return str(path), True
    if path.is_file() and is_gguf(path):
        return str(ensure_converted(path)), True
    if path.exists():
        raise FileNotFoundError(
            f"model path {path} is a file but not a GGUF file; give the directory that holds it"
        )
    if name.startswith((".", "/", "~")) or not _HUB_ID.match(name):
        close = difflib.get_close_matches(name, KNOWN_MODELS, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise FileNotFoundError(
            f"model path {name!r} does not exist; {hint}give a directory in Hugging Face format, "
            "a .gguf file, a hub id like 'Qwen/Qwen2.5-Coder-0.5B-Instruct', 'default', or a "
            f"known model ({', '.join(sorted(KNOWN_MODELS))}: `execrl models list`)"
        )
    from execrl.models.loading.hub import hub_source

    return hub_source(name)  # offline: the cache, or an error that says so at once


def load_tokenizer(name: str, *, pad_token: str = "") -> Any:
    """The tokenizer of a model, checked to have a pad token (left padding, for sampling)."""
    from transformers import AutoTokenizer

    source, local = resolve_model_path(name)
    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=_offline(local))
    if pad_token:
        if pad_token not in tokenizer.get_vocab():
            raise ValueError(
                f"model.pad_token {pad_token!r} is not in the vocabulary of {name}; "
                f"the eos token {tokenizer.eos_token!r} is a safe choice"
            )
        tokenizer.pad_token = pad_token
    if tokenizer.pad_token is None:
        raise ValueError(
            f"the tokenizer of {name} has no pad token; set model.pad_token "
            f"(e.g. --set model.pad_token={tokenizer.eos_token!r}, its eos token)"
        )
    if tokenizer.eos_token is None:
        raise ValueError(f"the tokenizer of {name} has no eos token; completions could not end")
    tokenizer.padding_side = "left"
    return tokenizer


def load_policy(
    name: str,
    *,
    device: str = "cpu",
    dtype: str = "float32",
    lora: LoraSpec | None = None,
    pad_token: str = "",
) -> Policy:
    """A trainable policy: model (with LoRA adapters when asked) and tokenizer. An adapter
    directory (`models.loading.adapter`) loads as its base with the adapter merged in."""
    from transformers import AutoModelForCausalLM

    if dtype not in _DTYPES:
        raise ValueError(f"model.dtype {dtype!r} is not one of {sorted(_DTYPES)}")
    base = adapter_base(name)
    tokenizer = load_tokenizer(name, pad_token=pad_token)
    source, local = resolve_model_path(base or name)
    model = AutoModelForCausalLM.from_pretrained(
        source, dtype=_DTYPES[dtype], local_files_only=_offline(local)
    )
    if base is not None:
        model = merged_adapter(model, name)
    model.to(device)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if lora is not None:
        model = _with_lora(model, lora)
    model.train()
    return Policy(model=model, tokenizer=tokenizer, name=name)


def reference_from(policy: Policy) -> Any:
    """A frozen copy of the policy's current weights, the anchor of the KL penalty.

    With LoRA the base model with adapters disabled is the reference, so no copy is made: the
    caller gets the PeftModel itself and must run it under `disable_adapter()` (see
    `rl.objective.logprobs`).
    """
    if _is_peft(policy.model):
        return policy.model
    reference = copy.deepcopy(policy.model)
    reference.eval()
    reference.requires_grad_(False)
    return reference


def _with_lora(model: Any, spec: LoraSpec) -> Any:
    try:
        import peft
    except ImportError as e:
        raise ImportError(
            "model.lora needs PEFT: pip install 'execrl[lora]' (or set model.lora_r = 0)"
        ) from e
    config = peft.LoraConfig(
        r=spec.r,
        lora_alpha=spec.alpha,
        lora_dropout=spec.dropout,
        target_modules=list(spec.target_modules),
        task_type="CAUSAL_LM",
    )
    # a 16-bit base gets float32 adapters (their gradients and AdamW state too): mixed
    # precision, the base's matmuls in its dtype (`rl.config.config.ModelConfig.dtype`)
    return peft.get_peft_model(model, config, autocast_adapter_dtype=True)


def _is_peft(model: Any) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def _offline(local: bool) -> bool:
    return local or os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
