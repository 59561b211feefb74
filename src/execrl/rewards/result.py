"""What a reward returns: a score, the components behind it, a mask, token credit, flags."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class Flag(enum.StrEnum):
    """Diagnostic flags a reward result carries. Hack flags can carry a penalty (`HackPolicy`)."""

    # Hack flags: the program tried to pass without solving the task.
    EARLY_EXIT = "early_exit"  # exited (sys.exit, os._exit) before or during the tests
    TAMPERING = "tampering"  # the sandbox denied a harness-tampering attempt
    NOT_PLAIN_DATA = "not_plain_data"  # returned an object that is not plain data
    HARDCODED_VISIBLE = "hardcoded_visible"  # literal returns keyed on the visible tests' inputs
    VISIBLE_HIDDEN_GAP = "visible_hidden_gap"  # passes the visible tests far more than the hidden
    # the sandbox saw a run try to escape its penalty, e.g. kill a fresh worker on every attempt
    # (`ExecutionResult.possible_hack`); the run already has a program verdict, never a mask
    POSSIBLE_HACK = "possible_hack"
    # Diagnostics: worth counting, not a hack by themselves.
    TESTS_NOT_RUN = "tests_not_run"  # the run ended with tests never reported (not by a limit)
    NO_CODE = "no_code"  # no program could be extracted from the completion
    SANDBOX_ERROR = "sandbox_error"  # infrastructure failure: the sample is masked
    REWARD_MODEL_ERROR = "reward_model_error"  # an external reward model failed: masked
    NOISE_FLIPPED = "noise_flipped"  # injected label noise flipped this sample's verdict
    # the sandbox refused the run a frame (`sys._getframe`) and nothing else: the standard
    # library asks on a right answer's behalf (namedtuple, logging) and falls back, and a
    # refused frame gives a program nothing
    FRAME_REFUSED = "frame_refused"


HACK_FLAGS = frozenset(
    {
        Flag.EARLY_EXIT,
        Flag.TAMPERING,
        Flag.NOT_PLAIN_DATA,
        Flag.HARDCODED_VISIBLE,
        Flag.VISIBLE_HIDDEN_GAP,
        Flag.POSSIBLE_HACK,
    }
)


@dataclass(frozen=True, slots=True)
class RewardResult:
    """The reward of one sample.

    `masked` samples (infrastructure failures) must be left out of the advantage: their score is
    0.0 by convention and means nothing. `token_credit`, when present, has one value per
    completion token: `score` on the last token, minus a penalty over the failing line's tokens
    (see `token_credit.py`).
    """

    score: float
    components: Mapping[str, float] = field(default_factory=dict)  # node name -> its score
    masked: bool = False
    token_credit: tuple[float, ...] | None = None
    flags: frozenset[Flag] = frozenset()
    reason: str = ""  # why the sample is masked or penalised, for people


def masked_result(reason: str, *flags: Flag) -> RewardResult:
    return RewardResult(0.0, {}, masked=True, flags=frozenset(flags), reason=reason)
