"""A lean incremental forward for Llama-family models (Llama, Qwen2), used by
`models.engines.decode`.

On the small models RL from execution feedback trains on a CPU, a Hugging Face decoder layer
spends most of a decode step outside its matrix products: building the attention mask, calling
the rotary module, growing the cache, dispatching through modules. This forward reads the same
weights and does the same arithmetic (RMSNorm, rotary embedding, grouped-query attention, SwiGLU
MLP) with none of that: the q/k/v and gate/up projections are fused into one matrix product
each, the rotary cos/sin table is computed once by the model's own rotary module, the KV cache
is preallocated for the prompt plus the token budget and written in place, and the LM head runs
on the last position only. Greedy tokens equal the Hugging Face forward's; logits agree to
float rounding (tests/test_lean_llama.py).

`LeanLlama.of(model)` answers None for anything it does not reproduce exactly (other
architectures, sliding windows, length-dependent rope scaling, quantised layers, PEFT methods
other than plain LoRA on these projections); the caller then uses the model's own forward.

A PEFT LoRA policy decodes here with its adapters merged: each adapted projection's weight is
W + scaling B A (PEFT's own `get_delta_weight`), the same map as PEFT's W x + scaling B A x up to
float rounding, taken once per decode call like the fused matrices, so it follows every update.
Through PEFT's own layers a LoRA policy decoded 25-30 % slower (issue 27).

The fused matrices are copies, taken once per decode call (the policy changes every step), so
models above `MAX_PARAMETERS` keep the generic path rather than double their weight memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from execrl.models.engines.hf_forward import class_name

SUPPORTED = {"LlamaForCausalLM", "Qwen2ForCausalLM"}
MAX_PARAMETERS = 3_000_000_000


@dataclass(frozen=True)
class _Layer:
    norm_in: torch.Tensor  # (E,)
    qkv: torch.Tensor  # ((H + 2 KV) D, E): q, k and v projections stacked
    qkv_bias: torch.Tensor | None
    out: torch.Tensor  # (E, H D)
    out_bias: torch.Tensor | None
    norm_post: torch.Tensor  # (E,)
    gate_up: torch.Tensor  # (2 I, E): gate and up projections stacked
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor  # (E, I)
    down_bias: torch.Tensor | None


class LeanLlama:
    """One decode: `prefill` the left-padded prompts, then `step` one token per row at a time."""

    def __init__(self, model: Any, layers: list[_Layer]) -> None:
        cfg, body = model.config, model.model
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = body.layers[0].self_attn.head_dim
        self.scale = body.layers[0].self_attn.scaling
        self.eps = body.norm.variance_epsilon
        self.intermediate = layers[0].down.shape[1]
        self.layers, self.body, self.lm_head = layers, body, model.lm_head.weight

    @classmethod
    def of(cls, model: Any) -> LeanLlama | None:
        """The lean forward over `model`'s current weights, or None where it would differ."""
        model = _lora_base(model)
        if model is None or not _supported(model):
            return None
        layers, projections = [], []
        with torch.no_grad():
            for layer in model.model.layers:
                attn, mlp = layer.self_attn, layer.mlp
                modules = [attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj]
                modules += [mlp.gate_proj, mlp.up_proj, mlp.down_proj]
                maps = [_linear(m) for m in modules]
                if any(m is None for m in maps):  # e.g. a quantised linear computes otherwise
                    return None
                q, k, v, out, gate, up, down = maps
                layers.append(
                    _Layer(
                        norm_in=layer.input_layernorm.weight,
                        qkv=torch.cat([q.weight, k.weight, v.weight]),
                        qkv_bias=_cat_bias(q, k, v),
                        out=out.weight,
                        out_bias=out.bias,
                        norm_post=layer.post_attention_layernorm.weight,
                        gate_up=torch.cat([gate.weight, up.weight]),
                        gate_up_bias=_cat_bias(gate, up),
                        down=down.weight,
                        down_bias=down.bias,
                    )
                )
                projections += modules
        # PEFT may wrap only these projections (not a norm, the embedding or the head, as
        # modules_to_save or LoRA on them would): its other layers compute something else
        adapted = {id(p) for p in projections}
        if any(type(m).__module__.startswith("peft.") and id(m) not in adapted
               for m in model.modules()):  # fmt: skip
            return None
        return cls(model, layers)

    @torch.no_grad()
    def prefill(
        self, input_ids: torch.Tensor, attention: torch.Tensor, budget: int
    ) -> torch.Tensor:
        """Run the prompts (B, P), left-padded (attention 0 on padding), reserving cache room for
        `budget` more tokens; the logits (B, V) of each row's next token."""
        batch, width = input_ids.shape
        x = F.embedding(input_ids, self.body.embed_tokens.weight)  # (B, P, E)
        length = width + budget
        shape = (batch, self.kv_heads, length, self.head_dim)
        self.keys = [x.new_zeros(shape) for _ in self.layers]
        self.values = [x.new_zeros(shape) for _ in self.layers]
        cos, sin = self.body.rotary_emb(x, torch.arange(length, device=x.device).view(1, -1))
        self.cos, self.sin = cos[0], sin[0]  # (L, D): the rope table by absolute position
        positions = (attention.cumsum(-1) - 1).clamp(min=0)  # (B, P): padding shifts positions
        self.next_pos = positions[:, -1] + 1  # (B,)
        self.filled = width
        self.valid = None  # (B, L) bool: which cache slots hold real tokens, where any is padding
        if not bool(attention.bool().all()):
            self.valid = torch.ones((batch, length), dtype=torch.bool, device=x.device)
            self.valid[:, :width] = attention.bool()
            causal = torch.ones((width, width), dtype=torch.bool, device=x.device).tril()
            # (B, 1, P, P); a padding query sees itself so its (ignored) row is never all
            # masked: torch's CPU kernel returns zeros for such a row, but not every SDPA
            # backend does, and a NaN there would reach the cache's padding slots
            mask = (causal & self.valid[:, None, None, :width]) | torch.eye(
                width, dtype=torch.bool, device=x.device
            )
        else:
            mask = torch.ones((width, width), dtype=torch.bool, device=x.device).tril()
        rope = (self.cos[positions][:, None], self.sin[positions][:, None])  # (B, 1, P, D)
        return self._forward(x, 0, rope, mask)

    def expand(self, rows: torch.Tensor) -> None:
        """Row i of the decode continues prefilled row rows[i] (a prompt shared by a group)."""
        self.keys = [k[rows] for k in self.keys]
        self.values = [v[rows] for v in self.values]
        self.next_pos = self.next_pos[rows]
        if self.valid is not None:
            self.valid = self.valid[rows]

    @torch.no_grad()
    def step(self, token: torch.Tensor) -> torch.Tensor:
        """Feed one token per row (B,); the logits (B, V) of the token after it."""
        x = F.embedding(token.view(-1, 1), self.body.embed_tokens.weight)  # (B, 1, E)
        rope = (self.cos[self.next_pos][:, None, None], self.sin[self.next_pos][:, None, None])
        start = self.filled
        mask = None if self.valid is None else self.valid[:, None, None, : start + 1]
        self.next_pos = self.next_pos + 1
        self.filled += 1
        return self._forward(x, start, rope, mask)

    def _forward(self, x: torch.Tensor, start: int, rope: Any, mask: Any) -> torch.Tensor:
        # x (B, n, E): the n new positions, written to cache slots [start, start + n)
        batch, n, _ = x.shape
        h_, kv, d, half = self.heads, self.kv_heads, self.head_dim, self.head_dim // 2
        cos, sin = rope
        end = start + n
        for i, w in enumerate(self.layers):
            h = F.rms_norm(x, (x.shape[-1],), w.norm_in, self.eps)
            qkv = F.linear(h, w.qkv, w.qkv_bias).view(batch, n, h_ + 2 * kv, d).transpose(1, 2)
            qk = qkv[:, : h_ + kv]  # (B, H + KV, n, D): rotary applies to queries and keys
            qk = qk * cos + torch.cat((-qk[..., half:], qk[..., :half]), -1) * sin
            self.keys[i][:, :, start:end] = qk[:, h_:]
            self.values[i][:, :, start:end] = qkv[:, h_ + kv :]
            o = F.scaled_dot_product_attention(
                qk[:, :h_],
                self.keys[i][:, :, :end],
                self.values[i][:, :, :end],
                attn_mask=mask,
                scale=self.scale,
                enable_gqa=True,
            )  # (B, H, n, D)
            x = x + F.linear(o.transpose(1, 2).reshape(batch, n, h_ * d), w.out, w.out_bias)
            h = F.rms_norm(x, (x.shape[-1],), w.norm_post, self.eps)
            gu = F.linear(h, w.gate_up, w.gate_up_bias)
            act = F.silu(gu[..., : self.intermediate]) * gu[..., self.intermediate :]
            x = x + F.linear(act, w.down, w.down_bias)
        last = F.rms_norm(x[:, -1], (x.shape[-1],), self.body.norm.weight, self.eps)
        return F.linear(last, self.lm_head)  # (B, V)


@dataclass(frozen=True)
class _Linear:
    weight: torch.Tensor  # (out, in)
    bias: torch.Tensor | None  # (out,)


def _linear(module: nn.Module) -> _Linear | None:
    """The affine map a projection applies in eval mode: an exact `nn.Linear`, or a PEFT LoRA
    `Linear` over one (W + scaling B A per active adapter); None for anything else."""
    if type(module) is nn.Linear:
        return _Linear(module.weight, module.bias)
    base = getattr(module, "base_layer", None)
    if (
        type(module).__name__ != "Linear"
        or not type(module).__module__.startswith("peft.tuners.lora")
        or type(base) is not nn.Linear
        or module.merged  # PEFT unmerges before some forwards: not a fixed map
    ):
        return None
    if module.disable_adapters:  # the reference policy of a LoRA run: the base alone
        return _Linear(base.weight, base.bias)
    weight = base.weight
    for adapter in module.active_adapters:
        if adapter not in module.lora_A.keys():  # PEFT's forward skips it too
            continue
        # DoRA and the other variants, and a trained LoRA bias, are not W + scaling B A
        if adapter in getattr(module, "lora_variant", {}) or module.lora_bias.get(adapter):
            return None
        weight = weight + module.get_delta_weight(adapter).to(weight.dtype)
    return _Linear(weight, base.bias)


def _lora_base(model: Any) -> Any:
    """The transformers model under a PEFT LoRA wrapper (itself when unwrapped), or None for
    another PEFT method (prompt tuning, IA3, ...: not a change of linear weights)."""
    if not hasattr(model, "peft_config") or not hasattr(model, "get_base_model"):
        return model
    if any(str(c.peft_type.value) != "LORA" for c in model.peft_config.values()):
        return None
    return model.get_base_model()


def _cat_bias(*linears: _Linear) -> torch.Tensor | None:
    biases = [m.bias for m in linears]
    if all(b is None for b in biases):
        return None
    return torch.cat(
        [
            b if b is not None else m.weight.new_zeros(m.weight.shape[0])
            for m, b in zip(linears, biases, strict=True)
        ]
    )


def _supported(model: Any) -> bool:
    if class_name(model) not in SUPPORTED or not hasattr(model, "model"):
        return False
    cfg = model.config
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    rope_type = str(rope.get("rope_type", rope.get("type", "default")))
    layer_types = set(getattr(cfg, "layer_types", None) or ["full_attention"])
    if (
        getattr(cfg, "hidden_act", "silu") != "silu"
        or getattr(cfg, "pretraining_tp", 1) != 1
        or getattr(cfg, "use_sliding_window", False)
        or layer_types != {"full_attention"}
        or "dynamic" in rope_type
        or "longrope" in rope_type
        or type(getattr(model, "lm_head", None)) is not nn.Linear
        or model.lm_head.bias is not None
        or sum(p.numel() for p in model.parameters()) > MAX_PARAMETERS
    ):
        return False
    return type(model.model.embed_tokens) is nn.Embedding
