"""A scripted policy drives each environment; the trajectory is checked token by token."""

from __future__ import annotations

from execrl.rl.episodes import EnvConfig, make_env
from execrl.rl.episodes.builtin import _feedback_turn
from execrl.tasks.schema import CallTests, Task

from .conftest import LOGPROB, play

PROMPT = 'def add(a, b):\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
# hidden: (10, 20) -> 30 and (7, -3) -> 4 appear nowhere in the prompt
ADD = Task(
    "t/add",
    PROMPT,
    CallTests(((1, 2), (10, 20), (7, -3)), (3, 30, 4)),
    entry_point="add",
)
WRONG, RIGHT = "    return a - b\n", "    return a + b\n"


def run(scorer, tokenizer, env: EnvConfig, turns: list[str], task: Task = ADD):
    return play(scorer, tokenizer, env, turns, task)


def test_self_correct_feedback_turn_and_the_exact_trajectory(scorer, tokenizer):
    policy, episode = run(scorer, tokenizer, EnvConfig("self_correct", max_turns=3), [WRONG, RIGHT])
    feedback = (
        "Your code failed a visible test (prompt examples, test 1).\n"
        "Test: add(1, 2)\nExpected: 3\nYour code returned: -1"
    )
    assert episode.observations == (
        feedback + "\n\n" + "Fix the code. Answer with the whole "
        "corrected solution in one code block.",
    )
    prompt = tokenizer.encode(PROMPT)
    env_ids = tokenizer.encode(_feedback_turn(ADD, feedback).raw, add_special_tokens=False)
    wrong, right = policy.ids(WRONG), policy.ids(RIGHT)
    traj = episode.trajectory
    assert traj.token_ids == tuple(prompt + wrong + env_ids + right)
    assert traj.loss_mask == tuple(
        [0] * len(prompt) + [1] * len(wrong) + [0] * len(env_ids) + [1] * len(right)
    )
    assert traj.logprobs == tuple(
        [0.0] * len(prompt) + [LOGPROB] * len(wrong) + [0.0] * len(env_ids) + [LOGPROB] * len(right)
    )
    a = len(prompt) + len(wrong) + len(env_ids)
    assert traj.turn_spans == ((len(prompt), len(prompt) + len(wrong)), (a, a + len(right)))
    assert traj.turn_rewards == (0.0, 1.0)  # earlier turns 0; the hidden tests grade the last
    # the model was given exactly the trajectory so far at each turn
    assert policy.seen == [[prompt], [prompt + wrong + env_ids]]
    assert [s.info.hidden_passed for s in episode.steps] == [False, True]
    assert episode.passed_by_turn(3) == [False, True, True]  # ended early: visible tests pass


def test_self_correct_stops_when_turns_run_out(scorer, tokenizer):
    _, episode = run(scorer, tokenizer, EnvConfig("self_correct", max_turns=2), [WRONG, WRONG])
    assert len(episode.steps) == 2 and episode.steps[-1].done
    assert episode.trajectory.turn_rewards == (0.0, 0.0)


def test_verdict_feedback_says_only_that_the_attempt_failed(scorer, tokenizer):
    """env.feedback = "verdict", the control: no test, input, value or line reaches the model."""
    env = EnvConfig("self_correct", max_turns=3, feedback="verdict")
    _, episode = run(scorer, tokenizer, env, [WRONG, "    return a +\n", RIGHT])
    fix = "\n\nFix the code. Answer with the whole corrected solution in one code block."
    assert episode.observations == (
        "Your code failed a visible test." + fix,
        "Your code failed before any test ran: SYNTAX_ERROR." + fix,
    )
    assert episode.passed_by_turn(3) == [False, False, True]


def test_exception_feedback_names_the_line(scorer, tokenizer):
    crash = "    return a / 0\n"
    _, episode = run(scorer, tokenizer, EnvConfig("self_correct", max_turns=2), [crash, RIGHT])
    text = episode.observations[0]
    assert "Test: add(1, 2)" in text and "Expected: 3" in text
    assert "ZeroDivisionError" in text and "line 6: return a / 0" in text


def test_single_is_one_turn_graded_by_the_hidden_tests(scorer, tokenizer):
    policy, episode = run(scorer, tokenizer, EnvConfig("single"), [RIGHT])
    prompt = tokenizer.encode(PROMPT)
    traj = episode.trajectory
    assert traj.token_ids == tuple(prompt + policy.ids(RIGHT))
    assert traj.loss_mask == tuple([0] * len(prompt) + [1] * len(policy.ids(RIGHT)))
    assert traj.turn_rewards == (1.0,) and len(policy.seen) == 1


def test_a_hidden_failure_the_visible_example_misses_is_graded_zero(scorer, tokenizer):
    # right on add(1, 2) only: the visible test passes, the episode ends, the hidden tests fail
    _, episode = run(scorer, tokenizer, EnvConfig("self_correct", max_turns=3), ["    return 3\n"])
    assert len(episode.steps) == 1 and episode.steps[0].info.visible_passed is True
    assert episode.trajectory.turn_rewards == (0.0,)


def test_tool_call_output_is_a_masked_tool_turn(scorer, tokenizer):
    call = "```python exec\nprint(2 + 3)\n```\n"
    policy, episode = run(scorer, tokenizer, EnvConfig("tool", max_turns=3), [call, RIGHT])
    assert episode.observations == ("Output:\n5\n",)
    env_ids = tokenizer.encode("\n```output\n5\n\n```\n", add_special_tokens=False)
    prompt, first, second = tokenizer.encode(PROMPT), policy.ids(call), policy.ids(RIGHT)
    traj = episode.trajectory
    assert traj.token_ids == tuple(prompt + first + env_ids + second)
    assert traj.loss_mask == tuple(
        [0] * len(prompt) + [1] * len(first) + [0] * len(env_ids) + [1] * len(second)
    )
    assert traj.turn_rewards == (0.0, 1.0)
    assert episode.steps[-1].info.tool_calls == 1


def test_tool_budget_spent_makes_the_turn_the_answer(scorer, tokenizer):
    call = "```python exec\nprint(1)\n```\n"
    _, episode = run(scorer, tokenizer, EnvConfig("tool", max_turns=3, tool_calls=0), [call])
    assert len(episode.steps) == 1 and episode.steps[0].done
    assert episode.steps[0].info.note.startswith("tool budget spent")


def test_tool_output_is_capped(scorer, tokenizer):
    call = "```python exec\nprint('x' * 5000)\n```\n"
    env = EnvConfig("tool", max_turns=2, tool_output_chars=100)
    _, episode = run(scorer, tokenizer, env, [call, RIGHT])
    assert episode.observations[0] == "Output:\n" + "x" * 100 + "\n... (output cut)"


def test_token_budget_truncates_the_episode(scorer, tokenizer):
    budget = len(tokenizer.encode(PROMPT)) + 1
    env = EnvConfig("self_correct", max_turns=3)
    _, episode = play(scorer, tokenizer, env, [WRONG, RIGHT], ADD, max_tokens=budget)
    assert episode.truncated and len(episode.steps) == 1
    assert episode.trajectory.turn_rewards == (0.0,)


def test_env_config_errors_name_the_field():
    import pytest

    with pytest.raises(ValueError, match="env.name 'nope'"):
        EnvConfig("nope")
    with pytest.raises(ValueError, match="env.max_turns"):
        EnvConfig("self_correct", max_turns=0)
    with pytest.raises(ValueError, match="cannot load"):
        make_env(EnvConfig("no_such_module_x:Env"), None)  # type: ignore[arg-type]


def first_feedback(scorer, task: Task, answer: str) -> str:
    env = make_env(EnvConfig("self_correct", max_turns=2), scorer)
    env.reset(task)
    result = env.step(answer)
    assert result.observation is not None, result.info
    return result.observation.text.split("\n\nFix the code.")[0]


def test_stdio_feedback_shows_the_public_input_and_both_outputs(scorer):
    from execrl.tasks.schema import StdioCase, StdioTests

    public = StdioTests((StdioCase("2 3\n", "5\n"),))
    hidden = StdioTests((StdioCase("2 3\n", "5\n"), StdioCase("40 2\n", "42\n")))
    task = Task("t/io", "Read two ints, print their sum.", hidden, visible_tests=public)
    answer = "```python\na, b = map(int, input().split())\nprint(a * b)\n```"
    assert first_feedback(scorer, task, answer) == (
        "Your code failed a visible test (public tests, test 1).\n"
        "Input:\n2 3\n\nExpected output: 5\n\nYour output: 6\n"
    )


def test_mbpp_feedback_uses_the_first_listed_test_only(scorer):
    from execrl.tasks.schema import AssertTests

    listed = AssertTests(statements=("assert add(1, 2) == 3", "assert add(10, 20) == 30"))
    task = Task("t/mbpp", "Write add.\nassert add(1, 2) == 3", listed, "add", visible_tests=listed)
    answer = "```python\ndef add(a, b):\n    return a - b\n```"
    assert first_feedback(scorer, task, answer) == (
        "Your code failed a visible test (first listed test, test 1).\n"
        "Test: add(1, 2)\nExpected: 3\nYour code returned: -1"
    )


def test_an_assert_that_is_not_a_call_is_shown_with_its_error(scorer):
    from execrl.tasks.schema import AssertTests

    listed = AssertTests(statements=("assert add(1, 2) > 2", "assert add(10, 20) == 30"))
    task = Task("t/gt", "Write add.", listed, "add", visible_tests=listed)
    answer = "```python\ndef add(a, b):\n    return a - b\n```"
    text = first_feedback(scorer, task, answer)
    assert text.startswith("Your code failed a visible test (first listed test, test 1).\n")
    assert "Test: assert add(1, 2) > 2" in text and "AssertionError" in text
    assert "10, 20" not in text


class BrokenSandbox:
    """Every run is an infrastructure failure (a worker that died on every retry)."""

    def run(self, job):
        from execrl.sandbox.grading.verdict import ExecutionResult, Verdict

        return ExecutionResult(Verdict.SANDBOX_ERROR, n_tests=len(job.tests), message="died")

    def run_many(self, jobs, progress=None):
        return [self.run(j) for j in jobs]


def test_a_sandbox_failure_masks_the_episode_instead_of_scoring_it(tokenizer):
    from execrl.rewards import RewardConfig, RewardScorer

    scorer = RewardScorer(RewardConfig(), sandbox=BrokenSandbox())
    _, episode = run(scorer, tokenizer, EnvConfig("self_correct", max_turns=3), [WRONG])
    assert len(episode.steps) == 1 and episode.masked  # no feedback made of a broken run
    _, single = run(scorer, tokenizer, EnvConfig("single"), [RIGHT])
    assert single.masked


def test_inline_prompt_examples_are_parsed():
    from execrl.rl.episodes.visible import prompt_examples

    prompt = (
        "def digitSum(s):\n"
        '    """Sum of upper-case codes.\n'
        '    digitSum("") => 0\n'
        '    digitSum("abAB") ➞ 131.\n'
        "    digitSum(x) => 7\n"  # not literal arguments: skipped
        '    >>> digitSum("A")\n'
        "    65\n"
        '    """\n'
    )
    assert prompt_examples(prompt, "digitSum") == CallTests(
        (("",), ("abAB",), ("A",)), (0, 131, 65)
    )


def test_a_prompt_example_the_reference_fails_is_never_fed_back(scorer):
    # HumanEval/47's docstring says median([-10, 4, 6, 1000, 10, 20]) is 15.0; it is 8.0
    prompt = (
        "def median(l):\n"
        '    """Median.\n    >>> median([3, 1, 2])\n    2\n'
        '    >>> median([-10, 4, 6, 1000, 10, 20])\n    15.0\n    """\n'
    )
    reference = (
        prompt
        + "    s = sorted(l)\n    n = len(s)\n"
        + ("    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\n")
    )
    hidden = CallTests((([1, 2, 3, 4],), ([5],)), (2.5, 5))
    task = Task("t/median", prompt, hidden, "median", reference=reference)
    env = make_env(EnvConfig("self_correct", max_turns=2), scorer)
    env.reset(task)
    # right on the true example, 10 (not the docstring's 15.0) on the wrong one, wrong on [1..4]
    result = env.step("    return sorted(l)[len(l) // 2]\n")
    assert result.done and result.observation is None  # no feedback from the wrong example
    assert result.info.visible_passed is True and result.info.hidden_passed is False
