"""Each advantage estimator as one typed record, registered once: `Algorithm`.

Every fact the trainer, the config checks, the warnings and the CLI need about an estimator is a
field of its record (per-token or per-sequence, group-relative, a critic, the default loss
aggregation, batch-wide statistics), so nothing else in execrl tests an algorithm's name. Like
verl's `core_algos` registry of advantage estimators, but a record instead of a bare function:
there, what an estimator needs (a critic, a group) is still asked of its name elsewhere.

The advantage functions here adapt the pure estimators of `rl.objective.advantages` to one
signature, (AdvantageInputs) -> (advantages (B, T), value targets (B, T) or None); nothing here does
math of its own. A user's estimator is a record in their own module, named in the config as
`rl.algorithm = "module:name"` (docs/algorithms.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from execrl.rl.files.toml_config import ConfigError
from execrl.rl.objective import advantages as A
from execrl.rl.objective import losses


@dataclass(frozen=True, slots=True)
class AdvantageInputs:
    scores: torch.Tensor  # (B,) outcome rewards, prompt-major groups of group_size
    valid: torch.Tensor  # (B,) bool: reward not masked
    token_rewards: (
        torch.Tensor
    )  # (B, T): outcome (or token credit) on tokens, minus KL if in reward
    mask: torch.Tensor  # (B, T) float: real completion tokens
    values: torch.Tensor | None  # (B, T) old value estimates, when the algorithm has a critic
    group_size: int
    gamma: float = 1.0  # rl.gamma: discount
    lam: float = 0.95  # rl.lam: GAE lambda
    # (K,) the record's `batch_sums` of every process's rows, summed: the global batch's
    # statistics when this process holds only part of it; None without batch_sums
    batch_sums: torch.Tensor | None = None


Advantages = tuple[torch.Tensor, torch.Tensor | None]  # advantages (B, T), value targets (B, T)
AdvantageFn = Callable[[AdvantageInputs], Advantages]
AGGREGATIONS = ("token_mean", "seq_mean", "seq_mean_constant")  # `aggregator` below


@dataclass(frozen=True, slots=True)
class Algorithm:
    """One advantage estimator and what the rest of training must know about it."""

    name: str
    advantage: AdvantageFn
    # Reads per-token rewards (token credit, a KL penalty in the reward): its advantages vary
    # along a sequence, so a harness episode's segments cannot share one advantage
    per_token: bool = False
    # The baseline is the other samples of the prompt's group: needs rl.group_size >= 2 and
    # different samples (a temperature above 0); allows credit.baseline = "reached"
    group_relative: bool = False
    # Trains a value head beside the policy; `advantage` reads AdvantageInputs.values and
    # returns the value targets
    critic: bool = False
    loss_agg: str = "token_mean"  # what rl.loss_agg = "auto" means: one of AGGREGATIONS
    # Statistics over the whole global batch: (inputs) -> (K,) sums over this process's rows,
    # summed over processes before `advantage` reads them as AdvantageInputs.batch_sums
    batch_sums: Callable[[AdvantageInputs], torch.Tensor] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("an Algorithm needs a name (a non-empty string)")
        if not callable(self.advantage):
            raise ValueError(f"Algorithm {self.name!r}: advantage must be a function "
                             "(AdvantageInputs) -> (advantages (B, T), value targets or None)")  # fmt: skip
        if self.loss_agg not in AGGREGATIONS:
            raise ValueError(f"Algorithm {self.name!r}: loss_agg = {self.loss_agg!r}; choose "
                             f"one of {', '.join(AGGREGATIONS)}")  # fmt: skip
        if self.batch_sums is not None and not callable(self.batch_sums):
            raise ValueError(f"Algorithm {self.name!r}: batch_sums must be a function or None")


REGISTRY: dict[str, Algorithm] = {}


def register(algorithm: Algorithm) -> Algorithm:
    """Make `algorithm` choosable as rl.algorithm = its name (in this process); returns it."""
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"register() takes an Algorithm record, got {type(algorithm).__name__}")
    if ":" in algorithm.name:
        raise ValueError(f"Algorithm {algorithm.name!r}: ':' marks module:name in rl.algorithm; "
                         "register under a plain name")  # fmt: skip
    known = REGISTRY.get(algorithm.name)
    if known is not None and known is not algorithm:
        raise ValueError(f"an algorithm named {algorithm.name!r} is registered already; "
                         "give yours another name")  # fmt: skip
    REGISTRY[algorithm.name] = algorithm
    return algorithm


def names(where: Callable[[Algorithm], bool] = lambda a: True) -> list[str]:
    """The registered algorithms' names, in order of registration, those `where` accepts."""
    return [name for name, algorithm in REGISTRY.items() if where(algorithm)]


def listed(where: Callable[[Algorithm], bool]) -> str:
    """'grpo, dr_grpo or rloo': the registered algorithms `where` accepts, for a message."""
    found = names(where)
    return " or ".join(found) if len(found) < 3 else f"{', '.join(found[:-1])} or {found[-1]}"


def resolve(spec: str) -> Algorithm:
    """rl.algorithm's value as a record: a registered name, or "module:name" where the module
    is importable and `name` is an Algorithm or a function of no arguments returning one. A
    ValueError says what is wrong and what to do (the config adds the field's name)."""
    if ":" not in spec:
        if spec in REGISTRY:
            return REGISTRY[spec]
        raise ValueError(f"choose one of {', '.join(REGISTRY)}, or module:name for an "
                         "estimator of your own (docs/algorithms.md)")  # fmt: skip
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError("expected module:name, e.g. my_estimators:MAX_BASELINE")
    try:
        found = getattr(importlib.import_module(module), attr)
    except ImportError as e:
        raise ValueError(f"cannot import {module} ({e}); put its directory on PYTHONPATH") from None
    except AttributeError:
        raise ValueError(f"{module} has no {attr}") from None
    if not isinstance(found, Algorithm) and callable(found):
        try:
            found = found()
        except Exception as e:  # a user's function: its failure is theirs to fix, said so here
            raise ValueError(f"{attr}() raised {type(e).__name__}: {e}") from None
    if not isinstance(found, Algorithm):
        raise ValueError(f"{attr} is a {type(found).__name__}, not an Algorithm record (or a "
                         "function returning one; "
                         "execrl.rl.objective.algorithms.Algorithm)")  # fmt: skip
    return found


def check_advantages(algorithm: str, out: Advantages, mask: torch.Tensor) -> None:
    """An estimator's result as the loss needs it: a pair of (B, T) tensors like `mask`, finite
    (a user's estimator returning (B,) or (B, 1) would otherwise broadcast, or land on the first
    token alone, and a NaN would skip every update). A ConfigError otherwise: the run stops with
    a message naming rl.algorithm."""
    if not isinstance(out, tuple) or len(out) != 2:
        raise ConfigError(f"rl.algorithm = {algorithm!r}: its advantage function must return "
                         "(advantages, value targets or None)")  # fmt: skip
    for what, tensor in zip(("advantages", "value targets"), out, strict=True):
        if tensor is None and what == "value targets":
            continue
        shape = tuple(getattr(tensor, "shape", ()))
        if not isinstance(tensor, torch.Tensor) or shape != tuple(mask.shape):
            raise ConfigError(f"rl.algorithm = {algorithm!r}: its {what} have shape {shape}, "
                             f"the batch is {tuple(mask.shape)} (B sequences, T tokens); "
                             "return one value per token, e.g. a per-sequence (B,) "
                             "advantage as adv[:, None] * inputs.mask")  # fmt: skip
        if not torch.isfinite(tensor).all():
            raise ConfigError(f"rl.algorithm = {algorithm!r}: its {what} are not all finite "
                             "(NaN or inf); fix the estimator")  # fmt: skip


def outcome(estimator: Callable[..., torch.Tensor]) -> AdvantageFn:
    """An outcome estimator (rewards (B,), group_size, valid (B,)) -> advantages (B,) as an
    advantage function: each sequence's advantage on all of its tokens, no critic."""
    return partial(_outcome, estimator)


def _outcome(estimator: Callable[..., torch.Tensor], x: AdvantageInputs) -> Advantages:
    return estimator(x.scores, x.group_size, x.valid)[:, None] * x.mask, None  # (B, T)


def _reinforce_pp_sums(x: AdvantageInputs) -> torch.Tensor:
    return A.reinforce_pp_moments(x.token_rewards, x.mask)  # (3,)


def _reinforce_pp(x: AdvantageInputs) -> Advantages:
    stats = None if x.batch_sums is None else A.moments_stats(x.batch_sums)
    return A.reinforce_pp(x.token_rewards, x.mask, stats=stats), None


def _ppo(x: AdvantageInputs) -> Advantages:
    if x.values is None:
        raise ValueError("PPO's GAE needs the critic's values (AdvantageInputs.values)")
    return A.gae(x.token_rewards, x.values, x.mask, x.gamma, x.lam)


GRPO = register(Algorithm("grpo", outcome(A.grpo), group_relative=True))
# Dr. GRPO's fix is the pair (no std, constant normaliser); the others use DAPO's token mean
DR_GRPO = register(
    Algorithm("dr_grpo", outcome(A.dr_grpo), group_relative=True, loss_agg="seq_mean_constant")
)
RLOO = register(Algorithm("rloo", outcome(A.rloo), group_relative=True))
REINFORCE_PP = register(
    Algorithm("reinforce_pp", _reinforce_pp, per_token=True, batch_sums=_reinforce_pp_sums)
)
PPO = register(Algorithm("ppo", _ppo, per_token=True, critic=True))


def aggregator(name: str, max_new_tokens: int) -> Callable:
    """(loss (B, T), mask (B, T), denominator) -> scalar."""
    if name == "seq_mean_constant":
        return lambda loss, mask, d: losses.seq_mean_constant(loss, mask, max_new_tokens, d)
    return {"token_mean": losses.token_mean, "seq_mean": losses.seq_mean}[name]


def counts_tokens(name: str) -> bool:
    """Whether the aggregator's global denominator counts tokens (else sequences)."""
    return name == "token_mean"
