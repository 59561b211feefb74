"""A TRL `GRPOTrainer` reward function backed by execrl's sandbox.

    reward = TRLReward(tasks={t.id: t for t in tasks})        # dataset has a "task_id" column
    reward = TRLReward(tasks, sandbox=SandboxConfig(workers=8, limits=Limits(wall_s=5)))
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=dataset, ...)

Or, without a task table, a "ground_truth" column holding `ground_truth.task_to_json(task)`.
Masked samples (sandbox infrastructure failures) are returned as None, which TRL treats as
unscorable: they get no advantage instead of a zero reward. Flag counts go to TRL's log as
`execrl/flag/<flag>` when the trainer offers `log_metric`. TRL is not imported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from execrl.rewards.adapters.ground_truth import task_from_json
from execrl.rewards.result import RewardResult
from execrl.rewards.scoring.config import RewardConfig
from execrl.rewards.scoring.scorer import RewardScorer
from execrl.sandbox import SandboxConfig
from execrl.tasks.schema import Task


def completion_text(completion: Any) -> str:
    """A standard completion is a string; a conversational one is a list of messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], Mapping):
        content = completion[-1].get("content", "")
        if isinstance(content, list):  # content blocks
            return "".join(b.get("text", "") for b in content if isinstance(b, Mapping))
        return str(content)
    raise TypeError(f"cannot read a completion of type {type(completion).__name__}")


class TRLReward:
    __name__ = "execrl"  # TRL names the reward column after it

    def __init__(
        self,
        tasks: Mapping[str, Task] | None = None,
        config: RewardConfig | None = None,
        scorer: RewardScorer | None = None,
        task_column: str = "task_id",
        ground_truth_column: str = "ground_truth",
        sandbox: SandboxConfig | None = None,
    ) -> None:
        """`sandbox`: the pool the scorer opens and each run's limits (the defaults' without
        one); a `scorer` given brings its own."""
        self.tasks = dict(tasks or {})
        self.scorer = scorer or RewardScorer(config, sandbox_config=sandbox)
        self.task_column = task_column
        self.ground_truth_column = ground_truth_column
        self.last_results: list[RewardResult] = []

    def _tasks(self, n: int, kwargs: dict[str, Any]) -> list[Task]:
        if self.task_column in kwargs and self.tasks:
            ids = kwargs[self.task_column]
            missing = sorted({str(i) for i in ids if i not in self.tasks})
            if missing:
                raise KeyError(f"TRLReward: task ids {missing[:5]} are not in the task table")
            return [self.tasks[i] for i in ids]
        if self.ground_truth_column in kwargs:
            return [task_from_json(g) for g in kwargs[self.ground_truth_column]]
        raise KeyError(
            f"TRLReward: the dataset needs a {self.task_column!r} column (with tasks= given) or a "
            f"{self.ground_truth_column!r} column of execrl task JSON; it has {sorted(kwargs)}"
        )

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        tasks = self._tasks(len(completions), kwargs)
        texts = [completion_text(c) for c in completions]
        n_tokens = [len(ids) for ids in completion_ids] if completion_ids is not None else None
        state = kwargs.get("trainer_state")
        step = getattr(state, "global_step", None)
        results = self.scorer.score(tasks, texts, n_tokens=n_tokens, step=step)
        self.last_results = results
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            for key, value in self.scorer.last_metrics.items():
                log_metric(key.replace("reward/", "execrl/", 1), value)
        return [None if r.masked else r.score for r in results]

    def close(self) -> None:
        self.scorer.close()
