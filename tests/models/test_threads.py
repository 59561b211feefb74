"""torch's CPU threads chosen for the cores actually free (`models.threads`, issue 29 item 2),
the rule by hand; `tests/rl/test_threads_cli.py` goes through the commands."""

from __future__ import annotations

import pytest

from execrl.models.threads import Machine, choose_threads, threads_under_vllm


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


def test_under_vllm_torch_keeps_its_count_and_the_line_says_what_vllm_does():
    """vLLM's attention plans with the count it finds when its engine starts and fails when the
    kernel runs with another, so the count is left as it stands; vLLM then sets torch to one
    thread unless OMP_NUM_THREADS is set, which the run's first line says."""
    import torch

    unset = threads_under_vllm({})
    assert unset.threads == torch.get_num_threads()
    assert "on one thread" in unset.line() and "set OMP_NUM_THREADS to choose" in unset.line()
    assert "OMP_NUM_THREADS=2, which vLLM keeps" in threads_under_vllm({"OMP_NUM_THREADS": "2"}).why
    assert "on one thread" in threads_under_vllm({"OMP_NUM_THREADS": "0"}).why
