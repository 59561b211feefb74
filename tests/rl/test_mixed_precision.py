"""model.dtype = "bfloat16" with LoRA on a CPU is mixed precision: the frozen base in bfloat16,
the adapters, their gradients and AdamW state in float32, log-probs and loss in float32; full
fine-tuning in 16 bits on a CPU is refused."""

from __future__ import annotations

import pytest
import torch

from execrl.rl import setup
from execrl.rl.config.config import ConfigError, load_config
from execrl.rl.objective.logprobs import collate, token_stats
from execrl.rl.objective.losses import Batch
from execrl.rl.update.learner_settings import LearnerSettings
from execrl.rl.update.trainer import Learner

LORA = ["model.lora_r=4", "model.lora_targets=['q_proj','k_proj','v_proj','o_proj','gate_proj',"
        "'up_proj','down_proj']", "model.device='cpu'"]  # fmt: skip


def test_sixteen_bit_full_fine_tuning_on_a_cpu_is_refused():
    with pytest.raises(ConfigError, match="full fine-tuning on a CPU.*model.lora_r = 16"):
        load_config(None, ["model.dtype='bfloat16'", "model.device='cpu'"])
    load_config(None, ["model.dtype='bfloat16'", *LORA])  # LoRA: mixed precision
    load_config(None, ["model.dtype='bfloat16'", "model.device='cuda'"], this_machine=False)


def _update(model_dir, dtype: str):
    """One update of a LoRA policy loaded as `execrl train` loads it, from fixed rows."""
    config = load_config(None, [f"model.path='{model_dir}'", f"model.dtype='{dtype}'", *LORA,
                                "rl.micro_batch_size=2", "optim.lr=1e-2"])  # fmt: skip
    torch.manual_seed(0)
    policy = setup.policy_of(config, "cpu")
    with torch.no_grad():  # B = 0 at first: adapters with a say in the forward
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2)
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.optim.lr, fused=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    learner = Learner(LearnerSettings.of(config), policy.model, None, optimizer, scheduler)
    prompt = torch.tensor([5, 6, 7])
    seqs = collate([prompt, prompt], [torch.tensor([9, 10, 11]), torch.tensor([12, 13])], 0)
    mask = seqs.token_mask
    batch = Batch(sequences=seqs, old_logp=torch.full(mask.shape, -5.0) * mask,
                  advantages=torch.tensor([[1.0], [-1.0]]) * mask, mask=mask)  # fmt: skip
    logp = token_stats(policy.model, seqs, head=learner.head).logp
    metrics = learner.update([batch], float(mask.sum()))
    return policy.model, optimizer, logp, metrics


def test_bfloat16_lora_trains_float32_adapters_over_a_bfloat16_base(tiny_model_dir):
    model, optimizer, logp, metrics = _update(tiny_model_dir, "bfloat16")
    frozen = {p.dtype for p in model.parameters() if not p.requires_grad}
    trained = [p for p in model.parameters() if p.requires_grad]
    assert frozen == {torch.bfloat16} and {p.dtype for p in trained} == {torch.float32}
    assert len(trained) == 2 * 7 * 2  # A and B, seven projections, two layers
    moments = {s[k].dtype for s in optimizer.state.values() for k in ("exp_avg", "exp_avg_sq")}
    assert moments == {torch.float32}
    assert logp.dtype == torch.float32
    assert metrics.skipped_update == 0 and metrics.grad_norm > 0
    # the same update in float32: bfloat16's 8-bit mantissa, nothing more, apart
    _, _, logp32, metrics32 = _update(tiny_model_dir, "float32")
    mask = logp32 != 0
    assert torch.allclose(logp[mask], logp32[mask], atol=0.05)
    assert metrics.loss == pytest.approx(metrics32.loss, rel=0.05)
    assert metrics.grad_norm == pytest.approx(metrics32.grad_norm, rel=0.05)
