"""The fork-server worker: one long-lived, pre-warmed, confined process per pool slot.

It reads run requests on stdin, forks one child per unit (a program and its tests), confines
the child, lets the harness run it, watches it from outside (wall clock, output caps, exit), and
writes the raw observations back on stdout. It never decides a verdict; `grade` does, in the
trusted parent. Run as `python -m execrl.sandbox.run.worker`.
"""

from __future__ import annotations

import gc
import importlib
import math
import os
import resource
import signal
import sys
import time

from execrl.sandbox.confine import handler_filter, isolation, memcg, syscalls
from execrl.sandbox.confine.hidden_paths import inside
from execrl.sandbox.run import (
    cases,
    coroutine_decorator,
    execunit,
    frameless,
    protocol,
    timer_signals,
)
from execrl.sandbox.run.prepared import Prepared
from execrl.sandbox.run.scratch import SCRATCH, clear_tmp, make_scratch, remove_scratch
from execrl.sandbox.run.watch import channel, drain, watch_run

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the worker 2 MB
if TYPE_CHECKING:
    from typing import Any

# Imported once here so that a run costs a fork, not an import. Common in benchmark solutions
# (`typing`: most HumanEval prompts start with `from typing import List`; compiled from source in
# a child it would cost tens of milliseconds). Kept short on purpose: each megabyte the worker
# holds costs page-table copies at every fork, and a module the candidate imports that is not
# here still loads, from disk, in its child.
# `traceback` (0.3 MB): `logging` imports it, and its walks are made frame-free once, here
# (`frameless`), for every run the worker forks.
PREIMPORT = tuple(
    "bisect collections functools heapq itertools math re string traceback typing".split()
)
KEEP_OUTPUT = 64 << 10  # bytes of stdout/stderr returned to the parent


def main() -> None:
    inp, out = sys.stdin.buffer.raw, sys.stdout.buffer.raw
    config = protocol.read_message(inp)
    if config is None:
        return
    try:
        ctx = _setup(config)
    except Exception as exc:  # reported to the pool, which refuses to start
        protocol.write_message(out, {"t": "error", "msg": f"{type(exc).__name__}: {exc}"})
        return
    ready = {"t": "ready", "layers": sorted(ctx["layers"]), "pid": ctx["pool_pid"]}
    protocol.write_message(out, ready)
    while (request := protocol.read_message(inp)) is not None:
        limits = request["limits"]
        results = []
        _start_case_server(request["units"], limits, ctx)
        try:
            for unit in request["units"]:
                results.append(_run_unit_safely(unit, limits, ctx))
                if ctx["retire"] or (unit.get("stop") and _failed(results[-1])):
                    break
        finally:
            _drop_case_server(ctx)
        reply: dict[str, Any] = {"t": "result", "units": results}
        if ctx["retire"]:
            reply["retire"] = ctx["retire"]
        protocol.write_message(out, reply)
        if ctx["retire"]:
            # Not fit for another run (its scratch could not be emptied, or it failed): the
            # pool starts a fresh worker and sends the requests queued here to it.
            return


def _start_case_server(units: list[dict[str, Any]], limits: dict[str, Any], ctx: dict[str, Any]):  # noqa: ANN202
    """The request's case server (`cases`), where its cases can share one; else none."""
    if cases.usable(units, ctx):
        run_limits = dict(limits, rlimits=_rlimits(limits, ctx["vm_kb"], limits["processes"]))
        ctx["server"] = cases.CaseServer.start(units[0], run_limits, ctx, _child)


def _drop_case_server(ctx: dict[str, Any]) -> None:
    server, ctx["server"] = ctx["server"], None
    if server is not None:
        server.close()


def _failed(raw: dict[str, Any]) -> bool:
    """A case the worker can see failed without its expected output, which never reaches the
    worker (a run is its fork and could read it). Each test here is one `grade` fails a case
    on, so a reply cut after it still ends in that failure, never in "only k of n reported"."""
    compiled = raw.get("compile")
    if compiled is not None and not compiled.get("ok"):
        return True
    if raw["timed_out"] or raw["output_limit"] or raw["signal"] is not None:
        return True
    if raw["exit_code"] != 0 or raw.get("scratch_left") or raw.get("oom_killed"):
        return True
    events = raw["events"]
    if any(event.get("t") in ("syntax", "setup_error") for event in events):
        return True
    result = next((event for event in events if event.get("t") == "result"), None)
    return result is not None and not result.get("ok")


def _setup(config: dict[str, Any]) -> dict[str, Any]:
    layers = set(config["layers"])
    userns = bool(config.get("userns"))
    # Opened before any namespace of ours exists: the files stay writable through these
    # descriptors however the worker's own view of the filesystem is confined (`memcg`).
    memory = memcg.RunMemory(*config["memcg"]) if config.get("memcg") else None
    uid = config.get("uid") if "uid" in layers else None
    next_pid = None
    if userns:  # not root: namespaces of our own, as pid 1 of the pid namespace (`isolation`)
        isolation.enter_user_namespace()
    elif uid is not None and "filesystem" in layers:
        # As root, a pid namespace of our own too (its /proc is the filesystem layer's mount):
        # runs then draw pids from a counter we set at random before each (`NextPid`).
        isolation.reap_uid(uid)  # leftovers of a pool that died with this uid, on the host
        isolation.enter_pid_namespace()
        try:
            next_pid = isolation.NextPid()
        except OSError:  # a kernel without ns_last_pid: the counter is ours, if not random
            next_pid = None
    # Our pid as the pool sees it (in a namespace of our own we are pid 1): /proc is still the
    # pool's here, and /proc/self names us in its namespace.
    pool_pid = int(os.readlink("/proc/self"))
    os.environ.clear()
    os.environ.update({"PATH": isolation.ENV_PATH, "LANG": "C.UTF-8"})
    for name in PREIMPORT:
        importlib.import_module(name)
    frameless.install(sys.modules["traceback"])
    coroutine_decorator.install(sys.modules["types"])  # `import asyncio` under the audit hook
    isolation.setup_worker(layers, config["hide"], config["keep"], config["scratch_mb"], userns)
    # Orphans of a run (daemons, double forks) become our children, not init's: we reap them,
    # so that no zombie keeps counting against the run uid's process limit.
    syscalls.prctl(syscalls.PR_SET_CHILD_SUBREAPER, 1)
    if uid is not None:
        isolation.reap_uid(uid)  # leftovers of a pool that died with this uid
    # Set here once rather than in every child: fork inherits all three, and each line of
    # Python a child runs before the harness costs it page faults (a third of its fixed cost).
    syscalls.prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1)
    syscalls.prctl(syscalls.PR_SET_DUMPABLE, 0)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # The worker's own /tmp (see scratch.make_scratch): a tmpfs of its mount namespace.
    fixed_scratch = "filesystem" in layers
    if fixed_scratch:
        os.environ.clear()
        os.environ.update(isolation.child_environment(SCRATCH))
    # The kernel keyrings outlive runs (`syscalls.key_syscall_filter`): the worker leaves the
    # session keyring it was started in for a fresh, empty one, then refuses itself, and so
    # every run it forks (seccomp filters are inherited, and cannot be removed), every key
    # system call. Done here once, not in each child, where it cost ~0.4 ms a run.
    key_filter = syscalls.key_syscall_filter()
    if key_filter is not None:
        syscalls.join_fresh_session_keyring()
        syscalls.install_filter(key_filter)
    # Before `Prepared` takes the handlers `guard.quiet` puts back: the timer signals' handler,
    # which a run may no longer set (`handler_filter`), is set here.
    timer_signals.install(signal)
    prepared = Prepared(PREIMPORT)
    ctx_cache = execunit.make_cache(config["bin_dir"], "filesystem" in layers, uid is not None)
    if memory is not None:
        memory.enter_worker()  # last: what the worker holds so far stays charged to the pool
    gc.collect()
    gc.freeze()  # children share these pages instead of copying them when gc walks them
    return {
        "layers": layers,
        "uid": uid,
        "userns": userns,
        "vm_kb": _vm_size_kb(),
        "fixed_scratch": fixed_scratch,
        # the size of the scratch tmpfs now (the filesystem layer): resized when a job's limits
        # ask for another (`Limits.scratch_mb`)
        "scratch_mb": config["scratch_mb"] if fixed_scratch else None,
        # runs have our uid in a user namespace, so all of our /tmp is theirs to write: cleared
        # after each run, but for what is bound back there (`scratch.clear_tmp`)
        "tmp_keep": [k for k in config["keep"] if inside(k, "/tmp")]
        if fixed_scratch and userns
        else None,
        "prepared": prepared,
        "cache": ctx_cache,
        "memory": memory,
        "retire": "",  # why this worker must take no further run ("" while it is fit)
        "case_server": bool(config.get("case_server", True)),  # `SandboxConfig.case_server`
        "server": None,  # this request's `cases.CaseServer`, if it has one
        "next_pid": next_pid,  # `isolation.NextPid`, set before each run is forked, or None
        "pool_pid": pool_pid,
        "handler_filter": handler_filter.handler_filter(),  # for every Python run (`_child`)
    }


def _vm_size_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1])
    return 0


def _run_unit_safely(
    unit: dict[str, Any], limits: dict[str, Any], ctx: dict[str, Any]
) -> dict[str, Any]:
    """`_run_unit`, which must not kill the worker: an exception here used to end it, and the
    pool masked the run as SANDBOX_ERROR, a penalty escaped if the run could cause it. What the
    run leaves behind is handled without exceptions (`scratch.remove_scratch`); anything that
    still raises is a failure of the worker itself, reported as a setup failure (retried on a
    fresh worker), after the run's processes are killed."""
    try:
        if unit.get("run") is not None:  # another language: the child execs a program
            return execunit.run(unit, limits, ctx, _spawn)
        return _spawn(unit, limits, ctx)
    except BaseException as exc:  # noqa: BLE001 - reported, then this worker retires
        if ctx["uid"] is not None:
            isolation.reap_uid(ctx["uid"])
        elif ctx["userns"]:
            isolation.reap_namespace()
        _drop_case_server(ctx)
        _reap_orphans(block_s=2.0)
        ctx["retire"] = f"the worker failed: {type(exc).__name__}: {exc}"
        return execunit.not_run(events=[{"t": "setup_error", "msg": ctx["retire"]}])


def _spawn(unit: dict[str, Any], limits: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
    try:
        return _spawn_once(unit, limits, ctx)
    except cases.Lost:
        # The case server failed: whatever it started is killed, and this case and the rest
        # run forked by the worker, as they would have without it.
        _drop_case_server(ctx)
        if ctx["uid"] is not None:
            isolation.reap_uid(ctx["uid"])
        _reap_orphans(block_s=2.0)
        return _spawn_once(unit, limits, ctx)


def _spawn_once(
    unit: dict[str, Any], limits: dict[str, Any], ctx: dict[str, Any]
) -> dict[str, Any]:
    if ctx["retire"]:  # a compile step left the scratch unusable: no run on top of it
        raise RuntimeError(ctx["retire"])
    uid = ctx["uid"]
    _size_scratch(limits["scratch_mb"], ctx)
    scratch = make_scratch(uid, "filesystem" in ctx["layers"])
    if unit.get("files") or unit.get("source") or unit.get("binary") is not None:
        execunit.put_files(scratch, unit, uid)
    stdin_fd = _stdin_for(unit, scratch)
    ch_r, ch_w = channel()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    key = os.urandom(16)  # seals the harness's messages (`protocol.seal`); never leaves the run
    # With its own uid, or as the only other process of the worker's pid namespace, the run can
    # kill(-1) everything it started when it ends (`harness._finish`).
    unit = dict(unit, reap=uid is not None or ctx["userns"])
    ctx["prepared"].precompile(unit)
    # Threads count against it too, and every run may start threads; new processes are the
    # harness's to deny (its audit hook) unless the job allows them.
    processes = limits["processes"]
    limits = dict(limits, rlimits=_rlimits(limits, ctx["vm_kb"], processes))
    memory = ctx["memory"]
    if memory is not None:
        _charge_memory(memory, ctx, limits)
    t0 = time.monotonic()
    server = ctx["server"]
    try:
        pid = _launch(
            unit, limits, ctx, scratch, (stdin_fd, ch_w, out_w, err_w), (ch_r, out_r, err_r), key
        )
    except cases.Lost:
        _abandon((ch_r, out_r, err_r), scratch)
        raise
    reader = protocol.ChannelReader(key)
    watch = watch_run(pid, ch_r, out_r, err_r, limits, t0, reader)
    try:
        status, cpu_s, maxrss_kb = _wait(pid, server)
    except cases.Lost:
        _abandon((ch_r, out_r, err_r), scratch)
        raise
    wall = time.monotonic() - t0
    if memory is not None:
        # Reading what the run wrote (kept in this worker, which lives in the run's cgroup)
        # must not be what goes over the limit once the run is gone: no process but the
        # worker would be left for the OOM killer.
        memory.allow(sum(len(watch[name]) for name in ("channel", "stdout", "stderr")))
    drain(watch, limits)
    reader.feed(watch["channel"], final=True)
    events, forged = reader.events, reader.forged(watch["channel"])
    _end_processes(status, events, uid, ctx, server)
    for fd in (ch_r, out_r, err_r):
        os.close(fd)
    # Every process of the run is gone now, so nothing can swap a path while it is read.
    try:
        exited_ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        kept = execunit.take_files(scratch, unit, exited_ok)
    except OSError:  # what the run left there is unreadable: as if the files were absent
        kept = {}
    left = not remove_scratch(scratch)
    if ctx["tmp_keep"] is not None:
        left = not clear_tmp(ctx["tmp_keep"]) or left
    if left:
        ctx["retire"] = "the run's scratch directory could not be removed"
    if memory is not None:  # after the scratch is gone: its tmpfs pages were the run's too
        kept.update(memory.after_run())
    return {
        **kept,
        "scratch_left": left,
        "events": events,
        "forged": forged,
        "timed_out": watch["timed_out"],
        "output_limit": watch["output_limit"],
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        **_outputs(watch, unit["kind"] == "stdio"),
        "cpu_s": cpu_s,
        "wall_s": wall,
        "maxrss_kb": maxrss_kb,
    }


def _size_scratch(scratch_mb: int, ctx: dict[str, Any]) -> None:
    """The scratch tmpfs (the filesystem layer's) resized to the run's `Limits.scratch_mb` when
    the last run had another size."""
    if ctx["scratch_mb"] is None or scratch_mb == ctx["scratch_mb"]:
        return
    try:
        isolation.resize_scratch(scratch_mb)
    except OSError as exc:  # something of an earlier run is left there: no run on it
        ctx["retire"] = f"the scratch filesystem could not be resized: {exc}"
        raise RuntimeError(ctx["retire"]) from None
    ctx["scratch_mb"] = scratch_mb


def _charge_memory(memory: Any, ctx: dict[str, Any], limits: dict[str, Any]) -> None:
    """The same bound as each process's address space (`_rlimits`), which binds a lone process
    first (its resident memory is below its address space); the cgroup binds the run's
    processes together. A case server's own pages are in the cgroup too: the run keeps its
    full allowance."""
    held = ctx["server"].held_bytes if ctx["server"] is not None else 0
    memory.before_run(ctx["vm_kb"] * 1024 + limits["memory_mb"] * (1 << 20) + held)


def _wait(pid: int, server: Any) -> tuple[int, float, int]:
    """The run's exit status, CPU seconds and peak resident KB: from the case server that
    forked it, else from our own child."""
    if server is not None:
        return server.reap()
    _, status, usage = os.wait4(pid, 0)
    return status, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def _abandon(fds: tuple[int, ...], scratch: str) -> None:
    """A run lost before it could be read (its case server died): its pipes and scratch go."""
    for fd in fds:
        os.close(fd)
    remove_scratch(scratch)


def _end_processes(
    status: int, events: list[Any], uid: int | None, ctx: dict[str, Any], server: Any
) -> None:
    """Every process the run left is killed and collected. The harness kills the run's other
    processes itself when it finishes normally."""
    clean_end = os.WIFEXITED(status) and any(e.get("t") == "done" for e in events)
    if uid is not None and not clean_end:
        isolation.reap_uid(uid)
    elif ctx["userns"] and not clean_end:
        isolation.reap_namespace()
    # Killed orphans are our children now (we are their subreaper): wait, bounded, until every
    # one is collected. With none, waitpid says so at once.
    _reap_orphans(block_s=2.0, server=server)


def _outputs(watch: dict[str, Any], stdio: bool) -> dict[str, str]:
    """The run's output as the result reports it: cut to KEEP_OUTPUT, and a stdio program's
    whole standard output, which its tests compare."""
    return {
        "stdout": bytes(watch["stdout"][:KEEP_OUTPUT]).decode("utf-8", "replace"),
        "stdout_full": bytes(watch["stdout"]).decode("utf-8", "replace") if stdio else "",
        "stderr": bytes(watch["stderr"][:KEEP_OUTPUT]).decode("utf-8", "replace"),
    }


def _launch(unit, limits, ctx, scratch, child_fds, parent_fds, key) -> int:  # noqa: ANN001
    """Start the run on `child_fds` (stdin, channel, stdout, stderr): forked here, or by the
    request's case server; its pid. The worker's copies of `child_fds` are closed."""
    server = ctx["server"]
    try:
        if server is not None:
            return server.launch(scratch, child_fds, key)
        if ctx["next_pid"] is not None:
            ctx["next_pid"].scramble()
        pid = os.fork()
        if pid == 0:
            for fd in parent_fds:
                os.close(fd)
            _child(unit, limits, ctx, scratch, *child_fds, key)
        return pid
    finally:
        for fd in child_fds:
            os.close(fd)


def _reap_orphans(block_s: float, server: cases.CaseServer | None = None) -> None:
    """Collect exited orphans; with block_s, wait (bounded) until every one of them is gone
    (every child but the case server, which is not an orphan)."""
    deadline = time.monotonic() + block_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if server is not None and _children() == [server.pid]:
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.001)


def _children() -> list[int] | None:
    """This process's children (Linux 3.5+ with CONFIG_PROC_CHILDREN); None if unknown."""
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as fh:
            return [int(p) for p in fh.read().split()]
    except (OSError, ValueError):
        return None


def _stdin_for(unit: dict[str, Any], scratch: str) -> int:
    if unit["kind"] != "stdio":
        return os.open(os.devnull, os.O_RDONLY)
    path = os.path.join(scratch, ".stdin")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(unit["stdin"])
    fd = os.open(path, os.O_RDONLY)
    os.unlink(path)
    return fd


def _child(unit, limits, ctx, scratch, stdin_fd, ch_w, out_w, err_w, key, start=None) -> None:  # noqa: ANN001
    """In the forked child: confine, then hand over to the harness. Never returns.

    No-new-privileges, non-dumpable and the environment come from the worker (`_setup`).
    `start`: the harness already prepared by a case server (`cases`), which forked this run."""
    try:
        memory = ctx["memory"]
        if memory is not None and memory.runs_reset_oom_score:  # the OOM killer's first choice
            memcg.reset_oom_score()  # again, not the worker
        os.setsid()
        os.dup2(stdin_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(ch_w, 3)
        os.closerange(4, 1 << 16)
        os.set_inheritable(3, False)
        os.chdir(scratch)
        setrlimit = resource.setrlimit
        for which, value in limits["rlimits"]:
            setrlimit(which, value)
        if ctx["userns"]:  # the worker kept its capabilities (it resizes the scratch): no run
            syscalls.clear_capabilities()
        uid = ctx["uid"]
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        os.umask(0o077)
        if not ctx["fixed_scratch"]:
            os.environ.clear()
            os.environ.update(isolation.child_environment(scratch))
        if unit.get("argv") is not None:  # another language: exec it, confined (fd 3 closes)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # ignored by Python; programs expect them
                signal.signal(sig, signal.SIG_DFL)
            os.execve(unit["argv"][0], unit["argv"], os.environ)
        # A Python run: from here on no signal handler of its own, which CPython would hand
        # the frame it interrupts (`handler_filter`; its own timers: `timer_signals`).
        handler_filter.refuse_new_handlers(ctx["handler_filter"])
    except BaseException as exc:  # noqa: BLE001 - an infrastructure failure, said on the channel
        message = protocol.seal(key, 0, protocol.dumps({"t": "setup_error", "msg": repr(exc)}))
        for fd in (3, ch_w):
            try:
                os.write(fd, message)
                break
            except OSError:
                continue
        os._exit(1)
    exit_ = os._exit  # bound before the program runs, which may patch `os`
    try:
        if start is not None:
            start(3, key)
        ctx["prepared"].run_unit(unit, 3, key, ctx["prepared"].parts)
    finally:
        # The harness never returns. Should it raise, the worker's own loop, up the stack, must
        # not go on in this process (it did: with the program's state, on the run's pipes).
        exit_(1)


def _rlimits(
    limits: dict[str, Any], vm_kb: int, processes: int
) -> list[tuple[int, tuple[int, int]]]:
    """The child's resource limits, worked out in the worker before the fork."""
    cpu = limits["cpu_s"] if limits["cpu_s"] is not None else limits["wall_s"] + 1
    cpu_soft = max(1, math.ceil(cpu))
    address_space = vm_kb * 1024 + limits["memory_mb"] * (1 << 20)
    fsize = limits["file_size_mb"] * (1 << 20)
    return [
        (resource.RLIMIT_CPU, (cpu_soft, cpu_soft + 1)),
        (resource.RLIMIT_AS, (address_space, address_space)),
        (resource.RLIMIT_FSIZE, (fsize, fsize)),
        (resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"])),
        (resource.RLIMIT_NPROC, (processes, processes)),
        (resource.RLIMIT_CORE, (0, 0)),
    ]


if __name__ == "__main__":
    main()
