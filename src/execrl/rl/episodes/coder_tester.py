"""`coder_tester`: one policy plays two roles in one episode of a coding task.

    turn 1, tester: the task's description -> a test suite, before any code exists
    turn 2, coder:  "now write the function" -> a program, graded by the hidden tests; then the
                    tester's tests run on it, and a failure gives a feedback turn listing them
    turn 3, coder:  the revision (env.max_turns = 3; with 2 the coder has one attempt)

The episode is one token-exact trajectory: the coder reads the tests its tester wrote (the
same policy, earlier in the conversation). Each turn says its role (`StepInfo.role`), and the
registration names the roles (`EnvKind.roles`), so the trainer estimates each role's
advantages over its own turns alone, compared with the same role's turns in the group's other
episodes (`rl.update.batch_builder.role_view`).

Rewards:
- coder: the hidden tests' reward tree on its final answer, on its last turn (the earlier turn
  0), as `self_correct`'s "final";
- tester: what its suite catches among the group's coders (`tester_grade.py`: the testgen
  verifier's score, 0 unless the suite passes on the reference, then 0.8 x the fraction of
  the group's wrong coder programs it rejects + 0.2 x coverage). It depends on the whole
  group, so it is set when the group is done (`finish_group`, `turn_loop.GroupRewarded`);
  until then the tester's turn holds 0.

Both grades reach the log as reward components of the episode (`tester/score`,
`tester/passes_reference`, `tester/kill_rate`, `tester/coverage`, `coder/score`); a sandbox
failure on either masks the episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample
from execrl.rewards.scoring.scorer import RewardScorer, ScoredSample, build_sample
from execrl.rl.episodes.builtin import _feedback_turn
from execrl.rl.episodes.env import EnvConfig, Observation, StepInfo, StepResult, grade
from execrl.rl.episodes.tester_grade import (
    TesterGrade,
    check_task,
    checks_of,
    failing_tests_text,
    grade_suites,
    suite_of,
    wrong_programs,
)
from execrl.rl.episodes.turn_loop import Episode
from execrl.sandbox import Job, Verdict
from execrl.tasks.schema import AssertTests, Task
from execrl.tasks.suites.testgen import PROMPT as TESTER_PROMPT

TESTER, CODER = "tester", "coder"
CODER_REQUEST = (
    "Now write the function `{entry}` described above. Answer with the whole solution in one "
    "code block."
)


class CoderTester:
    """The tester's turn, then up to `max_turns - 1` coder attempts; see the module docstring."""

    name = "coder_tester"

    def __init__(self, config: EnvConfig, scorer: RewardScorer) -> None:
        if config.max_turns < 2:
            raise ValueError(
                f"env.max_turns = {config.max_turns}: coder_tester counts the tester's turn and "
                "the coder's attempts, so it needs at least 2 (3: the coder may revise once)"
            )
        self.config, self.scorer = config, scorer
        self.task: Task | None = None
        self.checks: AssertTests | None = None
        self.turn = 0

    def reset(self, task: Task) -> Observation:
        check_task(task)
        self.task, self.checks, self.turn = task, None, 0
        text = TESTER_PROMPT.format(entry=task.entry_point, description=task.prompt)
        return Observation(text, text + "\n\n")

    def step(self, model_output: str) -> StepResult:
        task = self.task
        assert task is not None, "reset(task) before step()"
        self.turn += 1
        if self.turn == 1:
            self.checks = checks_of(suite_of(task, model_output))
            info = StepInfo(1, note="tests written; graded when the group is done", role=TESTER)
            return StepResult(_coder_turn(task), 0.0, False, info)
        graded = grade(self.scorer, task, model_output)
        info = StepInfo(self.turn, graded.passed, masked=graded.masked, graded=graded.scored,
                        role=CODER)  # fmt: skip
        if self.turn >= self.config.max_turns or self.checks is None:
            return StepResult(None, graded.reward, True, info)
        program = build_sample(task, model_output, self.scorer.config.program).program
        if program is None:
            feedback = (
                "No code was found in your answer. Write the whole solution in one code block."
            )
            return StepResult(_feedback_turn(task, feedback), 0.0, False, info)
        job = Job.for_task(task, program, self.scorer.limits, self.checks)
        result = self.scorer.sandbox.run(job)
        info = replace(info, visible_passed=result.passed)
        if result.passed:
            return StepResult(None, graded.reward, True, info)
        if result.verdict is Verdict.SANDBOX_ERROR:  # never the program's fault: no feedback
            masked = replace(info, masked=True, note="sandbox error on the tester's tests")
            return StepResult(None, graded.reward, True, masked)
        feedback = failing_tests_text(self.checks, result)
        return StepResult(_feedback_turn(task, feedback), 0.0, False, info)

    def finish_group(self, task: Task, episodes: Sequence[Episode]) -> list[Episode]:
        """The group's testers graded against its coders' wrong programs (`GroupRewarded`)."""
        answers = [s.info.graded for e in episodes for s in e.steps
                   if s.info.role == CODER and s.info.graded is not None]  # fmt: skip
        suites = [suite_of(task, e.outputs[0]) if e.outputs else None for e in episodes]
        grades = grade_suites(task, suites, wrong_programs(answers), self.scorer.sandbox,
                              self.scorer.limits)  # fmt: skip
        return [
            with_tester_grade(e, g, _tester_sample(task, e, g)) for e, g in zip(episodes, grades,
                                                                                strict=True)
        ]  # fmt: skip


def with_tester_grade(episode: Episode, graded: TesterGrade, sample: ScoredSample) -> Episode:
    """The episode with its tester's reward on the tester's turn (step and trajectory), the
    tester's grade as that step's `graded`, and both roles' grades among the final grade's
    reward components (what the training log averages)."""
    if not episode.steps or episode.steps[0].info.role != TESTER:
        return episode
    tester = episode.steps[0]
    info = replace(tester.info, note=graded.note, graded=sample, masked=graded.masked)
    steps = [replace(tester, reward=graded.reward, info=info), *episode.steps[1:]]
    final = steps[-1]
    if len(steps) > 1 and final.info.graded is not None:
        coder = final.info.graded
        parts = {**coder.reward.components, "coder/score": coder.reward.score,
                 "tester/score": graded.reward,
                 **{f"tester/{k}": v for k, v in graded.components.items()}}  # fmt: skip
        reward = replace(coder.reward, components=parts)
        masked = final.info.masked or graded.masked
        steps[-1] = replace(final, info=replace(final.info, graded=replace(coder, reward=reward),
                                                masked=masked))  # fmt: skip
    trajectory = episode.trajectory
    if trajectory is not None:
        rewards = (graded.reward, *trajectory.turn_rewards[1:])
        trajectory = replace(trajectory, turn_rewards=rewards)
    return replace(episode, steps=tuple(steps), trajectory=trajectory)


def _tester_sample(task: Task, episode: Episode, graded: TesterGrade) -> ScoredSample:
    """The tester's grade as the scoring path's record: its answer, its suite, the verifier's
    run and the reward with testgen's components."""
    answer = episode.outputs[0] if episode.outputs else ""
    sample = Sample(task, answer, suite_of(task, answer), result=graded.result)
    reward = RewardResult(graded.reward, graded.components, masked=graded.masked,
                          reason=graded.note)  # fmt: skip
    return ScoredSample(sample, reward)


def _coder_turn(task: Task) -> Observation:
    """The coder's request; a raw-text model continues the prompt again when it is code."""
    from execrl.models.prompting.prompting import is_code_prompt  # lazily: models imports torch

    text = CODER_REQUEST.format(entry=task.entry_point)
    raw = f"\n\n{task.prompt}" if is_code_prompt(task.prompt) else f"\n\n{text}\n"
    return Observation(text, raw)
