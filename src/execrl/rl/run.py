"""A whole training run: set-up, the step loop, held-out pass@1 before and after, checkpoints.

The run directory holds `config.toml` (resolved), `metrics.jsonl` (one line per step),
`checkpoint/state.pt` (everything `--resume` needs), `final/` (the policy in Hugging Face
format) and `summary.json`.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from execrl.models import LoraSpec, SamplingParams, encode_prompts, load_policy, reference_from
from execrl.models.prompting import with_signature_prompts
from execrl.rl import dist
from execrl.rl.config import TrainConfig, load_config, to_toml
from execrl.rl.metrics import MetricsLog, step_metrics
from execrl.rl.prompts import PromptSampler
from execrl.rl.rollout import Rollouts, RolloutTimes, gather_chunks
from execrl.rl.trainer import Learner, collect
from execrl.tasks.schema import Task


@dataclass
class Setup:
    config: TrainConfig
    run_dir: Path
    policy: Any
    learner: Learner
    sampler: PromptSampler
    tasks: list[Task]
    heldout: list[Task]


class StepObserver(Protocol):
    """What watches a run from above this layer (the report layer's telemetry)."""

    def step(self, row: dict[str, Any], collected: Any) -> None: ...

    def end(self, summary: dict[str, Any]) -> Any: ...


# (run_dir, config, training tasks, first step, whether this process reports) -> observer
ObserverFactory = Callable[[Path, TrainConfig, list[Task], int, bool], StepObserver]


class _Unobserved:
    def step(self, row: dict[str, Any], collected: Any) -> None:
        return None

    def end(self, summary: dict[str, Any]) -> None:
        return None


def train(config: TrainConfig, *, tasks: list[Task] | None = None, heldout: list[Task] | None = None,
          reward: Any = None, quiet: bool = False,
          observer: ObserverFactory | None = None) -> dict[str, Any]:  # fmt: skip
    """Run the training `config` describes; returns the summary (also written to summary.json).
    `observer` builds what is told of each step and of the end (`execrl train` passes the
    report layer's telemetry: trackers, example completions, the report)."""
    from execrl.sandbox import Limits, Sandbox

    start = time.time()
    dist.init_from_env()
    log = (
        (lambda msg: None)
        if quiet or dist.rank()
        else (lambda msg: print(msg, file=sys.stderr, flush=True))
    )
    s = _setup(config, tasks, heldout)
    c = s.config
    reward = reward if reward is not None else make_reward(c.rl.reward)
    first_step = _resume(s) if c.run.resume else 0
    metrics = MetricsLog(
        s.run_dir / "metrics.jsonl", keep_steps=first_step, enabled=dist.rank() == 0
    )
    make = observer or (lambda *_: _Unobserved())
    telemetry = make(s.run_dir, c, s.tasks, first_step, dist.rank() == 0)
    with Sandbox(workers=c.sandbox.workers) as sandbox:
        limits = Limits(wall_s=c.sandbox.wall_s)
        tok = s.policy.tokenizer
        chat = {"auto": None, "on": True, "off": False}[c.model.chat]
        train_ids = encode_prompts(tok, [t.prompt for t in s.tasks], chat=chat)
        params = SamplingParams(c.sampling.temperature, c.sampling.top_p, c.sampling.max_new_tokens,
                                tuple(c.sampling.stop))  # fmt: skip
        rollouts = Rollouts(s.policy.model, tok, s.tasks, train_ids, reward, sandbox, params, limits,
                            c.run.seed, c.sampling.groups_per_generate)  # fmt: skip
        summary: dict[str, Any] = {}
        try:
            if s.heldout and first_step == 0:
                summary["heldout_pass@1_before"] = evaluate(s, sandbox, limits, reward, chat)
                log(f"held-out pass@1 before: {summary['heldout_pass@1_before']:.3f}")
            progress = _progress(c.run.steps, first_step, quiet or dist.rank() != 0)
            for step in range(first_step, c.run.steps):
                t0 = time.perf_counter()
                got = collect(s.sampler, rollouts, c, step)
                t1 = time.perf_counter()
                update = s.learner.update(got.local, got.summaries)
                row = step_metrics(step, got, update, t1 - t0, time.perf_counter() - t1)
                metrics.write(row)
                telemetry.step(row, got)
                progress(row)
                if c.run.checkpoint_every and (step + 1) % c.run.checkpoint_every == 0:
                    save_checkpoint(s, step + 1)
            save_checkpoint(s, c.run.steps)
            if s.heldout:
                summary["heldout_pass@1_after"] = evaluate(s, sandbox, limits, reward, chat)
                log(f"held-out pass@1 after: {summary['heldout_pass@1_after']:.3f}")
        finally:
            rollouts.close()
    summary.update(steps=c.run.steps, seconds=round(time.time() - start, 1), run_dir=str(s.run_dir),
                   reward_first=metrics.first("reward_mean"), reward_last=metrics.last("reward_mean"))  # fmt: skip
    if dist.rank() == 0:
        s.policy.model.save_pretrained(s.run_dir / "final")
        s.policy.tokenizer.save_pretrained(s.run_dir / "final")
        (s.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    telemetry.end(summary)
    return summary


def make_reward(name: str) -> Any:
    from execrl.rewards.execution import PassAll, PassFraction

    rewards = {"pass": PassAll, "pass_fraction": PassFraction}
    if name not in rewards:
        raise ValueError(f"rl.reward = {name!r}; choose one of {', '.join(rewards)}")
    return rewards[name]()


def _setup(config: TrainConfig, tasks, heldout) -> Setup:
    if config.run.resume:
        resume = config.run.resume
        saved = Path(resume) / "config.toml"
        if not saved.is_file():
            raise FileNotFoundError(
                f"--resume {resume}: no config.toml there; is it a run directory?"
            )
        steps = config.run.steps
        config = load_config(saved)
        config.run.resume, config.run.steps = resume, max(steps, config.run.steps)
    c = config
    random.seed(c.run.seed)
    torch.manual_seed(c.run.seed)
    tasks = tasks if tasks is not None else load_tasks(c.data.train, "train", c.data.n_train, c)
    heldout = heldout if heldout is not None else (
        load_tasks(c.data.heldout, "test", c.data.n_heldout, c) if c.data.heldout else [])  # fmt: skip
    if not tasks:
        raise ValueError(f"data.train = {c.data.train!r} gave no tasks: nothing to train on")
    if c.data.signature_prompt:
        tasks, heldout = with_signature_prompts(tasks), with_signature_prompts(heldout)
    device = (
        c.model.device
        if c.model.device != "auto"
        else ("cuda" if torch.cuda.is_available() else "cpu")
    )
    lora = (
        LoraSpec(c.model.lora_r, c.model.lora_alpha, 0.0, tuple(c.model.lora_targets))
        if c.model.lora_r
        else None
    )
    policy = load_policy(
        c.model.path, device=device, dtype=c.model.dtype, lora=lora, pad_token=c.model.pad_token
    )
    reference = reference_from(policy) if c.rl.kl_coef > 0 else None
    value_head = None
    if c.rl.algorithm == "ppo":
        hidden = policy.model.config.get_text_config().hidden_size
        value_head = torch.nn.Linear(hidden, 1).to(device)
        torch.nn.init.zeros_(value_head.weight)
        torch.nn.init.zeros_(value_head.bias)
    params = [p for p in policy.model.parameters() if p.requires_grad]
    params += list(value_head.parameters()) if value_head is not None else []
    # One fused kernel per step instead of a dozen ops per tensor (0.8 ms against 4.7 ms a step
    # for the embedded default on a CPU); other devices keep torch's default implementation.
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params)
    optimizer = torch.optim.AdamW(params, lr=c.optim.lr, betas=(c.optim.beta1, c.optim.beta2),
                                  weight_decay=c.optim.weight_decay, fused=fused or None)  # fmt: skip
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(c))
    learner = Learner(c, policy.model, reference, value_head, optimizer, scheduler)
    learner.pad_id = policy.tokenizer.pad_token_id
    sampler = PromptSampler(len(tasks), c.run.seed, c.rl.prompt_sampler, c.rl.pass_rate_target,
                            c.rl.pass_rate_decay)  # fmt: skip
    run_dir = Path(c.run.resume) if c.run.resume else _new_run_dir(c)
    if dist.rank() == 0:
        (run_dir / "config.toml").write_text(to_toml(c))
    return Setup(c, run_dir, policy, learner, sampler, tasks, heldout)


def _new_run_dir(c: TrainConfig) -> Path:
    name = c.run.name or time.strftime("%Y%m%d-%H%M%S")
    run_dir = Path(c.run.out_dir) / name
    if dist.rank() == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
    dist.barrier()
    return run_dir


def _schedule(c: TrainConfig):
    warm, total, kind = c.optim.warmup_steps, c.run.steps, c.optim.schedule

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        frac = (step - warm) / max(1, total - warm)
        if kind == "linear":
            return max(0.0, 1 - frac)
        if kind == "cosine":
            return 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))
        return 1.0

    return factor


def load_tasks(source: str, split: str, n: int, c: TrainConfig) -> list[Task]:
    """Tasks from the synthetic suite or a named benchmark / jsonl:PATH (at most n)."""
    if source == "synthetic":
        from execrl.models.default import synthetic_tasks

        return synthetic_tasks(seed=c.run.seed, n=n, difficulty=c.data.difficulty, split=split)
    from execrl.sandbox.reference_runner import sandbox_runner
    from execrl.tasks.registry import load_benchmark

    return load_benchmark(source, reference_runner=sandbox_runner())[:n]


def evaluate(s: Setup, sandbox, limits, reward, chat) -> float:
    """Held-out pass@1: the mean pass (all hidden tests) over `heldout_samples` per task."""
    c = s.config
    tok = s.policy.tokenizer
    ids = encode_prompts(tok, [t.prompt for t in s.heldout], chat=chat)
    params = SamplingParams(c.sampling.heldout_temperature, 1.0, c.sampling.max_new_tokens,
                            tuple(c.sampling.stop))  # fmt: skip
    rollouts = Rollouts(s.policy.model, tok, s.heldout, ids, make_reward("pass"), sandbox, params, limits,
                        c.run.seed + 7919, c.sampling.groups_per_generate)  # fmt: skip
    try:
        chunks = rollouts.chunks(list(range(len(s.heldout))))
        mine = gather_chunks(len(chunks), dist.rank(), dist.world_size())
        local = rollouts.run(
            [(i, chunks[i]) for i in mine], c.data.heldout_samples, -1, 0, RolloutTimes()
        )
    finally:
        rollouts.close()
    passed = [float(x.passed) for groups in local.values() for g in groups for x in g]
    totals = dist.all_reduce_sum(torch.tensor([sum(passed), len(passed)], dtype=torch.float64))
    return float(totals[0] / totals[1].clamp(min=1))


def save_checkpoint(s: Setup, step: int) -> None:
    """Everything `--resume` needs, written atomically (a crash never leaves half a file)."""
    if dist.rank() != 0:
        return
    state = {
        "step": step,
        "model": s.policy.model.state_dict(),
        "value_head": s.learner.value_head.state_dict()
        if s.learner.value_head is not None
        else None,
        "optimizer": s.learner.optimizer.state_dict(),
        "scheduler": s.learner.scheduler.state_dict(),
        "sampler": s.sampler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "python_rng": random.getstate(),
    }
    directory = s.run_dir / "checkpoint"
    directory.mkdir(exist_ok=True)
    tmp = directory / "state.pt.tmp"
    torch.save(state, tmp)
    os.replace(tmp, directory / "state.pt")


def _resume(s: Setup) -> int:
    path = s.run_dir / "checkpoint" / "state.pt"
    if not path.is_file():
        raise FileNotFoundError(f"--resume {s.run_dir}: no checkpoint/state.pt to resume from")
    state = torch.load(path, map_location=s.learner.device, weights_only=False)
    s.policy.model.load_state_dict(state["model"])
    if state["value_head"] is not None:
        s.learner.value_head.load_state_dict(state["value_head"])
    s.learner.optimizer.load_state_dict(state["optimizer"])
    s.learner.scheduler.load_state_dict(state["scheduler"])
    s.sampler.load_state_dict(state["sampler"])
    torch.set_rng_state(state["torch_rng"])
    random.setstate(state["python_rng"])
    return int(state["step"])


def _progress(total: int, first: int, quiet: bool):
    if quiet or not sys.stderr.isatty():
        return lambda row: None
    from tqdm import tqdm

    bar = tqdm(total=total, initial=first, desc="train", file=sys.stderr)

    def update(row: dict[str, Any]) -> None:
        bar.set_postfix(reward=f"{row['reward_mean']:.3f}", pass_rate=f"{row['pass_rate']:.2f}")
        bar.update(1)
        if row["step"] + 1 >= total:
            bar.close()

    return update
