"""Peak memory per process of `execrl train` under dist.strategy = "ddp" and "fsdp".

    python scripts/fsdp_memory.py [--hidden 768] [--layers 6] [--processes 2] [--steps 2]

Builds a random Llama of the given shape (tiny tokenizer), trains it for a few steps with each
strategy under torchrun on CPU (gloo), and prints each process's peak resident memory (ru_maxrss)
and the same less what the process held before training began (Python, torch, transformers),
with glibc's mmap threshold fixed so that freed tensors leave the resident set.
docs/engines.md keeps what it printed. Each process re-runs this file as torchrun's entry point
(`--rank-run`), which records its own peak once `execrl train` returns.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def rank_run(out: Path, args: list[str]) -> int:
    from execrl.cli import main

    before = _rss_mb()  # the imports: the same under both strategies
    code = main(args)
    rank = int(os.environ.get("RANK", "0"))
    (out / f"rank{rank}.json").write_text(json.dumps({"before_mb": before, "peak_mb": _rss_mb()}))
    return code


def build_model(directory: Path, hidden: int, layers: int) -> Path:
    from execrl.models.loading.tiny import (
        TinyLlamaShape,
        new_llama,
        save_pretrained,
        train_bpe_tokenizer,
    )

    corpus = ["def add(a, b):\n    return a + b\n", "eee eeee e", "xyz qrs"] * 10
    tokenizer = train_bpe_tokenizer(corpus, vocab_size=300)
    heads = hidden // 64
    shape = TinyLlamaShape(hidden=hidden, layers=layers, heads=heads, kv_heads=heads,
                           intermediate=hidden * 8 // 3, max_positions=256)  # fmt: skip
    model = new_llama(tokenizer, shape, seed=0)
    n = sum(p.numel() for p in model.parameters())
    print(f"model: hidden {hidden}, {layers} layers, {n / 1e6:.1f} M parameters "
          f"({n * 4 / 2**20:.0f} MiB in float32)", flush=True)  # fmt: skip
    return save_pretrained(model, tokenizer, directory)


def measure(model_dir: Path, work: Path, strategy: str, processes: int, steps: int) -> list[dict]:
    out = work / strategy
    out.mkdir()
    sets = [f"model.path={str(model_dir)!r}", f"dist.strategy={strategy!r}", f"run.steps={steps}",
            "data.n_train=8", "data.heldout=''", "rl.group_size=4", "rl.groups_per_step=2",
            "rl.dynamic_sampling=false", "rl.entropy_coef=0.01", "sampling.max_new_tokens=16",
            "sandbox.workers=1", f"run.out_dir={str(out)!r}", "run.name='run'"]  # fmt: skip
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={processes}", __file__,
               "--rank-run", str(out), "train"]  # fmt: skip
    for item in sets:
        command += ["--set", item]
    # glibc keeps large freed blocks in the heap once its mmap threshold has grown past them, so
    # resident memory would count tensors long freed (FSDP frees each gathered layer); a fixed
    # threshold maps every block over 128 KiB on its own and returns it when freed
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "131072"}
    subprocess.run(command, check=True, env=env)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(processes)]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--rank-run":
        sys.exit(rank_run(Path(sys.argv[2]), sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2)
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir = build_model(work / "model", a.hidden, a.layers)
        print("| strategy | rank | peak RSS (MiB) | peak less the start (MiB) |")
        print("| --- | --- | --- | --- |")
        for strategy in ("ddp", "fsdp"):
            for rank, m in enumerate(measure(model_dir, work, strategy, a.processes, a.steps)):
                print(f"| {strategy} | {rank} | {m['peak_mb']:.0f} | "
                      f"{m['peak_mb'] - m['before_mb']:.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
