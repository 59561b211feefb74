"""Asynchronous training (`rl.max_staleness`): the rollout thread's version schedule, the
synchronous run unchanged at k = 0, a k = 1 run that learns, logs its staleness and resumes bit
for bit, and the refusals (several processes, a negative k)."""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import dataclass

import pytest
import torch

from execrl.cli import main
from execrl.models import LoraSpec, load_policy
from execrl.models.engines.engine import InProcessEngine
from execrl.rewards.result import RewardResult
from execrl.rl import prefetch as rl_prefetch
from execrl.rl import run as run_module
from execrl.rl.config.config import ConfigError, load_config
from execrl.rl.prefetch import Prefetcher, behaviour_version, policy_copy
from execrl.rl.run import train

from .conftest import LetterE, tasks, tiny_config
from .test_train import (  # metrics without timings; the final weights
    _rows,
    _weights,
    assert_learned,
)


def test_each_step_is_generated_by_the_policy_k_updates_back():
    # k = 1 from a fresh start: steps 0, 1, 2, 3 <- versions 0, 0, 1, 2 (staleness 0, 1, 1, 1)
    assert [behaviour_version(t, 1, 0) for t in range(4)] == [0, 0, 1, 2]
    # k = 2: 0, 0, 0, 1, 2 (the first k steps use the initial policy)
    assert [behaviour_version(t, 2, 0) for t in range(5)] == [0, 0, 0, 1, 2]
    # resumed at step 5 (the first version this process has is 5): 5, 5, 6
    assert [behaviour_version(t, 1, 5) for t in range(5, 8)] == [5, 5, 6]


def _linear(value: float) -> torch.nn.Linear:
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(value)
    return model


def _prefetcher(model, k, steps, produce=None, first=0):
    shadow = policy_copy(model)
    engine = InProcessEngine("loop", shadow, None)
    # the batch a step "gathers" here is the weight its generator held: the version's number
    produce = produce or (lambda step: (float(engine.model.weight.item()), {"step": step}))
    return Prefetcher(produce, shadow, engine, k, first, steps).start(model)


@pytest.mark.parametrize("k", [1, 2])
def test_the_rollout_thread_samples_exactly_the_version_k_back(k):
    model = _linear(0.0)  # version v has weight v: each update adds 1
    prefetch = _prefetcher(model, k, steps=6)
    seen = []
    for step in range(6):
        item = prefetch.take(step)
        seen.append((item.step, item.gathered, item.staleness, item.sampled["step"]))
        with torch.no_grad():
            model.weight.add_(1.0)
        prefetch.publish(step + 1, model)
    prefetch.close()
    assert seen == [(t, float(max(t - k, 0)), t - max(t - k, 0), t) for t in range(6)]
    assert model.weight.requires_grad and not prefetch.shadow.weight.requires_grad


def test_the_thread_gathers_ahead_without_waiting_for_the_update():
    model = _linear(0.0)
    prefetch = _prefetcher(model, 1, steps=4)
    assert prefetch.take(0).gathered == 0.0
    # no update published yet: step 1 (version 0) is gathered all the same; step 2 waits
    ahead = prefetch.drain()
    assert [x.step for x in ahead] == [1] and prefetch.next_step == 2
    prefetch.close()


def test_a_lora_policy_copy_takes_each_version_through_its_adapter_only(tiny_model_dir):
    policy = load_policy(str(tiny_model_dir), lora=LoraSpec(2, 4, 0.0, ("q_proj", "v_proj")))
    model, shadow = policy.model, policy_copy(policy.model)
    published = rl_prefetch._trainable(model)
    assert published and all("lora_" in name for name in published)  # not the frozen base
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.5)
    rl_prefetch._load(shadow, rl_prefetch._trainable(model))
    theirs = shadow.state_dict()
    assert all(torch.equal(value, theirs[name]) for name, value in model.state_dict().items())


def test_a_failure_in_the_rollout_thread_is_raised_in_the_trainer():
    def produce(step):
        if step == 1:
            raise ValueError("task t3: the sandbox is gone")
        return 0.0, {}

    model = _linear(0.0)
    prefetch = _prefetcher(model, 1, steps=4, produce=produce)
    prefetch.take(0)
    with pytest.raises(ValueError, match="sandbox is gone"):
        prefetch.take(1)
    prefetch.close()


def test_max_staleness_0_is_the_synchronous_run_bit_for_bit(tiny_model_dir, tmp_path, monkeypatch):
    def no_thread(*args, **kwargs):
        raise AssertionError("rl.max_staleness = 0 must not start a rollout thread")

    monkeypatch.setattr(run_module, "Prefetcher", no_thread)
    for name, extra in (("sync", ()), ("k0", ("rl.max_staleness=0",))):
        config = tiny_config(tiny_model_dir, tmp_path / name, "run.steps=2", *extra)
        train(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    sync, k0 = tmp_path / "sync" / "run", tmp_path / "k0" / "run"
    assert _rows(sync) == _rows(k0)
    assert not any(k.startswith("async/") for r in _rows(k0) for k in r)
    a, b = _weights(sync), _weights(k0)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_with_frozen_weights_the_thread_gathers_the_synchronous_batches(tiny_model_dir, tmp_path):
    """lr = 0: every version is the same policy, so the thread must draw the same prompts, with
    the same seeds, in the same order as the synchronous run: the same samples step by step."""
    for name, extra in (("sync", ()), ("async", ("rl.max_staleness=1",))):
        config = tiny_config(tiny_model_dir, tmp_path / name, "optim.lr=0.0", "run.steps=3", *extra)
        train(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    sync, ahead = _rows(tmp_path / "sync" / "run"), _rows(tmp_path / "async" / "run")
    keys = ("reward_mean", "reward_std", "pass_rate", "len_mean", "groups_drawn", "groups_kept")
    assert [[r[k] for k in keys] for r in sync] == [[r[k] for k in keys] for r in ahead]
    assert [r["async/staleness"] for r in ahead] == [0, 1, 1]
    # pi_old recomputed by the trainer's forward against the sampler's own numbers: equal
    # weights, so only float rounding between the decode loop and the full forward
    assert all(r["engine/logprob_diff_max"] < 1e-4 for r in ahead)


@pytest.mark.slow
def test_episodes_are_gathered_ahead_as_the_synchronous_run_gathers_them(tiny_model_dir, tmp_path):
    """[env] self_correct: the rollout thread runs whole episodes on its own engine."""
    extra = ("env.name='self_correct'", "run.steps=3", "optim.lr=0.0", "rl.dynamic_sampling=false")
    for name, more in (("sync", ()), ("async", ("rl.max_staleness=1",))):
        config = tiny_config(tiny_model_dir, tmp_path / name, *extra, *more)
        train(config, tasks=tasks(), heldout=[], quiet=True)
    sync, ahead = _rows(tmp_path / "sync" / "run"), _rows(tmp_path / "async" / "run")
    keys = ("reward_mean", "len_mean", "episode/turns_mean", "episode/feedback_tokens_mean")
    assert [[r[k] for k in keys] for r in sync] == [[r[k] for k in keys] for r in ahead]
    assert [r["async/staleness"] for r in ahead] == [0, 1, 1]
    # a step whose groups all scored alike trains no row and has no gap to log
    # (`LearnerSettings.skips_idle_rows`)
    assert all(r.get("engine/logprob_diff_max", 0.0) < 1e-4 for r in ahead)


def test_one_step_stale_rollouts_still_learn_and_log_staleness(tiny_model_dir, tmp_path):
    config = tiny_config(tiny_model_dir, tmp_path, "run.steps=8", "rl.dynamic_sampling=false",
                         "rl.max_staleness=1")  # fmt: skip
    summary = train(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    rows = assert_learned(tiny_model_dir, tmp_path / "run")
    assert [r["async/staleness"] for r in rows] == [0] + [1] * 7
    # from step 1 the behaviour policy is an update behind: its log-probs differ from pi_old
    assert rows[0]["engine/logprob_diff_max"] < 1e-4
    assert all(r["engine/logprob_diff_max"] > 1e-4 for r in rows[1:])
    assert all(0.0 <= r["engine/tis_truncated"] <= 1.0 for r in rows)
    assert summary["async/staleness_max"] == 1 and summary["async/staleness_mean"] == 7 / 8


@dataclass(frozen=True)
class SignalOnCall(LetterE):
    """LetterE that sends the process SIGINT at its `at`-th sample (a user's Ctrl-C mid-run)."""

    at: int = 20
    calls: list = None  # type: ignore[assignment]

    def __call__(self, sample) -> RewardResult:
        self.calls.append(1)
        if len(self.calls) == self.at:
            os.kill(os.getpid(), signal.SIGINT)
        return super().__call__(sample)


@pytest.mark.slow
def test_an_interrupted_asynchronous_run_resumes_bit_for_bit(tiny_model_dir, tmp_path):
    extra = ("rl.max_staleness=1", "rl.dynamic_sampling=false", "run.steps=5")
    straight = tiny_config(tiny_model_dir, tmp_path / "a", *extra)
    train(straight, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    # 16 samples a step: the 20th is scored while the thread gathers step 1
    stopped = tiny_config(tiny_model_dir, tmp_path / "b", *extra)
    summary = train(stopped, tasks=tasks(), heldout=[], reward=SignalOnCall(calls=[]), quiet=True)
    at = summary["interrupted_at"]
    saved = torch.load(tmp_path / "b" / "run" / "checkpoint" / f"prefetched-{at}.pt",
                       weights_only=False)  # fmt: skip
    # the thread was drained: the batches of steps at .. at + k were gathered and kept
    assert [x.step for x in saved["items"]] == [at, at + 1]
    resumed = tiny_config(
        tiny_model_dir, tmp_path / "ignored", *extra, f"run.resume={str(tmp_path / 'b' / 'run')!r}"
    )
    train(resumed, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    assert _rows(tmp_path / "a" / "run") == _rows(tmp_path / "b" / "run")
    a, b = _weights(tmp_path / "a" / "run"), _weights(tmp_path / "b" / "run")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert sorted(p.name for p in (tmp_path / "b" / "run" / "checkpoint").iterdir()) == [
        "prefetched-5.pt",
        "state.pt",
    ]


def test_a_resume_without_the_prefetched_batches_says_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"prefetched-3\.pt is missing.*rl\.max_staleness"):
        rl_prefetch.load_prefetched(tmp_path, 3)


def test_several_processes_are_refused_before_anything_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    config = load_config(None, ["rl.max_staleness=1", f"run.out_dir={str(tmp_path)!r}",
                                "model.path='/nonexistent/model'"])  # fmt: skip
    with pytest.raises(ConfigError, match=r"rl.max_staleness = 1 with 2 processes"):
        train(config, quiet=True)
    assert not any(tmp_path.iterdir())  # no run directory


def test_a_negative_max_staleness_is_a_config_error():
    with pytest.raises(ConfigError, match="rl.max_staleness must be at least 0"):
        load_config(None, ["rl.max_staleness=-1"])


def test_execrl_train_runs_asynchronously(tiny_model_dir, tmp_path, capsys, monkeypatch):
    config = tmp_path / "c.toml"
    config.write_text(
        f"[model]\npath = {str(tiny_model_dir)!r}\n"
        "[data]\nn_train = 8\nn_heldout = 2\nheldout_samples = 1\n"
        "[rl]\ngroup_size = 2\ngroups_per_step = 2\ndynamic_sampling = false\n"
        "[sampling]\nmax_new_tokens = 6\n"
        f"[run]\nsteps = 3\nout_dir = {str(tmp_path)!r}\nname = 'r'\n"
        "[sandbox]\nworkers = 1\n"
    )
    threads = set()
    original = rl_prefetch.Prefetcher._run

    def spy(self):
        threads.add(threading.current_thread().name)
        original(self)

    monkeypatch.setattr(rl_prefetch.Prefetcher, "_run", spy)
    assert main(["train", "--config", str(config), "--set", "rl.max_staleness=1"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "heldout_pass@1_after" in summary and summary["async/staleness_max"] == 1
    assert threads == {"execrl-rollouts"}
    rows = _rows(tmp_path / "r")
    assert [r["async/staleness"] for r in rows] == [0, 1, 1]
    assert "max_staleness = 1" in (tmp_path / "r" / "config.toml").read_text()
