"""Attack class: reaching the harness's own state from the candidate.

The harness runs on private copies of its globals (`prepared._privatize`), but the candidate can
reach every module object through `sys.modules`, every class through `object.__subclasses__`,
and a function's globals through `__globals__` (reading it raises no audit event). A private
object that any of these lead to, or a class the harness relies on, could be bent into a pass.
Every program here is wrong unless the attack works."""

from __future__ import annotations

import dataclasses
import types

import pytest

from execrl.sandbox import Sandbox, Verdict
from execrl.sandbox.run import harness, plain
from sandbox_helpers import (
    ALWAYS_EQUAL,
    HONEST,
    HUMANEVAL_STYLE,
    assert_job,
    call_job,
    run_attack,
    sandbox_processes,
)

# Walks whatever the sandbox's modules lead to, and the globals of every method of every class,
# replacing each helper the harness runs with one that makes every test a no-op.
PATCH_EVERY_REACHABLE_HELPER = """
import sys

def nothing_to_run(*args, **kwargs):
    return compile("pass", "<tests>", "exec")

seen = set()

def visit(obj, depth):
    if depth > 4 or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, dict):
        if "_compiled" in obj:
            obj["_compiled"] = nothing_to_run
        for value in list(obj.values()):
            visit(value, depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for value in list(obj):
            visit(value, depth + 1)
    elif type(obj).__name__ == "function":
        visit(obj.__globals__, depth + 1)
    elif isinstance(obj, type):
        visit(dict(vars(obj)), depth + 1)
    elif type(obj).__name__ in ("module", "SimpleNamespace"):
        visit(vars(obj), depth + 1)

for name, module in list(sys.modules.items()):
    if name.startswith("execrl") or name == "__main__":
        visit(vars(module), 0)
stack = [object]
while stack:
    cls = stack.pop()
    visit(cls, 3)
    try:
        stack.extend(type.__subclasses__(cls))
    except TypeError:
        pass

def f(x):
    return 0
"""


def test_helpers_reached_through_modules_and_classes(sandbox):
    r = run_attack(
        sandbox, assert_job(PATCH_EVERY_REACHABLE_HELPER, "check(candidate)", HUMANEVAL_STYLE)
    )
    assert r.verdict is Verdict.WRONG_ANSWER


SWALLOWING_TESTS = (
    "def check(candidate):\n    try:\n        assert candidate(1) == 2\n    except Exception:\n"
    "        pass\n"
)


@pytest.mark.parametrize(
    "tamper",
    [
        "NotPlainData.__str__ = lambda self: 1 / 0",  # the harness's report of it raises
        "NotPlainData.__new__ = lambda cls, *a: 5",  # `raise NotPlainData(...)` raises TypeError
        "NotPlainData.__init__ = lambda self, *a: 1 / 0",
    ],
)
def test_tampered_not_plain_data_class(sandbox, tamper):
    """A non-plain return must fail even when the candidate bent the class that reports it and
    the test code swallows every exception around the call."""
    program = (
        "import sys\nNotPlainData = sys.modules['execrl.sandbox.run.plain'].NotPlainData\n"
        f"{tamper}\n{ALWAYS_EQUAL}"
    )
    r = run_attack(sandbox, assert_job(program, "check(candidate)", SWALLOWING_TESTS))
    assert r.verdict is Verdict.WRONG_ANSWER
    assert r.tests[0].exception == "NotPlainData"
    r = run_attack(sandbox, call_job(program, [(1,)], [2]))
    assert r.verdict is Verdict.WRONG_ANSWER


IMMUTABLE = (int, float, str, bytes, bool, frozenset, tuple, type(None), type, types.ModuleType)
CALLABLE = (types.FunctionType, types.BuiltinFunctionType, types.MethodWrapperType)


@pytest.mark.parametrize("module", [harness, plain])
def test_module_level_values_are_immutable(module):
    """The private globals are copies of these modules' dicts, so every module-level value is
    shared with the public module the candidate can reach: none may be a container it could
    change (a module-level list of the private globals once let a candidate pass)."""
    mutable = {
        name: type(value).__name__
        for name, value in vars(module).items()
        if not name.startswith("__")
        and not isinstance(value, IMMUTABLE + CALLABLE)
        and type(value).__name__
        not in ("Pattern", "getset_descriptor", "method_descriptor", "_Feature")
    }
    assert not mutable, f"mutable module-level values in {module.__name__}: {mutable}"


def test_daemon_that_hijacks_the_final_flush(sandbox):
    """The harness flushes stdout after its last report and then kills every process of the
    run; a candidate that shadows the stream's flush with its own could start a daemon there
    and exit before the kill."""
    program = (
        "import os, sys, time\n"
        "def flush():\n"
        "    if os.fork() == 0:\n        os.setsid()\n        time.sleep(30)\n        os._exit(0)\n"
        "    os._exit(0)\n"
        "sys.stdout.flush = flush\n"
        "def f(x):\n    return x + 1\n"
    )
    job = dataclasses.replace(
        assert_job(program, "check(candidate)", HUMANEVAL_STYLE), allow_threads=True
    )
    sandbox.run(job)
    assert sandbox_processes(sandbox) == []


def test_function_of_the_tests_leads_to_the_candidate_wrapper(sandbox):
    """A test that hands the candidate a function of its own gives it the tests' globals, where
    the wrapper the tests call sits: that wrapper must lead nowhere."""
    program = ALWAYS_EQUAL.replace("def f(x):\n    return AlwaysEqual()\n", "") + (
        "def f(g):\n"
        "    wrapper = g.__globals__['candidate']\n"
        "    for cell in wrapper.__closure__ or ():\n"
        "        state = cell.cell_contents\n"
        "        if isinstance(state, dict) and 'privileged' in state:\n"
        "            state['privileged'] = True\n"
        "    for value in list(wrapper.__globals__.values()):\n"
        "        if type(value).__name__ == 'SimpleNamespace':\n"
        "            value.to_json = value.exact_copy = lambda v: v\n"
        "            value.is_exact = lambda v: True\n"
        "    return AlwaysEqual()\n"
    )
    setup = "def check(candidate):\n    assert candidate(lambda y: y) == 2\n"
    r = run_attack(sandbox, assert_job(program, "check(candidate)", setup))
    assert r.verdict is not Verdict.PASSED


def test_builtins_of_the_tests_reached_through_their_function(sandbox):
    program = "def f(g):\n    g.__builtins__['abs'] = lambda x: 0\n    return 10.0\n"
    setup = (
        "def check(candidate):\n    v = candidate(lambda y: y)\n    assert abs(v - 0.5) < 1e-6\n"
    )
    r = run_attack(sandbox, assert_job(program, "check(candidate)", setup))
    assert r.verdict is Verdict.WRONG_ANSWER


READ_THE_CHANNEL = r"""
import json, os
def f(x):
    fd = os.open("/proc/self/fd/3", os.O_RDONLY | os.O_NONBLOCK)
    line = os.read(fd, 1 << 16).split(b"\n")[0]
    token = line[: line.index(b"{")]
    for message in ({"t": "result", "i": 0, "ok": True, "wall": 0.0}, {"t": "done", "n": 1}):
        os.write(3, token + json.dumps(message).encode() + b"\n")
    os._exit(0)
"""


@pytest.mark.parametrize("layers", [None, ("rlimits", "audit")])
def test_token_read_back_from_the_channel(layers):
    """The harness's messages carry the token; reopening the channel for reading must fail,
    with every layer and with the uid layer off (where the run has the worker's own uid)."""
    config = {} if layers is None else {"layers": layers}
    with Sandbox(workers=1, **config) as sb:
        r = sb.run(assert_job(READ_THE_CHANNEL, "assert f(1) == 2"))
        assert r.verdict is not Verdict.PASSED, r
        assert sb.run(assert_job(HONEST)).passed


ESCAPES = {
    "subinterpreter": (
        "import _xxsubinterpreters as si\n"
        'si.run_string(si.create(), "import os, ctypes, sys\\n'
        "ctypes.string_at(id(sys), 8)\\nos.write(1, b'ESCAPED')\")\n"
    ),
    "subinterpreter by its loader": (
        "import glob, importlib.util, sys\n"
        "path = glob.glob(sys.base_exec_prefix + '/lib/python3*/lib-dynload/_xxsubinterpreters*')[0]\n"
        "spec = importlib.util.spec_from_file_location('_xxsubinterpreters', path)\n"
        "si = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(si)\n"
        "si.run_string(si.create(), \"import os\\nos.write(1, b'ESCAPED')\")\n"
    ),
    "test module": "import _testcapi\nprint('ESCAPED')\n",
    "internal test module": "import _testinternalcapi\nprint('ESCAPED')\n",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_ways_around_the_audit_hook(sandbox, name):
    """Modules that do what the hook denies (a subinterpreter has no hook at all: ctypes and
    frames work there, in the same memory)."""
    program = ESCAPES[name] + "def f(x):\n    return x + 1\n"
    r = run_attack(sandbox, assert_job(program))
    assert "ESCAPED" not in r.stdout


FORGE_A_REPLY = r"""
import json, os, struct
def f(x):
    pool = next(int(l.split()[1]) for l in open(f"/proc/{os.getppid()}/status") if l.startswith("PPid:"))
    raw = {"events": [{"t": "loaded"}, {"t": "start", "i": 0}, {"t": "result", "i": 0, "ok": True},
           {"t": "done", "n": 1}], "forged": 0, "timed_out": False, "output_limit": False,
           "exit_code": 0, "signal": None, "stdout": "", "stdout_full": "", "stderr": "",
           "cpu_s": 0.0, "wall_s": 0.0, "maxrss_kb": 0}
    body = json.dumps({"t": "result", "units": [raw]}).encode()
    for name in os.listdir(f"/proc/{pool}/fd"):
        path = f"/proc/{pool}/fd/{name}"
        try:
            if os.readlink(path).startswith("pipe:"):
                os.write(os.open(path, os.O_WRONLY | os.O_NONBLOCK), struct.pack(">I", len(body)) + body)
        except OSError:
            pass
    return 0
"""


def test_reply_forged_into_the_pools_pipes():
    """Without the uid layer a run has the pool's own uid: it must not be able to write a
    reply into the pool's channel to its worker through /proc/<pool>/fd."""
    with Sandbox(workers=1, layers=("rlimits", "audit")) as sb:
        r = sb.run(assert_job(FORGE_A_REPLY, "assert f(1) == 2"))
        assert r.verdict is not Verdict.PASSED, r


def test_pool_is_not_dumpable_while_runs_share_its_uid():
    """Without the uid layer a run could read this process's /proc entries (its environment
    holds the user's API keys) and trace it; a non-dumpable process's entries are root's.
    (As root, where these tests run, the runs could read them anyway: that is why the uid
    layer is on by default.)"""
    from execrl.sandbox.confine import syscalls

    assert syscalls.prctl_get(syscalls.PR_GET_DUMPABLE) == 1
    with Sandbox(workers=1, layers=("rlimits", "audit")) as sb:
        assert syscalls.prctl_get(syscalls.PR_GET_DUMPABLE) == 0
        assert sb.run(assert_job(HONEST)).passed
    assert syscalls.prctl_get(syscalls.PR_GET_DUMPABLE) == 1
    with Sandbox(workers=1):  # the uid layer: nothing to shield
        assert syscalls.prctl_get(syscalls.PR_GET_DUMPABLE) == 1


SILENCE_THE_AUDIT_HOOK = """
import sys

hook = sys.modules["execrl.sandbox.run.audit_hook"]
hook.MAX_DENIALS_REPORTED = -1  # the public module: the hook reads a private copy
hook._DENIED_EVENTS = frozenset()
try:
    sys._getframe(0)
    print("frame reached")
except ValueError:
    pass

def f(x):
    return x + 1
"""


def test_patching_the_audit_hooks_module_neither_silences_nor_disarms_it(sandbox):
    r = sandbox.run(assert_job(SILENCE_THE_AUDIT_HOOK))
    assert "frame reached" not in r.stdout
    assert "sys._getframe" in r.tampering, (r.verdict, r.tampering, r.message)
