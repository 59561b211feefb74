"""The `[credit]` of a run: which of an episode's turns and sequences its advantage reaches, and
what is learnt beside it (training only; the math is `rl.objective.credit`'s,
`rl.update.corrections`').

Its five settings were [env]'s until the environment and the credit were told apart: the old
names (`MOVED_TO_CREDIT`) still load, each with a one-line deprecation message naming its new
field, so configs and run directories written before keep working (docs/episodes.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from execrl.rl.episodes.env import EnvConfig
from execrl.rl.files.toml_config import ConfigError
from execrl.rl.objective.algorithms import Algorithm, listed

BASELINES = ("group", "reached")
SEGMENTS = ("auto", "every", "last")


@dataclass(frozen=True, slots=True)
class CreditConfig:
    """The `[credit]` of a run (training only): which of an episode's turns and sequences the
    advantage reaches, and what is learnt beside it. These were [env]'s credit_from_turn,
    held_kl_coef, credit_baseline, correction_coef and segments; those names still load, with a
    deprecation message (`MOVED_TO_CREDIT`)."""

    # The policy-gradient advantage lands on the tokens of turns >= this one (1: every turn).
    # 2 trains the corrections only: the first attempt's tokens get no advantage (KL and
    # entropy still apply), so RL cannot lift the first turn in place of teaching the second to
    # use the feedback: stage I of SCoRe (Kumar et al. 2024, "Training Language Models to
    # Self-Correct via Reinforcement Learning"), which found plain multi-turn RL does exactly that
    from_turn: int = 1
    # A KL penalty to the reference model on the tokens of the turns before from_turn, with
    # this coefficient (loads the reference): SCoRe's strong KL on the first attempt, which
    # keeps it where it started while the corrections learn (the first turn would otherwise
    # follow the second through the shared weights). Always a loss term, even with rl.kl_in =
    # "reward": the held turns get no advantage, so a penalty in their rewards would be zeroed
    # with it. 0: none
    held_kl_coef: float = 0.0
    # With from_turn > 1 and a group-relative estimator (docs/algorithms.md): whose returns the
    # group's baseline compares an episode with. "group": all of the group's episodes;
    # "reached": only those that reached from_turn. Under "group" the episodes that passed
    # before it (nothing to learn, top return) raise the baseline, so most corrections get a
    # negative advantage; "reached" compares corrections with corrections
    baseline: str = "group"
    # env.name = "self_correct": each episode whose first attempt failed also gives a correction
    # sample (the failed attempt and its feedback, then a passing answer of its group), learnt
    # with this fixed advantage beside the RL objective (CIPO, Ren et al. 2026;
    # rl/update/corrections.py). 0: none
    correction_coef: float = 0.0
    # env.name = "harness": an episode whose calls do not extend one conversation (the agent
    # cut, summarised or handed off its history) has several token-exact segments. "every":
    # each is trained as a sequence of its own with the episode's advantage (an estimator that
    # is not per-token); "last": only the one holding the final call (any algorithm); "auto":
    # "every" where the algorithm gives one advantage per episode, else "last"
    # (docs/harness.md). With from_turn > 1 such episodes are masked (their turns are numbered
    # per segment)
    segments: str = "auto"

    def __post_init__(self) -> None:
        if self.from_turn < 1:
            raise ValueError(f"credit.from_turn must be >= 1, got {self.from_turn}")
        if self.held_kl_coef < 0 or (self.held_kl_coef > 0 and self.from_turn == 1):
            raise ValueError(
                f"credit.held_kl_coef = {self.held_kl_coef}: it must be >= 0 and it needs held "
                f"turns (credit.from_turn > 1, got {self.from_turn})"
            )
        if self.baseline not in BASELINES or (self.baseline == "reached" and self.from_turn == 1):
            raise ValueError(
                f"credit.baseline {self.baseline!r}: choose one of {', '.join(BASELINES)}; "
                '"reached" needs credit.from_turn > 1'
            )
        if self.correction_coef < 0:
            raise ValueError(f"credit.correction_coef must be >= 0, got {self.correction_coef}")
        if self.segments not in SEGMENTS:
            raise ValueError(
                f"credit.segments {self.segments!r}: choose one of {', '.join(SEGMENTS)}"
            )


# [env]'s old name -> [credit]'s field
MOVED_TO_CREDIT = {"credit_from_turn": "from_turn", "held_kl_coef": "held_kl_coef",
                   "credit_baseline": "baseline", "correction_coef": "correction_coef",
                   "segments": "segments"}  # fmt: skip


def moved_to_credit(data: dict[str, Any], where: str, say: Callable[[str], None]) -> dict[str, Any]:
    """`data` (the config's tables) with each old [env] name moved to its [credit] field, and
    a deprecation message said for each; one setting under both names is an error."""
    env, credit = data.get("env"), data.get("credit", {})
    old = [name for name in MOVED_TO_CREDIT if isinstance(env, dict) and name in env]
    if not old or not isinstance(credit, dict):
        return data  # nothing to move, or a [credit] that is not a table (refused later)
    env, credit = dict(env), dict(credit)
    for name in old:
        new = MOVED_TO_CREDIT[name]
        if new in credit:
            raise ConfigError(f"{where}: env.{name} and credit.{new} are the same setting; "
                              f"keep credit.{new} (env.{name} is its old name)")  # fmt: skip
        credit[new] = env.pop(name)
        say(f"execrl: {where}: env.{name} is deprecated; it is credit.{new} now ([credit], "
            "docs/episodes.md)")  # fmt: skip
    return {**data, "env": env, "credit": credit}


def check_credit(credit: CreditConfig, env: EnvConfig, algorithm: Algorithm, name: str,
                 where: str) -> None:  # fmt: skip
    """[credit] against [env] and rl.algorithm (= `name`), when the config loads."""
    if credit.from_turn > env.most_turns:
        bound = f"env {env.name!r} takes " if env.kind.turns else ""
        raise ConfigError(f"{where}: credit.from_turn must be in 1..env.max_turns ({bound}"
                          f"{env.most_turns}), got {credit.from_turn}: turns before it get no "
                          "advantage")  # fmt: skip
    if credit.correction_coef > 0 and not env.kind.corrects:
        raise ConfigError(f"{where}: credit.correction_coef = {credit.correction_coef} needs "
                          'env.name = "self_correct" (a failed attempt with feedback), got '
                          f"{env.name!r}")  # fmt: skip
    if not env.by_turn:  # one turn: nothing below has turns to act on
        return
    if credit.baseline == "reached" and not algorithm.group_relative:
        raise ConfigError(f'{where}: credit.baseline = "reached" changes a group\'s baseline, '
                          f"which rl.algorithm = {name!r} does not have; use "
                          f"{listed(lambda a: a.group_relative)}")  # fmt: skip
    if credit.segments == "every" and algorithm.per_token:
        raise ConfigError(f'{where}: credit.segments = "every" gives each segment its '
                          f"episode's one advantage, which rl.algorithm = {name!r} does not "
                          'have (its returns run along one sequence); use "last" or "auto", or '
                          f"{listed(lambda a: not a.per_token)}")  # fmt: skip
    if credit.segments != "auto" and credit.from_turn > 1:
        raise ConfigError(f"{where}: credit.segments = {credit.segments!r} with "
                          "credit.from_turn > 1: a segment's turns are numbered on their own, "
                          'so such episodes are masked; use "auto"')  # fmt: skip
    if credit.correction_coef > 0 and algorithm.critic:
        raise ConfigError(f"{where}: credit.correction_coef gives no value targets to the "
                          f"critic of rl.algorithm = {name!r}; use "
                          f"{listed(lambda a: not a.critic)}")  # fmt: skip
