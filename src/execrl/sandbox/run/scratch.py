"""A run's scratch directory: made fresh before each run, removed after it, whatever it holds.

The scratch is the only place a run may write. Its removal must neither fail nor raise on
anything the run built there (a tree deeper than Python's recursion limit or PATH_MAX,
directories it made unreadable, millions of entries), or the run's worker dies and the pool
masks the run as SANDBOX_ERROR: a penalty escaped (`isolation`'s threat model). The worker
imports this module: standard library only, nothing heavy.
"""

from __future__ import annotations

import os

SCRATCH = "/tmp/run"  # inside the worker's own /tmp, a tmpfs of its mount namespace


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


def remove_scratch(path: str) -> bool:
    """Remove a run's scratch directory and all it holds; True when it is gone. Never raises."""
    try:
        os.rmdir(path)  # the common case: the program wrote nothing
        return True
    except FileNotFoundError:
        return True
    except OSError:
        pass
    try:
        remove_tree(path)
    except Exception:  # noqa: BLE001 - the caller learns it from what is left
        pass
    return not os.path.lexists(path)


def clear_tmp(keep: list[str], top: str = "/tmp") -> bool:
    """Remove everything in the worker's /tmp (`top`) but the paths bound back there (`keep`:
    read-only binds of the interpreter or the compile cache) and the folders that lead to them;
    True when nothing else is left. Never raises. Where runs have the worker's uid (a user
    namespace) the whole of /tmp is theirs to write, and a file one left there would be the
    next run's to read. Called with no run's process alive: nothing can swap a path meanwhile."""
    try:
        with os.scandir(top) as it:
            entries = [(e.path, e.is_dir(follow_symlinks=False)) for e in it]
    except OSError:
        return False
    clean = True
    for path, is_dir in entries:
        if path in keep:
            continue
        if is_dir and any(k.startswith(path + "/") for k in keep):
            clean = clear_tmp(keep, path) and clean
        elif is_dir:
            clean = remove_scratch(path) and clean
        else:
            try:
                os.unlink(path)
            except OSError:
                clean = False
    return clean


def remove_tree(path: str, max_passes: int = 1 << 20) -> None:
    """Remove the directory `path` and everything under it, however deep, with a constant
    number of open files and no recursion: `shutil.rmtree` recurses once per level (a run that
    made 20,000 nested directories raised RecursionError in the worker, which died, and the
    run was masked as SANDBOX_ERROR), and paths that deep are longer than PATH_MAX anyway.

    Works relative to directory descriptors: each pass empties the directories at the top of
    the tree of files and moves their subdirectories up beside them (a rename within one
    filesystem), so no path ever grows. A directory the run made unreadable (mode 0; without
    the uid layer the worker has no capability to bypass it) is opened after a chmod, which
    its owner may do. Raises OSError if something cannot be removed."""
    top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    fresh = 0
    try:
        for _ in range(max_passes):
            names = _entries(top)
            if not names:
                break
            for name, is_dir in names:
                if not is_dir:
                    os.unlink(name, dir_fd=top)
                    continue
                fresh = _hoist_children(top, name, fresh)
                os.rmdir(name, dir_fd=top)
        else:
            raise OSError(f"{path}: still not empty after {max_passes} passes")
    finally:
        os.close(top)
    os.rmdir(path)


def _entries(dir_fd: int) -> list[tuple[str, bool]]:
    with os.scandir(dir_fd) as it:
        return [(e.name, e.is_dir(follow_symlinks=False)) for e in it]


def _open_dir(parent: int, name: str) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        return os.open(name, flags, dir_fd=parent)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=parent, follow_symlinks=False)
        return os.open(name, flags, dir_fd=parent)


def _hoist_children(top: int, name: str, fresh: int) -> int:
    """Empty `name` (a directory in `top`) of its files, and move its subdirectories up into
    `top` under fresh names; returns the next fresh number."""
    fd = _open_dir(top, name)
    try:
        os.fchmod(fd, 0o700)  # writable, so its entries can be removed (an owner may chmod)
        for child, is_dir in _entries(fd):
            if not is_dir:
                os.unlink(child, dir_fd=fd)
                continue
            for _ in range(64):  # a name the run did not take already
                fresh += 1
                try:
                    os.rename(child, f".execrl-rm-{fresh}", src_dir_fd=fd, dst_dir_fd=top)
                    break
                except OSError:
                    continue
            else:
                raise OSError(f"cannot move {child!r} out of {name!r}")
    finally:
        os.close(fd)
    return fresh
