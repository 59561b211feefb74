"""A command execrl starts outside the pool (an agent harness), confined as a sandbox run is.

A harness is a program execrl did not write, driven by the model being trained, and it runs
outside the pool: it talks to the policy server on the host's loopback. What it must not reach:
the hidden tests and official answers (wherever benchmark data lives: the list the sandbox's
filesystem layer hides, `hidden_paths.benchmark_data`), the other episodes of its batch (their
folders, answers, processes), and anything a later grading or episode reads (the trainer's
working directory, /tmp, execrl's own code and the virtual environment). So each one starts
through this launcher, with the sandbox's own pieces (`isolation.cover`, `syscalls`), in a mount
and a pid namespace of its own (and a user namespace, without root) where:

- every benchmark-data location is covered (an empty tmpfs, or /dev/null for a file), and so
  is every task file the run named by its path (`jsonl:PATH`, `apps:PATH`: `registry.files_read`);
- the root is read-only; writable are its episode's folder (its working directory), and a
  /tmp and /dev/shm of its own (tmpfs, gone when it ends): nothing one episode writes is seen
  by another, by the trainer or by a grading;
- the runner's folder of episode folders is covered, and this episode's folder alone bound
  back at its own path (named by a secret, so that no harness could guess a sibling's);
- /proc is the pid namespace's own: no other process, and so no `/proc/PID/root` way round
  the covers, nor a sibling's environment (which holds its key) or memory;
- as root it runs under a uid of its own (`isolation.UidLease`, as a run does), with no group,
  no capability and no new privilege (a setuid program gives none); homes are covered, the
  paths it needs from them (the interpreter, execrl, the trainer's working directory, the
  command's files: `keep`) bound back read-only. Without root it has no capability after exec
  (a user namespace's are lost at exec by a non-zero uid);
- its memory (address space, per process, as the sandbox's fallback) and processes are capped
  (`memory_mb`, `processes`; the process limit binds for its uid alone, in its namespace).

The network namespace is the host's: the harness reaches the policy server on 127.0.0.1.
The launcher is pid 1 of the namespace and reaps; the harness is its child, and when the
harness exits every process it left there dies with the namespace.

    python -I -c LAUNCH SPEC   (`launcher_argv`; SPEC: a `Confinement` as JSON)
"""

from __future__ import annotations

import json
import os
import resource
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
    folder: str  # this episode's folder, inside `workdir`: bound back, writable, the cwd
    argv: tuple[str, ...]  # the harness command
    # bound back read-only where their folders are covered (/tmp; homes as root): the
    # interpreter, execrl, the trainer's working directory, the command's own files
    keep: tuple[str, ...] = ()
    memory_mb: int = 4096  # each process's address space; the size of its /tmp and /dev/shm
    processes: int = 256  # processes and threads of its uid (RLIMIT_NPROC)


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
    uid = None
    if os.getuid() == 0:  # a uid of its own, held (a lock) while this launcher lives
        from execrl.sandbox.confine.isolation import UidLease

        lease = UidLease()  # its lock is not inherited: it goes when this process does
        uid = lease.uid
        for path in (spec.folder, *(str(p) for p in Path(spec.folder).iterdir())):
            os.chown(path, uid, uid)
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
        _confine(spec, uid is not None)
    except OSError as exc:
        _fail(f"cannot confine the harness: {exc}")
    harness = os.fork()
    if harness == 0:
        try:
            _become(spec, uid)
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


def _confine(spec: Confinement, cover_homes: bool) -> None:
    """The mounts, as the filesystem layer makes a worker's (`isolation`): covers, the
    episode's folder bound back, a private /tmp and /dev/shm, the rest read-only."""
    from execrl.sandbox.confine import isolation, syscalls
    from execrl.sandbox.confine.hidden_paths import inside, outermost, private_dirs

    syscalls.mount(None, "/", None, syscalls.MS_REC | syscalls.MS_PRIVATE, None)
    flags = syscalls.MS_NOSUID | syscalls.MS_NODEV
    own = os.open(spec.folder, os.O_PATH | os.O_DIRECTORY)  # reached after its parent is covered
    for path in outermost([p for p in spec.hide if os.path.lexists(p)]):
        if os.path.isdir(path):  # empty and read-only
            syscalls.mount("execrl-hidden", path, "tmpfs", flags | syscalls.MS_RDONLY, "size=4k")
        else:
            syscalls.mount("/dev/null", path, None, syscalls.MS_BIND, None)
    # Homes, as root (its own uid could not pass through them to the interpreter), and /tmp:
    # covered, what the harness needs from them bound back (`isolation.cover`, through a stage)
    here = os.path.realpath(os.getcwd())
    covered = [d for d in private_dirs() if d != here] if cover_homes else []
    stage = "/dev/shm"
    syscalls.mount("execrl-stage", stage, "tmpfs", flags, "size=1m,mode=0700")
    private = f"size={spec.memory_mb}m,mode=1777"
    for directory in [*covered, "/tmp"]:
        keep = [k for k in spec.keep if inside(k, directory) and k != directory]
        options = private if directory == "/tmp" else "size=1m,mode=0755"
        isolation.cover(directory, keep, stage, options)
    syscalls.umount(stage)
    syscalls.mount("execrl-private", stage, "tmpfs", flags, private)
    os.makedirs(spec.workdir, exist_ok=True)  # in the fresh /tmp, where it usually was
    syscalls.mount("execrl-episodes", spec.workdir, "tmpfs", flags, "size=1m,mode=0711")
    place = os.path.join(spec.workdir, os.path.basename(spec.folder))
    os.mkdir(place, 0o700)
    syscalls.mount(f"/proc/self/fd/{own}", place, None, syscalls.MS_BIND, None)
    os.close(own)
    syscalls.set_readonly("/", True, recursive=True)
    for writable in (place, "/tmp", stage):
        syscalls.set_readonly(writable, False, recursive=False)
    syscalls.mount("proc", "/proc", "proc", flags | MS_NOEXEC, None)


def _become(spec: Confinement, uid: int | None) -> None:
    """In the harness's process, before its exec: its folder, its limits, its uid (as root),
    and no capability or new privilege."""
    from execrl.sandbox.confine import syscalls

    os.chdir(spec.folder)
    memory = spec.memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_NPROC, (spec.processes, spec.processes))
    syscalls.prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1)  # a setuid program gives no privilege
    if os.getuid() == 0:
        syscalls.drop_bounding_set()
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        syscalls.clear_capabilities()


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
