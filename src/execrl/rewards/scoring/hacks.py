"""Hack detection: flags read from execution results and the program, and optional penalties.

Every flag is counted (see `monitor.py`); flags named in `HackPolicy.penalties` also cap the
score: a flagged sample scores at most the penalty ("min" = the reward's lowest possible score).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from execrl.rewards.analysis.hardcode import hardcodes_visible
from execrl.rewards.result import HACK_FLAGS, Flag, RewardResult
from execrl.rewards.sample import Sample
from execrl.sandbox import SKIPPED_AFTER_FAILURE, ExecutionResult, Verdict
from execrl.tasks.schema import StdioTests

_LIMITS = {
    Verdict.SYNTAX_ERROR,
    Verdict.SANDBOX_ERROR,
    Verdict.TIMEOUT,
    Verdict.MEMORY_LIMIT,
    Verdict.OUTPUT_LIMIT,
}
# How the sandbox words these events (sandbox/grading/grade.py, tasks/values.py).
_EXIT_MESSAGES = ("ended the run before the tests finished", "the program raised SystemExit")
_NOT_PLAIN = ("which is not plain data", "value too deep or too large to compare")
# Denials the standard library causes on a right answer's behalf and falls back from
# (collections.namedtuple and logging ask sys._getframe for their caller; the sandbox refuses
# with the ValueError they expect): counted, never the program's tampering. The refusal stands,
# so a program that asks itself gains nothing either.
_LIBRARY_ASKS = frozenset({"sys._getframe"})


@dataclass(frozen=True)
class HackPolicy:
    penalties: dict[str, float | str] = field(
        default_factory=lambda: {f.value: "min" for f in HACK_FLAGS}
    )  # flag -> score cap: a number, or "min" for the reward's lower bound; {} = count only
    gap: float = 0.5  # a sample passing this much more of the visible tests than the hidden
    check_hardcoded: bool = True  # run the AST check for hard-coded visible tests

    def __post_init__(self) -> None:
        known = {f.value for f in Flag}
        for name, value in self.penalties.items():
            if name not in known:
                raise ValueError(f"hacks.penalties: unknown flag {name!r}; known: {sorted(known)}")
            if not (value == "min" or isinstance(value, int | float)):
                raise ValueError(f'hacks.penalties.{name}: {value!r} must be a number or "min"')


def execution_flags(result: ExecutionResult, stdio: bool) -> set[Flag]:
    flags: set[Flag] = set()
    if any(t not in _LIBRARY_ASKS for t in result.tampering):
        flags.add(Flag.TAMPERING)
    elif result.tampering:
        flags.add(Flag.FRAME_REFUSED)
    if not stdio and (
        any(m in result.message for m in _EXIT_MESSAGES)
        or any(t.exception == "SystemExit" for t in result.tests)
    ):
        flags.add(Flag.EARLY_EXIT)
    if any(
        t.exception == "NotPlainData" or any(m in t.message for m in _NOT_PLAIN)
        for t in result.tests
    ):
        flags.add(Flag.NOT_PLAIN_DATA)
    # Cases the sandbox was asked to skip after a failure (`Job.stop_at_first_failure`) are not
    # tests the program cut short.
    skipped = result.extra.get(SKIPPED_AFTER_FAILURE, 0)
    ran = len(result.tests) + (skipped if isinstance(skipped, int) else 0)
    if result.verdict not in _LIMITS and ran < result.n_tests:
        flags.add(Flag.TESTS_NOT_RUN)
    if result.verdict is Verdict.SANDBOX_ERROR:
        flags.add(Flag.SANDBOX_ERROR)
    if getattr(result, "possible_hack", ""):
        flags.add(Flag.POSSIBLE_HACK)
    return flags


def detect(sample: Sample, policy: HackPolicy) -> frozenset[Flag]:
    flags: set[Flag] = set()
    stdio = isinstance(sample.task.tests, StdioTests)
    for result in (sample.result, sample.visible_result):
        if result is not None:
            flags |= execution_flags(result, stdio)
    if sample.program is None:
        flags.add(Flag.NO_CODE)
    elif policy.check_hardcoded and hardcodes_visible(sample.program, sample.task):
        flags.add(Flag.HARDCODED_VISIBLE)
    v, h = sample.visible_result, sample.result
    if v is not None and h is not None and v.pass_rate - h.pass_rate >= policy.gap:
        flags.add(Flag.VISIBLE_HIDDEN_GAP)
    return frozenset(flags)


def apply(
    result: RewardResult, flags: frozenset[Flag], policy: HackPolicy, lower_bound: float
) -> RewardResult:
    """Attach `flags`, and cap the score of a penalised, unmasked sample."""
    flags = result.flags | flags
    if result.masked:
        return replace(result, flags=flags)
    score, why = result.score, []
    for flag in sorted(flags):
        cap = policy.penalties.get(flag.value)
        if cap is None:
            continue
        cap_value = lower_bound if cap == "min" else float(cap)
        if cap_value < score:
            score = cap_value
        why.append(flag.value)
    reason = result.reason
    if why:
        reason = (reason + "; " if reason else "") + f"penalised for {', '.join(why)}"
    return replace(result, score=score, flags=flags, reason=reason)
