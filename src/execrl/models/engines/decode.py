"""A direct sampling loop over a causal LM's KV cache, without `model.generate`.

For the small models RL from execution feedback trains on a CPU, `generate`'s per-token
machinery (config validation, processor and criteria lists, cache bookkeeping) costs as much as
the model itself. This loop does only what `models.engines.sampling` needs: one forward over the
left-padded prompts, then one token per step for every unfinished row, recording the behaviour
log-probability log softmax(logits / T)[token] before top-p (as `rl.objective.logprobs` recomputes
it).

Rows end at an eos token (kept), when `stop_hit` names a reason (a stop sequence, a stop rule of
`models.engines.stop_rules`), or at the token budget; finished rows are fed the pad token and their
outputs ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from execrl.models.engines.hf_forward import cache_keyword, cache_of, forward_params
from execrl.models.engines.lean_llama import LeanLlama


@torch.no_grad()
def decode(
    model: Any,
    input_ids: torch.Tensor,  # (B, P) long, left-padded
    attention: torch.Tensor,  # (B, P) long, 0 on padding
    *,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    eos_ids: Sequence[int],
    pad_id: int,
    stop_hit: Any = None,  # (row, generated ids) -> why the row ends now ("stop", ...) or None
) -> tuple[torch.Tensor, torch.Tensor, list[tuple[int, str]]]:
    """(generated (B, T) long, logprobs (B, T) float32, per row (kept length, how it ended))."""
    # Under torch.distributed the policy is wrapped (DistributedDataParallel): generation needs
    # no gradient sync, and the wrapper hides the model's keyword arguments.
    model = getattr(model, "module", model)
    device = input_ids.device
    batch = input_ids.shape[0]
    eos = torch.tensor(list(eos_ids), dtype=torch.long, device=device)
    forward = LeanLlama.of(model) or _ModelForward(model)
    # A GRPO group repeats its prompt: run each distinct prompt once and copy its cache rows.
    distinct, row_of = torch.unique(
        torch.cat([input_ids, attention], 1), dim=0, return_inverse=True
    )
    if len(distinct) < batch:
        width = input_ids.shape[1]
        logits = forward.prefill(distinct[:, :width], distinct[:, width:], max_new_tokens)
        forward.expand(row_of)  # (U, ...) -> (B, ...)
        logits = logits[row_of]  # (B, V)
    else:
        logits = forward.prefill(input_ids, attention, max_new_tokens)  # (B, V)
    pad = torch.full((batch,), pad_id, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    length = torch.zeros(batch, dtype=torch.long, device=device)  # kept tokens, once done
    how = ["length"] * batch
    tokens: list[torch.Tensor] = []  # each (B,)
    logps: list[torch.Tensor] = []  # each (B,)
    for step in range(max_new_tokens):
        token, logp = _pick(logits.float(), temperature, top_p)
        token = torch.where(done, pad, token)
        tokens.append(token)
        logps.append(logp)
        ended = ~done & torch.isin(token, eos)  # (B,)
        for row in ended.nonzero()[:, 0].tolist():
            how[row] = "eos"
        if stop_hit is not None:
            generated = torch.stack(tokens, 1)
            for row in (~done & ~ended).nonzero()[:, 0].tolist():
                reason = stop_hit(row, generated[row])
                if reason:
                    ended[row] = True
                    how[row] = reason
        length = torch.where(ended, step + 1, length)
        done = done | ended
        if step + 1 == max_new_tokens or bool(done.all()):
            break
        logits = forward.step(token)
    generated = torch.stack(tokens, 1).cpu()  # (B, T)
    logprobs = torch.stack(logps, 1).cpu()  # (B, T)
    t = generated.shape[1]
    kept = torch.where(done, length, t).tolist()
    return generated, logprobs, list(zip(kept, how, strict=True))


class _ModelForward:
    """Any causal LM through its own forward and KV cache (the same interface as `LeanLlama`)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        params = forward_params(model)
        self.cache_kw = cache_keyword(params)
        # the prompt pass needs the last position's logits only
        self.extra = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    def prefill(
        self, input_ids: torch.Tensor, attention: torch.Tensor, budget: int
    ) -> torch.Tensor:
        positions = (attention.cumsum(-1) - 1).clamp(min=0)  # (B, P): padding shifts them
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
            use_cache=True,
            **self.extra,
        )
        self.cache, self.attention = cache_of(out), attention
        self.next_pos = positions[:, -1:] + 1  # (B, 1)
        return out.logits[:, -1, :]

    def expand(self, rows: torch.Tensor) -> None:
        """Row i of the decode continues prefilled row rows[i]."""
        self.cache.batch_select_indices(rows)
        self.attention, self.next_pos = self.attention[rows], self.next_pos[rows]

    def step(self, token: torch.Tensor) -> torch.Tensor:
        self.attention = torch.cat([self.attention, torch.ones_like(self.attention[:, :1])], 1)
        out = self.model(
            input_ids=token.view(-1, 1),
            attention_mask=self.attention,
            position_ids=self.next_pos,
            use_cache=True,
            **{self.cache_kw: self.cache},
        )
        self.cache, self.next_pos = cache_of(out), self.next_pos + 1
        return out.logits[:, -1, :]


def _pick(
    logits: torch.Tensor, temperature: float, top_p: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample (or, at temperature 0, take the argmax) from (B, V) logits; (token, log pi)."""
    if temperature == 0:
        logp_all = torch.log_softmax(logits, -1)
        token = logp_all.argmax(-1)
        return token, logp_all.gather(1, token.view(-1, 1))[:, 0]
    logp_all = torch.log_softmax(logits / temperature, -1)  # (B, V): the behaviour policy
    probs = logp_all.exp()
    if top_p < 1.0:
        sorted_p, order = probs.sort(-1, descending=True)
        # keep the smallest prefix whose mass reaches top_p (the first token always stays)
        drop = sorted_p.cumsum(-1) - sorted_p >= top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(1, order, sorted_p)
    # Inverse-CDF sampling: one uniform draw per row. torch.multinomial draws an exponential for
    # every vocabulary entry, about a tenth of a decode step at batch 32 on a CPU.
    # u < total (rounding included), so the first index whose cumulative mass exceeds u has
    # non-zero probability: a token top-p removed is never drawn.
    cdf = probs.cumsum(-1)  # (B, V)
    total = cdf[:, -1:]
    u = torch.rand(total.shape, dtype=cdf.dtype, device=cdf.device) * total
    u = torch.minimum(u, torch.nextafter(total, torch.zeros_like(total)))
    token = torch.searchsorted(cdf, u, right=True)[:, 0]
    return token, logp_all.gather(1, token.view(-1, 1))[:, 0]
