"""verl's custom reward hook, backed by execrl's sandbox.

In a verl config:

    custom_reward_function:
      path: <site-packages>/execrl/rewards/adapters/verl_adapter.py
      name: compute_score
      reward_kwargs: {reward_config: run.toml}     # optional: a TOML file with a [reward] table,
                                                   # and [sandbox] (its runs' limits in
                                                   # [sandbox.limits]) as `execrl train` reads it

Each row's `ground_truth` is `execrl.rewards.adapters.ground_truth.task_to_json(task)`. verl's
per-sample reward managers call `compute_score(data_source, solution_str, ground_truth,
extra_info)`; its batch manager passes lists, which run in parallel. verl is not imported here.
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

from execrl.rewards.adapters.ground_truth import task_from_json
from execrl.rewards.result import RewardResult
from execrl.rewards.scoring.config import RewardConfig, sandbox_config_of
from execrl.rewards.scoring.scorer import RewardScorer
from execrl.sandbox import SandboxConfig

_scorers: dict[str | None, RewardScorer] = {}
_lock = threading.Lock()


def _scorer(reward_config: str | None) -> RewardScorer:
    with _lock:
        if reward_config not in _scorers:
            if reward_config:
                config, box = RewardConfig.load(reward_config), sandbox_config_of(reward_config)
            else:
                config, box = RewardConfig(), SandboxConfig()
            _scorers[reward_config] = RewardScorer(config, sandbox_config=box)
        return _scorers[reward_config]


@atexit.register
def close_all() -> None:
    with _lock:
        for s in _scorers.values():
            s.close()
        _scorers.clear()


def as_verl(result: RewardResult) -> dict[str, Any]:
    """verl logs every key of the dict; `score` is the reward. Masked samples score 0.0 (verl
    has no mask) and say so in `masked`, for a reward manager that drops them."""
    out: dict[str, Any] = {"score": result.score, "masked": result.masked}
    out.update({f"component/{k}": v for k, v in result.components.items()})
    out.update({f"flag/{f.value}": 1.0 for f in result.flags})
    return out


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Any = None,
    reward_config: str | None = None,
    **_: Any,
) -> dict[str, Any] | list[dict[str, Any]]:
    scorer = _scorer(reward_config)
    batch = isinstance(solution_str, list)
    solutions = solution_str if batch else [solution_str]
    truths = ground_truth if batch else [ground_truth]
    if len(truths) != len(solutions):
        raise ValueError(
            f"compute_score: {len(solutions)} solutions for {len(truths)} ground truths"
        )
    tasks = [task_from_json(g) for g in truths]
    results = [as_verl(r) for r in scorer.score(tasks, solutions)]
    return results if batch else results[0]
