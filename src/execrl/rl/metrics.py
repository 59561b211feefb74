"""Per-step telemetry: what tells whether an RL run on code is healthy, as JSONL.

Rewards, pass rates and verdicts are over every group sampled in the step (kept or dropped by
dynamic sampling): that is the policy's current behaviour. KL, entropy and clip fraction are
over the tokens that entered the loss.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from execrl.rewards.result import HACK_FLAGS, Flag
from execrl.rl.episodes.turn_loop import standing_after
from execrl.rl.rollout.groups import Gathered, GroupSummary
from execrl.rl.rollout.prompts import PromptSampler
from execrl.rl.update.trainer import UpdateMetrics

# Prefixes of the row's entries that measure the machine, not the run (wall clock, memory): two
# runs that draw and learn the same differ in these alone
MACHINE_KEYS = ("time/", "exec_per_s", "exec_latency_", "tokens_per_s", "mem/")


def of_the_run(row: dict[str, Any]) -> dict[str, Any]:
    """`row` without its measures of the machine (MACHINE_KEYS)."""
    return {k: v for k, v in row.items() if not k.startswith(MACHINE_KEYS)}


class MetricsLog:
    def __init__(self, path: Path, keep_steps: int = 0, enabled: bool = True) -> None:
        self.path, self.enabled = path, enabled
        self.rows: list[dict[str, Any]] = []
        if path.exists():
            # on resume, keep the steps before the checkpoint and drop any logged after it
            self.rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
            self.rows = [r for r in self.rows if r["step"] < keep_steps]
        if enabled:
            path.write_text("".join(json.dumps(r) + "\n" for r in self.rows))

    def write(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if self.enabled:
            with self.path.open("a") as f:
                f.write(json.dumps(row) + "\n")

    def first(self, key: str) -> float | None:
        return self.rows[0].get(key) if self.rows else None

    def last(self, key: str) -> float | None:
        return self.rows[-1].get(key) if self.rows else None


def step_metrics(step: int, got: Gathered, update: UpdateMetrics, collect_s: float,
                 update_s: float, nodes: Sequence[str] = (), *,
                 by_turn: bool = True) -> dict[str, Any]:  # fmt: skip
    """The step's row of metrics.jsonl: reward and each of its tree's `nodes`, flags, verdicts,
    the update; with `by_turn` (an environment whose episodes may take several turns,
    `EnvConfig.by_turn`) the episodes' rows."""
    groups = got.every
    scores = [x for g in groups for x, v in zip(g.scores, g.valid, strict=True) if v]
    n = sum(len(g.scores) for g in groups) or 1
    verdicts = Counter(v for g in groups for v in g.verdicts)
    flags = Counter(f for g in groups for fl in g.flags for f in fl)
    lengths = [t for g in groups for t in g.n_tokens]
    t = got.times
    lat = sorted(t.latencies) or [0.0]
    row: dict[str, Any] = {
        "step": step,
        "reward_mean": statistics.fmean(scores) if scores else 0.0,
        "reward_std": statistics.pstdev(scores) if len(scores) > 1 else 0.0,
        # the spread as values the reward took (mean ± std leaves the reward's range)
        "reward_p10": _nearest_rank(scores, 0.1),
        "reward_p90": _nearest_rank(scores, 0.9),
        "pass_rate": sum(p for g in groups for p in g.passed) / n,
        "masked_frac": 1 - len(scores) / n,
        "reward/masked": n - len(scores) if groups else 0,
        "sandbox_error_rate": verdicts.get("SANDBOX_ERROR", 0) / n,
        "timeout_rate": verdicts.get("TIMEOUT", 0) / n,
        "truncated_frac": sum(x for g in groups for x in g.truncated) / n,
        "len_mean": statistics.fmean(lengths) if lengths else 0.0,
        "len_max": max(lengths, default=0),
        "groups_drawn": got.drawn,
        "groups_kept": len(got.kept),
        "sample_rounds": got.rounds,
        "hack_flags": sum(c for f, c in flags.items() if f in {str(h) for h in HACK_FLAGS}),
    }
    row.update(_components(groups, nodes))
    row.update(_episodes(groups) if by_turn else {})
    row.update({f"verdict/{k}": v / n for k, v in sorted(verdicts.items())})
    row.update({f"flag/{f.value}": flags.get(f.value, 0) for f in Flag})
    causes = Counter(c for g in groups for c in g.sandbox_causes if c)
    row.update({f"sandbox_error/{k}": v for k, v in sorted(causes.items())})
    row.update(update.row())
    row.update({
        "time/generate_s": t.generate_s,
        "time/execute_s": t.execute_s,
        "time/execute_wait_s": t.wait_s,
        "time/collect_s": collect_s,
        "time/update_s": update_s,
        "exec_per_s": t.executions / t.execute_s if t.execute_s else 0.0,
        "exec_latency_p50_s": lat[len(lat) // 2],
        "exec_latency_p95_s": lat[min(len(lat) - 1, int(0.95 * len(lat)))],
        "tokens_per_s": sum(lengths) / t.generate_s if t.generate_s else 0.0,
    })  # fmt: skip
    return row


def _nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-quantile as one of `values` (nearest rank); 0.0 for none, as reward_mean."""
    ordered = sorted(values)
    return ordered[round(q * (len(ordered) - 1))] if ordered else 0.0


def _components(groups: list[GroupSummary], nodes: Sequence[str]) -> dict[str, float | None]:
    """reward/<node>: each reward tree node's mean score over the step's valid samples that
    reached it (a gate's reward only where the gate opened); None (null) when none did."""
    sums: dict[str, float] = {}
    counts: Counter[str] = Counter()
    for g in groups:
        for parts, valid in zip(g.components, g.valid, strict=True):
            if not valid:
                continue
            for name, value in parts.items():
                sums[name] = sums.get(name, 0.0) + value
                counts[name] += 1
    names = list(nodes) + sorted(set(sums) - set(nodes))
    return {f"reward/{k}": sums[k] / counts[k] if counts[k] else None for k in names}


def _episodes(groups: list[GroupSummary]) -> dict[str, float]:
    """episode/...: turns per episode, tool calls, environment (feedback, tool output) tokens,
    the fraction of trajectory tokens masked out of the loss, and pass@1 after each turn (the
    answer standing then, on the hidden tests); nothing without episodes."""
    episodes = [e for g in groups for e in g.episodes]
    if not episodes:
        return {}
    env_tokens = sum(e.environment_tokens for e in episodes)
    tokens = env_tokens + sum(e.policy_tokens for e in episodes)
    turns = max(len(e.passed_by_turn) for e in episodes)
    standing = [standing_after(e.passed_by_turn, turns) for e in episodes if e.passed_by_turn]
    row = {
        "episode/turns_mean": statistics.fmean(e.turns for e in episodes),
        "episode/tool_calls_mean": statistics.fmean(e.tool_calls for e in episodes),
        "episode/feedback_tokens_mean": env_tokens / len(episodes),
        "episode/masked_token_frac": env_tokens / tokens if tokens else 0.0,
    }
    for t in range(turns):  # an episode that ended early keeps its last answer
        row[f"episode/pass@turn{t + 1}"] = (
            statistics.fmean(x[t] for x in standing) if standing else 0.0
        )
    return row


def mix_metrics(groups: list[GroupSummary], sampler: PromptSampler) -> dict[str, Any]:
    """source/<name>/{groups,pass_rate,reward} for each source of a mix of several, over the
    step's groups as pass_rate and reward_mean are (null when the step drew none of it), and
    with a curriculum curriculum/level, the hardest level open this step, and for pass_rate
    curricula each level's running pass rate (curriculum/level<k>_pass_rate)."""
    row: dict[str, Any] = {}
    mix = sampler.mix
    if mix is not None and len(mix.names) > 1:
        for s, name in enumerate(mix.names):
            mine = [g for g in groups if mix.source_of[g.task] == s]
            n = sum(len(g.scores) for g in mine)
            scores = [x for g in mine for x, v in zip(g.scores, g.valid, strict=True) if v]
            row[f"source/{name}/groups"] = len(mine)
            row[f"source/{name}/pass_rate"] = (
                sum(p for g in mine for p in g.passed) / n if n else None
            )
            row[f"source/{name}/reward"] = statistics.fmean(scores) if scores else None
    curriculum = sampler.curriculum
    if curriculum is not None:
        row["curriculum/level"] = sampler.open_level
        if curriculum.mode == "pass_rate":
            for level in curriculum.levels:
                row[f"curriculum/level{level}_pass_rate"] = curriculum.running_pass_rate(level)
    return row


def source_kl(kl_by_task: dict[int, tuple[float, float]] | None,
              sampler: PromptSampler) -> dict[str, float | None]:  # fmt: skip
    """source/<name>/kl: the mean KL to the reference per token of each source's samples in
    the update (null when the update had none of it); nothing without a reference model or
    with one source."""
    mix = sampler.mix
    if kl_by_task is None or mix is None or len(mix.names) < 2:
        return {}
    totals = [[0.0, 0.0] for _ in mix.names]
    for task, (kl_sum, tokens) in kl_by_task.items():
        totals[mix.source_of[task]][0] += kl_sum
        totals[mix.source_of[task]][1] += tokens
    return {f"source/{name}/kl": (kl / n if n else None)
            for name, (kl, n) in zip(mix.names, totals, strict=True)}  # fmt: skip
