"""The built-in environments "single" (one turn) and "self_correct" (attempts with feedback
from the visible tests; `visible.py` says which tests those are, per benchmark family)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from execrl.rewards.scoring.scorer import RewardScorer, ScoredSample, build_sample
from execrl.rl.episodes.env import (
    EnvConfig,
    Grade,
    Observation,
    PolicyTurn,
    StepInfo,
    StepResult,
    first_observation,
    grade,
)
from execrl.rl.episodes.trajectory import token_offsets
from execrl.rl.episodes.visible import (
    VisibleTests,
    checked_against_reference,
    feedback_text,
    verdict_text,
    visible_tests,
)
from execrl.sandbox import ExecutionResult, Job, Verdict
from execrl.tasks.schema import Task

FIX_REQUEST = "Fix the code. Answer with the whole corrected solution in one code block."


class Single:
    """One turn graded by the hidden tests: the default environment of training and evaluation.
    Its episodes step together (`env.StepsTogether`): the answers of a chunk's episodes are
    graded in one call of the scoring path, on the scoring thread while the next chunk generates
    (`rl.rollout.episode_sources`); `step` grades one answer the same way."""

    name = "single"

    def __init__(self, config: EnvConfig, scorer: RewardScorer) -> None:
        self.scorer = scorer
        self.task: Task | None = None

    def reset(self, task: Task) -> Observation:
        self.task = task
        return first_observation(task)

    def step(self, model_output: str) -> StepResult:
        return self.step_together([self], [PolicyTurn(model_output, [])])[0]

    @staticmethod
    def step_together(envs: Sequence[Single], turns: Sequence[PolicyTurn]) -> list[StepResult]:
        """Each episode's one turn graded by its task's hidden tests, all in one call of the
        scoring path; with a token engine's turns, each token's characters (token credit,
        `reward.token_credit`) and their count (a reward by length) go with the answers."""
        if not envs:
            return []
        scorer = envs[0].scorer
        tasks = [e.task for e in envs if e.task is not None]
        assert len(tasks) == len(envs), "reset(task) before step()"
        counted = all(t.tokenizer is not None for t in turns)  # a token engine's turns
        offsets = None
        if counted and scorer.config.token_credit.enabled:
            offsets = [token_offsets(t.tokenizer, t.token_ids, t.text) for t in turns]
        n_tokens = [len(t.token_ids) for t in turns] if counted else None
        answers = [t.text for t in turns]
        scored = scorer.score_samples(tasks, answers, offsets=offsets, n_tokens=n_tokens)
        return [_graded_turn(x) for x in scored]


def _graded_turn(scored: ScoredSample) -> StepResult:
    """A one-turn episode's step: its answer's grade ends it."""
    graded = Grade.of(scored)
    info = StepInfo(1, hidden_passed=graded.passed, masked=graded.masked, graded=scored)
    return StepResult(None, graded.reward, True, info)


class SelfCorrect:
    """Up to `max_turns` attempts. After each, the program runs on the visible tests only; a
    failure gives a feedback turn; the episode ends when they pass or the turns run out, and
    the hidden tests grade the final answer. With `turn_reward = "final"` the last turn gets
    that reward and earlier turns 0; with "improvement" each turn gets its grade minus the
    previous turn's (the same return, credited to the turn that fixed the program). Every
    attempt is graded on the hidden tests, for `StepInfo.hidden_passed` (evaluation by turn) and
    the improvement reward; that grade never reaches the model."""

    name = "self_correct"

    def __init__(self, config: EnvConfig, scorer: RewardScorer) -> None:
        self.config = config
        self.scorer = scorer
        self.task: Task | None = None
        self.visible: VisibleTests | None = None
        self.turn = 0
        self.previous = 0.0  # the last attempt's grade (turn_reward = "improvement")

    def reset(self, task: Task) -> Observation:
        self.task = task
        visible = visible_tests(task, self.config.visible_split)
        sandbox = self.scorer.sandbox
        self.visible = checked_against_reference(task, visible, sandbox) if visible else None
        self.turn, self.previous = 0, 0.0
        return first_observation(task)

    def step(self, model_output: str) -> StepResult:
        task = self.task
        assert task is not None, "reset(task) before step()"
        self.turn += 1
        graded = grade(self.scorer, task, model_output)
        info = StepInfo(self.turn, graded.passed, masked=graded.masked, graded=graded.scored)
        final = graded.reward - (self.previous if self.config.turn_reward == "improvement" else 0)
        if self.visible is None:
            note = "no visible tests: one attempt"
            return StepResult(None, final, True, replace(info, note=note))
        sample = build_sample(task, model_output, self.scorer.config.program)
        result = self._run_visible(task, sample.program)
        info = replace(info, visible_passed=result.passed)
        if result.passed or self.turn >= self.config.max_turns:
            return StepResult(None, final, True, info)
        if result.verdict is Verdict.SANDBOX_ERROR:  # never the program's fault: no feedback
            masked = replace(info, masked=True, note="sandbox error on the visible tests")
            return StepResult(None, final, True, masked)
        feedback = (
            feedback_text(self.visible, result, sample.program)
            if self.config.feedback == "full"
            else verdict_text(result, sample.program)
        )
        reward = final if self.config.turn_reward == "improvement" else 0.0
        self.previous = graded.reward
        return StepResult(_feedback_turn(task, feedback), reward, False, info)

    def _run_visible(self, task: Task, program: str | None) -> ExecutionResult:
        assert self.visible is not None
        if program is None:
            return ExecutionResult(Verdict.SYNTAX_ERROR, n_tests=len(self.visible.tests))
        job = Job.for_task(task, program, self.scorer.limits, self.visible.tests)
        return self.scorer.sandbox.run(job)


def _feedback_turn(task: Task, feedback: str) -> Observation:
    """Feedback as a user message; for a raw-text model, as comments followed by the prompt again
    when the prompt is code it continues (HumanEval style), else as plain text."""
    from execrl.models.prompting.prompting import is_code_prompt  # lazily: models imports torch

    if is_code_prompt(task.prompt):
        comment = "\n".join(f"# {line}".rstrip() for line in feedback.splitlines())
        raw = f"\n\n# Feedback on the attempt above:\n{comment}\n\n{task.prompt}"
    else:
        raw = f"\n\nFeedback:\n{feedback}\n\n{FIX_REQUEST}\n"
    return Observation(f"{feedback}\n\n{FIX_REQUEST}", raw)
