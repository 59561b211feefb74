"""A run's memory limit is the run's, not each process's: processes of one run share it."""

from __future__ import annotations

import pytest

from execrl.sandbox import Job, Limits, Sandbox, Verdict
from execrl.sandbox.confine import memcg
from execrl.sandbox.grading import languages
from execrl.tasks.schema import StdioCase, StdioTests

# Four children, each touching 80 MiB and holding it until all four exist: 320 MiB at once,
# every process far below the run's 128 MiB on its own. Then the right answer.
FORK_HOG = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
int main(void) {
    int a, b, p[2];
    if (scanf("%d %d", &a, &b) != 2) return 1;
    if (pipe(p)) return 1;
    for (int k = 0; k < 4; k++) {
        if (fork() == 0) {
            volatile char *m = malloc(80 << 20);  /* volatile: no store is optimised away */
            if (!m) _exit(0);
            for (long i = 0; i < (80L << 20); i += 4096) m[i] = 1;
            write(p[1], "x", 1);
            sleep(1);
            _exit(0);
        }
    }
    char c;
    for (int k = 0; k < 4; k++) read(p[0], &c, 1);
    while (wait(NULL) > 0) {}
    printf("%d\n", a + b);
    return 0;
}
"""


def _mode() -> str:
    return memcg.probe()[0]


def test_a_compiled_program_that_forks_children_cannot_exceed_the_runs_memory():
    if languages.missing_tools("c"):
        pytest.skip("no C compiler")
    if _mode() == "rlimit":
        pytest.skip(f"no memory cgroup on this host: {memcg.probe()[1]}")
    job = Job(
        FORK_HOG,
        StdioTests((StdioCase("3 4\n", "7\n"),)),
        language="c",
        limits=Limits(memory_mb=128, wall_s=3),
    )
    with Sandbox(workers=1) as sb:
        assert sb.memory_mode.startswith("cgroup")
        r = sb.run(job)
        assert r.verdict is Verdict.MEMORY_LIMIT, (r.verdict, r.message)
        assert "together" in r.message
        # The same program within a limit that holds all four passes, in the same worker.
        roomy = Job(job.program, job.tests, language="c", limits=Limits(memory_mb=512, wall_s=10))
        ok = sb.run(roomy)
        assert ok.passed, ok.message
        assert ok.peak_memory_kb >= 4 * 80 * 1024  # the run's peak: all its processes
        assert sb.stats.sandbox_errors == 0


def test_an_honest_run_keeps_its_memory_limit_across_runs():
    """A Python run may still use its whole limit in one process, run after run."""
    program = "def f(n):\n    b = bytearray(n << 20)\n    return len(b) >> 20\n"
    from sandbox_helpers import call_job

    with Sandbox(workers=1) as sb:
        for _ in range(3):
            r = sb.run(call_job(program, [(100,)], [100], memory_mb=256))
            assert r.passed, r.message
        r = sb.run(call_job(program, [(400,)], [400], memory_mb=256))
        assert r.verdict is Verdict.MEMORY_LIMIT, (r.verdict, r.message)


def test_a_run_is_the_oom_killer_s_ordinary_choice_whatever_its_worker_s_score():
    """The worker lowers its own OOM score where it may; a run never inherits that (it resets
    its own only where the worker's moved: the reset costs each run a /proc lookup)."""
    from sandbox_helpers import call_job

    program = "def f():\n    return open('/proc/self/oom_score_adj').read().strip()\n"
    with Sandbox(workers=1) as sb:
        for _ in range(2):
            r = sb.run(call_job(program, [()], ["0"]))
            assert r.passed, (r.verdict, r.message)


def test_doctor_names_how_the_runs_memory_is_bound(capsys):
    import argparse

    from execrl.cli.sandbox_command import run_doctor

    run_doctor(argparse.Namespace(json=False))
    out = capsys.readouterr().out
    mode, detail = memcg.probe()
    assert f"memory      {mode}" in out and detail in out


def test_without_a_writable_memory_cgroup_the_rlimit_fallback_is_named():
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run as nobody")
    src = str(Path(memcg.__file__).resolve().parents[2])
    code = "from execrl.sandbox.confine import memcg; print(memcg.probe()[0])"
    out = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
        env={"PYTHONPATH": src, "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if out.returncode != 0:
        pytest.skip(f"this Python does not run as nobody: {out.stderr[-200:]}")
    assert out.stdout.strip() == "rlimit"
