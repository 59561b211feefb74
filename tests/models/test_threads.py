"""torch's CPU threads chosen for the cores actually free (`models.threads`, issue 29 item 2),
the rule by hand; `tests/rl/test_threads_cli.py` goes through the commands."""

from __future__ import annotations

import pytest

from execrl.models.threads import Machine, ThreadChoice, choose_threads, for_vllm


@pytest.mark.parametrize(
    "cores, load, workers, processes, expected",
    [
        (2, 0.0, 2, 1, 2),  # 2 quiet cores: 2 threads beat 1 beside the short sandbox runs
        (2, 0.4, 2, 1, 2),  # round(1.6) = 2 free
        (2, 0.6, 2, 1, 1),  # round(1.4) = 1 free
        (2, 4.0, 2, 1, 1),  # two CPU hogs beside it and more: never below one thread
        (16, 0.0, 2, 1, 14),  # the sandbox workers keep a core each
        (16, 4.4, 2, 1, 10),  # round(11.6) = 12 free, less 2 workers
        (16, 0.0, 2, 2, 6),  # two torchrun processes: 8 cores each, less 2 workers
        (4, 0.0, 0, 1, 4),  # nothing beside it (execrl sft): every free core
    ],
)
def test_threads_follow_the_free_cores(cores, load, workers, processes, expected):
    choice = choose_threads(0, workers, Machine(cores, load, processes), "model.threads", env={})
    assert choice.threads == expected
    assert f"{cores} cores, load average {load:.1f} at start" in choice.line()


def test_what_a_person_set_wins_over_the_choice():
    busy = Machine(2, 9.0)
    assert choose_threads(3, 2, busy, "model.threads", env={"OMP_NUM_THREADS": "1"}).threads == 3
    assert choose_threads(3, 2, busy, "model.threads", env={}).line() == (
        "threads: torch uses 3 (model.threads = 3)"
    )
    by_env = choose_threads(0, 2, busy, "--threads", env={"OMP_NUM_THREADS": "2"})
    assert (by_env.threads, by_env.why) == (2, "OMP_NUM_THREADS=2")
    assert choose_threads(0, 2, busy, "--threads", env={"MKL_NUM_THREADS": "4"}).threads == 4
    assert choose_threads(0, 2, busy, "--threads", env={"OMP_NUM_THREADS": ""}).threads == 1


def test_under_vllm_a_choice_above_one_is_exported_and_one_is_left_to_vllm():
    """vLLM's worker keeps torch at OMP_NUM_THREADS when it is set and sets one thread when it
    is not (and then ignores torch.set_num_threads), so a choice of two must reach it as the
    variable, before its engine starts; a choice of one needs nothing; a person's own
    variable wins over the choice."""
    two = ThreadChoice(2, "2 cores, load average 0.4 at start")
    env: dict[str, str] = {}
    kept = for_vllm(two, env)
    assert env == {"OMP_NUM_THREADS": "2"} and kept.threads == 2
    assert "exported as OMP_NUM_THREADS" in kept.line()
    env = {}
    one = for_vllm(ThreadChoice(1, "2 cores, load average 3.0 at start"), env)
    assert env == {} and one.threads == 1 and "vLLM keeps one" in one.line()
    env = {"OMP_NUM_THREADS": "1"}
    theirs = for_vllm(two, env)
    assert env == {"OMP_NUM_THREADS": "1"} and theirs.threads == 1
    assert "OMP_NUM_THREADS=1, kept by vLLM" in theirs.why
