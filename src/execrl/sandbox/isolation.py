"""Isolation layers: what the host supports, and how a worker and each run are confined.

Threat model. The candidate program is hostile and runs as Python code in a forked child of a
pre-warmed worker. It must not pass without passing the tests (see `harness`), and it must not
touch the host: read files it has no business reading, write anywhere but its scratch directory,
reach the network, signal or inspect other processes, exhaust the machine, or leave processes
behind. The layers below each close one of these doors; `execrl sandbox doctor` shows which are
active. A layer that was required but is unavailable stops the sandbox from starting unless the
user opts out (`SandboxConfig.allow_missing_layers`).

- `network`: the worker lives in a fresh network namespace with no interfaces up.
- `filesystem`: a private mount namespace: the root is read-only, home directories and the
  working directory are hidden behind empty tmpfs mounts (the Python installation is bound back
  read-only), /tmp is a size-limited tmpfs holding only the run's scratch directory, and /proc is
  remounted with hidepid=2 so that the run cannot see any process but its own.
- `uid`: each worker runs its programs under a uid of its own, with no groups; files private to
  the invoking user are unreadable, signals to other processes fail, RLIMIT_NPROC binds (it does
  not bind root), and at the end `kill(-1)` from that uid removes every process the run started,
  daemons and double forks included.
- `rlimits`: CPU time, address space, file size, open files, processes, no core dumps.
- `audit`: the in-process audit hook of the harness (always on).

Without root, `network` and `filesystem` come from an unprivileged user namespace where the
kernel allows one (`userns_available`): the worker enters new user, network, mount and pid
namespaces, becomes pid 1 of its pid namespace, confines the filesystem as above, and then drops
every capability, so that no run can undo a mount. A run keeps the user's uid (the namespace maps
that one uid only, so there is no `uid` layer), but it sees and can signal only the processes of
its own worker's namespace, /proc shows nothing else, the process limit counts only that
namespace's processes, and at the end `kill(-1)` from the worker (pid 1, which it cannot hit)
removes every process the run started. What it can still do that the `uid` layer would forbid:
read files the user can read outside the hidden directories.
"""

from __future__ import annotations

import os
import signal
import sys

from execrl.sandbox import syscalls

# Pool-side helpers import fcntl, tempfile and shutil lazily: the worker must stay small.

LAYERS = ("network", "filesystem", "uid", "rlimits", "audit")
UID_BASE = 0x30000  # 196608: far above distribution-allocated uids
UID_SLOTS = 4096
SCRATCH = "/tmp/run"
ENV_PATH = "/usr/local/bin:/usr/bin:/bin"


class LayerStatus:
    __slots__ = ("name", "available", "detail")

    def __init__(self, name: str, available: bool, detail: str) -> None:
        self.name, self.available, self.detail = name, available, detail


def probe_layers() -> list[LayerStatus]:
    """What this host can give, checked without changing anything."""
    root = os.geteuid() == 0
    linux = sys.platform.startswith("linux")
    userns = not root and linux and userns_available()
    why_not_root = (
        "needs root or an unprivileged user namespace, which this kernel refuses; run as root "
        "or opt out"
    )
    in_userns = " (in a user namespace: not root)"
    out = [
        LayerStatus(
            "network",
            (root and linux) or userns,
            "fresh network namespace" + ("" if root else in_userns)
            if root or userns
            else why_not_root,
        ),
        LayerStatus(
            "filesystem",
            (root and linux) or userns,
            "read-only root, hidden homes, tmpfs scratch, "
            + ("hidepid /proc" if root else "own pid namespace and /proc" + in_userns)
            if root or userns
            else why_not_root,
        ),
        LayerStatus(
            "uid",
            root,
            f"dedicated uid per worker from {UID_BASE}"
            if root
            else "needs root; without it runs keep your uid"
            + (" (inside their own user and pid namespace)" if userns else ""),
        ),
        LayerStatus("rlimits", True, "cpu, address space, file size, open files, processes"),
        LayerStatus("audit", sys.version_info >= (3, 8), "in-process audit hook of the harness"),
    ]
    return out


_USERNS_PROBE: list[bool] = []  # the answer, once found: the kernel's setting does not change


def userns_available() -> bool:
    """Whether this process may create the user, network, mount and pid namespaces a worker
    enters without root. Tried in a throwaway child, which changes nothing here."""
    if not _USERNS_PROBE:
        pid = os.fork()
        if pid == 0:
            try:
                _unshare_mapped()
                os._exit(0)
            except BaseException:  # noqa: BLE001 - any failure means "not available"
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        _USERNS_PROBE.append(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0)
    return _USERNS_PROBE[0]


def _unshare_mapped() -> None:
    uid, gid = os.getuid(), os.getgid()
    syscalls.unshare(
        syscalls.CLONE_NEWUSER
        | syscalls.CLONE_NEWNET
        | syscalls.CLONE_NEWNS
        | syscalls.CLONE_NEWPID
    )
    # The user's own uid and gid, and nothing else: no uid the run could switch to.
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{uid} {uid} 1"),
        ("gid_map", f"{gid} {gid} 1"),
    ):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


def enter_user_namespace() -> None:
    """Move this worker into new user, network, mount and pid namespaces, as pid 1 of the last.

    Returns in a forked child, which is the worker from now on; the calling process stays
    behind only to wait for it and exit with its status (so that the pool, which started it,
    sees the worker end). If that process dies (the pool kills it), the kernel kills the worker,
    and with it every process in its namespace."""
    _unshare_mapped()
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(alive_r)
        for fd in (0, 1):  # the worker's link to the pool is the child's alone
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
    os.close(alive_w)
    syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
    # The parent may have died before that line: then the pipe reads as closed.
    os.set_blocking(alive_r, False)
    try:
        gone = os.read(alive_r, 1) == b""
    except BlockingIOError:
        gone = False
    if gone:
        os._exit(1)
    os.close(alive_r)


def reap_namespace() -> None:
    """From pid 1 of the worker's pid namespace: kill every other process in it (the kernel
    spares the caller), atomically against forks, then leave the zombies to the caller."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


class UidLease:
    """An exclusive claim on one sandbox uid, held by a lock file for the pool's lifetime."""

    def __init__(self) -> None:
        import fcntl
        import tempfile

        lock_dir = (
            "/run/execrl-uids"
            if os.access("/run", os.W_OK)
            else os.path.join(tempfile.gettempdir(), "execrl-uids")
        )
        os.makedirs(lock_dir, mode=0o700, exist_ok=True)
        start = os.getpid() % UID_SLOTS
        for k in range(UID_SLOTS):
            uid = UID_BASE + (start + k) % UID_SLOTS
            fd = os.open(os.path.join(lock_dir, str(uid)), os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            return
        raise RuntimeError(
            f"no free sandbox uid in {UID_BASE}..{UID_BASE + UID_SLOTS}; too many pools running"
        )

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def reap_uid(uid: int) -> None:
    """Kill every process running under `uid` (a forked reaper drops to it and kills -1)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        except BaseException:  # noqa: BLE001 - nothing to kill is fine
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def setup_worker(
    layers: set[str], hide: list[str], keep: list[str], scratch_mb: int, userns: bool = False
) -> None:
    """Confine the worker process itself, once, before any run. With `userns` the namespaces
    exist already (`enter_user_namespace`), and the capabilities they gave are dropped at the
    end: a run that had them could unmount what hides the user's files."""
    if userns:
        if "filesystem" in layers:
            _confine_filesystem(hide, keep, scratch_mb)
        syscalls.drop_capabilities()
        return
    if "network" in layers and "filesystem" in layers:
        syscalls.unshare(syscalls.CLONE_NEWNET | syscalls.CLONE_NEWNS)
    elif "network" in layers:
        syscalls.unshare(syscalls.CLONE_NEWNET)
    elif "filesystem" in layers:
        syscalls.unshare(syscalls.CLONE_NEWNS)
    if "filesystem" in layers:
        _confine_filesystem(hide, keep, scratch_mb)


def _confine_filesystem(hide: list[str], keep: list[str], scratch_mb: int) -> None:
    syscalls.mount(None, "/", None, syscalls.MS_REC | syscalls.MS_PRIVATE, None)
    # Paths to keep are bound onto a staging tmpfs, the directories that hold them are covered
    # with empty tmpfs mounts, and the paths are bound back. /tmp is covered too (it becomes the
    # scratch filesystem), with whatever the interpreter needs from under it bound back.
    stage = next(d for d in ("/dev/shm", "/run", "/mnt") if os.path.isdir(d))
    syscalls.mount(
        "execrl-stage", stage, "tmpfs", syscalls.MS_NOSUID | syscalls.MS_NODEV, "size=1m,mode=0700"
    )
    for directory in [*hide, "/tmp"]:
        options = f"size={scratch_mb}m,mode=0711" if directory == "/tmp" else "size=1m,mode=0755"
        _hide(directory, [k for k in keep if _inside(k, directory)], stage, options)
    syscalls.umount(stage)
    syscalls.set_readonly("/", True, recursive=True)
    syscalls.set_readonly("/tmp", False, recursive=False)
    syscalls.mount("proc", "/proc", "proc", syscalls.MS_NOSUID | syscalls.MS_NODEV, "hidepid=2")


def _hide(directory: str, keep_inside: list[str], stage: str, options: str) -> None:
    if not os.path.isdir(directory) or directory == "/":
        return
    staged: list[tuple[str, str]] = []
    for n, path in enumerate(_outermost(keep_inside)):
        place = os.path.join(stage, str(n))
        os.mkdir(place)
        syscalls.mount(path, place, None, syscalls.MS_BIND | syscalls.MS_REC, None)
        staged.append((path, place))
    syscalls.mount(
        "execrl-hidden", directory, "tmpfs", syscalls.MS_NOSUID | syscalls.MS_NODEV, options
    )
    for path, place in staged:
        os.makedirs(path, mode=0o755, exist_ok=True)
        syscalls.mount(place, path, None, syscalls.MS_BIND | syscalls.MS_REC, None)
        syscalls.umount(place)
        os.rmdir(place)


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _outermost(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in sorted(set(paths)):
        if not any(_inside(p, q) for q in out):
            out.append(p)
    return out


def default_hide() -> list[str]:
    """Directories whose files the program has no business reading."""
    candidates = ["/root", "/home", os.path.expanduser("~"), os.getcwd()]
    out: list[str] = []
    for c in candidates:
        c = os.path.realpath(c)
        if c not in ("/", "/tmp") and not _inside(c, "/tmp") and os.path.isdir(c) and c not in out:
            out.append(c)
    return _outermost(out)


def default_keep() -> list[str]:
    """Paths the interpreter needs: its prefixes and import path (and execrl itself)."""
    import execrl

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(p for p in sys.path if p)
    paths.add(os.path.dirname(os.path.dirname(os.path.realpath(execrl.__file__))))
    exe = os.path.realpath(sys.executable)
    paths.add(os.path.dirname(exe))
    return sorted(os.path.realpath(p) for p in paths if os.path.isdir(p))


def make_scratch(uid: int | None, private_tmp: bool = True) -> str:
    """A fresh scratch directory owned by the run's uid, the only place it may write.

    The fixed path is only safe inside the worker's own /tmp (the filesystem layer); without
    it, workers of several pools would share the host's /tmp."""
    if not private_tmp:
        import tempfile

        path = tempfile.mkdtemp(prefix="execrl-run-")
        if uid is not None:
            os.chown(path, uid, uid)
        return path
    if os.path.lexists(SCRATCH):
        remove_scratch(SCRATCH)
    os.mkdir(SCRATCH, 0o700)
    if uid is not None:
        os.chown(SCRATCH, uid, uid)
    return SCRATCH


def remove_scratch(path: str) -> None:
    try:
        os.rmdir(path)  # the common case: the program wrote nothing
    except OSError:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


def child_environment(scratch: str) -> dict[str, str]:
    return {
        "PATH": ENV_PATH,
        "HOME": scratch,
        "TMPDIR": scratch,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
