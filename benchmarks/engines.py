"""Training steps per second with each rollout engine (`loop`, `hf`, `vllm`) in one run, on the
same model, tasks and shape, at two shapes:

- `quickstart`: what `execrl train` runs (the embedded default model, 8 prompts x 8
  completions, 40 tokens, T = 0.5, the procedural suite, the sandbox's pass-fraction reward);
- `generation`: where generation weighs most, a larger random Llama (3.3M parameters, built
  here; nothing is downloaded) with 16 prompts x 8 completions of up to 256 tokens.

Every run is `execrl.rl.run.train` with the quickstart's config and only `sampling.engine`
(and, for the second shape, the model and shape) changed; dynamic sampling is off so that
every engine trains on the same number of groups. A step's time is its own work
(`time/collect_s + time/update_s`: generation, sandbox, the update and, for vLLM, the weight
push and the trainer's recomputed log-probabilities); set-up (model load, vLLM's start) is not
counted, and the first step of each run is left out as warm-up. The engines take turns within a
shape, so a slow spell of the machine falls on all of them. Each run is a fresh process:
vLLM's CPU worker, in-process, replaces `torch.set_num_threads` with a no-op for the rest of the
process, which would carry over to the runs after it (each run reports the torch threads and
CPUs it ended with). On a crowded machine set OMP_NUM_THREADS=1: with two threads each decode
step waits on both, and a busy machine rarely gives both at once.

Needs vLLM for the `vllm` engine: run it with the vLLM environment's Python
(docs/engines.md, "vLLM as the rollout engine"), e.g.

    VLLM_CPU_KVCACHE_SPACE=1 nice -n 5 .venv-vllm/bin/python benchmarks/engines.py

vLLM runs in-process (execrl's default; `--vllm-multiprocess` for vLLM's own engine process).
The last line of stdout is JSON: per shape and engine the steps per second, the mean seconds of
generation and update per step and the mean completion length, the ratios between engines, and
the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("EXECRL_TRACKERS", "none")

ENGINES = ("loop", "hf", "vllm")
# 256 wide, 4 layers, head size 32 (vLLM's CPU attention takes it), positions for a prompt
# plus 256 tokens
GENERATION_SHAPE = dict(hidden=256, layers=4, heads=8, kv_heads=4, intermediate=768,
                        max_positions=512)  # fmt: skip


def build_random_model(directory: Path, seed: int) -> Path:
    """A random Llama of GENERATION_SHAPE with a BPE tokenizer trained on task text."""
    from execrl.models.loading.tiny import (
        TinyLlamaShape,
        new_llama,
        save_pretrained,
        train_bpe_tokenizer,
    )
    from execrl.tasks.synthetic import generate

    tasks = list(generate(seed=seed, n=200, difficulty=1, split="train"))
    corpus = [t.prompt for t in tasks] + [t.reference or "" for t in tasks]
    tokenizer = train_bpe_tokenizer(corpus, vocab_size=512)
    model = new_llama(tokenizer, TinyLlamaShape(**GENERATION_SHAPE), seed=seed)
    return save_pretrained(model, tokenizer, directory)


def shape_overrides(shape: str, model_dir: Path | None) -> list[str]:
    if shape == "quickstart":
        return []  # the defaults: embedded model, 8 x 8, 40 tokens
    return [
        f"model.path={str(model_dir)!r}", "model.chat='off'", "rl.group_size=8",
        "rl.groups_per_step=16", "sampling.groups_per_generate=16",
        "sampling.max_new_tokens=256",
    ]  # fmt: skip


def run_engine(engine: str, shape: str, steps: int, model_dir: Path | None, out: Path) -> dict:
    from execrl.rl.config.config import load_config
    from execrl.rl.run import train

    config = load_config(None, shape_overrides(shape, model_dir) + [
        f"run.out_dir={str(out)!r}", f"run.name={engine!r}", f"run.steps={steps}",
        "data.heldout=''", "rl.dynamic_sampling=false", f"sampling.engine={engine!r}",
        "run.trackers='none'",
    ])  # fmt: skip
    import torch

    start = time.perf_counter()
    train(config, quiet=True)
    took = time.perf_counter() - start
    threads, cpus = torch.get_num_threads(), len(os.sched_getaffinity(0))
    rows = [json.loads(x) for x in (out / engine / "metrics.jsonl").read_text().splitlines()]
    timed = rows[1:] if len(rows) >= 2 else rows  # the first step warms up
    step_s = [r["time/collect_s"] + r["time/update_s"] for r in timed]
    return {
        "steps_per_s": round(len(step_s) / sum(step_s), 4),
        "generate_s": round(statistics.fmean(r["time/generate_s"] for r in timed), 3),
        "update_s": round(statistics.fmean(r["time/update_s"] for r in timed), 3),
        "len_mean": round(statistics.fmean(r["len_mean"] for r in timed), 1),
        "step_s": [round(s, 3) for s in step_s],
        "wall_s_with_setup": round(took, 1),
        "torch_threads_after": threads,  # what the update ran with, at the end of the run
        "cpus_after": cpus,  # the CPUs this process may run on then
    }


def run_in_child(engine: str, shape: str, steps: int, model_dir: Path | None, out: Path,
                 multiprocess: bool) -> dict:  # fmt: skip
    """`run_engine` in a fresh process (see the module docstring); its last stdout line."""
    command = [sys.executable, __file__, "--child", engine, shape, str(steps),
               str(model_dir or ""), str(out)] + (["--vllm-multiprocess"] if multiprocess else [])  # fmt: skip
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {engine} run at the {shape} shape failed ({done.returncode}); "
                         f"its error is above")  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def ratios(results: dict[str, dict]) -> dict[str, float]:
    rate = {name: r["steps_per_s"] for name, r in results.items()}
    pairs = [("vllm", "loop"), ("vllm", "hf"), ("hf", "loop")]
    return {f"{a}/{b}": round(rate[a] / rate[b], 3) for a, b in pairs if a in rate and b in rate}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engines", default=",".join(ENGINES), help="comma-separated")
    p.add_argument("--shapes", default="quickstart,generation", help="comma-separated")
    p.add_argument("--quickstart-steps", type=int, default=6, help="steps per run (1 warm-up)")
    p.add_argument("--generation-steps", type=int, default=3, help="steps per run (1 warm-up)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vllm-multiprocess", action="store_true",
                   help="vLLM's own engine process instead of in-process")  # fmt: skip
    p.add_argument("--child", nargs=5, help=argparse.SUPPRESS)  # engine shape steps model out
    args = p.parse_args(argv)
    if args.vllm_multiprocess:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1"
    if args.child:
        engine, shape, steps, model_dir, out = args.child
        model = Path(model_dir) if model_dir else None
        print(json.dumps(run_engine(engine, shape, int(steps), model, Path(out))))
        return 0
    engines = [e for e in args.engines.split(",") if e]
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = sorted(set(engines) - set(ENGINES)) + sorted(
        set(shapes) - {"quickstart", "generation"}
    )
    if unknown:
        p.error(f"unknown engine or shape: {', '.join(unknown)}")
    load_before = os.getloadavg()
    summary: dict = {"shapes": {}}
    with tempfile.TemporaryDirectory(prefix="execrl-engines-bench-") as tmp:
        for shape in shapes:
            random_dir = Path(tmp) / "model"
            model_dir = None if shape == "quickstart" else build_random_model(random_dir, args.seed)
            steps = args.quickstart_steps if shape == "quickstart" else args.generation_steps
            results = {}
            for engine in engines:
                r = run_in_child(engine, shape, steps, model_dir, Path(tmp) / shape,
                                 args.vllm_multiprocess)  # fmt: skip
                results[engine] = r
                print(
                    f"{shape:10s} {engine:4s}: {r['steps_per_s']:.3f} steps/s (step seconds "
                    f"{', '.join(f'{s:.2f}' for s in r['step_s'])}; generation "
                    f"{r['generate_s']:.2f} s, update {r['update_s']:.2f} s a step; "
                    f"{r['len_mean']:.0f} tokens a completion; {r['wall_s_with_setup']:.0f} s "
                    f"with set-up; {r['torch_threads_after']} torch threads on "
                    f"{r['cpus_after']} CPUs; load {os.getloadavg()[0]:.1f})",
                    file=sys.stderr,
                    flush=True,
                )
            summary["shapes"][shape] = {"engines": results, "ratios": ratios(results)}
    summary.update(
        vllm_multiprocess=args.vllm_multiprocess,
        omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
        loadavg_before=[round(x, 2) for x in load_before],
        loadavg_after=[round(x, 2) for x in os.getloadavg()],
        cpus=os.cpu_count(),
    )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":  # vLLM's spawned processes import this file: keep the guard
    sys.exit(main())
