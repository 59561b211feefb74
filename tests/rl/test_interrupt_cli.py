"""What a person sees at a run's end, through the `execrl` command as a shell starts it (issue
42): Ctrl-C in a terminal (SIGINT to the whole foreground process group, sandbox workers
included) is a few lines and no traceback, the resume command is the one they typed, an
interrupted run leaves no final/ and its report says where it stopped; a finished run's report
says it finished; slow steps read as seconds per step, not `0.00 steps/s`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

EXECRL = Path(sys.executable).parent / "execrl"  # the console script beside this interpreter


def _sets(*settings: str) -> list[str]:
    return [a for s in settings for a in ("--set", s)]


def _small(model_dir: Path, out_dir: Path, name: str) -> list[str]:
    return _sets(f"model.path={str(model_dir)!r}", f"run.out_dir={str(out_dir)!r}",
                 f"run.name={name!r}", "data.n_train=8", "data.heldout=''", "rl.group_size=2",
                 "rl.groups_per_step=2", "sampling.max_new_tokens=8", "sandbox.workers=2",
                 "rl.dynamic_sampling=false", "run.trackers='none'", "model.threads=1")  # fmt: skip


SLOW_GRPO = """import dataclasses, time
from execrl.rl.objective.algorithms import REGISTRY


def slow():  # GRPO, each step's advantages 1.1 s late: steps slower than one a second
    grpo = REGISTRY["grpo"]

    def advantage(x):
        time.sleep(1.1)
        return grpo.advantage(x)

    return dataclasses.replace(grpo, advantage=advantage)
"""


def _started(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The command in a session of its own, taking SIGINT as a terminal's foreground job does.
    A suite started in the background by a script (`cmd &`) inherits SIGINT ignored, and an
    ignored disposition survives exec: Python then installs no KeyboardInterrupt handler, and
    the command would ignore the Ctrl-C this file sends. A handler is reset to the default by
    exec, so one held around the start gives the child the default."""
    held = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(argv, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, held)


def _interrupt_when(proc: subprocess.Popen, ready, timeout_s: float = 300) -> tuple[str, str]:
    """Ctrl-C as a terminal sends it (the whole process group) once `ready()`; the output."""
    deadline = time.monotonic() + timeout_s
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    return proc.communicate(timeout=300)


def test_ctrl_c_stops_execrl_train_without_tracebacks_and_its_resume_line_finishes_the_run(
    tiny_model_dir, tmp_path
):
    (tmp_path / "slow_grpo.py").write_text(SLOW_GRPO)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    typed = os.path.relpath(EXECRL, tmp_path)  # `.venv/bin/execrl`, from where the user is
    run, metrics = tmp_path / "cut", tmp_path / "cut" / "metrics.jsonl"
    argv = [typed, "train", *_small(tiny_model_dir, tmp_path, "cut"),
            *_sets("rl.algorithm='slow_grpo:slow'", "run.steps=500")]  # fmt: skip
    proc = _started(argv, tmp_path, env)
    out, err = _interrupt_when(proc, lambda: metrics.is_file() and metrics.read_text().count("\n"))
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    # its config names code (the slow estimator): the line trusts it, as its author does
    assert f"\n    {typed} train --resume {run} --trust-code\n" in err, err[-2000:]
    assert not (run / "final").exists()  # the policy is in checkpoint/, not a finished model
    assert "interrupted at step" in (run / "report.html").read_text()
    # the printed line, pasted as it is, one more step: that step reads in seconds per step
    at = json.loads(out.strip().splitlines()[-1])["interrupted_at"]
    resume = err.split("Resume with:\n", 1)[1].splitlines()[0].split()
    done = subprocess.run([*resume, "--set", f"run.steps={at + 1}"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [x for x in done.stderr.splitlines() if x.startswith("step ")]
    assert lines and all(" s/step " in x and "steps/s" not in x for x in lines), lines
    assert (run / "final" / "config.json").is_file()
    assert "<tr><td>status</td><td>finished</td></tr>" in (run / "report.html").read_text()


def test_ctrl_c_during_execrl_eval_is_one_line_saying_the_samples_are_kept(
    tiny_model_dir, tmp_path
):
    out_dir = tmp_path / "eval"
    argv = [str(EXECRL), "eval", "--model", str(tiny_model_dir), "--benchmark", "synthetic",
            "--limit", "60", "--batch-size", "1", "--max-new-tokens", "64", "--threads", "1",
            "--out-dir", str(out_dir)]  # fmt: skip
    samples = out_dir / "samples.jsonl"
    proc = _started(argv, tmp_path)
    out, err = _interrupt_when(proc, lambda: samples.is_file() and samples.read_text().count("\n"))
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == (
        "execrl eval: interrupted; the samples generated so far are saved: the same command "
        "continues from them"
    )
