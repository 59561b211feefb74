"""A decoder-only model's dimensions, read from its config.json or stated as a size (`7b`).

What `execrl plan` (`rl.parallel.memory_plan`) counts memory from: nothing is loaded but the config.
Known here: Llama-architecture configs (Llama, Qwen2, Mistral and the embedded default).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class ShapeError(ValueError):
    """A model spec that names no shape; the message says what to give instead."""


@dataclass(frozen=True, slots=True)
class ModelShape:
    """A decoder-only (Llama/Qwen2) model's dimensions, as its config.json gives them."""

    name: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    tied_embeddings: bool = False
    qkv_bias: bool = False  # Qwen2's q, k and v projections carry a bias
    head_dim: int = 0  # 0: hidden // heads
    # A parameter count stated by the user (`7b`): it replaces the architecture's own count,
    # and the layers' share of it scales with it; the dimensions still shape the activations
    stated_params: int = 0

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    def projections(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear module in one decoder layer, by its HF name."""
        h, q, kv = self.hidden, self.heads * self.dim_per_head, self.kv_heads * self.dim_per_head
        i = self.intermediate
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}  # fmt: skip

    def _architecture_layer_params(self) -> int:
        weights = sum(n_in * n_out for n_in, n_out in self.projections().values())
        bias = (self.heads + 2 * self.kv_heads) * self.dim_per_head if self.qkv_bias else 0
        return weights + bias + 2 * self.hidden  # two RMSNorm weights

    @property
    def root_params(self) -> int:
        """The embedding, the LM head unless tied to it, and the final norm."""
        embedding = self.vocab * self.hidden
        return embedding * (1 if self.tied_embeddings else 2) + self.hidden

    @property
    def params(self) -> int:
        return (
            self.stated_params or self.layers * self._architecture_layer_params() + self.root_params
        )

    @property
    def layer_params(self) -> int:
        if not self.stated_params:
            return self._architecture_layer_params()
        return max(0, self.stated_params - self.root_params) // self.layers

    def lora_params(self, rank: int, targets: tuple[str, ...]) -> int:
        """LoRA's A (r x in) and B (out x r) for each targeted module of every layer."""
        shapes = self.projections()
        return self.layers * sum(rank * (shapes[t][0] + shapes[t][1]) for t in targets)

    def activation_elements_per_token(self) -> int:
        """One layer's saved activations a token (the module docstring's count)."""
        return 6 * self.hidden + 2 * self.kv_heads * self.dim_per_head + 4 * self.intermediate

    def kv_elements_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.dim_per_head


# The published config.json of the Qwen2.5-Coder models the GPU recipes train (configs/): their
# model cards give 0.49B, 1.54B and 7.61B parameters, which these shapes reproduce
KNOWN_SHAPES = {
    "qwen2.5-coder-0.5b": ModelShape("Qwen2.5-Coder-0.5B", 151936, 896, 24, 14, 2, 4864,
                                     tied_embeddings=True, qkv_bias=True),
    "qwen2.5-coder-1.5b": ModelShape("Qwen2.5-Coder-1.5B", 151936, 1536, 28, 12, 2, 8960,
                                     tied_embeddings=True, qkv_bias=True),
    "qwen2.5-coder-3b": ModelShape("Qwen2.5-Coder-3B", 151936, 2048, 36, 16, 2, 11008,
                                   tied_embeddings=True, qkv_bias=True),
    "qwen2.5-coder-7b": ModelShape("Qwen2.5-Coder-7B", 152064, 3584, 28, 28, 4, 18944,
                                   qkv_bias=True),
    "qwen2.5-coder-14b": ModelShape("Qwen2.5-Coder-14B", 152064, 5120, 48, 40, 8, 13824,
                                    qkv_bias=True),
    "qwen2.5-coder-32b": ModelShape("Qwen2.5-Coder-32B", 152064, 5120, 64, 40, 8, 27648,
                                    qkv_bias=True),
}  # fmt: skip
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([mb])$", re.IGNORECASE)


def from_hf_config(config: dict[str, Any], name: str) -> ModelShape:
    """The shape of a Hugging Face config.json's fields (a multimodal config's text part)."""
    config = config.get("text_config") or config
    try:
        heads = int(config["num_attention_heads"])
        return ModelShape(
            name=name,
            vocab=int(config["vocab_size"]),
            hidden=int(config["hidden_size"]),
            layers=int(config["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(config.get("num_key_value_heads") or heads),
            intermediate=int(config["intermediate_size"]),
            tied_embeddings=bool(config.get("tie_word_embeddings", False)),
            qkv_bias=config.get("model_type") == "qwen2" or bool(config.get("attention_bias")),
            head_dim=int(config.get("head_dim") or 0),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ShapeError(
            f"{name}: not a decoder-only config the planner reads (missing or bad {e}); it needs "
            "vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size"
        ) from None


def shape_of(spec: str) -> ModelShape:
    """`spec`: a size (`7b`, `500m`: the nearest known shape, with that many parameters), a
    known name or hub id (`Qwen/Qwen2.5-Coder-7B-Instruct`), `default` (the embedded model), or
    a config.json or the model directory that holds one."""
    size = _SIZE.match(spec.strip())
    if size:
        params = int(float(size[1]) * (10**6 if size[2].lower() == "m" else 10**9))
        if params < 1:
            raise ShapeError(f"model size {spec!r}: give a positive size like 7b or 500m")
        nearest = min(KNOWN_SHAPES.values(), key=lambda s: abs(s.params - params))
        return replace(nearest, name=f"{spec} (shape of {nearest.name})", stated_params=params)
    if spec == "default":
        return _default_shape()
    path = _local_config(spec)
    if path is not None:
        try:
            return from_hf_config(json.loads(path.read_text()), str(path))
        except json.JSONDecodeError as e:
            raise ShapeError(f"{path}: not JSON ({e})") from None
    known = spec.lower().split("/")[-1].removesuffix("-instruct")
    if known in KNOWN_SHAPES:
        return KNOWN_SHAPES[known]
    raise ShapeError(
        f"model {spec!r}: no config.json there or in the Hugging Face cache, and not a known "
        f"model; give a size like 7b, the model's directory or config.json, or one of "
        f"{', '.join(KNOWN_SHAPES)}"
    )


def _local_config(spec: str) -> Path | None:
    """The config.json `spec` names on this machine: a file, a model directory, a model fetched
    with `execrl models get`, or a hub id in the Hugging Face cache (never downloaded)."""
    from execrl.models.loading.gguf import ModelFileError
    from execrl.models.loading.registry import fetched_dir, known_model

    path = Path(spec).expanduser()
    if known_model(spec) is not None:
        try:
            path = fetched_dir(spec)
        except ModelFileError as e:  # not fetched yet: the one line that says what to run
            raise ShapeError(str(e)) from None
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        return path
    if re.match(r"^[\w.-]+/[\w.-]+$", spec):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(spec, "config.json")
        return Path(cached) if isinstance(cached, str) else None
    return None


def _default_shape() -> ModelShape:
    from execrl.models.loading.default import DefaultRecipe

    recipe = DefaultRecipe()
    shape = recipe.shape
    return ModelShape("default (embedded)", recipe.vocab_size, shape.hidden, shape.layers,
                      shape.heads, shape.kv_heads, shape.intermediate, tied_embeddings=True)  # fmt: skip
