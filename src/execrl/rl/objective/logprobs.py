"""Teacher-forced log-probabilities, entropies and values of completions under a model.

A batch lays each sequence out as [left padding | prompt | completion | right padding], so every
completion starts at column P (the widest prompt) and the logits of completion token t sit at
column P + t - 1. Positions count real tokens only, as in generation, so the numbers match the
behaviour log-probabilities that sampling recorded.

The completions of a GRPO group share their prompt, so the prompt's forward (most of the tokens
when completions are short) need not run once per completion: `collate` finds the distinct
prompts, `token_stats` runs them once with the model's KV cache, gives each row its prompt's
keys and values, and runs only the completions on top (the shared-prefix forward of Prefix
Grouper, Liu et al. 2025). Gradients flow through the shared keys and values to the prompt
pass, so the loss and its gradient equal the per-row forward's to float rounding.

How the log-probabilities are taken from the last hidden state is chosen once at set-up
(`resolve_head`, rl.logprob_head): "fused" runs the decoder and then the LM head together with
the log-softmax, a chunk of positions at a time (`rl.objective.fused_head`), so no (B, T, vocab)
tensor exists; "chunked" takes the model's logits and chunks only the log-softmax (a model whose
head cannot be fused); "full" is the whole vocabulary's log-softmax at once (the reference path, and
the entropy bonus's, whose gradient goes through every probability).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from execrl.models.engines.hf_forward import cache_keyword, cache_of, forward_params
from execrl.rl.objective.fused_head import token_logprobs


def entropy_from_logprobs(logp: torch.Tensor) -> torch.Tensor:
    """H(pi(. | s_t)) = -sum_v p log p, from normalised log-probabilities (B, T, V) -> (B, T)."""
    if logp.requires_grad:  # an entropy bonus: exp's output is kept for backward
        return -(logp.exp() * logp).sum(-1)
    # a metric: one (B, T, V) temporary, not two (the same values, multiplied in place)
    return -logp.exp().mul_(logp).sum(-1)


@dataclass(frozen=True, slots=True)
class SharedPrompts:
    """The distinct prompts of a batch, laid out as the batch lays out its prompts."""

    input_ids: torch.Tensor  # (U, P) long, left-padded
    attention_mask: torch.Tensor  # (U, P) long
    position_ids: torch.Tensor  # (U, P) long
    row_prompt: torch.Tensor  # (B,) long: which distinct prompt each row continues

    def to(self, device: torch.device | str) -> SharedPrompts:
        return SharedPrompts(*(x.to(device) for x in (self.input_ids, self.attention_mask,
                                                      self.position_ids, self.row_prompt)))  # fmt: skip


@dataclass(frozen=True, slots=True)
class SequenceBatch:
    input_ids: torch.Tensor  # (B, P + T) long
    attention_mask: torch.Tensor  # (B, P + T) long
    position_ids: torch.Tensor  # (B, P + T) long
    token_mask: torch.Tensor  # (B, T) float: 1 on real completion tokens
    prompt_width: int  # P
    shared: SharedPrompts | None = None  # set when rows repeat a prompt

    @property
    def completion_ids(self) -> torch.Tensor:
        return self.input_ids[:, self.prompt_width :]  # (B, T)

    def to(self, device: torch.device | str) -> SequenceBatch:
        return SequenceBatch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.position_ids.to(device),
            self.token_mask.to(device),
            self.prompt_width,
            None if self.shared is None else self.shared.to(device),
        )


def collate(
    prompts: Sequence[torch.Tensor], completions: Sequence[torch.Tensor], pad_id: int
) -> SequenceBatch:
    """prompts[i] (P_i,), completions[i] (T_i,) -> SequenceBatch."""
    p = max(len(x) for x in prompts)
    t = max(1, max(len(x) for x in completions))
    ids = torch.full((len(prompts), p + t), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), p + t), dtype=torch.long)
    token_mask = torch.zeros((len(prompts), t))
    for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        ids[i, p - len(prompt) : p] = prompt
        ids[i, p : p + len(completion)] = completion
        attention[i, p - len(prompt) : p + len(completion)] = 1
        token_mask[i, : len(completion)] = 1
    positions = (attention.cumsum(1) - 1).clamp(min=0)
    shared = _shared(prompts, ids, attention, positions, p)
    return SequenceBatch(ids, attention, positions, token_mask, p, shared)


def _shared(prompts: Sequence[torch.Tensor], ids: torch.Tensor, attention: torch.Tensor,
            positions: torch.Tensor, p: int) -> SharedPrompts | None:  # fmt: skip
    """The distinct prompts, cut from the first row that has each: a row's prompt columns are
    laid out (padding, positions) exactly as the prompt alone would be."""
    distinct: dict[tuple[int, ...], int] = {}  # prompt -> its index among the distinct ones
    first_row: list[int] = []  # per distinct prompt, the first row that has it
    row_prompt: list[int] = []
    for row, x in enumerate(prompts):
        key = tuple(x.tolist())
        if key not in distinct:
            distinct[key] = len(first_row)
            first_row.append(row)
        row_prompt.append(distinct[key])
    if len(first_row) == len(prompts):
        return None
    return SharedPrompts(ids[first_row, :p], attention[first_row, :p], positions[first_row, :p],
                         torch.tensor(row_prompt))  # fmt: skip


@dataclass(frozen=True, slots=True)
class TokenStats:
    logp: torch.Tensor  # (B, T) log pi(token_t)
    entropy: torch.Tensor | None  # (B, T), when asked for
    hidden: torch.Tensor | None  # (B, T, H) last hidden state before each token, when asked for


HEADS = ("fused", "chunked", "full")  # rl.logprob_head's values, the fastest first
# Causal LMs whose forward is `logits = lm_head(last hidden state)`, nothing after it (no
# soft-capping or logit scale): the head can be fused with the log-softmax
_PLAIN_HEAD = frozenset({"llama", "mistral", "qwen2", "qwen3"})


def resolve_head(model, wanted: str, *, entropy_grad: bool = False) -> str:
    """The head `token_stats` uses for `model`, chosen once at set-up: `wanted` ("fused",
    "chunked" or "full"), or the nearest path the model allows. "fused" needs a plain LM head
    (`_PLAIN_HEAD`) on a model that is not sharded (FSDP gathers the head in the model's own
    forward); an entropy bonus (entropy_grad) differentiates the entropy: the "full" path."""
    if wanted not in HEADS:
        raise ValueError(f"rl.logprob_head {wanted!r}: choose one of {', '.join(HEADS)}")
    if entropy_grad:
        return "full"
    if wanted == "fused" and _fusion_problem(model):
        return "chunked"
    return wanted


def _fusion_problem(model) -> str:
    """Why `model`'s LM head cannot be run by `fused_head` ("" when it can)."""
    from torch.distributed.fsdp import FSDPModule

    inner = _unwrap(model)
    model_type = getattr(getattr(inner, "config", None), "model_type", "")
    head = inner.get_output_embeddings() if hasattr(inner, "get_output_embeddings") else None
    if hasattr(model, "module") or any(isinstance(m, FSDPModule) for m in inner.modules()):
        return "a wrapped or sharded model runs its head in its own forward"
    if model_type not in _PLAIN_HEAD or not hasattr(inner, "get_decoder"):
        return f"model type {model_type!r} may transform its logits"
    if type(head) is not torch.nn.Linear or head.bias is not None:
        return "the LM head is not a plain linear layer (an adapter on it?)"
    return ""


def token_stats(
    model,
    batch: SequenceBatch,
    temperature: float = 1.0,
    *,
    entropy: bool = False,
    entropy_grad: bool = False,
    hidden: bool = False,
    disable_adapter: bool = False,
    head: str = "full",
) -> TokenStats:
    """Forward pass; the logits are divided by the sampling temperature, as sampling did.

    entropy_grad: the entropy enters the loss (an entropy bonus); otherwise it is a metric and
    is computed outside the graph. head: `resolve_head`'s choice for this model. "fused" and
    "chunked" score only the real completion tokens (0 elsewhere); "full" scores every column.
    """
    inner = _unwrap(model)
    scope = model.disable_adapter() if disable_adapter else contextlib.nullcontext()
    with scope:
        return _HEAD_STATS[head](model, inner, batch, temperature, entropy, entropy_grad, hidden)


def _full_stats(model, inner, batch: SequenceBatch, temperature: float, entropy: bool,
                entropy_grad: bool, hidden: bool) -> TokenStats:  # fmt: skip
    """The whole vocabulary's log-softmax at once: the reference path, and the entropy bonus's."""
    logits, last_hidden = _logits_forward(model, inner, batch, hidden)  # (B, T, V), (B, T, H)
    logits = logits.float()
    if temperature > 0:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    # log_softmax keeps its output for backward, not its input: the scaled logits can go
    # before the entropy's temporaries are made
    del logits
    logp = logp_all.gather(-1, batch.completion_ids.unsqueeze(-1)).squeeze(-1)
    if entropy:
        ent = entropy_from_logprobs(logp_all if entropy_grad else logp_all.detach())
    return TokenStats(logp=logp, entropy=ent if entropy else None, hidden=last_hidden)


def _chunked_stats(model, inner, batch: SequenceBatch, temperature: float, entropy: bool,
                   entropy_grad: bool, hidden: bool) -> TokenStats:  # fmt: skip
    """The model's logits, their log-softmax a chunk of positions at a time (`fused_head`)."""
    logits, last_hidden = _logits_forward(model, inner, batch, hidden)  # (B, T, V), (B, T, H)
    return _scored(logits, None, batch, temperature, entropy, last_hidden)


def _fused_stats(model, inner, batch: SequenceBatch, temperature: float, entropy: bool,
                 entropy_grad: bool, hidden: bool) -> TokenStats:  # fmt: skip
    """The decoder's last hidden states, then the LM head fused with the log-softmax a chunk
    of positions at a time (`fused_head`): no (B, T, V) tensor at all."""
    decoder = inner.get_decoder()
    params = forward_params(decoder)
    forward = _shared_forward if _can_share(inner, params, batch) else _full_forward
    states, _ = forward(decoder, params, batch, False, _last_hidden)  # (B, T, H)
    weight = inner.get_output_embeddings().weight  # (V, H)
    # the decoder's last hidden state is the model's hidden_states[-1] (the final norm's output)
    return _scored(states, weight, batch, temperature, entropy, states if hidden else None)


def _scored(x: torch.Tensor, weight: torch.Tensor | None, batch: SequenceBatch,
            temperature: float, entropy: bool, last_hidden: torch.Tensor | None) -> TokenStats:  # fmt: skip
    """x (B, T, V) logits, or (B, T, H) hidden states with the head's weight, scored on the
    batch's real completion tokens."""
    b, t = batch.token_mask.shape
    rows = batch.token_mask.reshape(-1).nonzero().squeeze(1)  # (n,) the real tokens
    logp, ent = token_logprobs(x.reshape(b * t, -1), weight, batch.completion_ids.reshape(-1),
                               rows, temperature, entropy)  # fmt: skip
    return TokenStats(logp=logp.view(b, t), entropy=None if ent is None else ent.view(b, t),
                      hidden=last_hidden)  # fmt: skip


def _logits_forward(model, inner, batch: SequenceBatch, hidden: bool):
    """The model's logits over the completion columns (B, T, V), and its last hidden state."""
    params = forward_params(inner)  # read once: the forwards below ask about it several times
    forward = _shared_forward if _can_share(inner, params, batch) else _full_forward
    return forward(model, params, batch, hidden, _logits_of)


_HEAD_STATS = {"fused": _fused_stats, "chunked": _chunked_stats, "full": _full_stats}


def _logits_of(out) -> torch.Tensor:
    return out.logits


def _last_hidden(out) -> torch.Tensor:
    return out.last_hidden_state


def _full_forward(model, params: frozenset[str], batch: SequenceBatch, hidden: bool,
                  read: Callable[[Any], torch.Tensor]):  # fmt: skip
    """Every row's prompt and completion; column P + i - 1 scores completion token i. `read`
    takes the logits (a causal LM) or the last hidden state (its decoder) from the output."""
    p, t = batch.prompt_width, batch.token_mask.shape[1]
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        output_hidden_states=hidden,
        # no KV cache to return: none is read, and a layer whose activations are recomputed in
        # backward (dist.activation_checkpointing) would append its keys to it a second time
        **({"use_cache": False} if "use_cache" in params else {}),
        **_keep_logits(params, t + 1),
    )
    # the LM head ran on the last t + 1 columns where the model allows it, else on all of them
    logits = read(out)[:, -(t + 1) : -1]  # (B, T, V) or (B, T, H)
    return logits, out.hidden_states[-1][:, p - 1 : p + t - 1] if hidden else None


def _shared_forward(model, params: frozenset[str], batch: SequenceBatch, hidden: bool,
                    read: Callable[[Any], torch.Tensor]):  # fmt: skip
    """The distinct prompts once, their KV cache gathered to the rows, then the completions."""
    shared, p, t = batch.shared, batch.prompt_width, batch.token_mask.shape[1]
    assert shared is not None
    inner = getattr(model, "module", model)
    # The prompt pass goes around a DistributedDataParallel wrapper: its gradients reach the
    # parameters through the completion pass's backward, which the wrapper does see.
    first = inner(
        input_ids=shared.input_ids,
        attention_mask=shared.attention_mask,
        position_ids=shared.position_ids,
        use_cache=True,
        output_hidden_states=hidden,
        **_keep_logits(params, 1),
    )
    cache = cache_of(first)
    if not hasattr(cache, "batch_select_indices"):  # a model that returned no usable cache
        return _full_forward(model, params, batch, hidden, read)
    cache.batch_select_indices(shared.row_prompt)  # (U, ...) -> (B, ...), differentiably
    rest = model(
        input_ids=batch.input_ids[:, p:],
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids[:, p:],
        use_cache=True,
        output_hidden_states=hidden,
        **{cache_keyword(params): cache},
    )
    # completion token 0 is scored by the prompt's last column, token i by completion column i-1
    logits = torch.cat([read(first)[:, -1:][shared.row_prompt], read(rest)[:, : t - 1]], 1)
    if not hidden:
        return logits, None
    last = first.hidden_states[-1][:, -1:][shared.row_prompt]  # (B, 1, H)
    return logits, torch.cat([last, rest.hidden_states[-1][:, : t - 1]], 1)


def _can_share(inner, params: frozenset[str], batch: SequenceBatch) -> bool:
    """Rows repeat a prompt and the model runs its cache in training: a plain HF causal LM
    without gradient checkpointing (which turns the cache off), PEFT or DDP around it allowed."""
    if batch.shared is None:
        return False
    # transformers 5 renamed is_gradient_checkpointing (older versions have only that name)
    checkpointing = next(
        (getattr(inner, n) for n in ("is_activation_checkpointing", "is_gradient_checkpointing")
         if hasattr(type(inner), n)),
        False,
    )  # fmt: skip
    if checkpointing:
        return False
    return "use_cache" in params and ("cache" in params or "past_key_values" in params)


def _unwrap(model):
    """The model whose forward declares the keywords: inside DDP and PEFT, which pass them on."""
    inner = getattr(model, "module", model)  # DistributedDataParallel
    if hasattr(inner, "get_base_model"):  # PEFT passes keyword arguments through
        inner = inner.get_base_model()
    return inner


def _keep_logits(params: frozenset[str], n: int) -> dict[str, int]:
    """logits_to_keep=n where the model's forward takes it: the LM head and its gradient over
    the prompt columns cost time and are never read."""
    return {"logits_to_keep": n} if "logits_to_keep" in params else {}
