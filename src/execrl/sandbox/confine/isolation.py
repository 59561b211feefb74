"""Isolation layers: what the host supports, and how a worker and each run are confined.

Threat model. The candidate program is hostile and runs as Python code in a forked child of a
pre-warmed worker. It must not pass without passing the tests (see `harness`), and it must not
touch the host: read files it has no business reading, write anywhere but its scratch directory,
reach the network, signal or inspect other processes, exhaust the machine, or leave processes
behind. The layers below each close one of these doors; `execrl sandbox doctor` shows which are
active. A layer that was required but is unavailable stops the sandbox from starting unless the
user opts out (`SandboxConfig.allow_missing_layers`).

- `network`: the worker lives in a fresh network namespace with no interfaces up.
- `filesystem`: a private mount namespace: the root is read-only, home directories, the
  working directory and every place benchmark data lives (execrl's data directory and download
  cache, data files that benchmark packages ship, the evalplus and Hugging Face caches: they
  hold the official answers) are hidden behind empty tmpfs mounts (the Python installation is
  bound back read-only, the benchmark data inside it covered again), /tmp is a size-limited
  tmpfs holding only the run's scratch directory, and /proc is remounted with hidepid=2 so that
  the run cannot see any process but its own. What is bound back is the interpreter and execrl;
  an import-path entry that is "/", /tmp or a hidden directory is never bound back whole
  (`hidden_paths.default_keep`: a script run from /tmp once gave every run the host's /tmp).
  With it (or with `network`) the worker also has an IPC namespace of its own, whose limits let nobody create SysV shared memory, semaphore sets or
  message queues, or POSIX message queues: no run leaves an object behind (a segment stays in
  memory until removed, past the pool) or reaches another run through one. A run that makes a
  user namespace of its own, where the kernel allows unprivileged ones, gets an IPC namespace
  with the default limits; what it makes there dies with its last process, but until then does
  not count against its address-space limit.
- `uid`: each worker runs its programs under a uid of its own, with no groups; files private to
  the invoking user are unreadable, signals to other processes fail, RLIMIT_NPROC binds (it does
  not bind root), and at the end `kill(-1)` from that uid removes every process the run started,
  daemons and double forks included. It is also what keeps a stdin/stdout sample's case server
  (`cases`: the worker's fork that prepared the program and forks each case) out of the runs'
  reach: the server keeps the worker's uid, so a case can neither signal nor trace it; without
  this layer there is no server, and the worker forks every case.
- `rlimits`: CPU time, address space, file size, open files, processes, no core dumps.
- `audit`: the in-process audit hook of the harness (always on).

Beside the layers, each always on where the host allows it (`execrl sandbox doctor` shows both):
- the run's memory (`memcg`): one memory cgroup per worker, in which each run is forked, so
  all the processes of a run share its limit and an OOM kill there is MEMORY_LIMIT.
  Where no memory cgroup is writable (no root; a cgroup v2 tree that does not delegate the
  memory controller) only RLIMIT_AS binds, per process: a run of N processes may then use N
  times its limit. That fallback is named, not hidden.
- the kernel keyrings (`syscalls.key_syscall_filter`): the worker joins a fresh, empty session
  keyring and refuses itself and every run add_key, request_key and keyctl by seccomp, on the
  native, i386 and x32 system call tables; so no run stores a key in its uid's user,
  user-session, session or persistent keyring for a later run to read.
- signal actions (`handler_filter`): every Python run ignores SIGINT and then refuses itself a
  new signal action by seccomp, since CPython hands a handler the frame it interrupts (the
  program's own timer handlers are called by the worker's, without it: `run/timer_signals`).

What a run may leave behind, and what became of it. Processes: killed at the end (`uid`, or
pid 1 of the worker's namespace). SysV and POSIX IPC: none can be made (`filesystem`). Files:
the scratch is the only writable place, and it is removed after each run however the run built
it (`scratch.remove_tree`: no recursion, constant open files, unreadable directories opened after a
chmod); if it cannot be, the run fails (RUNTIME_ERROR) and its worker is replaced. Keys:
refused. Memory cgroup state: usage is the run's, the peak reset before each run. Inotify and
fanotify instances, POSIX timers, timerfds, epoll, io_uring, memfds, user and network
namespaces a run makes: all belong to its processes or their descriptors, and go with them;
the abstract Unix sockets of the worker's network namespace, likewise. Kernel state that is per
uid and outlives a process was the keyrings; none other was found.

Global counters a run can move and a later run read. The next pid: as root (with `uid` and
`filesystem`) each worker is pid 1 of a pid namespace of its own, and sets its counter at
random before it forks each run (and its case server before each case), so a run's pid and
/proc/loadavg's last pid say nothing of what earlier runs started (a run that started 1000
threads used to tell the next its pid minus 1000); the host's counter is not seen. Ephemeral
ports: the kernel picks them at random, and each worker has its own network namespace.

Still open, plainly: the page cache is shared with the host and every run, so a run can learn
which files an earlier run read (mincore, timing): a covert channel of a few bits per file
between runs that co-operate, which no per-run layer here closes. Inode numbers are counters
too: pipes, sockets and other anonymous inodes take theirs from one host-wide counter, and the
scratch tmpfs numbers its files in order, so a run that makes k pipes or files moves the number
a later run sees by k (a few bits between co-operating runs, as above). Without root (the user
namespace), and as root without the `filesystem` layer, the next pid is the worker's
namespace's (the host's) counter, moved by every run: the same channel; so it is as root on a
kernel without /proc/sys/kernel/ns_last_pid (CONFIG_CHECKPOINT_RESTORE), between the runs of
one worker. Per-uid counters (inotify
instances, RLIMIT_NPROC) are shared by concurrent runs of one uid only where runs share a uid
(without the `uid` layer), and only while those runs live.

A program cannot buy a masked sample. SANDBOX_ERROR, which training masks, is reserved for
failures of the sandbox (`verdict.SandboxErrorCause`); what a run does in its own run ends in a
program verdict: a scratch it leaves unremovable is RUNTIME_ERROR, output that grading cannot
read is WRONG_ANSWER, and a job whose worker dies on every attempt (a fresh one each time) is
RUNTIME_ERROR flagged `possible_hack`. The worker itself never dies of an exception while
handling a run: it reports it and retires, and the pool starts a fresh one. Nor does the pool
wait forever: a worker that gives no answer past a job's own limits and
`SandboxConfig.hang_s` is killed (SANDBOX_ERROR worker_hung, retried, and counted as a worker
the job brought down).

Without root, `network` and `filesystem` come from an unprivileged user namespace where the
kernel allows one (`userns_available`): the worker enters new user, network, mount and pid
namespaces, becomes pid 1 of its pid namespace, confines the filesystem as above, and each run
it forks drops every capability before any of its code runs, so that no run can undo a mount
(the worker keeps them, to resize the scratch between runs). Runs have the worker's uid there,
so the whole of its /tmp is theirs to write, not only the scratch: all of it is cleared after
each run (`scratch.clear_tmp`), and no run reads what an earlier one left. Its IPC namespace
belongs to an outer user namespace in which the user is root, since only that root may set the
IPC limits (`_unshare_mapped`); runs have the same uid, so /proc/sys is mounted read-only for
them. A run keeps the user's uid (the namespace maps that one uid only, so there is no `uid`
layer), but it sees and can signal only the processes of its own worker's namespace, /proc
shows nothing else, the process limit counts only that namespace's processes, and at the end
`kill(-1)` from the worker (pid 1, which it cannot hit) removes every process the run started.
What it can still do that the `uid` layer would forbid: read files the user can read outside
the hidden directories.
"""

from __future__ import annotations

import os
import signal
import sys

from execrl.sandbox.confine import syscalls
from execrl.sandbox.confine.hidden_paths import inside, outermost

# Pool-side helpers import fcntl, tempfile and shutil lazily: the worker must stay small.

LAYERS = ("network", "filesystem", "uid", "rlimits", "audit")
UID_BASE = 0x30000  # 196608: far above distribution-allocated uids
UID_SLOTS = 4096
ENV_PATH = "/usr/local/bin:/usr/bin:/bin"
CLONE_NEWIPC = 0x08000000
# The worker's IPC namespace, file under /proc/sys by file (each is per IPC namespace): no SysV
# segment (shmmni, and no byte of one: shmmax, shmall), semaphore set ("semmsl semmns semopm
# semmni"), message queue, or POSIX message queue. Linux 6.18 takes 0 for each (it refuses 0 for
# fs/mqueue/msg_max and msgsize_max, which queues_max makes moot).
IPC_LIMITS = (
    ("kernel/shmmax", "0"),
    ("kernel/shmall", "0"),
    ("kernel/shmmni", "0"),
    ("kernel/sem", "0 0 0 0"),
    ("kernel/msgmni", "0"),
    ("fs/mqueue/queues_max", "0"),
)


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
            "read-only root, hidden homes and benchmark data, tmpfs scratch, no SysV or POSIX "
            "IPC, "
            + (
                "own pid namespace, hidepid /proc"
                if root
                else "own pid namespace and /proc" + in_userns
            )
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
    # The IPC limits of an IPC namespace can be written only by uid 0 of the user namespace that
    # owns it (ipc/ipc_sysctl.c, ipc_permissions; anyone else gets the files' "other" bits, and
    # writing fails with EACCES), and the worker's own namespace maps the user's uid, not 0. So
    # a first user namespace, where the user is root, owns the IPC namespace and sets its limits,
    # and the worker's namespace is nested in it, mapping the user's uid back.
    syscalls.unshare(syscalls.CLONE_NEWUSER | CLONE_NEWIPC)
    _map_ids(f"0 {uid} 1", f"0 {gid} 1")
    _refuse_ipc()
    syscalls.unshare(
        syscalls.CLONE_NEWUSER
        | syscalls.CLONE_NEWNET
        | syscalls.CLONE_NEWNS
        | syscalls.CLONE_NEWPID
    )
    # The user's own uid and gid, and nothing else: no uid the run could switch to.
    _map_ids(f"{uid} 0 1", f"{gid} 0 1")


def _map_ids(uid_map: str, gid_map: str) -> None:
    for name, text in (("setgroups", "deny"), ("uid_map", uid_map), ("gid_map", gid_map)):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


def _refuse_ipc() -> None:
    """In a fresh IPC namespace: set the limits under which no IPC object can be created
    (`IPC_LIMITS`). Raises if the kernel refuses one (the worker then fails to start, and the
    pool with it), rather than run with a layer that is only partly there."""
    for name, value in IPC_LIMITS:
        path = f"/proc/sys/{name}"
        try:
            with open(path, "w") as fh:
                fh.write(value)
            with open(path) as fh:
                now = fh.read().split()
        except OSError as exc:
            raise OSError(
                exc.errno, f"cannot set the IPC limit {path} to {value!r}: {exc.strerror}"
            ) from None
        if now != value.split():
            raise OSError(f"the IPC limit {path} reads {' '.join(now)!r}, not {value!r}")


def enter_user_namespace() -> None:
    """Move this worker into new user, network, mount and pid namespaces, as pid 1 of the last
    (`_become_init`)."""
    _unshare_mapped()
    _become_init()


def enter_pid_namespace() -> None:
    """As root: move this worker into a pid namespace of its own, as pid 1 of it
    (`_become_init`), so that its runs draw their pids from its own counter, which it sets at
    random before each run (`NextPid`), never from the host's, which any process moves."""
    syscalls.unshare(syscalls.CLONE_NEWPID)
    _become_init()


def _become_init() -> None:
    """Fork into the pid namespace made for our children, as its pid 1.

    Returns in the forked child, which is the worker from now on; the calling process stays
    behind only to wait for it and exit with its status (so that the pool, which started it,
    sees the worker end). If that process dies (the pool kills it), the kernel kills the worker,
    and with it every process in its namespace."""
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


class NextPid:
    """The pid counter of the worker's own pid namespace (`enter_pid_namespace`), set at random
    before each run is forked: a run that starts k threads moves the counter by k, and the next
    run would read k back from its own pid (`os.getpid()`, /proc/loadavg's last pid). Opened
    before /proc/sys is made read-only; writing it needs the worker's root."""

    def __init__(self) -> None:
        with open("/proc/sys/kernel/pid_max", "rb") as fh:
            self.pid_max = int(fh.read())
        self.fd = os.open("/proc/sys/kernel/ns_last_pid", os.O_WRONLY | os.O_CLOEXEC)
        self.scramble()  # fails here, at the worker's start, if it cannot be written

    def scramble(self) -> None:
        """The next fork gets a pid drawn uniformly from [300, pid_max - 1000)."""
        span = self.pid_max - 1300
        value = 300 + int.from_bytes(os.urandom(4), "little") % span
        os.pwrite(self.fd, b"%d" % value, 0)  # at offset 0: the kernel ignores other offsets


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
    exist already (`enter_user_namespace`), and the worker keeps the capabilities they gave (it
    resizes and clears the scratch between runs with them), less its bounding set: each run
    drops the rest as it starts (`syscalls.clear_capabilities`, in the worker's child), since a
    run that had them could unmount what hides the user's files."""
    if userns:
        if "filesystem" in layers:
            _confine_filesystem(hide, keep, scratch_mb)
        else:
            # Runs have the uid the IPC limits are writable by (`_unshare_mapped`); the mount
            # namespace is the worker's own even without the filesystem layer.
            _lock_sysctls()
        syscalls.drop_bounding_set()
        return
    flags = 0
    if "network" in layers:
        flags |= syscalls.CLONE_NEWNET
    if "filesystem" in layers:
        flags |= syscalls.CLONE_NEWNS
    if flags:
        # The IPC namespace belongs to the initial user namespace: only real root may change its
        # limits, and a run has a uid of its own (or is root, and could undo anything anyway).
        syscalls.unshare(flags | CLONE_NEWIPC)
        _refuse_ipc()
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
    # A hidden path inside a kept one (a benchmark package's data in site-packages) would come
    # back with the bind of the kept path: those are covered after all the binds, last.
    inner = [h for h in hide if any(inside(h, k) and h != k for k in keep)]
    outer = [h for h in hide if h not in inner]
    for directory in [*outermost(outer), "/tmp"]:
        options = _scratch_options(scratch_mb) if directory == "/tmp" else "size=1m,mode=0755"
        cover(directory, [k for k in keep if inside(k, directory)], stage, options)
    for path in outermost(inner):
        cover(path, [k for k in keep if inside(k, path)], stage, "size=1m,mode=0755")
    syscalls.umount(stage)
    syscalls.set_readonly("/", True, recursive=True)  # the covers of `inner` too
    syscalls.set_readonly("/tmp", False, recursive=False)
    syscalls.mount("proc", "/proc", "proc", syscalls.MS_NOSUID | syscalls.MS_NODEV, "hidepid=2")
    _lock_sysctls()


def _scratch_options(scratch_mb: int) -> str:
    # One inode per KiB of scratch: a run that makes millions of empty files (tmpfs counts no
    # bytes for them) would otherwise hold the worker for seconds removing them.
    return f"size={scratch_mb}m,nr_inodes={max(4096, scratch_mb * 1024)},mode=0711"


def resize_scratch(scratch_mb: int) -> None:
    """The worker's /tmp (the scratch tmpfs of the filesystem layer) resized to the next run's
    `Limits.scratch_mb`, between runs (it is empty then: tmpfs refuses a size below what it
    holds)."""
    flags = syscalls.MS_REMOUNT | syscalls.MS_NOSUID | syscalls.MS_NODEV
    syscalls.mount("execrl-hidden", "/tmp", "tmpfs", flags, _scratch_options(scratch_mb))


def _lock_sysctls() -> None:
    """/proc/sys read-only, so that no run can raise the IPC limits again (`_refuse_ipc`): in a
    user namespace a run has the uid they are writable by. A run cannot remount it (no
    capability), and in a user namespace of its own the mount is locked read-only, and it hides
    enough of /proc that the kernel refuses it a fresh proc mount."""
    syscalls.mount("/proc/sys", "/proc/sys", None, syscalls.MS_BIND | syscalls.MS_REC, None)
    syscalls.set_readonly("/proc/sys", True, recursive=True)


def cover(directory: str, keep_inside: list[str], stage: str, options: str) -> None:
    """Cover `directory` with an empty tmpfs mounted with `options`, the paths of `keep_inside`
    bound back (through `stage`, a private tmpfs); a file is covered by /dev/null. Also how a
    harness's launcher covers homes (`command`)."""
    if os.path.isfile(directory):  # a single data file (evalplus's override): an empty one
        syscalls.mount("/dev/null", directory, None, syscalls.MS_BIND, None)
        return
    if not os.path.isdir(directory) or directory == "/":
        return
    staged: list[tuple[str, str]] = []
    for n, path in enumerate(outermost(keep_inside)):
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


def child_environment(scratch: str) -> dict[str, str]:
    return {
        "PATH": ENV_PATH,
        "HOME": scratch,
        "TMPDIR": scratch,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
