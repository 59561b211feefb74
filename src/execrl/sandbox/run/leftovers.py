"""What a call into the candidate may leave behind in assert-style tests: a thread of its own
still running, and changes to the objects of the tests it was handed (see `guard`, whose
checks after each call these are). Run, like `guard`, on private copies of its globals."""

from __future__ import annotations

from execrl.sandbox.run import plain, restorer

TYPE_CHECKING = False  # typing stays out of the worker
if TYPE_CHECKING:
    from typing import Any

STRAY_THREAD = (
    "a thread the program started outlived the call that started it (in assert-style tests "
    "every thread must end, joined, before the function that started it returns)"
)
THREAD_WAIT_S = 1.0  # how long a thread that has ended in Python may take to leave the kernel


def sole_thread(state: dict[str, Any]) -> None:
    """Return only once the harness's thread is the process's only one; else set `stray` (and
    `broken`) and raise. The kernel's count (the links of /proc/self/task, held open since
    before the candidate ran) is the only one no Python code can bend. A thread joined a moment
    ago may still be leaving the kernel: while no Python thread is left (`_thread._count`) it
    is waited for, for at most THREAD_WAIT_S; one still in Python fails at once. Once the
    count is one, nothing but the harness can start another."""
    p = state["p"]
    tasks = state["tasks"]
    if tasks is None:  # no /proc: the worker's process limit allows no thread (harness)
        return
    fd, dev, ino, alone = tasks
    fstat = p["fstat"]
    clock = p["clock"]
    deadline = None
    pause = 1e-5
    while True:
        try:
            st = fstat(fd)
            same = st.st_ino == ino and st.st_dev == dev  # still /proc/self/task
        except OSError:
            same = False
        if not same:  # the candidate closed or replaced the descriptor
            break
        if st.st_nlink <= alone:
            return
        if p["python_threads"]() > 0:
            break
        now = clock()
        if deadline is None:
            deadline = now + THREAD_WAIT_S
        elif now > deadline:
            break
        p["sleep"](pause)
        pause = min(pause * 2, 0.01)
    state["stray"] = STRAY_THREAD
    state["broken"] = ("RuntimeError", STRAY_THREAD)
    raise RuntimeError(STRAY_THREAD)


def tests_world(state: dict[str, Any], given: tuple[Any, ...]) -> list[Any]:
    """What a candidate handed an object of the tests can reach and change, to put back and
    report after the call: the tests' namespace (through any function's `__globals__`), the
    classes the tests defined, the closure cells of the tests' functions and of the functions
    handed over, and the class of each object handed over. Taken only for such calls."""
    p = state["p"]
    ns = state["test_ns"]
    cand_ns = state["cand_ns"]
    function_type = p["function_type"]
    classes, cells, functions = [], [], []
    # Only reads that run no code of the candidate's: type(), C attributes of functions,
    # methods and classes (never isinstance, which may read a planted `__class__`).
    for name, value in ns.items():
        kind = type(value)
        if kind is function_type:
            functions.append(value)
        elif issubclass(kind, type) and cand_ns.get(name) is not value:
            # A class of the tests (the program's own classes are its business).
            if _flags(value) & restorer.HEAPTYPE:
                snap = dict(_class_dict(value))
                classes.append((value, snap, *restorer.fingerprint(snap)))
    classes_of = []
    for x in given:
        kind = type(x)
        if plain.is_scalar(x):
            continue
        classes_of.append((x, kind))
        if kind is function_type:
            functions.append(x)
        elif kind is p["method_type"] and type(x.__func__) is function_type:
            functions.append(x.__func__)
    for fn in functions:
        for cell in fn.__closure__ or ():
            try:
                cells.append((cell, cell.cell_contents))
            except ValueError:  # an empty cell
                continue
    snap = dict(ns)
    return [ns, snap, *restorer.fingerprint(snap), classes, cells, classes_of]


def restore_world(world: list[Any], state: dict[str, Any]) -> None:
    ns, snap, keys, values, classes, cells, classes_of = world
    tampered = state["tampered"]
    if restorer.differs(ns, keys, values):
        tampered.append("modified the tests' namespace")
        ns.clear()
        ns.update(snap)
    for cls, cls_snap, keys, values in classes:
        if restorer.differs(_class_dict(cls), keys, values):
            tampered.append(f"modified class {restorer.text(restorer.type_name(cls))} of the tests")
            _put_back_class(cls, cls_snap)
    for cell, contents in cells:
        try:
            now = cell.cell_contents
        except ValueError:
            now = cell
        if now is not contents:
            tampered.append("modified a closure cell of a function of the tests")
            cell.cell_contents = contents
    for x, cls in classes_of:
        if type(x) is not cls:
            name = restorer.text(restorer.type_name(cls))
            tampered.append(f"modified the class of a {name} of the tests")


def _put_back_class(cls: Any, snap: dict[str, Any]) -> None:
    current = _class_dict(cls)
    for key in list(current):
        if key not in snap:
            type.__delattr__(cls, key)
    for key, value in snap.items():
        if current.get(key) is not value:
            type.__setattr__(cls, key, value)


# Unbound descriptors: a class of the tests' metaclass cannot override them.
_class_dict = type.__dict__["__dict__"].__get__
_flags = type.__dict__["__flags__"].__get__
