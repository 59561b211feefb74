"""Generation speed of `execrl eval`'s engines on one model, in one run, beside the floor.

Runs `execrl eval --engine E` (greedy, EvalPlus's instruct prompt) on the first N HumanEval tasks
for each engine asked, in a fresh process each, and reads the generation time the command
prints; counts the generated tokens with the model's tokenizer; measures this machine's memory
bandwidth (a copy of 1 GiB, read + write) and gives the decoding floor: each decoding step reads
the weights once, so one sequence cannot go faster than bandwidth / weight bytes tokens a second
(a batch of B sequences shares the read). Prints a table and writes JSON.

    .venv-vllm/bin/python benchmarks/eval_engines_speed.py --model qwen2.5-coder-0.5b-instruct \\
        --tasks 16 --engines loop:float32,vllm:float32,vllm:bfloat16 --out speed.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

GENERATED = re.compile(r"generated (\d+) samples .* in .*, ([0-9.]+) s")


def bandwidth_gbs(gib: float = 1.0, repeats: int = 5) -> float:
    """Best of `repeats` copies of `gib` GiB: bytes read plus written per second, in GB/s."""
    n = int(gib * 2**30 / 4)
    src, dst = torch.ones(n), torch.empty(n)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - start)
    return 2 * n * 4 / best / 1e9


def weight_bytes(model_dir: Path, dtype: str) -> int:
    """The bytes one decoding step reads: every parameter once, in the engine's dtype."""
    from safetensors import safe_open

    count = 0
    for shard in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(shard), "pt") as f:
            for name in f.keys():  # noqa: SIM118 (safe_open has no iterator)
                count += math.prod(f.get_slice(name).get_shape())
    return count * {"float32": 4, "bfloat16": 2, "float16": 2}[dtype]


def run_engine(model: str, engine: str, dtype: str, tasks: int, max_new: int, out: Path) -> dict:
    command = [sys.executable, "-m", "execrl.cli", "eval", "--model", model, "--benchmark",
               "humaneval", "--limit", str(tasks), "--prompt", "evalplus", "--engine", engine,
               "--dtype", dtype, "--max-new-tokens", str(max_new), "--out-dir", str(out),
               "--restart", "--workers", "1", "--json"]  # fmt: skip
    load_before = os.getloadavg()[0]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{engine}/{dtype} failed:\n{done.stderr[-3000:]}")
    match = GENERATED.search(done.stderr)
    assert match is not None, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())  # vLLM logs to stdout too
    return {
        "engine": engine, "dtype": dtype, "samples": int(match.group(1)),
        "seconds": float(match.group(2)), "pass@1": summary.get("pass@1"),
        "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "raws": [json.loads(line)["raw"] for line in (out / "samples.jsonl").open()],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=768)
    parser.add_argument("--engines", default="loop:float32,vllm:float32,vllm:bfloat16")
    parser.add_argument("--out", type=Path, default=Path("eval_engines_speed.json"))
    args = parser.parse_args()
    from execrl.models.loading.loading import load_tokenizer, resolve_model_path

    model_dir = Path(resolve_model_path(args.model)[0])
    tokenizer = load_tokenizer(args.model)
    bandwidth = bandwidth_gbs()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.engines.split(","):
            engine, dtype = spec.split(":")
            row = run_engine(args.model, engine, dtype, args.tasks, args.max_new_tokens,
                             Path(tmp) / spec.replace(":", "-"))  # fmt: skip
            raws = row.pop("raws")
            row["tokens"] = sum(len(tokenizer(r)["input_ids"]) for r in raws)
            row["tokens_per_s"] = row["tokens"] / row["seconds"]
            floor = bandwidth * 1e9 / weight_bytes(model_dir, dtype)  # tokens/s, one sequence
            row["one_sequence_floor_tokens_per_s"] = floor
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\nmemory bandwidth {bandwidth:.1f} GB/s (copy, read + write); {args.tasks} HumanEval "
          f"tasks, greedy, EvalPlus's prompt")  # fmt: skip
    print(f"{'engine':8} {'dtype':9} {'tokens':>7} {'seconds':>8} {'tok/s':>7} "
          f"{'floor(1 seq)':>12} {'pass@1':>7} load")  # fmt: skip
    for r in rows:
        print(f"{r['engine']:8} {r['dtype']:9} {r['tokens']:7d} {r['seconds']:8.1f} "
              f"{r['tokens_per_s']:7.1f} {r['one_sequence_floor_tokens_per_s']:12.1f} "
              f"{r['pass@1']:7.3f} {r['load']}")  # fmt: skip
    args.out.write_text(json.dumps({"bandwidth_gbs": bandwidth, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
