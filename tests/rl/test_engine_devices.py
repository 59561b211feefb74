"""`sampling.engine_devices`: `execrl train` with its rollout engine in a process of its own (here
on the CPU beside the trainer) trains as the colocated run does; a list that does not fit the
run is a config error before any model loads."""

import json
import os
import subprocess
import sys

import pytest

from execrl.cli import main
from execrl.rl.metrics import of_the_run

SMALL = ["data.n_train=8", "data.heldout=''", "run.steps=2", "rl.group_size=2",
         "rl.groups_per_step=2", "sampling.groups_per_generate=1", "sampling.max_new_tokens=6",
         "sampling.temperature=1.0", "sandbox.workers=1", "model.threads=1",
         "rl.dynamic_sampling=false", "rl.entropy_coef=0.1", "optim.lr=0.01",
         "run.trackers='none'"]  # fmt: skip


def _train(model_dir, out_dir, name: str, *extra: str) -> int:
    settings = [*SMALL, f"model.path={str(model_dir)!r}", f"run.out_dir={str(out_dir)!r}",
                f"run.name={name!r}", *extra]  # fmt: skip
    return main(["train", *sum((["--set", s] for s in settings), [])])


def _rows(run_dir) -> list[dict]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [of_the_run(r) for r in rows]


# asynchronous: the rollout thread pushes to the engine process and samples from it
@pytest.mark.parametrize(
    "mode", ["rl.max_staleness=0", pytest.param("rl.max_staleness=1", marks=pytest.mark.slow)]
)
def test_a_run_with_its_engine_on_a_device_of_its_own_trains_as_the_colocated_run(
    tiny_model_dir, tmp_path, capsys, mode
):
    assert _train(tiny_model_dir, tmp_path, "here", mode) == 0
    assert _train(tiny_model_dir, tmp_path, "there", mode, "sampling.engine_devices=['cpu']") == 0
    here, there = _rows(tmp_path / "here"), _rows(tmp_path / "there")
    assert [r["step"] for r in there] == [0, 1]
    # the engine process drew the same completions with the same log-probabilities, and the
    # update after step 0 reached it: every logged number of both steps is the same
    assert there == here
    assert there[0]["loss"] != 0  # it trained: step 1 sampled the weights pushed after step 0


@pytest.mark.slow
def test_held_out_evaluation_samples_the_engine_process_as_the_colocated_engine(
    tiny_model_dir, tmp_path, capsys
):
    """Before and after training, through the engine process. A weak check of the numbers: the
    random tiny model passes nothing, so both runs' pass@1 are 0; it shows the path runs."""
    heldout = ("data.heldout='synthetic'", "data.n_heldout=4", "data.heldout_samples=2",
               "sampling.heldout_temperature=1.0", "run.steps=1")  # fmt: skip
    assert _train(tiny_model_dir, tmp_path, "here", *heldout) == 0
    assert (
        _train(tiny_model_dir, tmp_path, "there", *heldout, "sampling.engine_devices=['cpu']") == 0
    )
    summary = lambda name: {k: v for k, v in json.loads((tmp_path / name / "summary.json")  # noqa: E731
                            .read_text()).items() if k not in ("seconds", "run_dir")}  # fmt: skip
    assert "heldout_pass@1_after" in summary("there") and summary("there") == summary("here")


@pytest.mark.slow
def test_a_colocated_run_resumed_with_its_engine_on_a_device_of_its_own_ends_as_if_uninterrupted(
    tiny_model_dir, tmp_path, capsys
):
    """The resumed run's engine process starts from the model's start and is pushed the
    checkpoint's weights before its first step: the run ends where the uninterrupted one does."""
    assert _train(tiny_model_dir, tmp_path, "whole") == 0
    assert _train(tiny_model_dir, tmp_path, "cut", "run.steps=1") == 0
    resumed = ["train", "--resume", str(tmp_path / "cut"), "--set", "run.steps=2",
               "--set", "sampling.engine_devices=['cpu']"]  # fmt: skip
    assert main(resumed) == 0
    assert _rows(tmp_path / "cut") == _rows(tmp_path / "whole")


@pytest.mark.parametrize(
    ("devices", "world", "says"),
    [
        ("['cpu', 'cpu']", "1", "names 2 device(s) for 1 trainer process(es)"),
        ("['cpu']", "2", "names 1 device(s) for 2 trainer process(es)"),
        ("['tpu:0']", "1", "engine_devices[0] = 'tpu:0': not a device"),
        ("['cuda:7']", "1", "engine_devices[0] = 'cuda:7'"),
    ],
)
def test_engine_devices_that_do_not_fit_the_run_are_config_errors_before_loading(
    devices, world, says, tmp_path, capsys, monkeypatch
):
    from execrl.rl import setup

    monkeypatch.setenv("WORLD_SIZE", world)
    monkeypatch.setattr(setup, "build", lambda *a: pytest.fail("a model was loaded"))
    code = main(["train", "--set", f"sampling.engine_devices={devices}",
                 "--set", f"run.out_dir={str(tmp_path)!r}"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "sampling.engine_devices" in err and says in err
    assert len(err.strip().splitlines()) == 1  # one line, no traceback


@pytest.mark.slow
def test_torchrun_with_an_engine_process_per_trainer_process_trains_as_colocated(
    tiny_model_dir, tmp_path
):
    """Two FSDP processes, each with its engine process on the CPU (rank r uses entry r), each
    pushed its own gathered units over its own weight group: the same metrics as the two
    processes with their engines colocated."""
    for name, extra in (("here", []), ("there", ["sampling.engine_devices=['cpu','cpu']"])):
        sets = [*SMALL, f"model.path={str(tiny_model_dir)!r}", "dist.strategy='fsdp'",
                f"run.out_dir={str(tmp_path)!r}", f"run.name={name!r}", *extra]  # fmt: skip
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node", "2", "-m", "execrl.cli", "train"]  # fmt: skip
        command += sum((["--set", s] for s in sets), [])
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    here, there = _rows(tmp_path / "here"), _rows(tmp_path / "there")
    assert [r["step"] for r in there] == [0, 1] and there == here


def test_the_vllm_engine_gets_the_configured_memory_share(tiny_model_dir, tmp_path, monkeypatch):
    """sampling.engine_memory reaches vLLM as its gpu_memory_utilization (colocated or on a
    device of its own); a share outside (0, 1] is a config error before any model loads."""
    import importlib.util

    import pytest

    from execrl.rl import run as run_module
    from execrl.rl.config.config import ConfigError

    from .conftest import LetterE, tasks, tiny_config

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "vllm" else find_spec(name, *a))  # fmt: skip
    for bad in ("0", "1.5"):
        with pytest.raises(ConfigError, match="sampling.engine_memory"):
            tiny_config(tiny_model_dir, tmp_path, "sampling.engine='vllm'",
                        f"sampling.engine_memory={bad}")  # fmt: skip
    given: dict = {}

    class Made(Exception):
        pass

    def capture(name, model, tokenizer, *, device="", **options):
        given.update(options, name=name, device=device)
        raise Made

    monkeypatch.setattr(run_module, "make_engine", capture)
    config = tiny_config(tiny_model_dir, tmp_path, "sampling.engine='vllm'",
                         "sampling.engine_memory=0.85")  # fmt: skip
    with pytest.raises(Made):
        run_module.train(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    assert given["name"] == "vllm" and given["gpu_memory_utilization"] == 0.85
