"""`execrl plan`'s figures against the peak memory that `execrl train` reaches on a CPU.

Each run is `execrl train` for a few steps in a fresh process (or two, under torchrun), on the
embedded default and on a random Llama built here (nothing is downloaded), and its peak resident
set size is read from the kernel when it ends (`os.wait4`: the largest of the process and the
processes it reaped, so under torchrun the largest rank; the sandbox workers are smaller).

On a CPU the resident set holds much besides the model: the Python runtime, torch, transformers,
the tasks, the tokenizer, the sandbox's pools. So every run is paired with a "floor" run of the
same command on a model of one 16-wide layer (the same tokenizer, tasks, settings, processes),
whose model-dependent memory the plan puts under 1 MB: the floor's peak is that runtime, and
"measured" below is a run's peak less its floor's. "planned" is `execrl plan --json`'s peak for
the same config (`--reserve 0B`: no CUDA context) less the floor's plan. The prompt length the
plan is given is the longest training prompt in the model's tokens, the completion length
the longest completion the run logged (metrics.jsonl's len_max): upper bounds of the widest
micro-batch.

    OMP_NUM_THREADS=1 nice -n 15 .venv/bin/python benchmarks/memory_plan_check.py

The last line of stdout is JSON, with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from execrl.models.loading.tiny import TinyLlamaShape

# ~14M parameters: states (226 MB in fp32) and activations of one micro-batch (~0.4 GB) both
# well above the runtime's run-to-run noise
LLAMA = TinyLlamaShape(hidden=384, layers=8, heads=6, kv_heads=3, intermediate=1152)
FLOOR = TinyLlamaShape(hidden=16, layers=1, heads=1, kv_heads=1, intermediate=16)
STATES = ("params", "grads", "optimizer (AdamW moments)", "reference", "all-reduce buffer")
# a step of 4 prompts x 4 completions, one micro-batch of 16, no held-out evaluation; every
# group trains (a random model passes nothing: DAPO's filter would leave no update to measure)
SHAPE = ["rl.group_size=4", "rl.groups_per_step=4", "rl.micro_batch_size=16",
         "sampling.groups_per_generate=4", "data.heldout=''", "sandbox.workers=1",
         "run.trackers='none'", "rl.dynamic_sampling=false"]  # fmt: skip


@dataclass(frozen=True)
class Case:
    name: str
    model: str  # "default", or LLAMA's key in the built models
    processes: int
    extra: tuple[str, ...] = ()


CASES = (
    Case("default", "default", 1),
    Case("llama-14m", "llama", 1),
    Case("llama-14m, micro-batch 4", "llama", 1, ("rl.micro_batch_size=4",)),
    Case("llama-14m, kl_coef 0.05 (reference copy)", "llama", 1, ("rl.kl_coef=0.05",)),
    Case("llama-14m, LoRA r=8 (q, k, v, o)", "llama", 1, ("model.lora_r=8",)),
    # two chunks of 2 groups, one to each process (`rl.rollout.groups`): each trains on 8 sequences
    Case("llama-14m, ddp", "llama", 2, ("sampling.groups_per_generate=2",)),
)

# the DDP case sharded instead: the plan reads dist.strategy from the config it is given
FSDP = Case(
    "llama-14m, fsdp", "llama", 2, ("sampling.groups_per_generate=2", "dist.strategy='fsdp'")
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--no-ddp", action="store_true", help="skip the torchrun runs")
    p.add_argument("--fsdp", action="store_true", help="also the DDP case with dist.strategy = "
                   "'fsdp' (FSDP2, issue 31 items 1-3: an execrl without [dist] refuses it)")  # fmt: skip
    args = p.parse_args()
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="execrl-memcheck-") as tmp:
        models = _build_models(Path(tmp))
        floors: dict[tuple, tuple[int, dict]] = {}  # (processes, extra) -> the floor's figures
        for case in CASES + (FSDP,) * args.fsdp:
            if case.processes > 1 and args.no_ddp:
                continue
            key = (case.processes, case.extra)
            if key not in floors:
                floor = Case("floor", "floor", case.processes, case.extra)
                floors[key] = _measure(floor, models, Path(tmp), args.steps)
            measured, planned = _measure(case, models, Path(tmp), args.steps)
            floor_measured, floor_planned = floors[key]
            planned_by = {c["name"]: c["device_bytes"] for c in planned["components"]}
            rows.append({"run": case.name, "processes": case.processes, "peak_rss": measured,
                         "floor_rss": floor_measured, "measured": measured - floor_measured,
                         "planned": planned["peak_bytes"] - floor_planned["peak_bytes"],
                         "planned_states": sum(planned_by.get(n, 0) for n in STATES),
                         "planned_activations": planned_by["activations"]})  # fmt: skip
            _print_row(rows[-1])
    print(json.dumps({"rows": rows, "load_before": load_before, "load_after": os.getloadavg()}))


def _build_models(tmp: Path) -> dict[str, str]:
    """The random Llama and the floor model, with the embedded default's tokenizer."""
    from transformers import AutoTokenizer

    from execrl.models.loading.default import ensure_default_model
    from execrl.models.loading.tiny import new_llama, save_pretrained

    tokenizer = AutoTokenizer.from_pretrained(ensure_default_model())
    built = {"default": "default"}
    for name, shape in (("llama", LLAMA), ("floor", FLOOR)):
        directory = tmp / name
        save_pretrained(new_llama(tokenizer, shape), tokenizer, directory)
        built[name] = str(directory)
    return built


def _measure(case: Case, models: dict[str, str], tmp: Path, steps: int) -> tuple[int, dict]:
    """(peak RSS in bytes of `execrl train`, `execrl plan --json`'s answer) for `case`."""
    runs = tmp / "runs"
    name = f"run{len(list(runs.glob('*'))) if runs.is_dir() else 0}"
    overrides = [*SHAPE, f"run.steps={steps}", f"model.path={models[case.model]!r}",
                 f"run.out_dir={str(runs)!r}", f"run.name={name!r}", *case.extra]  # fmt: skip
    sets = [arg for o in overrides for arg in ("--set", o)]
    train = [sys.executable, "-m", "execrl.cli", "train", *sets]
    if case.processes > 1:  # torchrun, as the python module it is
        train[1:2] = ["-m", "torch.distributed.run", "--standalone",
                      f"--nproc_per_node={case.processes}", "-m"]  # fmt: skip
    peak = _peak_rss(train)
    # the completions' length as sampled (the longest), the prompts' as the longest there is
    metrics = (runs / name / "metrics.jsonl").read_text().splitlines()
    completion = max(json.loads(line)["len_max"] for line in metrics)
    plan = subprocess.run(
        [sys.executable, "-m", "execrl.cli", "plan", "--config", _defaults_file(tmp), *sets,
         "--devices", str(case.processes), "--reserve", "0B", "--completion-tokens",
         str(completion), "--prompt-tokens", str(_longest_prompt(models[case.model])), "--json"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return peak, json.loads(plan.stdout)


def _peak_rss(argv: list[str]) -> int:
    """The peak resident set of `argv`'s process tree (its largest process), in bytes."""
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    start = time.time()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({child.returncode}):\n{err.decode()[-3000:]}")
    print(f"  {' '.join(argv[1:8])} ... {time.time() - start:.0f} s", file=sys.stderr)
    return usage.ru_maxrss * 1024  # Linux reports kilobytes


def _defaults_file(tmp: Path) -> str:
    """An empty config: `execrl plan --set` needs one to change."""
    path = tmp / "defaults.toml"
    path.write_text("")
    return str(path)


def _longest_prompt(model: str) -> int:
    """The longest training prompt of the default tasks in `model`'s tokens."""
    from transformers import AutoTokenizer

    from execrl.models.loading.default import ensure_default_model, synthetic_tasks
    from execrl.models.prompting.prompting import with_signature_prompts

    directory = ensure_default_model() if model == "default" else model
    tokenizer = AutoTokenizer.from_pretrained(directory)
    tasks = with_signature_prompts(synthetic_tasks(seed=0, n=800, difficulty=1, split="train"))
    return max(len(tokenizer(t.prompt)["input_ids"]) for t in tasks)


def _print_row(row: dict) -> None:
    mb = lambda n: f"{n / 2**20:5.0f} MiB"  # noqa: E731
    print(f"{row['run']:<42} x{row['processes']}  peak RSS {mb(row['peak_rss'])}  floor "
          f"{mb(row['floor_rss'])}  measured {mb(row['measured'])}  planned {mb(row['planned'])}"
          f" (states {mb(row['planned_states'])}, activations {mb(row['planned_activations'])})",
          flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
