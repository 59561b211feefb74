"""execrl's trainer against TRL's GRPOTrainer, side by side in one run, on equal terms.

Both train the same model (by default execrl's embedded default, a 0.85M-parameter Llama
built on first use; `--model random` for a tiny random one; nothing is downloaded) on the same
synthetic tasks (`execrl.tasks.synthetic.generate`, prompts ending in the signature line, as
execrl trains), with the same reward (execrl's sandbox-backed pass fraction: the same program
construction, the same sandbox, the same limits), group size, prompts per step, token budget
(by default the shape `execrl train` runs: 8 prompts x 8 completions, 40 tokens), learning
rate, optimiser (AdamW, beta2, grad clip), clip range (0.2 / 0.28, DAPO token-mean loss,
group-std advantages), no KL and no reference model, one optimiser step per batch, no dynamic
sampling, no trackers.

A step's time is the step's own work: for execrl the `time/collect_s + time/update_s` it logs,
for TRL the time between its `on_step_begin` and `on_step_end` callbacks. Model loading and
set-up are not counted on either side; the first step of each (warm-up) is left out of the
rates when there are at least three steps.

    .venv/bin/python benchmarks/trl_vs_execrl.py

Each round trains both, back to back, from the same start (who goes first alternates); the
steps per second of each side are the median over rounds and the ratio is the median of the
per-round ratios, so a slow spell of the machine falls on both sides of a pair. The last line
of stdout is JSON: execrl_steps_per_s, trl_steps_per_s, ratio (execrl / TRL), ratio_per_round,
execrl_reward_last and trl_reward_last (mean training reward over the last `--last` steps of
every round: each trainer draws its own tasks, so these are not on the same tasks),
execrl_final_reward and trl_final_reward (each final policy scored by the same evaluator on
every task, `--eval-samples` each, at the training temperature), and the settings and load.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("EXECRL_TRACKERS", "none")  # TRL runs with report_to="none" too


def resolve_model(name: str, directory: Path, tasks, seed: int) -> Path:
    if name == "default":
        from execrl.models.loading.default import ensure_default_model

        return ensure_default_model()
    return build_model(directory, tasks, seed) if name == "random" else Path(name)


def build_model(directory: Path, tasks, seed: int) -> Path:
    from execrl.models.loading.tiny import (
        TinyLlamaShape,
        new_llama,
        save_pretrained,
        train_bpe_tokenizer,
    )

    corpus = [t.prompt for t in tasks] + [t.reference or "" for t in tasks]
    tokenizer = train_bpe_tokenizer(corpus * 4, vocab_size=512)
    return save_pretrained(new_llama(tokenizer, TinyLlamaShape(), seed=seed), tokenizer, directory)


class PassFractionForTRL:
    """TRL reward function scoring exactly as execrl's rollouts do: the rewards layer's one
    scoring path (`RewardScorer.score_samples`) with the pass_fraction tree; masked samples
    (sandbox errors) are None (unscorable)."""

    __name__ = "pass_fraction"

    def __init__(self, tasks, sandbox, limits) -> None:
        from execrl.rewards.scoring.config import RewardConfig
        from execrl.rewards.scoring.scorer import RewardScorer
        from execrl.sandbox import SandboxConfig

        self.tasks = tasks
        config = RewardConfig(tree={"type": "pass_fraction"}, analysis_workers=0)
        self.scorer = RewardScorer(config, sandbox, sandbox_config=SandboxConfig(limits=limits))

    def __call__(self, prompts, completions, completion_ids=None, task_index=None, **_):
        ids = completion_ids or [[]] * len(completions)
        scored = self.scorer.score_samples(
            [self.tasks[i] for i in task_index], list(completions), n_tokens=[len(t) for t in ids]
        )
        return [None if x.reward.masked else x.reward.score for x in scored]


def run_execrl(args, model_dir: Path, tasks, out: Path) -> dict:
    from execrl.rewards.leaves.execution import PassFraction
    from execrl.rl.config.config import load_config
    from execrl.rl.run import train

    batch = args.group_size * args.prompts
    # the prompts TRL gets, unchanged: main() already appended the signature line
    same_prompts = ["data.signature_prompt=false"] if _has_field("data", "signature_prompt") else []
    config = load_config(None, same_prompts + [
        f"model.path={str(model_dir)!r}", "model.chat='off'", "model.device='cpu'",
        f"run.out_dir={str(out)!r}", "run.name='execrl'", f"run.steps={args.steps}",
        f"run.seed={args.seed}", "data.heldout=''",
        f"rl.group_size={args.group_size}", f"rl.groups_per_step={args.prompts}",
        f"rl.micro_batch_size={batch}", "rl.dynamic_sampling=false", "rl.prompt_sampler='uniform'",
        "rl.kl_coef=0.0", "rl.loss_agg='token_mean'", "rl.clip_low=0.2", "rl.clip_high=0.28",
        f"sampling.max_new_tokens={args.max_new_tokens}", f"sampling.groups_per_generate={args.prompts}",
        "sampling.temperature=1.0", "sampling.top_p=1.0",
        f"optim.lr={args.lr}", "optim.beta2=0.99", "optim.grad_clip=1.0", "optim.schedule='constant'",
        f"sandbox.workers={args.workers}", f"sandbox.limits.wall_s={args.wall_s}",
        f"model.threads={args.threads}",
    ])  # fmt: skip
    train(config, tasks=tasks, heldout=[], reward=PassFraction(), quiet=True)
    rows = [json.loads(x) for x in (out / "execrl" / "metrics.jsonl").read_text().splitlines()]
    return {
        "step_s": [r["time/collect_s"] + r["time/update_s"] for r in rows],
        "reward": [r["reward_mean"] for r in rows],
        "len_mean": statistics.fmean(r["len_mean"] for r in rows),
        "final": lambda: final_reward(args, tasks, *_load(out / "execrl" / "final")),
    }


def _load(directory: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(directory), AutoTokenizer.from_pretrained(directory)


def final_reward(args, tasks, model, tokenizer) -> float:
    """The trained policy's mean reward on every task, `--eval-samples` each at the training
    temperature, scored by one evaluator (execrl's rollouts) for both sides: the two trainers
    draw different tasks at each step, so their training rewards are not on the same tasks."""
    from execrl.models.engines.engine_factory import make_engine
    from execrl.models.engines.sampling import SamplingParams
    from execrl.rewards.scoring.config import RewardConfig
    from execrl.rewards.scoring.scorer import RewardScorer
    from execrl.rl.episodes import EnvConfig
    from execrl.rl.rollout.episode_sources import episode_source
    from execrl.rl.rollout.rollouts import Rollouts, RolloutTimes
    from execrl.sandbox import Limits, Sandbox, SandboxConfig

    params = SamplingParams(1.0, 1.0, args.max_new_tokens)
    config = RewardConfig(tree={"type": "pass_fraction"}, analysis_workers=0)
    engine = make_engine("loop", model, tokenizer)
    box = SandboxConfig(workers=args.workers, limits=Limits(wall_s=args.wall_s))
    with Sandbox(box) as sandbox:
        scorer = RewardScorer(config, sandbox, sandbox_config=box)
        source = episode_source(EnvConfig(), engine, tokenizer, tasks, scorer, params, chat=False)
        rollouts = Rollouts(source, args.seed + 1, args.prompts)
        try:
            chunks = list(enumerate(rollouts.chunks(list(range(len(tasks))))))
            groups = rollouts.run(chunks, args.eval_samples, 0, 0, RolloutTimes())
        finally:
            rollouts.close()
            scorer.close()
    return statistics.fmean(x.score for gs in groups.values() for g in gs for x in g)


def _has_field(section: str, name: str) -> bool:
    from execrl.rl.config.config import TrainConfig

    sections = {f.name: f.default_factory() for f in dataclasses.fields(TrainConfig)}
    return name in {f.name for f in dataclasses.fields(sections[section])}


def run_trl(args, model_dir: Path, tasks, out: Path) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from execrl.sandbox import Limits, Sandbox

    torch.set_num_threads(args.threads)  # as execrl's side: not whatever the last run left

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []

        def on_step_begin(self, *a, **k):
            self.start = time.perf_counter()

        def on_step_end(self, *a, **k):
            self.times.append(time.perf_counter() - self.start)

    dataset = Dataset.from_dict(
        {"prompt": [t.prompt for t in tasks], "task_index": list(range(len(tasks)))}
    )
    grpo = GRPOConfig(
        output_dir=str(out / "trl"), per_device_train_batch_size=args.group_size * args.prompts,
        num_generations=args.group_size, max_completion_length=args.max_new_tokens,
        max_steps=args.steps, learning_rate=args.lr, lr_scheduler_type="constant",
        warmup_steps=0, adam_beta2=0.99, weight_decay=0.0, max_grad_norm=1.0, beta=0.0,
        epsilon=0.2, epsilon_high=0.28, loss_type="dapo", scale_rewards="group",
        temperature=1.0, top_p=1.0, num_iterations=1, gradient_accumulation_steps=1,
        logging_steps=1, report_to="none", save_strategy="no", use_cpu=True, bf16=False,
        seed=args.seed, disable_tqdm=True, dataloader_num_workers=0,
        gradient_checkpointing=False,  # execrl does not recompute activations either
    )  # fmt: skip
    timer = StepTimer()
    with Sandbox(workers=args.workers) as sandbox:
        reward = PassFractionForTRL(tasks, sandbox, Limits(wall_s=args.wall_s))
        trainer = GRPOTrainer(
            model=str(model_dir), reward_funcs=[reward], args=grpo, train_dataset=dataset,
            processing_class=AutoTokenizer.from_pretrained(model_dir), callbacks=[timer],
        )  # fmt: skip
        with contextlib.redirect_stdout(sys.stderr):  # TRL prints its logs: keep stdout JSON
            trainer.train()
    logs = [e for e in trainer.state.log_history if "reward" in e]
    return {
        "step_s": timer.times,
        "reward": [e["reward"] for e in logs],
        "len_mean": statistics.fmean(e.get("completions/mean_length", 0.0) for e in logs),
        "final": lambda: final_reward(args, tasks, trainer.model.eval(), trainer.processing_class),
    }


def rate(step_s: list[float]) -> float:
    timed = step_s[1:] if len(step_s) >= 3 else step_s  # the first step warms up
    return len(timed) / sum(timed)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # defaults: the shape `execrl train` runs (rl.group_size, rl.groups_per_step,
    # sampling.max_new_tokens)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--prompts", type=int, default=8, help="prompts (groups) per step")
    p.add_argument("--max-new-tokens", type=int, default=40, help="the token budget")
    p.add_argument("--n-tasks", type=int, default=32)
    p.add_argument("--difficulty", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--workers", type=int, default=2, help="sandbox workers (each side)")
    p.add_argument("--wall-s", type=float, default=2.0)
    p.add_argument("--last", type=int, default=3, help="steps averaged for the training reward")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1,
                   help="torch's CPU threads, the same for both sides (execrl's model.threads)")  # fmt: skip
    p.add_argument("--rounds", type=int, default=3, help="back-to-back pairs of runs")
    p.add_argument("--eval-samples", type=int, default=8,
                   help="samples per task when scoring each final policy on every task")  # fmt: skip
    p.add_argument(
        "--model",
        default="default",
        help="'default': execrl's embedded default (built on first use; it writes some correct "
        "code, so rewards are not all 0); 'random': a tiny random Llama built here; or an "
        "HF-format model directory",
    )
    args = p.parse_args(argv)

    from execrl.models.prompting.prompting import with_signature_prompts
    from execrl.tasks.synthetic import generate

    # prompts ending in the function's signature line, the format execrl trains and the
    # embedded default learnt; both sides get these exact strings
    tasks = with_signature_prompts(
        list(generate(seed=args.seed, n=args.n_tasks, difficulty=args.difficulty, split="train"))
    )
    load_before = os.getloadavg()
    runs = {"execrl": run_execrl, "trl": run_trl}
    results: dict[str, list[dict]] = {"execrl": [], "trl": []}
    with tempfile.TemporaryDirectory(prefix="execrl-trl-bench-") as tmp:
        out = Path(tmp)
        model_dir = resolve_model(args.model, out / "model", tasks, args.seed)
        for round_ in range(args.rounds):
            # alternate who goes first, so a drift in machine speed falls on both sides
            order = ("execrl", "trl") if round_ % 2 == 0 else ("trl", "execrl")
            for name in order:
                start = time.perf_counter()
                r = runs[name](args, model_dir, tasks, out / f"{name}-{round_}")
                took = time.perf_counter() - start
                # every round trains the same policy (seeded): evaluate the first one only
                r["final"] = r["final"]() if round_ == 0 else None
                results[name].append(r)
                final = "" if r["final"] is None else f"; final policy's reward {r['final']:.3f}"
                print(
                    f"round {round_ + 1} {name:6s}: {rate(r['step_s']):.3f} steps/s over "
                    f"{len(r['step_s'])} steps (step seconds "
                    f"{', '.join(f'{s:.2f}' for s in r['step_s'])}; "
                    f"{took:.0f} s with set-up); mean completion "
                    f"{r['len_mean']:.1f} tokens; reward per step "
                    f"{', '.join(f'{x:.3f}' for x in r['reward'])}{final}",
                    file=sys.stderr,
                )
    ex_rates = [rate(r["step_s"]) for r in results["execrl"]]
    trl_rates = [rate(r["step_s"]) for r in results["trl"]]
    ex, trl = results["execrl"], results["trl"]
    ratios = [a / b for a, b in zip(ex_rates, trl_rates, strict=True)]

    def reward_last(rs: list[dict]) -> float:
        return statistics.fmean(x for r in rs for x in r["reward"][-args.last :])

    summary = {
        "execrl_steps_per_s": round(statistics.median(ex_rates), 4),
        "trl_steps_per_s": round(statistics.median(trl_rates), 4),
        # the median of the per-round ratios: each pair ran back to back on the same machine
        "ratio": round(statistics.median(ratios), 3),
        "ratio_per_round": [round(x, 3) for x in ratios],
        "execrl_reward_last": round(reward_last(ex), 4),
        "trl_reward_last": round(reward_last(trl), 4),
        "execrl_final_reward": round(ex[0]["final"], 4),
        "trl_final_reward": round(trl[0]["final"], 4),
        "eval_samples": args.eval_samples,
        "execrl_len_mean": round(statistics.fmean(r["len_mean"] for r in ex), 1),
        "trl_len_mean": round(statistics.fmean(r["len_mean"] for r in trl), 1),
        "steps": args.steps,
        "rounds": args.rounds,
        "model": args.model,
        "group_size": args.group_size,
        "batch": args.group_size * args.prompts,
        "max_new_tokens": args.max_new_tokens,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }
    print(f"ratio execrl / TRL: {summary['ratio']:.2f}x", file=sys.stderr)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
