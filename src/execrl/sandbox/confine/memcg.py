"""A run's memory limit is the run's: one memory cgroup per worker, in which runs are forked.

RLIMIT_AS binds each process on its own, so a run allowed N processes could use N times its
memory (a C program forking children that each filled their limit passed with several times
it). Each worker gets a memory cgroup of its own, made by the pool under the pool's own one
(cgroup v1's memory hierarchy, or v2's where the memory controller can be delegated there),
and moves into it once it is set up; every run is forked inside it, so every process and
thread of the run, its tmpfs files included, is charged together against the limit the worker
sets before each run. Past it the kernel's OOM killer kills in that cgroup only, and the worker,
which counts the cgroup's OOM kills around each run, reports MEMORY_LIMIT.

Why the worker lives in the cgroup rather than each run moving into it: a move takes the
kernel's cgroup thread-group lock for writing, which waits for an RCU grace period; measured
here under load it cost each run milliseconds and the pool ~14% of its throughput. What the
worker already held when it moved in stays charged to the pool; what it allocates during a run
(the run's output it reads) counts with the run. The worker makes itself the OOM killer's last
choice (oom_score_adj -999: still killable, so the cgroup is never left with nothing to kill),
and each run resets its own score to 0 (`reset_oom_score`; not where the worker's is 0 already,
having no CAP_SYS_RESOURCE to lower it). If the worker is killed anyway, the
pool retries the job on a fresh worker, and a job that kills every worker is RUNTIME_ERROR.

The worker opens the cgroup's files before it makes any namespace of its own: descriptors
opened in the host's mount namespace stay writable however the worker then confines its own
view (its read-only root could not be made with files open for writing on one of its mounts).

Where neither version can be written (no root, a v2 tree where the memory controller is not
delegated), the per-process RLIMIT_AS is all there is; `execrl sandbox doctor` says which.
The worker imports this module: no typing, nothing heavy.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing stays out of the worker
if TYPE_CHECKING:
    from typing import Any

V1_ROOT = "/sys/fs/cgroup/memory"
POST_RUN_SLACK = 8 << 20  # what the worker may allocate after a run without raising the limit
WORKER_OOM_SCORE = -999  # -1000 would make it unkillable: an OOM with no victim can hang
PREFIX = "execrl-"
# File names per version: the limit, the swap limit, the OOM-kill counter, the peak usage.
FILES = {
    1: {
        "limit": "memory.limit_in_bytes",
        "swap": "memory.memsw.limit_in_bytes",
        "events": "memory.oom_control",
        "peak": "memory.max_usage_in_bytes",
    },
    2: {
        "limit": "memory.max",
        "swap": "memory.swap.max",
        "events": "memory.events",
        "peak": "memory.peak",
    },
}


def probe() -> tuple[str, str]:
    """("cgroup v1" | "cgroup v2" | "rlimit", why), found by making and removing a cgroup."""
    try:
        path, version = create("probe")
    except OSError as exc:
        return "rlimit", (
            f"no writable memory cgroup ({exc}); each process of a run is bound by "
            "RLIMIT_AS alone, so a run of N processes may use N times its memory limit"
        )
    remove(path)
    return f"cgroup v{version}", f"one memory cgroup per worker under {os.path.dirname(path)}"


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its v2 path."""
    out = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                out[name] = path
    return out


def _v2_mount() -> str | None:
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] == "cgroup2":
                return fields[4]
    return None


def _parent() -> tuple[str, int]:
    """Where this pool's worker cgroups go: its own memory cgroup, v1 first."""
    own = _own_cgroups()
    if "memory" in own and os.path.isdir(V1_ROOT):
        return os.path.join(V1_ROOT, own["memory"].lstrip("/")), 1
    mount = _v2_mount()
    if mount is None or "" not in own:
        raise OSError("the memory controller is mounted nowhere")
    parent = os.path.join(mount, own[""].lstrip("/"))
    with open(os.path.join(parent, "cgroup.controllers")) as fh:
        if "memory" not in fh.read().split():
            raise OSError(f"the memory controller is not delegated to {parent}")
    with open(os.path.join(parent, "cgroup.subtree_control")) as fh:
        enabled = "memory" in fh.read().split()
    if not enabled:  # refused (EBUSY) while the parent itself holds processes, as it does here
        with open(os.path.join(parent, "cgroup.subtree_control"), "w") as fh:
            fh.write("+memory")
    return parent, 2


def create(tag: str) -> tuple[str, int]:
    """A fresh memory cgroup for one worker: (its path, the cgroup version). Raises OSError."""
    parent, version = _parent()
    _remove_stale(parent)
    for n in range(1000):  # several pools of one process each count their workers from 1
        path = os.path.join(parent, f"{PREFIX}{os.getpid()}-{tag}-{n}")
        try:
            os.mkdir(path)
            break
        except FileExistsError:
            continue
    else:
        raise OSError(f"no free cgroup name under {parent}")
    if not os.path.exists(os.path.join(path, FILES[version]["limit"])):
        os.rmdir(path)
        raise OSError(f"{path} has no memory controller files")
    return path, version


def _remove_stale(parent: str) -> None:
    """Cgroups left by pools that died (their pid in the name is gone); empty, so removable."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        pid = name[len(PREFIX) :].split("-")[0]
        if name.startswith(PREFIX) and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                pass


def remove(path: str) -> None:
    """Remove a worker's cgroup once its processes are gone (zombies may linger a moment)."""
    import time

    for _ in range(100):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def reset_oom_score() -> None:
    """In a run's first process: the ordinary OOM score the worker's -999 would otherwise pass
    on (raising it needs no privilege)."""
    fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
    try:
        os.write(fd, b"0")
    finally:
        os.close(fd)


class RunMemory:
    """The worker's side: its cgroup's files, opened before the filesystem is confined."""

    def __init__(self, path: str, version: int) -> None:
        names = FILES[version]
        self.version = version
        self.procs = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY)
        self._limit = os.open(os.path.join(path, names["limit"]), os.O_RDWR)
        swap = os.path.join(path, names["swap"])
        self._swap = os.open(swap, os.O_RDWR) if os.path.exists(swap) else -1
        self._events = os.open(os.path.join(path, names["events"]), os.O_RDONLY)
        peak = os.path.join(path, names["peak"])
        self._peak = os.open(peak, os.O_RDWR) if os.path.exists(peak) else -1
        self.limit_bytes = self._read_limit()
        self._kills = 0
        self.runs_reset_oom_score = True  # until `enter_worker` has read what runs inherit

    def _read_limit(self) -> int:
        text = os.pread(self._limit, 64, 0).strip()
        return 1 << 62 if text == b"max" else int(text)

    def enter_worker(self) -> None:
        """Move the calling worker into its cgroup, as the OOM killer's last choice."""
        os.write(self.procs, b"0")
        try:
            with open("/proc/self/oom_score_adj", "w") as fh:
                fh.write(str(WORKER_OOM_SCORE))
        except OSError:  # no CAP_SYS_RESOURCE: the worker stays an ordinary choice
            pass
        with open("/proc/self/oom_score_adj", "rb") as fh:
            # What each run inherits: one that is 0 already needs no reset (`reset_oom_score`
            # opens a file of the new process's /proc, some 30-90 us of each run).
            self.runs_reset_oom_score = int(fh.read()) != 0

    def before_run(self, limit_bytes: int) -> None:
        """Set the run's limit (when it changed) and clear the peak; called between runs."""
        if limit_bytes != self.limit_bytes:
            self._set_limit(limit_bytes)
        if self._peak >= 0:
            try:
                os.pwrite(self._peak, b"0", 0)  # v1 resets on any write; v2 needs 6.12+
            except OSError:
                pass
        self._kills = self._oom_kills()

    def allow(self, held_bytes: int) -> None:
        """After the run's first process ended: room for the worker to read and encode the
        `held_bytes` of output it holds (a few copies of them), until `before_run`. Nothing is
        written for the small outputs of almost every run."""
        if held_bytes > POST_RUN_SLACK:
            self._set_limit(self.limit_bytes + 4 * held_bytes + POST_RUN_SLACK)

    def after_run(self) -> dict[str, Any]:
        """Whether the kernel killed a process of the run at its limit, and its peak."""
        out: dict[str, Any] = {"oom_killed": self._oom_kills() > self._kills}
        if self._peak >= 0:
            try:
                out["cgroup_peak_kb"] = int(os.pread(self._peak, 64, 0)) // 1024
            except (OSError, ValueError):
                pass
        return out

    def _set_limit(self, limit_bytes: int) -> None:
        # v1 refuses a memory limit above memsw's, and a memsw limit below the memory one: the
        # order depends on the direction. v2's swap limit is its own: no swap at all.
        value = b"%d" % limit_bytes
        if self.version == 1:
            raising = limit_bytes > self.limit_bytes
            writes = [(self._swap, value), (self._limit, value)]
            for fd, data in writes if raising else writes[::-1]:
                if fd >= 0:
                    os.pwrite(fd, data, 0)
        else:
            os.pwrite(self._limit, value, 0)
            if self._swap >= 0:
                os.pwrite(self._swap, b"0", 0)
        self.limit_bytes = limit_bytes

    def _oom_kills(self) -> int:
        text = os.pread(self._events, 4096, 0).decode()
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0
