"""Thin ctypes wrappers for the Linux calls the isolation layers need (Python has none for them)."""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
MOUNT_ATTR_RDONLY = 0x1
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
SYS_MOUNT_SETATTR = 442  # same number on every architecture with the generic syscall table

_libc = ctypes.CDLL(None, use_errno=True)


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    enc = [s.encode() if s is not None else None for s in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def umount(target: str, flags: int = MNT_DETACH) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def set_readonly(path: str, readonly: bool = True, recursive: bool = True) -> None:
    """Flip the read-only flag of the mount at `path` (and every mount below it)."""
    attr = _MountAttr(
        MOUNT_ATTR_RDONLY if readonly else 0, 0 if readonly else MOUNT_ATTR_RDONLY, 0, 0
    )
    flags = AT_RECURSIVE if recursive else 0
    ret = _libc.syscall(
        SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), flags, ctypes.byref(attr), ctypes.sizeof(attr)
    )
    _check(ret, f"mount_setattr {path}")


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), "prctl")


def prctl_get(option: int) -> int:
    ret = _libc.prctl(option, 0, 0, 0, 0)
    if ret < 0:
        _check(ret, "prctl")
    return ret


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_capabilities() -> None:
    """Give up every capability, for good: the bounding set first (which needs CAP_SETPCAP),
    then the effective, permitted and inheritable sets."""
    drop_bounding_set()
    clear_capabilities()


def drop_bounding_set() -> None:
    """Empty the bounding set (needs CAP_SETPCAP): no exec can give a capability back, while
    the capabilities held now stay (a worker needs its own until it forks each run)."""
    cap = 0
    while _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) == 0:
        cap += 1


def clear_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets (two 32-bit words each in version
    3): one system call, cheap enough for every run."""
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


# -- kernel keyrings ----------------------------------------------------------------------------
# A key a run adds to its uid's user keyring (or user-session or persistent keyring) outlives
# the run, in the kernel, and a later run of the same uid can read it: an answer passed from a
# run that computed it to one that did not. The worker refuses itself, and so every run it
# forks, every key system call by a seccomp filter, for the native and the compat (32-bit
# `int 0x80`, x32) system call tables alike, after leaving the session keyring it inherited
# (root's, perhaps a login's) for a fresh, empty one: a run cannot add, read or link a key.
KEYCTL_JOIN_SESSION_KEYRING = 1
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO with EPERM, as container runtimes answer
X32_BIT = 0x40000000  # set in the numbers of the x32 table (x86_64's third)
# Classic BPF, as seccomp runs it: load a word of `seccomp_data` (nr at 0, arch at 4, the low and
# high halves of argument i at 16 + 8i and 20 + 8i), jump on a comparison, return a verdict.
BPF_LD_ABS, BPF_JEQ, BPF_JGE, BPF_RET = 0x20, 0x15, 0x35, 0x06
# (audit arch, (add_key, request_key, keyctl), whether x32 numbers exist) per system call table
# of each host architecture (arch/*/entry/syscalls, include/uapi/linux/audit.h).
_KEY_SYSCALLS = {
    "x86_64": ((0xC000003E, (248, 249, 250), True), (0x40000003, (286, 287, 288), False)),
    "aarch64": ((0xC00000B7, (217, 218, 219), False), (0x40000028, (309, 310, 311), False)),
}


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def key_syscall_filter() -> _SockFprog | None:
    """A seccomp program refusing (EPERM) add_key, request_key and keyctl, or None where this
    machine's system call numbers are not known here."""
    tables = _KEY_SYSCALLS.get(os.uname().machine)
    if tables is None:
        return None
    ld, jeq, jge, ret = BPF_LD_ABS, BPF_JEQ, BPF_JGE, BPF_RET
    code: list[tuple[int, int, int, int]] = []
    for arch, numbers, x32 in tables:
        checks = [(jge, X32_BIT)] if x32 else []
        checks += [(jeq, n) for n in numbers]
        m = len(checks)
        block = [(ld, 0, 0, 0)]  # seccomp_data.nr
        block += [(op, m + 1 - j, 0, k) for j, (op, k) in enumerate(checks, 1)]
        block += [(ret, 0, 0, SECCOMP_RET_ALLOW), (ret, 0, 0, SECCOMP_RET_EPERM)]
        code += [(ld, 0, 0, 4), (jeq, 0, len(block), arch)]  # seccomp_data.arch
        code += block
    code.append((ret, 0, 0, SECCOMP_RET_ALLOW))
    return seccomp_program(code)


def seccomp_program(code: list[tuple[int, int, int, int]]) -> _SockFprog:
    """A seccomp program from its instructions, each (opcode, jump if true, jump if false, k)."""
    filters = (_SockFilter * len(code))(*[_SockFilter(*c) for c in code])
    prog = _SockFprog(len(code), filters)
    prog._keep = filters  # type: ignore[attr-defined]  # the array must outlive the struct
    return prog


def install_filter(prog: _SockFprog) -> None:
    """Apply a seccomp filter to this process and all it starts, for good (needs
    no-new-privileges, which the worker sets)."""
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


def join_fresh_session_keyring() -> None:
    """Give this process a new, empty, anonymous session keyring (best effort: the key system
    calls are refused to runs anyway, and a full key quota must not fail a run)."""
    tables = _KEY_SYSCALLS.get(os.uname().machine)
    if tables is not None:
        keyctl = tables[0][1][2]
        _libc.syscall(keyctl, KEYCTL_JOIN_SESSION_KEYRING, None)
