"""The `testgen` verifier's runner: one model-written test suite against one program (the
reference or a mutant), in the sandbox. Shipped as text with each run (as `runner.py`, beside
`suite.py` and execrl's `protocol`, `audit_hook` and `frameless`) and run by a confined
`python -I`; it imports nothing of execrl's.

stdin holds, in order: the key that seals the result line (hex), a JSON header (`entry`: the
function's name; `coverage`: whether to measure the program's line coverage), and the program
under test. The process reads it all, then forks:

- The child runs the suite. Its stdin, stdout and stderr are /dev/null. It compiles the program
  from the string read (its file name `<program under test>` names no file and is in no
  `linecache`), so `inspect.getsource` and reading files find no source; it binds a recording
  wrapper of the entry point under the entry point's name in the suite's namespace, installs
  execrl's audit hook (frames, tracebacks' frames, gc's object lists, trace hooks, ctypes,
  /proc/self/mem and new processes denied) and one more hook that denies reading the code of the
  program's functions and of the wrapper (`__code__`, and any generator's or coroutine's code), so
  bytecode, constants and names cannot tell a mutant from the reference; then it runs the suite:
  its top-level code, its `test*` functions, its `unittest.TestCase` classes. It reports, on a
  pipe, whether all of that ended without an exception and the arguments of the calls made
  through the wrapper, as plain data.
- The parent never runs the suite's code. It waits for the report (at most SUITE_S seconds,
  then kills the child), and, when asked for coverage and the suite passed, replays the recorded
  calls on a fresh copy of the program under `sys.settrace` to find the lines they execute.
  Nothing the suite did reaches this measure except the arguments it passed, which it could
  have passed anyway (so a program that runs its input as code, `eval`, must not be a task's
  reference: the suite's code would run here; the built-in suite leaves such functions out).
  It prints one line sealed with the key (`protocol.seal`), which the child
  never held in reach: the verdict, the covered lines and the count of recorded calls.
"""

import json
import os
import select
import signal
import sys
import time
import types

MARK = "@execrl-testgen "
PROGRAM = "<program under test>"
SUITE_S = 4.0  # the suite's time against one program; over it, the program is rejected
REPLAY_S = 2.0  # the coverage replay's time; lines covered by then count
MAX_REPORT = 16 << 20  # bytes of the child's report (the recording budget keeps it under)
MAX_CALLS = 512  # calls recorded for the coverage replay
MAX_NODES = 200_000  # values recorded, all calls together (a long string counts per 16 chars)
HIDDEN_CODE = frozenset({"__code__", "gi_code", "cr_code", "ag_code", "f_code"})


class NotPlain(Exception):
    """A value the recorder does not copy (an object of the suite's own, or too much data)."""


class OutOfTime(BaseException):
    """The coverage replay's time is up."""


def private(path):
    # A module of execrl's, shipped beside this runner, in a namespace of its own.
    namespace = {"__name__": "execrl_" + path[:-3]}
    with open(path, encoding="utf-8") as f:
        exec(compile(f.read(), path, "exec"), namespace)
    return namespace


def encode(value, budget, depth=0):
    """`value` as JSON-ready plain data, exact built-in types only (no code of the suite's runs:
    no __eq__, __hash__ or __iter__ of its own is called); NotPlain otherwise."""
    budget[0] -= 1
    kind = type(value)
    if budget[0] < 0 or depth > 50:
        raise NotPlain
    if value is None or kind is bool:
        return ["c", value]
    if kind is int:
        return ["i", str(value)]
    if kind is float:
        return ["f", value.hex()]
    if kind is str or kind is bytes:
        budget[0] -= len(value) // 16
        return ["s", value] if kind is str else ["y", value.hex()]
    if kind in (list, tuple, set, frozenset):
        tag = {list: "l", tuple: "t", set: "S", frozenset: "F"}[kind]
        return [tag, [encode(v, budget, depth + 1) for v in value]]
    if kind is dict:
        return [
            "d",
            [
                [encode(k, budget, depth + 1), encode(v, budget, depth + 1)]
                for k, v in value.items()
            ],
        ]
    raise NotPlain


def decode(data):
    tag, value = data
    if tag == "c":
        return value
    if tag == "i":
        return int(value)
    if tag == "f":
        return float.fromhex(value)
    if tag == "s":
        return str(value)
    if tag == "y":
        return bytes.fromhex(value)
    if tag == "d":
        return {decode(k): decode(v) for k, v in value}
    items = [decode(v) for v in value]
    return {"l": list, "t": tuple, "S": set, "F": frozenset}[tag](items)


def recorder(function, calls, budget):
    """What the suite calls: the entry point, recording each call's arguments as they were
    before the call (for the coverage replay)."""

    def entry(*args, **kwargs):
        if len(calls) < MAX_CALLS:
            try:
                calls.append([encode(list(args), budget), encode(kwargs, budget)])
            except (NotPlain, ValueError, RecursionError):
                pass
        return function(*args, **kwargs)

    for name in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(entry, name, getattr(function, name, None))
    return entry


def deny_code(hidden):
    """An audit hook denying the code of functions whose globals are in `hidden` (the program's
    and this runner's), and every generator's and coroutine's code."""
    function_type, id_ = types.FunctionType, id

    def hook(event, args):
        if event != "object.__getattr__" or args[1] not in HIDDEN_CODE:
            return
        if args[1] == "__code__" and not (
            type(args[0]) is function_type and id_(args[0].__globals__) in hidden
        ):
            return
        raise AttributeError(f"execrl sandbox: reading {args[1]} of the program is not permitted")

    sys.addaudithook(hook)


def run_suite(module):
    """Run the suite's top-level code, then its test functions and TestCase classes; raises
    the first failure."""
    with open("suite.py", encoding="utf-8") as f:
        source = f.read()
    try:
        exec(compile(source, "suite.py", "exec"), module.__dict__)
    except SystemExit as exc:
        if exc.code not in (None, 0, False):
            raise
        return
    case_type = sys.modules["unittest"].TestCase
    for name, value in list(module.__dict__.items()):
        if type(value) is types.FunctionType and name.startswith("test"):
            if value.__globals__ is module.__dict__:  # the suite's own, not an import
                value()
        elif isinstance(value, type) and issubclass(value, case_type) and value is not case_type:
            run_case(value)


def run_case(cls):
    cls.setUpClass()
    try:
        for name in sorted(n for n in dir(cls) if n.startswith("test")):
            case = cls(name)
            case.setUp()
            try:
                getattr(case, name)()
            finally:
                case.tearDown()
    finally:
        cls.tearDownClass()


def child(program, entry, write_fd):
    sys.stdin = open(os.devnull)
    sys.stdout = sys.stderr = open(os.devnull, "w")
    sys.set_int_max_str_digits(0)
    namespace = {"__name__": "program"}
    exec(compile(program, PROGRAM, "exec"), namespace)
    del program
    calls, budget = [], [MAX_NODES]
    module = types.ModuleType("__main__")
    function = namespace.get(entry)
    if callable(function):
        module.__dict__[entry] = recorder(function, calls, budget)
    sys.modules["__main__"] = module
    # Imported before the hooks, from cached bytecode: a test module's usual imports are not
    # compiled anew in every run (a third of a run's time under load).
    import threading
    import traceback
    import unittest  # noqa: F401 - for run_suite, and for suites that use it

    # Modules imported from here compile from source: cached bytecode is read through
    # marshal.loads, which the hook denies.
    sys.pycache_prefix = "/proc/execrl-no-bytecode"
    state = {
        "privileged": True,
        "dirty": False,
        "extra_globals": set(),
        "p": {"get_ident": threading.get_ident, "protected_globals": {id(globals())}},
    }
    private("audit_hook.py")["install"](state, lambda **_: None, False)
    deny_code(frozenset({id(namespace), id(globals())}))
    private("frameless.py")["install"](traceback)
    state["privileged"] = False
    try:
        run_suite(module)
        report = {"passed": True, "error": ""}
    except BaseException as exc:  # the suite rejected the program (or broke)
        try:
            error = f"{type(exc).__name__}: {exc}"[:500]
        except BaseException:
            error = type(exc).__name__
        report = {"passed": False, "error": error}
    report["calls"] = calls
    data = json.dumps(report).encode()
    while data:
        data = data[os.write(write_fd, data[:65536]) :]
    os._exit(0)


def collect(read_fd, pid):
    """The child's report, or a failure when it sent none in time (then it is killed)."""
    chunks, size, deadline = [], 0, time.monotonic() + SUITE_S
    while size <= MAX_REPORT:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([read_fd], [], [], left)[0]:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"passed": False, "error": f"the suite ran past {SUITE_S:g} s"}
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    try:
        report = json.loads(b"".join(chunks))
    except ValueError:
        return {"passed": False, "error": "the suite ended without a report (os._exit?)"}
    return report if isinstance(report, dict) else {"passed": False, "error": "bad report"}


def replay(program, entry, calls):
    """The program's lines executed by the recorded calls (the coverage measure)."""
    namespace = {"__name__": "program"}
    exec(compile(program, PROGRAM, "exec"), namespace)
    function = namespace.get(entry)
    covered = set()

    def local(frame, event, arg):
        if event == "line":
            covered.add(frame.f_lineno)
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename == PROGRAM else None

    def out_of_time(signum, frame):
        raise OutOfTime

    signal.signal(signal.SIGALRM, out_of_time)
    signal.setitimer(signal.ITIMER_REAL, REPLAY_S)
    try:
        for call in calls if isinstance(calls, list) else ():
            try:
                args, kwargs = decode(call[0]), decode(call[1])
            except Exception:
                continue
            sys.settrace(tracer)
            try:
                function(*args, **kwargs)
            except Exception:
                pass
            finally:
                sys.settrace(None)
    except OutOfTime:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.settrace(None)
    return sorted(covered)


def main():
    chunks = []
    while chunk := os.read(0, 1 << 16):
        chunks.append(chunk)
    key_hex, _, rest = b"".join(chunks).partition(b"\n")
    header_line, _, program_bytes = rest.partition(b"\n")
    key, header = bytes.fromhex(key_hex.decode()), json.loads(header_line)
    program, entry = program_bytes.decode(), str(header["entry"])
    seal = private("protocol.py")["seal"]
    sys.set_int_max_str_digits(0)
    null = os.open(os.devnull, os.O_RDWR)
    out = os.dup(1)
    os.dup2(null, 0)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        os.close(out)
        key = seal = None
        os.dup2(null, 1)
        os.dup2(null, 2)
        try:
            child(program, entry, write_fd)
        finally:  # the child never goes on into the parent's code
            os._exit(1)
    os.close(write_fd)
    report = collect(read_fd, pid)
    passed = report.get("passed") is True
    calls = report.get("calls")
    covered = []
    if header.get("coverage") and passed:
        os.dup2(null, 1)  # the program's own prints never reach the result line's stream
        covered = replay(program, entry, calls)
    body = {
        "passed": passed,
        "error": str(report.get("error") or "")[:500],
        "covered": covered,
        "calls": len(calls) if isinstance(calls, list) else 0,
    }
    os.write(out, b"\n" + MARK.encode() + seal(key, 0, json.dumps(body).encode()))
    os._exit(0)


if __name__ == "__main__":
    main()
