"""Worker side of programs that are not Python: compile once (cached), exec, stage files.

Runs in the fork-server worker, so it imports only what the worker already has (no typing).
The compile step and every run are ordinary confined children of the worker (`worker._spawn`):
same uid, rlimits, scratch directory and outside watch as a Python run; the child `exec`s the
compiler or the program instead of entering the harness. A compiled binary is copied out of the
compile's scratch into the pool's cache directory, or, where runs have the worker's uid, into the
worker's memory (see `make_cache`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat

from execrl.sandbox.run import protocol

TYPE_CHECKING = False  # typing stays out of the worker
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

CACHE_BYTES = 256 << 20  # compiled binaries kept by one pool, oldest removed first
MEMORY_CACHE_BYTES = 64 << 20  # kept by one worker, where the cache is in memory
BINARY = ".execrl-bin"  # the name of a run's own copy of a binary kept in memory
FETCH_CAP = 16 << 20  # bytes of fetched files returned per run


def make_cache(directory: str, private_mounts: bool, own_uid: bool) -> dict[str, Any]:
    """The compile cache, a directory the pool made and shares among its workers, so a source
    compiles once per pool. In the worker's read-only mount namespace it is bound back writable
    for the worker (root) alone: the directory is 0711 and the files root's, so a run can only
    execute a binary whose hashed name it is given, never write or list one.

    Without `own_uid` (the runs have the worker's uid) any file the worker can write, a run can
    overwrite, and a run that replaced the binaries of other samples with its own would pass for
    them. There the binaries are kept in the worker's memory instead, and each run gets its own
    copy in its scratch."""
    if not own_uid:
        return {"dir": None, "memory": {}, "bytes": 0}
    if private_mounts:
        from execrl.sandbox.confine import syscalls

        syscalls.mount(directory, directory, None, syscalls.MS_BIND, None)
        syscalls.set_readonly(directory, False, recursive=False)
    return {"dir": directory}


def run(
    unit: dict[str, Any],
    limits: dict[str, Any],
    ctx: dict[str, Any],
    spawn: Callable[[dict[str, Any], dict[str, Any], dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """One stdin/stdout case of a program in another language; `spawn` is `worker._spawn`."""
    source = [unit["source_name"], unit["program"]]
    comp = unit.get("compile")
    if comp is None:
        raw = spawn(
            dict(unit, argv=list(unit["run"]), allow_threads=True, source=source), limits, ctx
        )
        raw["compile"] = None
        return raw
    if ctx["cache"]["dir"] is None:
        info, binary = _compiled_in_memory(unit["program"], comp, source, limits, ctx, spawn)
    else:
        info, binary = _compiled(unit["program"], comp, source, limits, ctx, spawn)
    if binary is None:
        return not_run(compile=info)
    extra = {}
    if isinstance(binary, bytes):  # the run's own copy, in its scratch (its working directory)
        extra["binary"], binary = binary, f"./{BINARY}"
    argv = [binary if a == "{bin}" else a for a in unit["run"]]
    raw = spawn(dict(unit, argv=argv, allow_threads=True, source=None, **extra), limits, ctx)
    raw["compile"] = info
    return raw


def not_run(**fields: Any) -> dict[str, Any]:
    """The raw observations of a unit whose program never ran, with `fields` on top."""
    raw = {
        "events": [],
        "forged": 0,
        "timed_out": False,
        "output_limit": False,
        "exit_code": None,
        "signal": None,
        "stdout": "",
        "stdout_full": "",
        "stderr": "",
        "cpu_s": 0.0,
        "wall_s": 0.0,
        "maxrss_kb": 0,
    }
    raw.update(fields)
    return raw


def _compiled(program, comp, source, limits, ctx, spawn):  # noqa: ANN001, ANN202
    """(what the compile did, the binary's path or None), from the cache when it can be."""
    directory = ctx["cache"]["dir"]
    dest = os.path.join(directory, _key(comp, program, limits))
    cached = _cached_info(dest)
    if cached is not None:
        return dict(cached, cached=True), dest if cached["ok"] else None
    staging = f"{dest}.{os.urandom(8).hex()}"  # unique: every worker may be pid 1 of its own
    info, raw = _compile(comp, source, limits, ctx, spawn, staging)
    ok = info["ok"]
    if ok:
        os.replace(staging, dest)  # atomic: another worker may be compiling the same source
    if _cacheable(info):
        _write_atomic(f"{dest}.json", protocol.dumps(info), 0o600)
        _evict(directory)
    return info, dest if ok else None


def _compiled_in_memory(program, comp, source, limits, ctx, spawn):  # noqa: ANN001, ANN202
    """(what the compile did, the binary's bytes or None), kept in this worker's memory."""
    cache = ctx["cache"]
    memory, key = cache["memory"], _key(comp, program, limits)
    if key in memory:
        info, data = memory.pop(key)
        memory[key] = (info, data)  # most recently used last
        return dict(info, cached=True), data
    info, raw = _compile(comp, source, limits, ctx, spawn, None)
    data = raw.get("collected_bytes") if info["ok"] else None
    if _cacheable(info):
        memory[key] = (info, data)
        cache["bytes"] += len(data or b"")
        while cache["bytes"] > MEMORY_CACHE_BYTES and len(memory) > 1:
            cache["bytes"] -= len(memory.pop(next(iter(memory)))[1] or b"")  # the oldest
    return info, data


# Limits that a compile runs under as the job gives them (`_compile` sets its own clock).
_COMPILE_LIMITS = ("memory_mb", "file_size_mb", "open_files", "processes", "scratch_mb")
# What compiler drivers say when a compile failed for its limits, not its source: g++ and gcc
# report a cc1 killed by a signal as an internal compiler error, and a failed allocation,
# fork or write in words of their own.
_LIMIT_SIGNS = (
    "signal terminated program",
    "internal compiler error",
    "memory exhausted",
    "out of memory",
    "cannot allocate memory",
    "resource temporarily unavailable",
    "no space left on device",
    "file size limit exceeded",
    "too many open files",
)


def _key(comp: dict[str, Any], program: str, limits: dict[str, Any]) -> str:
    """The compiler, the source and the limits the compile runs under: a result reached under
    one job's limits is never another's."""
    bounds = [limits.get(k) for k in _COMPILE_LIMITS] + [limits.get("compile_wall_s", 10.0)]
    return hashlib.sha256(protocol.dumps([comp["argv"], program, bounds])).hexdigest()[:40]


def _cacheable(info: dict[str, Any]) -> bool:
    """Only a definite result: a binary, or a compile error the compiler reported on its own.
    A compile that ran out of time, was killed by a signal, hit the output cap, failed to set
    up, or whose driver reports a limit (a cc1 killed, memory exhausted) may not fail again,
    and cached it would fail every later job with that source, on every worker."""
    if info["ok"]:
        return True
    clean = info["signal"] is None and not info["timed_out"] and not info["output_limit"]
    said = (info["stderr"] + info["stdout"]).lower()
    return (
        clean
        and info["exit_code"] not in (None, 0)
        and info["setup_error"] is None
        and not any(sign in said for sign in _LIMIT_SIGNS)
    )


def _compile(comp, source, limits, ctx, spawn, staging):  # noqa: ANN001, ANN202
    """Run the compiler, confined like any run; its output goes to `staging`, or, with None,
    comes back as bytes in the raw result."""
    climits = dict(limits, wall_s=limits.get("compile_wall_s", 10.0), cpu_s=None, test_wall_s=None)
    unit = {
        "kind": "compile",
        "argv": comp["argv"],
        "allow_threads": True,  # compiler drivers start cc1, as, ld
        "source": source,
        "collect": [comp["output"], staging],
    }
    raw = spawn(unit, climits, ctx)
    setup = next((e.get("msg", "") for e in raw["events"] if e.get("t") == "setup_error"), None)
    ok = bool(raw.get("collected")) and raw["exit_code"] == 0 and not raw["timed_out"]
    info = {
        "ok": ok,
        "cached": False,
        "exit_code": raw["exit_code"],
        "signal": raw["signal"],
        "timed_out": raw["timed_out"],
        "output_limit": raw["output_limit"],
        "setup_error": setup,
        "stdout": raw["stdout"],
        "stderr": raw["stderr"],
        "wall_s": raw["wall_s"],
        "cpu_s": raw["cpu_s"],
    }
    return info, raw


def _cached_info(dest: str) -> dict[str, Any] | None:
    try:
        with open(f"{dest}.json", "rb") as fh:
            info = protocol.loads(fh.read())
    except (OSError, ValueError):
        return None
    if info.get("ok") and not os.path.exists(dest):
        return None
    os.utime(f"{dest}.json")  # most recently used
    return info


def _write_atomic(path: str, data: bytes, mode: int) -> None:
    staging = f"{path}.{os.urandom(8).hex()}"
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(staging, path)


def _evict(directory: str) -> None:
    """Remove the least recently used entries while the cache is over CACHE_BYTES."""
    entries = []
    total = 0
    for name in os.listdir(directory):
        if not name.endswith(".json"):
            continue
        path = os.path.join(directory, name)
        try:
            used = os.stat(path).st_mtime
            size = os.path.getsize(path[:-5]) if os.path.exists(path[:-5]) else 0
        except OSError:
            continue
        entries.append((used, path, size))
        total += size
    for _, path, size in sorted(entries):
        if total <= CACHE_BYTES:
            break
        for p in (path, path[:-5]):
            try:
                os.unlink(p)
            except OSError:
                pass
        total -= size


def _safe_rel(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and "\0" not in rel and ".." not in parts


def put_files(scratch: str, unit: dict[str, Any], uid: int | None) -> None:
    """Write the program's source and the job's files into the scratch, owned by the run uid."""
    items = [(name, base64.b64decode(data)) for name, data in (unit.get("files") or {}).items()]
    if unit.get("source"):
        name, text = unit["source"]
        items.append((name, text.encode("utf-8")))
    if unit.get("binary") is not None:
        items.append((BINARY, unit["binary"]))
    for rel, data in items:
        if not _safe_rel(rel):
            continue  # the parent rejects these; never write outside the scratch
        path = os.path.join(scratch, rel)
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            os.makedirs(parent, mode=0o755)
            if uid is not None:
                d = parent
                while d != scratch:
                    os.chown(d, uid, uid)
                    d = os.path.dirname(d)
        mode = 0o755 if rel == BINARY else 0o644
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if uid is not None:
                os.fchown(fd, uid, uid)
        finally:
            os.close(fd)


def take_files(scratch: str, unit: dict[str, Any], exited_ok: bool) -> dict[str, Any]:
    """Before the scratch is removed: files the job asked back, and a compile's binary."""
    out: dict[str, Any] = {}
    fetch = unit.get("fetch")
    if fetch:
        files: dict[str, str | None] = {}
        budget = FETCH_CAP
        for rel in fetch:
            data = _read_inside(scratch, rel, budget) if _safe_rel(rel) else None
            if data is not None:
                budget -= len(data)
            files[rel] = base64.b64encode(data).decode() if data is not None else None
        out["files"] = files
    collect = unit.get("collect")
    if collect and exited_ok:
        data = _read_inside(scratch, collect[0], 256 << 20)
        if data is not None and collect[1] is None:  # kept in memory (`make_cache`)
            out["collected"], out["collected_bytes"] = True, data
        elif data is not None:
            fd = os.open(collect[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, 0o755)
            finally:
                os.close(fd)
            out["collected"] = True
    return out


def _read_inside(scratch: str, rel: str, cap: int) -> bytes | None:
    """A regular file under the scratch, never through a link; None if absent or too big."""
    path = os.path.join(scratch, rel)
    real = os.path.realpath(path)
    if real != os.path.normpath(path) or not real.startswith(scratch.rstrip("/") + "/"):
        return None  # a symbolic link somewhere on the way
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
