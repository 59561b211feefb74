"""A run's life as a user meets it: resume with overrides, Ctrl-C / SIGTERM, progress, warnings,
LoRA's final directory, flagged samples, the sandbox backend."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass

import pytest
import torch

from execrl.cli import main
from execrl.rewards.result import Flag, RewardResult
from execrl.rl.progress import IdleWatch, setup_warnings
from execrl.rl.rollout.groups import GroupSummary
from execrl.rl.run import heldout_lines, train

from .conftest import LetterE, tasks, tiny_config


def _tiny_toml(model_dir, out_dir) -> str:
    return (
        f"[model]\npath = {str(model_dir)!r}\n"
        "[data]\nn_train = 8\nn_heldout = 2\nheldout_samples = 1\n"
        "[rl]\ngroup_size = 2\ngroups_per_step = 2\ndynamic_sampling = false\n"
        "[sampling]\nmax_new_tokens = 6\n"
        f"[run]\nsteps = 1\nout_dir = {str(out_dir)!r}\nname = 'r'\n"
        "[sandbox]\nworkers = 1\n"
    )


def _summary(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_resume_keeps_the_saved_config_and_honours_only_safe_overrides(
    tiny_model_dir, tmp_path, capsys
):
    config = tmp_path / "c.toml"
    config.write_text(_tiny_toml(tiny_model_dir, tmp_path))
    run = tmp_path / "r"
    assert main(["train", "--config", str(config)]) == 0
    before = _summary(capsys)["heldout_pass@1_before"]
    # --set run.steps continues the run; the saved config, not the CLI's defaults, is the base
    assert main(["train", "--resume", str(run), "--set", "run.steps=2"]) == 0
    summary = _summary(capsys)
    assert summary["steps"] == 2 and summary["heldout_pass@1_before"] == before
    saved = (run / "config.toml").read_text()
    assert "steps = 2" in saved and str(tiny_model_dir) in saved and "max_new_tokens = 6" in saved
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 2
    # without --set, the saved 2 steps stand (the CLI default of 160 does not win)
    assert main(["train", "--resume", str(run)]) == 0
    assert _summary(capsys)["steps"] == 2
    # an override that changes what the run trains is refused, with a message
    assert main(["train", "--resume", str(run), "--set", "optim.lr=0.5"]) == 2
    assert "cannot change optim.lr" in capsys.readouterr().err


@dataclass(frozen=True)
class SignalOnFirstCall(LetterE):
    """LetterE that sends the process `signum` while the first step scores (a user's Ctrl-C)."""

    signum: int = signal.SIGINT
    sent: list = None  # type: ignore[assignment]

    def __call__(self, sample) -> RewardResult:
        if not self.sent:
            self.sent.append(1)
            os.kill(os.getpid(), self.signum)
        return super().__call__(sample)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_finishes_the_step_saves_and_says_how_to_resume(
    tiny_model_dir, tmp_path, capsys, signum
):
    config = tiny_config(tiny_model_dir, tmp_path, "run.steps=4", "rl.dynamic_sampling=false")
    reward = SignalOnFirstCall(signum=signum, sent=[])
    # what the run must put back: default_int_handler, or SIG_IGN where the tests were started
    # in the background of a shell without job control
    before = signal.getsignal(signal.SIGINT)
    summary = train(config, tasks=tasks(), heldout=[], reward=reward)
    err = capsys.readouterr().err
    assert summary["interrupted_at"] == 1 and summary["steps"] == 1
    assert "execrl train --resume" in err and "step 1/4" in err  # and the progress line
    run = tmp_path / "run"
    state = torch.load(run / "checkpoint" / "state.pt", weights_only=False)
    assert state["step"] == 1 and len((run / "metrics.jsonl").read_text().splitlines()) == 1
    assert signal.getsignal(signal.SIGINT) is before  # handlers put back


def test_warnings_for_settings_that_cannot_learn():
    from execrl.rl.config.config import load_config

    (warning,) = setup_warnings(load_config(None, ["sampling.temperature=0"]))
    assert "sampling.temperature = 0" in warning and "grpo" in warning
    assert setup_warnings(load_config(None, ["sampling.temperature=0", "rl.algorithm='ppo'",
                                             "rl.group_size=1", "rl.dynamic_sampling=false"])) == []  # fmt: skip
    said: list[str] = []
    watch = IdleWatch(said.append, dynamic_sampling=True)
    for _ in range(3):
        row = {"groups_kept": 0, "skipped_update": 1.0}
        watch.step(row)
    assert row["idle_steps"] == 3 and len(said) == 1 and "dropped every group" in said[0]
    watch.step({"groups_kept": 2, "skipped_update": 0.0})
    assert watch.streak == 0


def test_flagged_samples_are_summarised_with_their_text():
    from execrl.models.engines.sampling import Completion
    from execrl.rewards.sample import Sample
    from execrl.rl.rollout.scored import Scored

    task = tasks(1)[0]
    completion = Completion(0, "import os; os._exit(0)", torch.tensor([1]), torch.tensor([2]),
                            torch.zeros(1), "eos")  # fmt: skip
    flagged = RewardResult(-1.0, {}, flags=frozenset({Flag.EARLY_EXIT}), reason="penalised")
    plain = RewardResult(0.0, {}, flags=frozenset({Flag.NO_CODE}))  # counted, not listed
    group = [Scored.answer(0, completion, r, Sample(task, completion.text, None))
             for r in (flagged, plain)]  # fmt: skip
    (f,) = GroupSummary.of(group).flagged
    assert (f.task_id, f.completion, f.flags, f.reason) == (
        "t0", "import os; os._exit(0)", ("early_exit",), "penalised"
    )  # fmt: skip


@pytest.mark.parametrize("merge", [False, True])
def test_lora_final_holds_the_adapter_or_the_merged_model(tiny_model_dir, tmp_path, merge):
    pytest.importorskip("peft")
    config = tiny_config(tiny_model_dir, tmp_path, "run.steps=1", "model.lora_r=2",
                         "model.lora_targets=['q_proj', 'v_proj']", f"run.merge_lora={str(merge).lower()}")  # fmt: skip
    train(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    final = tmp_path / "run" / "final"
    assert (final / "adapter_config.json").is_file() is not merge
    assert (final / "model.safetensors").is_file() is merge
    if merge:  # a plain model: loads without peft, no LoRA weights left in it
        from safetensors.torch import load_file

        assert not any("lora" in k for k in load_file(str(final / "model.safetensors")))


@pytest.mark.slow  # starting Ray takes ~25 s on 2 cores
def test_training_sends_execution_to_a_local_ray_sandbox(tiny_model_dir, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION", "0.01")
    config = tiny_config(tiny_model_dir, tmp_path, "run.steps=1", "sandbox.backend='ray'",
                         "sandbox.ray_actors=1", "rl.dynamic_sampling=false")  # fmt: skip
    try:
        train(config, tasks=tasks(), heldout=[], quiet=True)
    finally:
        import ray

        ray.shutdown()
    row = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert row["skipped_update"] in (0.0, 1.0) and row["exec_per_s"] >= 0.0


def test_the_two_held_out_figures_of_a_multi_turn_run_say_what_they_measure():
    summary = {"heldout_pass@1_before": 0.21875, "heldout_pass@1_by_turn_before": [0.2, 0.25]}
    one_turn = {"heldout_pass@1_before": 0.21875}
    assert heldout_lines(one_turn, "before", "single") == ["held-out pass@1 before: 0.219"]
    assert heldout_lines(summary, "before", "harness") == [
        "held-out pass@1 before: 0.219 (one turn: the policy alone on each task's prompt, "
        "without env 'harness')",
        "held-out pass@1 by turn before: [0.2, 0.25] (through env 'harness': the answers "
        "standing after turn 1, 2, ...; a harness's turn is a call to the policy)",
    ]
