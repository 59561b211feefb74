"""The update's memory with and without activation checkpointing, on a real model, on a CPU.

One micro-batch of `--rows` sequences (one prompt of `--prompt` tokens repeated, as GRPO's
groups repeat it, and completions of `--completion` tokens), through `execrl train`'s own
set-up (`rl.setup.build`) and one `Learner.update`, each setting in a fresh process so its
peak resident memory (`rl.parallel.memory`, as each training step logs it) is its own. Prints a
table and, last, a JSON line with the load average. Run from the repository root:

    .venv/bin/execrl models get smollm2-135m-instruct   # once
    .venv/bin/python benchmarks/update_memory.py --model smollm2-135m-instruct

(docs/engines.md's figures are of the MBPP warm-up, `runs/smollm2-mbpp/warmup/final`: the
same shapes.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def one(args: argparse.Namespace) -> dict:
    """In this process: build the learner, run one update, report its peak."""
    import torch

    from execrl.rl import setup
    from execrl.rl.config.config import load_config
    from execrl.rl.objective.logprobs import collate
    from execrl.rl.objective.losses import Batch
    from execrl.rl.parallel.memory import memory_metrics

    def peak_gib() -> float:
        return memory_metrics(torch.device("cpu"))["mem/peak_rss_gib"]

    overrides = [f"model.path='{args.model}'", f"rl.micro_batch_size={args.rows}",
                 f"dist.activation_checkpointing={str(args.checkpointing).lower()}",
                 f"model.lora_r={args.lora_r}", "sampling.engine='hf'"]  # fmt: skip
    config = load_config(None, overrides)
    built = setup.build(config, None, [])  # the default training set: the procedural suite
    loaded = peak_gib()
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(3, 1000, (args.prompt,), generator=g)
    completions = [
        torch.randint(3, 1000, (args.completion,), generator=g) for _ in range(args.rows)
    ]
    seqs = collate([prompt] * args.rows, completions, built.policy.tokenizer.pad_token_id)
    mask = seqs.token_mask.float()
    batch = Batch(sequences=seqs, old_logp=torch.full(mask.shape, -2.0) * mask,
                  advantages=torch.randn(mask.shape, generator=g) * mask, mask=mask)  # fmt: skip
    start = time.perf_counter()
    built.learner.update([batch], float(mask.sum()))
    seconds = time.perf_counter() - start
    peak = peak_gib()
    return {"loaded_gib": loaded, "peak_gib": peak, "update_peak_gib": peak - loaded,
            "update_s": seconds}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=150)
    parser.add_argument("--completion", type=int, default=320)
    parser.add_argument("--lora-r", type=int, default=0)
    parser.add_argument("--checkpointing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return
    rows, loads = {}, [load_average()]
    for checkpointing in (False, True):
        cmd = [sys.executable, __file__, "--one", "--model", args.model, "--rows", str(args.rows),
               "--prompt", str(args.prompt), "--completion", str(args.completion),
               "--lora-r", str(args.lora_r)] + (["--checkpointing"] if checkpointing else [])  # fmt: skip
        out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})  # fmt: skip
        rows["on" if checkpointing else "off"] = json.loads(out.stdout.strip().splitlines()[-1])
        loads.append(load_average())
    print(f"{args.rows} rows x ({args.prompt} prompt + {args.completion} completion) tokens, "
          f"LoRA r={args.lora_r}")  # fmt: skip
    print(
        "| activation checkpointing | resident after load (GiB) | peak (GiB) | update adds (GiB) | update (s) |"
    )
    print("| --- | --- | --- | --- | --- |")
    for name, r in rows.items():
        print(f"| {name} | {r['loaded_gib']:.2f} | {r['peak_gib']:.2f} | {r['update_peak_gib']:.2f} "
              f"| {r['update_s']:.1f} |")  # fmt: skip
    print(json.dumps({"rows": rows, "load": loads}))


if __name__ == "__main__":
    main()
