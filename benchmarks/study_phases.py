"""What the long studies of benchmarks/ share (qwen_code_rl.py, suite_learning.py): each phase an
`execrl` command run once, its output in a log, its minutes and the load average beside it in a
record, skipped when its output is there, so an interrupted study resumes where it stopped."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def execrl() -> str:
    """The execrl of the Python running the study (the vLLM environment's, for vLLM)."""
    return str(Path(sys.executable).parent / "execrl")


def phase(name: str, cmd: list[str], log: Path, done: Path) -> dict:
    """Run cmd (unless `done` exists), its output to log; minutes and load average."""
    record = log.with_suffix(".phase.json")
    if done.exists() and record.exists():
        return json.loads(record.read_text())
    print(f"[{time.strftime('%H:%M:%S')}] {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    load_before, start = load(), time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed (exit {proc.returncode}); see {log}")
    info = {"minutes": (time.monotonic() - start) / 60, "load_before": load_before,
            "load_after": load()}  # fmt: skip
    record.write_text(json.dumps(info) + "\n")
    return info


def keep(study: dict, folder: Path | None) -> None:
    """study.json into `folder` (a committed one): a VM's scratch does not outlive it."""
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "study.json").write_text(json.dumps(study, indent=1) + "\n")


def write(study: dict, out: Path, folder: Path | None, table: Callable[[dict], str],
          plot: Callable[[dict, Path], None]) -> None:  # fmt: skip
    """The study so far: OUT/study.json, study.md (its table), study.png, and into `folder`."""
    (out / "study.json").write_text(json.dumps(study, indent=1) + "\n")
    (out / "study.md").write_text(table(study))
    plot(study, out / "study.png")
    keep(study, folder)
    print(table(study), flush=True)


def train(config: str, out: Path, name: str, seed: int, steps: int) -> dict:
    """`execrl train` of `config` as OUT/NAME (run.seed, run.steps set); its phase record and
    its per-step series."""
    run = out / name
    cmd = [execrl(), "train", "--config", config, "--set", f"run.seed={seed}",
           "--set", f"run.steps={steps}", "--set", f"run.out_dir={str(out)!r}",
           "--set", f"run.name={name!r}"]  # fmt: skip
    record = phase(f"train {name}", cmd, out / f"{name}.train.log", run / "final" / "config.json")
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return {"phase": record, "reward": [r["reward_mean"] for r in rows],
            "pass_rate": [r["pass_rate"] for r in rows],
            "generate_s": [r["time/generate_s"] for r in rows],
            "update_s": [r["time/update_s"] for r in rows],
            "kl": [r.get("kl", 0.0) for r in rows],
            "logprob_diff_mean": [r.get("engine/logprob_diff_mean") for r in rows]}  # fmt: skip
