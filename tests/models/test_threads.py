"""torch's CPU threads chosen for the cores actually free (`models.threads`, issue 29 item 2),
the rule by hand; `tests/rl/test_threads_cli.py` goes through the commands."""

from __future__ import annotations

import pytest

from execrl.models.threads import (
    Machine,
    ThreadChoice,
    choose_threads,
    for_vllm,
    threads_at_start,
)


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


def test_under_vllm_torch_runs_at_the_count_threads_start_with_or_is_left_to_vllm():
    """vLLM's CPU attention fails unless torch's count is the one OpenMP gives its threads
    (CI, 2026-12-07: a choice of one set in the trainer's thread beside threads starting with
    two failed eight vllm tests), and its worker keeps torch at OMP_NUM_THREADS when that is
    set and sets one thread when not. So a choice of at least that count runs at it, exported;
    a smaller one leaves torch where it is; a person's own variable wins over the choice."""
    two = ThreadChoice(2, "2 cores, load average 0.4 at start")
    env: dict[str, str] = {}
    kept = for_vllm(two, env, start=2)
    assert env == {"OMP_NUM_THREADS": "2"} and kept.threads == 2
    assert "exported as OMP_NUM_THREADS" in kept.line()
    env = {}
    capped = for_vllm(ThreadChoice(4, "model.threads = 4"), env, start=2)
    assert env == {"OMP_NUM_THREADS": "2"} and capped.threads == 2
    assert "set OMP_NUM_THREADS before execrl starts for more" in capped.why
    env = {}
    one = for_vllm(ThreadChoice(1, "2 cores, load average 3.0 at start"), env, start=2, current=2)
    assert env == {} and one.threads == 2, "torch's count must not move apart from its threads'"
    assert "until its engine sets one thread" in one.line()
    env = {"OMP_NUM_THREADS": "1"}
    theirs = for_vllm(two, env, start=2)
    assert env == {"OMP_NUM_THREADS": "1"} and theirs.threads == 1
    assert "OMP_NUM_THREADS=1, kept by vLLM" in theirs.why


def test_the_count_threads_start_with_is_read_from_openmp_not_from_torch():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    start = threads_at_start()
    try:
        torch.set_num_threads(1 if start > 1 else 2)  # the calling thread's count only
        assert threads_at_start() == start
    finally:
        torch.set_num_threads(before)
