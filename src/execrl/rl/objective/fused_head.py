"""The selected token's log-probability and the entropy of pi(. | s_t) without (B, T, vocab)
temporaries: positions go through the LM head and the log-softmax a chunk at a time.

A 151,936-token vocabulary makes the plain path (`torch.log_softmax` over the model's logits)
hold about 0.93 GB a float32 temporary for 4 rows x 384 tokens, and autograd keeps the
log-softmax's output and makes its gradient. Here a chunk of C positions (C x vocab about
`CHUNK_ELEMENTS`) is scored at once and dropped; the backward recomputes the chunk's logits
and returns d loss / d input directly (the approach of Liger-Kernel's fused linear
cross-entropy, Hsu et al. 2024, written for log-probs and entropy):

  z = x W^T / temperature (fused) or logits / temperature, in float32;  lse = logsumexp(z)
  log pi(y) = z_y - lse;  H = lse - sum_v softmax(z)_v z_v
  d log pi(y) / d z = onehot(y) - softmax(z)

Only the positions in `rows` (real completion tokens) are scored; the others read 0. The
entropy is a metric here (not differentiated); the entropy bonus takes the plain path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK_ELEMENTS = 1 << 25  # logits of one chunk: 128 MiB in float32


def chunk_positions(vocab: int) -> int:
    """Positions per chunk for a vocabulary of `vocab` entries."""
    return max(1, CHUNK_ELEMENTS // vocab)


def token_logprobs(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    ids: torch.Tensor,
    rows: torch.Tensor,
    temperature: float,
    entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """x (N, H) last hidden states with `weight` (V, H) the LM head's, or x (N, V) logits with
    weight None; ids (N,) the scored tokens; rows (n,) the positions to score ->
    (log pi(ids) (N,) float32, 0 off `rows`; entropy (N,) float32 detached, or None)."""
    vocab = x.shape[-1] if weight is None else weight.shape[0]
    # a no-grad forward (pi_old, the reference) needs no gradient prepared; needs_input_grad
    # reads only the inputs' requires_grad, so the grad mode is passed in
    logp, ent = _ChunkedLogprobs.apply(
        x, weight, ids, rows, temperature, chunk_positions(vocab), entropy, torch.is_grad_enabled()
    )
    return logp, ent if entropy else None


def _logits(x: torch.Tensor, weight: torch.Tensor | None, rows: torch.Tensor,
            temperature: float) -> torch.Tensor:  # fmt: skip
    """(C, V) float32: the chunk's logits over the sampling temperature."""
    z = x.index_select(0, rows)
    z = (F.linear(z, weight) if weight is not None else z).float()
    return z.div_(temperature) if temperature > 0 else z


def _grad_z(z: torch.Tensor, ids: torch.Tensor, g: torch.Tensor, scale: float) -> torch.Tensor:
    """d (g * log pi(y)) / d logits = g (onehot(y) - softmax(z)) / T, in z's memory: (C, V)."""
    grad = z.sub_(torch.logsumexp(z, -1, keepdim=True)).exp_()  # softmax(z)
    return grad.mul_(-g[:, None]).scatter_add_(-1, ids[:, None], g[:, None]).mul_(scale)


class _ChunkedLogprobs(torch.autograd.Function):
    """A position's log-prob depends on its own hidden state alone, so with the head frozen
    (LoRA) its whole gradient is one H-vector a position, d log pi(y_i) / d h_i =
    (W_y - softmax(z_i) W) / T: the forward computes it beside the logits (the same matmul
    count as the plain path's backward) and the backward only scales it by the incoming
    gradient. A trainable head (or raw logits) recomputes each chunk in the backward."""

    @staticmethod
    def forward(ctx, x, weight, ids, rows, temperature, chunk, entropy, grad):  # noqa: PLR0913
        logp = torch.zeros(x.shape[0], dtype=torch.float32, device=x.device)
        ent = torch.zeros_like(logp)
        # the per-position gradient, when the backward needs d/dx alone of a fused head
        jacobian = (
            torch.zeros(x.shape, dtype=torch.float32, device=x.device)
            if grad
            and weight is not None
            and ctx.needs_input_grad[0]
            and not ctx.needs_input_grad[1]
            else None
        )
        scale = 1.0 / temperature if temperature > 0 else 1.0
        for lo in range(0, len(rows), chunk):
            at = rows[lo : lo + chunk]
            z = _logits(x, weight, at, temperature)  # (C, V)
            lse = torch.logsumexp(z, -1)  # (C,)
            logp[at] = z.gather(-1, ids[at, None]).squeeze(-1) - lse
            if entropy:  # H = lse - sum p z, p = softmax(z); the sum as a batched dot
                p = torch.softmax(z, -1)
                ent[at] = lse - torch.bmm(p[:, None, :], z[:, :, None]).view(-1)
                del p
            if jacobian is not None:
                ones = torch.ones(len(at), dtype=z.dtype, device=z.device)
                jacobian[at] = (_grad_z(z, ids[at], ones, scale).to(weight.dtype) @ weight).float()
        ctx.save_for_backward(x, weight, ids, rows, jacobian)
        ctx.temperature, ctx.chunk = temperature, chunk
        ctx.mark_non_differentiable(ent)
        return logp, ent

    @staticmethod
    def backward(ctx, grad_logp, _grad_ent):
        x, weight, ids, rows, jacobian = ctx.saved_tensors
        if jacobian is not None:  # (N, H): 0 off `rows`
            return (jacobian * grad_logp[:, None]).to(x.dtype), *(None,) * 7
        scale = 1.0 / ctx.temperature if ctx.temperature > 0 else 1.0
        grad_x = torch.zeros_like(x) if ctx.needs_input_grad[0] else None
        grad_w = (
            torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
            if weight is not None and ctx.needs_input_grad[1]
            else None
        )
        for lo in range(0, len(rows), ctx.chunk):
            at = rows[lo : lo + ctx.chunk]
            grad_z = _grad_z(_logits(x, weight, at, ctx.temperature), ids[at], grad_logp[at], scale)
            if weight is None:
                if grad_x is not None:
                    grad_x[at] = grad_z.to(x.dtype)
                continue
            grad_z = grad_z.to(weight.dtype)
            if grad_x is not None:
                grad_x[at] = grad_z @ weight  # (C, H)
            if grad_w is not None:
                grad_w.addmm_(grad_z.t().float(), x.index_select(0, at).float())  # (V, H)
        grad_w = None if grad_w is None else grad_w.to(weight.dtype)
        return grad_x, grad_w, *(None,) * 6
