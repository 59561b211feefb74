"""Episodes: multi-turn rollouts (self-correction from visible-test feedback, a code-execution
tool) with token-exact trajectories. See docs/episodes.md."""

from execrl.rl.episodes.env import (
    EnvConfig,
    Environment,
    Observation,
    StepInfo,
    StepResult,
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
    "StepInfo",
    "StepResult",
    "TextReplies",
    "Trajectory",
    "make_env",
    "run_episodes",
]
