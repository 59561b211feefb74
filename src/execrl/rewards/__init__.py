"""Rewards: components, combinators, token credit, hack flags, verifier noise, adapters.

Training, `execrl eval --model RUN/final` and the TRL and verl adapters score through one function,
`RewardScorer.score_samples(tasks, completions, offsets=...)` (`score` returns one `RewardResult`
per completion and counts flags; see scorer.py); reward trees come from TOML via `RewardConfig`
or are built from the classes here. Nothing here imports torch.
"""

from execrl.rewards.base import Reward
from execrl.rewards.leaves.execution import (
    CODERL_VALUES,
    PassAll,
    PassFraction,
    Runs,
    VerdictCredit,
)
from execrl.rewards.leaves.external import CallableReward, HttpReward, RewardModelError
from execrl.rewards.leaves.extract import Extraction, extract_code
from execrl.rewards.leaves.format import CodeFenced, OneFunction, ReasoningClosed
from execrl.rewards.leaves.length import LengthPenalty, SoftOverlong
from execrl.rewards.leaves.security import Security
from execrl.rewards.leaves.static_analysis import StaticAnalysis
from execrl.rewards.leaves.style import Style
from execrl.rewards.leaves.syntax import SyntaxValid
from execrl.rewards.result import HACK_FLAGS, Flag, RewardResult
from execrl.rewards.sample import Sample
from execrl.rewards.scoring.compose import Gate, Hierarchy, Level, Product, WeightedSum
from execrl.rewards.scoring.config import RewardConfig, RewardConfigError, build_reward
from execrl.rewards.scoring.hacks import HackPolicy
from execrl.rewards.scoring.monitor import RewardMonitor, RunSummary
from execrl.rewards.scoring.noise import FlakinessReport, LabelNoise, measure_flakiness
from execrl.rewards.scoring.scorer import RewardScorer, ScoredSample, build_sample
from execrl.rewards.scoring.token_credit import TokenCredit

__all__ = [
    "CODERL_VALUES",
    "HACK_FLAGS",
    "CallableReward",
    "CodeFenced",
    "Extraction",
    "Flag",
    "FlakinessReport",
    "Gate",
    "HackPolicy",
    "Hierarchy",
    "HttpReward",
    "LabelNoise",
    "LengthPenalty",
    "Level",
    "OneFunction",
    "PassAll",
    "PassFraction",
    "Product",
    "ReasoningClosed",
    "Reward",
    "RewardConfig",
    "RewardConfigError",
    "RewardModelError",
    "RewardMonitor",
    "RewardResult",
    "RewardScorer",
    "Runs",
    "RunSummary",
    "Sample",
    "ScoredSample",
    "Security",
    "SoftOverlong",
    "StaticAnalysis",
    "Style",
    "SyntaxValid",
    "TokenCredit",
    "VerdictCredit",
    "WeightedSum",
    "build_reward",
    "build_sample",
    "extract_code",
    "measure_flakiness",
]
