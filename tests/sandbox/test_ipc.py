"""SysV IPC and POSIX message queues: a run can create none, so nothing it made outlives it (a
segment left behind stays in memory, past the pool, until someone removes it, and runs of one
worker could talk through it). On the code before the fix the C program below got a segment, a
semaphore set, a message queue and a POSIX queue, all in the host's IPC namespace, as root and
as nobody."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import execrl
from execrl.sandbox import Job, Limits, Sandbox
from execrl.sandbox.confine import isolation
from execrl.sandbox.grading import languages
from execrl.tasks import StdioCase, StdioTests
from sandbox.unprivileged import cannot_run_as_nobody

# Prints what each call returned: -1 for every object the kernel refused, then whether the run
# could open its worker's IPC limits for writing (it must not be able to raise them again).
IPC = r"""
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
int main(void) {
    int shm = shmget(IPC_PRIVATE, 1 << 20, IPC_CREAT | 0666);
    if (shm >= 0) {
        char *p = shmat(shm, NULL, 0);
        if (p != (void *)-1) memset(p, 1, 1 << 20);
    }
    int sem = semget(IPC_PRIVATE, 1, IPC_CREAT | 0666);
    int msg = msgget(IPC_PRIVATE, IPC_CREAT | 0666);
    mqd_t mq = mq_open("/execrl-test", O_CREAT | O_RDWR, 0600, NULL);
    FILE *limit = fopen("/proc/sys/kernel/shmmni", "w");
    printf("%d %d %d %d %s\n", shm, sem, msg, (int)mq, limit ? "writable" : "locked");
    return 0;
}
"""
REFUSED = "-1 -1 -1 -1 locked\n"
NOBODY = 65534


def _objects(kind: str) -> set[str]:
    """Ids of the SysV objects of one kind ("m" segments, "s" semaphore sets, "q" message queues)
    in the host's IPC namespace that a sandbox uid owns (whatever else runs here is no concern)."""
    out = subprocess.run(["ipcs", f"-{kind}"], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines() if line.startswith("0x")]
    uids = {*range(isolation.UID_BASE, isolation.UID_BASE + isolation.UID_SLOTS), NOBODY}
    return {row[1] for row in rows if _uid(row[2]) in uids}


def _uid(owner: str) -> int | None:
    if owner.isdigit():
        return int(owner)
    return NOBODY if owner == "nobody" else None


def _cleanup(before: dict[str, set[str]]) -> None:
    """On the old code: do not leave the leaks pinned."""
    for kind in "msq":
        for ident in _objects(kind) - before[kind]:
            subprocess.run(["ipcrm", f"-{kind}", ident], check=False)
    ctypes.CDLL(None).mq_unlink(b"/execrl-test")


@pytest.mark.skipif(shutil.which("ipcs") is None, reason="ipcs (util-linux) is not installed")
def test_a_run_can_create_no_ipc_object_and_leaves_none_behind():
    if languages.missing_tools("c"):
        pytest.skip("no C compiler")
    before = {kind: _objects(kind) for kind in "msq"}
    job = Job(IPC, StdioTests((StdioCase("", REFUSED),)), language="c", limits=Limits(wall_s=20))
    try:
        with Sandbox(workers=1) as sb:
            r = sb.run(job)
            assert r.passed, (r.verdict, r.stdout, r.message)
            # The limits hold for the worker's life, not for its first run only.
            r = sb.run(job)
            assert r.passed, (r.verdict, r.stdout, r.message)
        assert {kind: _objects(kind) - before[kind] for kind in "msq"} == dict.fromkeys(
            "msq", set()
        )
    finally:
        _cleanup(before)


# Without root (here as nobody): the IPC namespace must belong to a user namespace where the
# worker is root, or it cannot set the limits, and /proc/sys must be read-only, or a run (which
# has the uid they are writable by) could raise them again.
AS_NOBODY = """
import subprocess, sys
sys.path.insert(0, "src")
from execrl.sandbox import Job, Limits, Sandbox
from execrl.sandbox.confine import isolation
from execrl.tasks import StdioCase, StdioTests
if sys.argv[1] == "probe":  # the pool starts its workers with sys.executable
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(sys.version_info >= (3, 11) and isolation.userns_available())
    sys.exit()
case = StdioCase("", open("expected.txt").read())
job = Job(open("ipc.c").read(), StdioTests((case,)), language="c", limits=Limits(wall_s=20))
with Sandbox(workers=1, layers=tuple(sys.argv[1].split(","))) as sb:
    r = sb.run(job)
    print(r.verdict.value, r.stdout, end="")
"""


def _as_nobody(python: str, base: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    cmd += [python, "script.py", *args]
    return subprocess.run(cmd, cwd=base, capture_output=True, text=True, timeout=180)


@pytest.mark.skipif(shutil.which("ipcs") is None, reason="ipcs (util-linux) is not installed")
@pytest.mark.parametrize("layers", ["network,filesystem", "network"])
def test_without_root_a_run_can_create_no_ipc_object(layers):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        cannot_run_as_nobody("needs root and setpriv to run as nobody")
    if languages.missing_tools("c"):
        pytest.skip("no C compiler")
    base = tempfile.mkdtemp(prefix="execrl-ipc-", dir="/var/tmp")
    before = {kind: _objects(kind) for kind in "msq"}
    try:
        src = Path(execrl.__file__).resolve().parent
        shutil.copytree(
            src, Path(base, "src", "execrl"), ignore=shutil.ignore_patterns("__pycache__")
        )
        Path(base, "script.py").write_text(AS_NOBODY)
        Path(base, "ipc.c").write_text(IPC)
        Path(base, "expected.txt").write_text(REFUSED)
        subprocess.run(["chmod", "-R", "a+rX", base], check=True)
        python = next(
            (
                p
                for p in (sys.executable, "/usr/bin/python3.11", "/usr/bin/python3")
                if os.path.exists(p) and _as_nobody(p, base, "probe").stdout.strip() == "True"
            ),
            None,
        )
        if python is None:
            cannot_run_as_nobody("no Python 3.11+ for nobody, or no unprivileged user namespaces")
        done = _as_nobody(python, base, f"{layers},rlimits,audit")
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout == "PASSED " + REFUSED, done.stdout
        assert {kind: _objects(kind) - before[kind] for kind in "msq"} == dict.fromkeys(
            "msq", set()
        )
    finally:
        _cleanup(before)
        shutil.rmtree(base, ignore_errors=True)
