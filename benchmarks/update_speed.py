"""The policy update's speed and memory on this CPU against torch's own matmul rate.

(a) torch's matmul throughput here, float32 and bfloat16, on the shapes of Qwen2.5-Coder-0.5B's
projections and LM head (`F.linear`, as the model calls them), and their mix as one layer and
the head weigh in the update. (b) One step's update of a Qwen2.5-Coder-0.5B-shaped model (random
weights from its config: 24 layers, hidden 896, vocabulary 151,936, untied head; or --model PATH)
with LoRA r=16 on all seven projections, on `--prompts` x `--samples` rows (prompt `--prompt`
tokens, completions of random lengths up to `--completion`), through `execrl train`'s own batch
builder and Learner, as a vLLM-sampled step (behaviour log-probs from another engine):

- before: the unoptimised path: rl.logprob_head = "full" and pi_old from a no-grad forward of
  every row (the batch builder's `recompute_old`);
- after: the fused LM head + log-softmax (`rl.objective.fused_head`), pi_old from the update's
  forward.

Each variant runs in a fresh process (its own peak resident memory, `rl.parallel.memory`). Useful
work is counted the same for both, as 2 * params * tokens forward and, with the base frozen, 2 *
params * tokens for the input gradients plus 2 * LoRA params * tokens for the adapters' own: decoder
params over the tokens the decoder must see (each micro-batch's shared prompt once, the real
completion tokens), the head's over the real completion tokens. Padding and the extra forward are
not useful work: they show as a lower rate. Run from the repository root:

    nohup .venv/bin/python benchmarks/update_speed.py > update_speed.log 2>&1 &
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HIDDEN, INTERMEDIATE, KV = 896, 4864, 128  # Qwen2.5-Coder-0.5B: 14 heads of 64, 2 KV heads
VOCAB, LAYERS = 151_936, 24
SEVEN = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# (K, N) of each matmul of one layer, x (M, K) @ W^T (K, N), and the head
LAYER_SHAPES = {"q_proj": (HIDDEN, HIDDEN), "k_proj": (HIDDEN, KV), "v_proj": (HIDDEN, KV),
                "o_proj": (HIDDEN, HIDDEN), "gate_proj": (HIDDEN, INTERMEDIATE),
                "up_proj": (HIDDEN, INTERMEDIATE), "down_proj": (INTERMEDIATE, HIDDEN)}  # fmt: skip
HEAD_CHUNK = 220  # positions of one fused-head chunk (`fused_head.chunk_positions`)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def matmul_rates(tokens: int, seconds: float) -> dict:
    """GFLOP/s of F.linear per dtype: each shape, and the mix of one layer plus the head."""
    import torch
    import torch.nn.functional as F

    out = {}
    shapes = {**LAYER_SHAPES, "lm_head": (HIDDEN, VOCAB)}
    for dtype in (torch.float32, torch.bfloat16):
        rates, flops_total, time_total = {}, 0.0, 0.0
        for name, (k, n) in shapes.items():
            m = HEAD_CHUNK if name == "lm_head" else tokens
            x, w = torch.randn(m, k, dtype=dtype), torch.randn(n, k, dtype=dtype)
            F.linear(x, w)  # warm-up: the kernel's first call
            reps, start = 0, time.perf_counter()
            while reps < 2 or time.perf_counter() - start < seconds:
                F.linear(x, w)
                reps += 1
            elapsed = (time.perf_counter() - start) / reps
            flops = 2.0 * m * k * n
            rates[name] = flops / elapsed / 1e9
            # the mix: a layer's seven matmuls over `tokens`, the head over as many positions
            weight = tokens / m
            flops_total += weight * flops
            time_total += weight * elapsed
        out[str(dtype).removeprefix("torch.")] = {"shapes": rates,
                                                  "mix": flops_total / time_total / 1e9}  # fmt: skip
    return out


def _model(args: argparse.Namespace, dtype: str):
    """The policy as `execrl train` builds it: the base in `dtype`, LoRA r=16 on SEVEN."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

    from execrl.models import LoraSpec
    from execrl.models.loading.loading import _with_lora

    torch.manual_seed(0)
    if args.model:
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=getattr(torch, dtype))
    else:
        config = Qwen2Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
                             num_hidden_layers=LAYERS, num_attention_heads=14,
                             num_key_value_heads=2, max_position_embeddings=32768,
                             rope_theta=1e6, tie_word_embeddings=False, dtype=dtype)  # fmt: skip
        model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.train()
    return _with_lora(model, LoraSpec(16, 32, 0.0, SEVEN))


def _groups(args: argparse.Namespace, vocab: int):
    """`prompts` groups of `samples` scored rows: random tokens, rewards 0/1, mu = -1."""
    import torch

    from execrl.models.engines.sampling import Completion
    from execrl.rewards.result import RewardResult
    from execrl.rewards.scoring.scorer import build_sample
    from execrl.rl.rollout.scored import Scored
    from execrl.tasks import CallTests, Task

    task = Task(id="t", prompt="Write f.", tests=CallTests(((1,),), (2,)), entry_point="f")
    g = torch.Generator().manual_seed(0)
    groups = []
    for _ in range(args.prompts):
        prompt = torch.randint(3, vocab, (args.prompt,), generator=g)
        group = []
        for j in range(args.samples):
            n = int(torch.randint(args.completion // 4, args.completion + 1, (1,), generator=g))
            tokens = torch.randint(3, vocab, (n,), generator=g)
            completion = Completion(0, "x", prompt, tokens, torch.full((n,), -1.0), "eos")
            group.append(
                Scored.answer(0, completion, RewardResult(float(j % 2)), build_sample(task, "x"))
            )
        groups.append(group)
    return groups


def one(args: argparse.Namespace) -> dict:
    """In this process: one step's batch building and update of one variant."""
    import dataclasses

    import torch

    from execrl.rl.config.config import load_config
    from execrl.rl.parallel.memory import memory_metrics
    from execrl.rl.update.batch_builder import BatchBuilder
    from execrl.rl.update.batch_rows import model_terms
    from execrl.rl.update.learner_settings import LearnerSettings
    from execrl.rl.update.trainer import Learner

    def peak_gib() -> float:
        return memory_metrics(torch.device("cpu"))["mem/peak_rss_gib"]

    dtype, variant = args.one.split(":")
    model = _model(args, dtype)
    vocab = model.get_output_embeddings().weight.shape[0]
    head = "full" if variant == "before" else "fused"
    config = load_config(None, ["sampling.engine='vllm'", f"rl.group_size={args.samples}",
                                f"rl.micro_batch_size={args.micro_batch}",
                                f"rl.logprob_head='{head}'", "sampling.temperature=1.0"],
                         this_machine=False)  # fmt: skip
    settings = LearnerSettings.of(config)
    settings = dataclasses.replace(settings, old_from_update=variant == "after")
    groups = _groups(args, vocab)
    loaded = peak_gib()
    start = time.perf_counter()
    terms = model_terms(model, None, None, settings.temperature, settings.logprob_head)
    built = BatchBuilder(settings, terms, 0, torch.device("cpu")).build(groups)
    build_s = time.perf_counter() - start
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5, fused=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    learner = Learner(settings, model, None, optimizer, scheduler)
    start = time.perf_counter()
    metrics = learner.update(built.batches, float(sum(b.mask.sum() for b in built.batches)))
    update_s = time.perf_counter() - start
    return {"build_s": build_s, "update_s": update_s, "step_s": build_s + update_s,
            "flops": _useful_flops(model, built.batches), "loaded_gib": loaded,
            "peak_gib": peak_gib(), "loss": metrics.loss, "grad_norm": metrics.grad_norm,
            "head": learner.head}  # fmt: skip


def _useful_flops(model, batches) -> float:
    """The module docstring's count over the step's micro-batches."""
    head = model.get_output_embeddings().weight.numel()
    embed = model.get_input_embeddings().weight.numel()
    lora = sum(p.numel() for p in model.parameters() if p.requires_grad)
    decoder = sum(p.numel() for p in model.parameters()) - head - embed - lora
    total = 0.0
    for b in batches:
        completion = float(b.sequences.token_mask.sum())
        shared = b.sequences.shared
        prompts = shared.attention_mask if shared is not None else b.sequences.attention_mask
        prompt = float(prompts[:, : b.sequences.prompt_width].sum())
        tokens = prompt + completion
        total += 4 * (decoder + lora) * tokens + 2 * lora * tokens + 4 * head * completion
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="", help="a converted model directory (default: "
                        "random weights of Qwen2.5-Coder-0.5B's shape)")  # fmt: skip
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=150)
    parser.add_argument("--completion", type=int, default=384)
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--variants", default="float32:before,float32:after,bfloat16:before,"
                        "bfloat16:after", help="dtype:before|after, comma-separated")  # fmt: skip
    parser.add_argument("--matmul-tokens", type=int, default=1024)
    parser.add_argument("--matmul-seconds", type=float, default=3.0, help="per shape and dtype")
    parser.add_argument("--json", default="update_speed.json")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return
    loads = [load_average()]
    rates = matmul_rates(args.matmul_tokens, args.matmul_seconds)
    loads.append(load_average())
    rows = {}
    for variant in args.variants.split(","):
        cmd = [sys.executable, __file__, "--one", variant, "--prompts", str(args.prompts),
               "--samples", str(args.samples), "--prompt", str(args.prompt), "--completion",
               str(args.completion), "--micro-batch", str(args.micro_batch),
               *(["--model", args.model] if args.model else [])]  # fmt: skip
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ)
        rows[variant] = json.loads(out.stdout.strip().splitlines()[-1])
        loads.append(load_average())
        print(variant, rows[variant], flush=True)
    _table(args, rates, rows, loads)
    Path(args.json).write_text(json.dumps({"matmul": rates, "update": rows, "load": loads,
                                           "args": vars(args)}, indent=1))  # fmt: skip


def _table(args: argparse.Namespace, rates: dict, rows: dict, loads: list[str]) -> None:
    print(f"\nmatmul (F.linear, {args.matmul_tokens} tokens; lm_head {HEAD_CHUNK} positions), "
          "GFLOP/s:")  # fmt: skip
    names = list(next(iter(rates.values()))["shapes"])
    print("| dtype | " + " | ".join(names) + " | layer + head mix |")
    print("|---" * (len(names) + 2) + "|")
    for dtype, r in rates.items():
        cells = " | ".join(f"{r['shapes'][n]:.1f}" for n in names)
        print(f"| {dtype} | {cells} | {r['mix']:.1f} |")
    print(f"\nupdate: {args.prompts} prompts x {args.samples} samples, prompt {args.prompt}, "
          f"completions <= {args.completion}, micro-batch {args.micro_batch}, LoRA r=16 x 7")  # fmt: skip
    print("| variant | head | pi_old forward (s) | update (s) | step (s) | useful GFLOP/s "
          "| of the matmul mix | peak RSS (GiB) | loss |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for variant, r in rows.items():
        rate = r["flops"] / r["step_s"] / 1e9
        mix = rates[variant.split(":")[0]]["mix"]
        print(f"| {variant} | {r['head']} | {r['build_s']:.1f} | {r['update_s']:.1f} "
              f"| {r['step_s']:.1f} | {rate:.1f} | {rate / mix:.0%} | {r['peak_gib']:.2f} "
              f"| {r['loss']:.5f} |")  # fmt: skip
    print(f"\nload average (1, 5, 15 min) at start, after the matmuls, after each variant: "
          f"{'; '.join(loads)}")  # fmt: skip


if __name__ == "__main__":
    main()
