"""The "tool" environment: the model may run code in the sandbox while it answers.

The call syntax is a fenced block whose info string is `python exec`:

    ```python exec
    print(sorted([3, 1, 2]))
    ```

A turn holding such a block (the first one counts) is a tool call: the code runs in the sandbox
(no stdin, the scorer's limits), and what it printed, with the exception if it raised, comes back
as a tool turn, cut to `tool_output_chars`. A turn without one is the final answer, graded by
the hidden tests (it is also the answer once `tool_calls` calls or `max_turns` turns are spent).
The token budget of the whole episode is the caller's (`env.max_tokens`, which
`turn_loop.TurnLoop` applies).
"""

from __future__ import annotations

import re

from execrl.rewards.scoring.scorer import RewardScorer
from execrl.rl.episodes.env import (
    EnvConfig,
    Observation,
    StepInfo,
    StepResult,
    first_observation,
    grade,
)
from execrl.sandbox import Job, Verdict
from execrl.tasks.schema import StdioCase, StdioTests, Task

TOOL_CALL = re.compile(r"^```python exec[ \t]*\n(.*?)^```", re.S | re.M)


def tool_call(text: str) -> str | None:
    """The code of the first `python exec` block of a turn, or None."""
    match = TOOL_CALL.search(text)
    return match.group(1) if match else None


class ToolUse:
    name = "tool"

    def __init__(self, config: EnvConfig, scorer: RewardScorer) -> None:
        self.config = config
        self.scorer = scorer
        self.task: Task | None = None
        self.turn = 0
        self.calls = 0

    def reset(self, task: Task) -> Observation:
        self.task, self.turn, self.calls = task, 0, 0
        return first_observation(task)

    def step(self, model_output: str) -> StepResult:
        task = self.task
        assert task is not None, "reset(task) before step()"
        self.turn += 1
        code = tool_call(model_output)
        budget_left = self.calls < self.config.tool_calls and self.turn < self.config.max_turns
        if code is None or not budget_left:
            graded = grade(self.scorer, task, model_output)
            note = "" if code is None else "tool budget spent: this turn is the answer"
            info = StepInfo(self.turn, graded.passed, None, self.calls, note, graded.masked,
                            graded.scored)  # fmt: skip
            return StepResult(None, graded.reward, True, info)
        self.calls += 1
        output = self.run_code(code)
        text = f"Output:\n{output}"
        raw = f"\n```output\n{output}\n```\n"
        info = StepInfo(self.turn, tool_calls=self.calls)
        return StepResult(Observation(text, raw, role="tool"), 0.0, False, info)

    def run_code(self, code: str) -> str:
        """What the code printed, then its error if it failed, cut to the configured size."""
        job = Job(code, StdioTests((StdioCase("", ""),)), limits=self.scorer.limits, id="tool")
        result = self.scorer.sandbox.run(job)
        output = result.stdout
        failed = next((t for t in result.tests if t.verdict is not Verdict.PASSED), None)
        if result.verdict not in (Verdict.PASSED, Verdict.WRONG_ANSWER):
            detail = failed if failed is not None else None
            exc = (
                f"{detail.exception}: {detail.message}"
                if detail is not None and detail.exception
                else (detail.message if detail is not None else result.message)
            )
            line = f" (line {detail.line})" if detail is not None and detail.line else ""
            output += f"\n{result.verdict}: {exc}{line}"
        cap = self.config.tool_output_chars
        return output if len(output) <= cap else output[:cap] + "\n... (output cut)"
