"""The trusted harness that runs inside each sandboxed child, next to the candidate program.

The harness reports through its own channel (a socket the worker reads), every message sealed
with a per-run key that lives only in this harness's locals and closures (a keyed tag over its
sequence number and text, `protocol.seal`), so no one else can write a line the worker believes,
even after reading the harness's own; before each message the harness also checks that fd 3 is
still that socket, and stops the run if not. Once the candidate runs, an audit hook
(`audit_hook`) denies the ways Python code could reach that key or bend the tests: frames
(`sys._getframe`, a traceback's, a generator's or a coroutine's), the garbage collector's object
lists, trace and profile hooks, ctypes, hand-made code objects, reading the process's own
memory, new processes (unless the job allows them), and changing the code or defaults of
functions that existed before the candidate ran or that the tests define. Other introspection
is allowed (a function's code and defaults: `@dataclass`, `inspect.signature`), but not the
keyword defaults of the wrapper the tests call, where it keeps what it works with.

Threads are allowed. In stdin/stdout programs the harness waits for the threads that are not
daemons, as the interpreter does at exit (`threading.Thread(target=main).start()`); call tests
compare in the parent whatever a thread does. In assert-style tests no thread may outlive the
program's load, a call into the candidate, or a test (`leftovers.sole_thread`): the run ends
there, failed, with a message that says so.

The harness's own functions run on private copies of this module's, `audit_hook`'s, `guard`'s,
`restorer`'s, `leftovers'`, `plain`'s and `values`' (`execrl.tasks.values`, the tagged JSON)
globals, with a private copy of the builtins (made in the worker by `Prepared`), so patching a module or a builtin cannot change what the harness does or reports.
The test code gets a private copy of the builtins too; the standard modules it imports, and the
real builtins that those modules use, are restored from a snapshot after every call into the
candidate. What the tests call in place of the candidate, and what it checks at each call, is in
`guard`, which also says what is still open.

Nothing here decides a verdict: the worker and the trusted parent do that from these messages,
and a run that did not say "done" after its last test never passes.
"""

from __future__ import annotations

import builtins
import os
import sys
import types

from execrl.sandbox.run import audit_hook, guard, leftovers, restorer
from execrl.tasks import values

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the worker 2 MB
if TYPE_CHECKING:
    from typing import Any

CANDIDATE_FILE = "<candidate>"
CHANNEL_REPLACED = 86  # the exit status of a run whose program replaced the harness's channel
TESTS_FILE = "<tests>"
CODE_CACHE_SIZE = 512  # compiled test sources kept by a worker


def run_unit(unit: dict[str, Any], channel_fd: int, key: bytes, parts: dict[str, Any]) -> None:
    """Run one unit (a program and its tests) and report through `channel_fd`. Never returns.

    Called as `prepared.run_unit`, the private copy, with `Prepared.parts`. Its state is a
    dict, never an instance of a Python class, for the reason given on `prepared.Prepared`."""
    prepare_unit(unit, parts)(channel_fd, key)


def prepare_unit(unit: dict[str, Any], parts: dict[str, Any]) -> Any:
    """Everything `run_unit` does before the candidate's code first runs (its state, the audit
    hook, the program compiled); returns `start(channel_fd, key)`, which runs the rest and
    never returns. A stdin/stdout sample's case server (`cases`) calls this once and `start`
    in a fresh fork per case: the candidate's code never runs in the process that prepared it.
    Nothing here may be bound to the process (a descriptor, its pid): `start` opens those."""
    state = _new_state(parts)
    # This run's channel and key, set by `start` (one process may prepare and another run).
    run: dict[str, Any] = {}
    write, dumps, fstat, blake2b = (
        parts["write"],
        parts["encode_json"],
        parts["fstat"],
        parts["blake2b"],
    )
    # What the harness itself sets in `sys`, set before the restore's snapshot of it.
    sys.stdin, sys.stdout, sys.stderr = parts["streams"]
    # Modules the worker did not preload compile from source: cached bytecode would be read
    # through marshal.loads, which the hook denies.
    sys.pycache_prefix = "/proc/execrl-no-bytecode"
    restore = state["restore"] = restorer.make_restore(unit, state)
    exit_ = parts["exit"]

    tampered = state["tampered"]
    # One sequence for every line, whichever thread writes it (the audit hook may, in a thread
    # the job allowed): a number taken out of order breaks the sequence, and the run.
    sequence, lock = [0], parts["lock"]()

    def put(body: bytes) -> None:
        with lock:
            rest = b"%d " % sequence[0] + body
            sequence[0] += 1
            tag = blake2b(rest, key=run["key"], digest_size=16).hexdigest().encode()
            write(run["fd"], tag + rest + b"\n")

    def send(**msg: Any) -> None:
        # Only where candidate code may have run since `guard` last put the tests' world back:
        # what the restore undoes is then the candidate's doing, and a signal handler of its
        # could otherwise swap fd 3 between the check below and the write.
        if state["dirty"]:
            restore()
            guard.quiet(state)
            state["dirty"] = False
        # The candidate may have put something else on fd 3 (dup2): a pipe it reads would take
        # the harness's lines (which it cannot change: they are sealed). Then nothing more is
        # written, and a run without "done" never passes.
        try:
            now = fstat(run["fd"])
            same = (now.st_dev, now.st_ino) == run["id"]
        except OSError:
            same = False
        if not same:
            exit_(CHANNEL_REPLACED)
        while tampered:  # what the restore had to undo, reported as it is found
            put(dumps({"t": "denied", "event": tampered.pop()}).encode())
        put(dumps(msg).encode())

    state["reap"] = bool(unit.get("reap"))
    state["stdout"] = parts["streams"][1]
    inputs = [values.loads(a) for a in unit.get("inputs", ())]  # decoded before the candidate runs
    audit_hook.install(state, send, bool(unit.get("allow_threads")))
    try:
        code = compile(unit["program"], CANDIDATE_FILE, "exec", dont_inherit=True, optimize=0)
        syntax = None
    except (SyntaxError, ValueError) as exc:  # ValueError: source with NUL bytes
        code, syntax = None, exc

    def start(channel_fd: int, key: bytes) -> None:
        channel = fstat(channel_fd)
        run.update(fd=channel_fd, key=key, id=(channel.st_dev, channel.st_ino))
        state["tasks"] = _open_tasks(parts)
        if syntax is not None:
            send(t="syntax", msg=guard.describe(syntax), line=getattr(syntax, "lineno", None))
            _finish(state)
        _run_candidate(unit, code, inputs, state, send)

    return start


def _new_state(parts: dict[str, Any]) -> dict[str, Any]:
    """A run's state, as the harness and `guard` share it (a dict, for the reason on `Prepared`)."""
    return {
        "p": parts,
        "privileged": True,  # until the candidate's code first runs; then a thread's id or False
        # Whether candidate code may have run since its signal handlers and timers were last
        # undone (`guard.quiet`): then they are undone before the next message is written.
        "dirty": False,  # and its changes to the tests' modules were last undone
        "nonplain": None,
        "broken": None,  # (exception name, message) when `guard` could not restore or check
        "extra_globals": set(),
        "calls": 0,  # calls into the candidate under way (`guard._call`)
        "tampered": [],
        "keep": [],  # what crossed between the tests and the candidate: never freed (`guard`)
        "gc_enabled": parts["gc_isenabled"](),
        "stray": None,  # why the run must end now: a thread of the candidate's outlived a call
        "tasks": None,  # `_open_tasks`, in `start`: /proc/self is the process that runs
    }


def _run_candidate(
    unit: dict[str, Any], code: types.CodeType, inputs: list[Any], state: dict[str, Any], send: Any
) -> None:
    kind = unit["kind"]
    module_name = "__main__" if kind == "stdio" else "__candidate__"
    cand_ns: dict[str, Any] = {"__name__": module_name, "__builtins__": builtins}
    state["privileged"] = False  # from here on the candidate's code may run
    if kind == "stdio":
        _run_stdio(code, cand_ns, state, send)
    ok = _exec_candidate(code, cand_ns, state, send)
    state["dirty"] = True
    if not ok:
        _finish(state)
    if kind == "assert" and not _threads_ended(state):
        send(t="load_error", exc="RuntimeError", cls="error", msg=state["stray"], line=None)
        _finish(state)
    send(t="loaded")
    if kind == "assert":
        _run_asserts(unit, cand_ns, state, send)
        send(t="done", n=len(unit["statements"]))
    else:
        _run_calls(unit["entry_point"], inputs, cand_ns, state, send, unit.get("clocked"))
        send(t="done", n=len(inputs))
    _finish(state)


def _finish(state: dict[str, Any]) -> None:
    """Flush, kill every other process of this run's uid, exit."""
    p = state["p"]
    try:
        p["flush"](state["stdout"])
    except Exception:  # the candidate may have closed or broken it
        pass
    if state["reap"]:
        # No process or thread can start once NPROC is 0, and kill(-1) is atomic against fork,
        # so after it this process is the run's last; the worker reaps on abnormal ends.
        p["setrlimit"](p["nproc"], (0, 0))
        try:
            p["kill"](-1, p["sigkill"])
        except ProcessLookupError:
            pass
    p["exit"](0)


def _exec_candidate(
    code: types.CodeType, ns: dict[str, Any], state: dict[str, Any], send: Any
) -> bool:
    try:
        exec(code, ns)
        return True
    except BaseException as exc:  # noqa: BLE001 - SystemExit and friends are failures here
        state["dirty"] = True
        send(t="load_error", **_exception_fields(exc, state))
        return False


def _run_stdio(code: types.CodeType, ns: dict[str, Any], state: dict[str, Any], send: Any) -> None:
    """A whole program reading stdin: a clean exit (status 0) is the only normal end."""
    send(t="start", i=0)
    status = 0
    try:
        exec(code, ns)
    except SystemExit as exc:
        state["dirty"] = True
        value = exc.code
        status = 0 if value is None else value if type(value) is int else 1
    except BaseException as exc:  # noqa: BLE001
        state["dirty"] = True
        send(t="result", i=0, ok=False, **_exception_fields(exc, state))
        _finish(state)
    state["dirty"] = True
    # As the interpreter does at exit: wait for the threads that are not daemons (the
    # `threading.Thread(target=main).start()` idiom). The output is judged in the parent.
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:  # noqa: BLE001 - what the program did to `threading` is its own
            pass
    send(t="result", i=0, ok=status == 0, status=status)
    send(t="done", n=1)
    _finish(state)


def _compiled(state: dict[str, Any], source: str) -> types.CodeType:
    cached = state["p"]["code_cache"].get((source, TESTS_FILE))
    return (
        cached
        if cached is not None
        else compile(source, TESTS_FILE, "exec", dont_inherit=True, optimize=0)
    )


def _run_asserts(
    unit: dict[str, Any], cand_ns: dict[str, Any], state: dict[str, Any], send: Any
) -> None:
    p = state["p"]
    # From here on the candidate's code runs only inside the calls the tests make (`guard`).
    p["gc_disable"]()
    guard.quiet(state)
    # The tests see the candidate's names (HumanEval's prompts define helpers the tests call),
    # but none that would shadow a builtin for them: `abs = lambda x: 0` is the candidate's own.
    builtin_names = p["builtins"]
    test_ns = {k: v for k, v in cand_ns.items() if k[:2] == "__" or k not in builtin_names}
    # Copied in the worker: each run is a fork, so this copy is the run's own all the same,
    # and a copy made here wrote every builtin's reference count (130 pages copied a run).
    test_ns["__builtins__"] = state["test_builtins"] = p["test_builtins"]
    # A standard module the tests use by the program's name for it: the real one, whatever
    # the program bound there (`class sys: getsizeof = ...`). Its dict is restored after calls.
    real_modules = state["real_modules"]
    for name in unit.get("borrowed") or ():
        if name in test_ns and name in real_modules:
            test_ns[name] = real_modules[name]
    function_type = p["function_type"]
    for name, value in list(test_ns.items()):  # helpers the tests may call (HumanEval/38's)
        if type(value) is function_type and value.__globals__ is cand_ns:
            test_ns[name] = guard.make_candidate(state, value, False, name)
    # From now on a function of the tests' may not be changed (its code, its defaults), and a
    # call that hands the candidate an object of theirs is checked for what it changed there.
    state["extra_globals"].add(id(test_ns))
    state["test_ns"], state["cand_ns"] = test_ns, cand_ns
    entry = unit.get("entry_point")
    if entry:
        if entry not in cand_ns:
            msg = f"the program does not define {entry!r}"
            send(t="load_error", exc="NameError", cls="error", msg=msg, line=None)
            return
        strict = unit.get("strict_returns", True)
        guarded = guard.make_candidate(state, cand_ns[entry], strict, entry)
        test_ns[entry] = guarded
        test_ns["candidate"] = guarded
    try:
        exec(_compiled(state, unit.get("setup") or ""), test_ns)
    except BaseException as exc:  # noqa: BLE001 - a broken test file is reported, not passed
        send(t="load_error", where="tests", **_exception_fields(exc, state))
        return
    clock = state["p"]["clock"]
    for i, stmt in enumerate(unit["statements"]):
        send(t="start", i=i)
        state["nonplain"] = state["broken"] = None
        t0 = clock()
        failure: dict[str, Any] | None = None
        try:
            exec(_compiled(state, stmt), test_ns)
        except BaseException as exc:  # noqa: BLE001
            failure = _exception_fields(exc, state)
        wall = clock() - t0
        _threads_ended(state)  # candidate code the tests ran outside a call (non-strict)
        if state["broken"] is not None:  # even if the test code swallowed the exception
            name, msg = state["broken"]
            cls = "memory" if name == "MemoryError" else "error"
            send(t="result", i=i, ok=False, wall=wall, cls=cls, exc=name, msg=msg, line=None)
        elif state["nonplain"] is not None:  # even if the test code swallowed our exception
            send(
                t="result",
                i=i,
                ok=False,
                wall=wall,
                cls="wrong",
                exc="NotPlainData",
                msg=state["nonplain"],
                line=None,
            )
        elif failure is not None:
            send(t="result", i=i, ok=False, wall=wall, **failure)
        else:
            send(t="result", i=i, ok=True, wall=wall)
        if state["stray"] is not None:  # that thread may still act: the run ends here, failed
            send(t="done", n=len(unit["statements"]))
            _finish(state)


def _threads_ended(state: dict[str, Any]) -> bool:
    """Whether the harness's thread is the only one left (`leftovers.sole_thread`); if not, the
    run's failure is set (`stray`, `broken`) and must end the run. Never raises."""
    if state["stray"] is None:
        try:
            # As after a call (`guard._after_call`): no handler of the candidate's may start a
            # thread after the count, and none that ended may leave the collector on.
            state["p"]["gc_disable"]()
            guard.quiet(state)
            leftovers.sole_thread(state)
            state["p"]["gc_disable"]()
        except BaseException:  # noqa: BLE001 - fail closed: a count we could not take
            if state["stray"] is None:
                state["stray"] = "the harness could not count the run's threads"
                state["broken"] = ("RuntimeError", state["stray"])
    return state["stray"] is None


def _open_tasks(parts: dict[str, Any]) -> tuple[int, int, int, int] | None:
    """/proc/self/task, held open for `leftovers.sole_thread`: the descriptor, its device and inode,
    and its link count now, with this thread alone. Without /proc no thread may start at all."""
    try:
        fd = parts["open"]("/proc/self/task", os.O_RDONLY | os.O_DIRECTORY)
        st = parts["fstat"](fd)
    except OSError:
        parts["setrlimit"](parts["nproc"], (1, 1))
        return None
    return fd, st.st_dev, st.st_ino, st.st_nlink


def _run_calls(
    entry: str,
    inputs: list[Any],
    cand_ns: dict[str, Any],
    state: dict[str, Any],
    send: Any,
    clocked: bool = False,
) -> None:
    fn = cand_ns.get(entry)
    if fn is None and "." in entry:
        # `Solution.twoSum`: LeetCode's shape. One instance for the run, as LiveCodeBench's and
        # APPS' harnesses make one per problem; building it runs the program's code, so a
        # failure there is the program's (a load error), never the sandbox's.
        cls_name, _, method = entry.partition(".")
        cls = cand_ns.get(cls_name)
        if cls is not None:
            try:
                fn = getattr(cls(), method)
            except BaseException as exc:  # noqa: BLE001
                send(t="load_error", **_exception_fields(exc, state))
                return
    if not callable(fn):
        msg = f"the program does not define a function {entry!r}"
        send(t="load_error", exc="NameError", cls="error", msg=msg, line=None)
        return
    clock, encode = state["p"]["clock"], state["p"]["encode_json"]
    for i, args in enumerate(inputs):
        send(t="start", i=i)
        t0 = clock()
        try:
            value = fn(*args)
        except BaseException as exc:  # noqa: BLE001
            state["dirty"] = True
            send(t="result", i=i, ok=False, wall=clock() - t0, **_exception_fields(exc, state))
            continue
        state["dirty"] = True
        wall = clock() - t0
        state["restore"]()
        if clocked:  # the per-test clock stops here, before the value is encoded and sent
            send(t="stop", i=i)
        try:
            encoded = encode(values.to_json(value, values.SANDBOX))
        except MemoryError as exc:
            send(t="result", i=i, ok=False, wall=wall, **_exception_fields(exc, state))
            continue
        except BaseException as exc:  # noqa: BLE001 - NotPlainData, or a tampered version of it
            msg = guard.describe(exc)
            send(t="result", i=i, ok=False, cls="wrong", exc="NotPlainData", msg=msg, line=None)
            continue
        send(t="result", i=i, ok=True, value=encoded, wall=wall)


def _exception_fields(exc: BaseException, state: dict[str, Any]) -> dict[str, Any]:
    state["dirty"] = True  # its message may come from the candidate's code
    if isinstance(exc, MemoryError):
        cls = "memory"
    elif isinstance(exc, AssertionError):
        cls = "wrong"
    else:
        cls = "error"
    name = _type_name(type(exc))[:100]
    return {
        "cls": cls,
        "exc": name,
        "msg": guard.describe(exc),
        "line": _candidate_line(exc, state),
    }


def _candidate_line(exc: BaseException, state: dict[str, Any]) -> int | None:
    """The last line of the candidate's code in the traceback.

    The only privileged section once the candidate has started: plain attribute reads on
    traceback, frame and code objects, none of which runs candidate code (threads are denied)."""
    if isinstance(exc, SyntaxError) and exc.filename == CANDIDATE_FILE:
        return exc.lineno if type(exc.lineno) is int else None
    tb = _get_traceback(exc)
    line = None
    state["privileged"] = state["p"]["get_ident"]()
    try:
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == CANDIDATE_FILE:
                line = tb.tb_lineno
            tb = tb.tb_next
    finally:
        state["privileged"] = False
    return line if type(line) is int else None


_get_traceback = guard._get_traceback
_type_name = restorer.type_name
