"""Episodes: multi-turn rollouts (self-correction from visible-test feedback, a code-execution
tool) with token-exact trajectories. See docs/episodes.md."""

from execrl.rl.episodes.env import (
    EnvConfig,
    Environment,
    Observation,
    PolicyTurn,
    StepInfo,
    StepResult,
    StepsTogether,
    make_env,
)
from execrl.rl.episodes.trajectory import Conversation, NotAppendOnly, Trajectory
from execrl.rl.episodes.turn_loop import Episode, TextReplies, run_episodes

__all__ = [
    "Conversation",
    "EnvConfig",
    "Environment",
    "Episode",
    "NotAppendOnly",
    "Observation",
    "PolicyTurn",
    "StepInfo",
    "StepResult",
    "StepsTogether",
    "TextReplies",
    "Trajectory",
    "make_env",
    "run_episodes",
]
