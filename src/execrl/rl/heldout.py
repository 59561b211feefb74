"""Held-out pass@1 of the policy, before and after training: the mean pass (every hidden test)
over `data.heldout_samples` completions per held-out task, sampled and scored exactly as
`execrl eval --model RUN/final` does (`eval_spec.run_heldout`), each process its chunks."""

from __future__ import annotations

import math
from typing import Any

import torch

from execrl.rl.config.config import TrainConfig
from execrl.rl.episodes.turn_loop import standing_after
from execrl.rl.eval_spec import heldout_spec, run_heldout
from execrl.rl.parallel import dist
from execrl.rl.rollout.rollouts import gather_chunks
from execrl.tasks.schema import Task


def heldout_pass_at_1(config: TrainConfig, engine: Any, tokenizer: Any, heldout: list[Task],
                      sandbox: Any) -> float:  # fmt: skip
    n_chunks = math.ceil(len(heldout) / config.sampling.groups_per_generate)
    mine = gather_chunks(n_chunks, dist.rank(), dist.world_size())
    done = run_heldout(heldout_spec(config), engine, tokenizer, heldout, sandbox, chunks=mine)
    passed = [float(x.passed) for x in done]
    totals = dist.all_reduce_sum(torch.tensor([sum(passed), len(passed)], dtype=torch.float64))
    return float(totals[0] / totals[1].clamp(min=1))


def heldout_pass_at_1_by_turn(config: TrainConfig, engine: Any, tokenizer: Any,
                              heldout: list[Task], sandbox: Any) -> list[float]:  # fmt: skip
    """Held-out pass@1 after each of `env.max_turns` turns of the run's environment: for turn t,
    the mean over episodes of whether the answer standing after t turns passes the hidden tests
    (an episode that ended early keeps its answer), sampled as `heldout_pass_at_1` samples."""
    turns = config.env.max_turns
    n_chunks = math.ceil(len(heldout) / config.sampling.groups_per_generate)
    mine = gather_chunks(n_chunks, dist.rank(), dist.world_size())
    done = run_heldout(heldout_spec(config), engine, tokenizer, heldout, sandbox, chunks=mine,
                       env=config.env)  # fmt: skip
    sums = torch.zeros(turns + 1, dtype=torch.float64)  # passes after each turn, then episodes
    for x in done:
        sums[:turns] += torch.tensor(standing_after(x.turns.passed_by_turn, turns),
                                     dtype=torch.float64)  # fmt: skip
        sums[turns] += 1
    totals = dist.all_reduce_sum(sums)
    return [round(float(totals[t] / totals[turns].clamp(min=1)), 4) for t in range(turns)]
