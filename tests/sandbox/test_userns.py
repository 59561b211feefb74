"""The sandbox without root: network and filesystem layers from an unprivileged user namespace.

Each test runs a script as `nobody` (uid 65534) with a copy of the execrl sources in a directory
that user can read, so it does not depend on where the checkout lives. Skipped where this
process is not root (it cannot become nobody), `setpriv` is missing, no Python 3.11+ is
runnable by nobody, or the kernel refuses unprivileged user namespaces."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import execrl
from sandbox.unprivileged import cannot_run_as_nobody

NOBODY = 65534
SRC = Path(execrl.__file__).resolve().parent


def _as_nobody(python: str, args: list[str], cwd: str, timeout: float = 180.0):
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python, *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def nobody():
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        cannot_run_as_nobody("needs root and setpriv to run as nobody")
    base = tempfile.mkdtemp(prefix="execrl-userns-", dir="/var/tmp")
    os.chmod(base, 0o755)
    shutil.copytree(
        SRC, os.path.join(base, "src", "execrl"), ignore=shutil.ignore_patterns("__pycache__")
    )
    secret = os.path.join(base, "secret")
    os.mkdir(secret, 0o755)
    with open(os.path.join(secret, "key.txt"), "w") as fh:
        fh.write("TOPSECRET\n")
    os.chmod(os.path.join(secret, "key.txt"), 0o644)
    subprocess.run(["chmod", "-R", "a+rX", base], check=True)
    # The pool starts its workers with sys.executable: that must work as nobody too.
    probe = (
        "import subprocess, sys; sys.path.insert(0, 'src'); assert sys.version_info >= (3, 11); "
        "subprocess.run([sys.executable, '-c', 'pass'], check=True); "
        "from execrl.sandbox.confine import isolation; print(isolation.userns_available())"
    )
    python = None
    for candidate in (sys.executable, "/usr/bin/python3.11", "/usr/bin/python3"):
        if os.path.exists(candidate):
            out = _as_nobody(candidate, ["-c", probe], base, timeout=60)
            if out.returncode == 0:
                python = candidate
                break
    try:
        if python is None:
            cannot_run_as_nobody("no Python 3.11+ that nobody can run")
        if out.stdout.strip() != "True":
            cannot_run_as_nobody("the kernel refuses unprivileged user namespaces")
        yield {"python": python, "base": base, "secret": secret}
    finally:
        shutil.rmtree(base, ignore_errors=True)


NAMESPACED = ("network", "filesystem", "rlimits", "audit")


def _run(nobody, body: str, layers: tuple[str, ...] = NAMESPACED) -> dict:
    """Run `body` as nobody, with a sandbox `sb` of these layers which hides the secret
    directory; `body` fills the dict `out`."""
    script = (
        textwrap.dedent(
            """
        import json, os, socket, subprocess, sys
        sys.path.insert(0, "src")
        from execrl.sandbox import Job, Limits, Sandbox
        from execrl.sandbox.confine.isolation import probe_layers
        from execrl.tasks import AssertTests, StdioCase, StdioTests
        SECRET = sys.argv[1]
        T = AssertTests("", ("assert f() == 1",))
        out = {}
        def run(program, **kw):
            kw.setdefault("limits", Limits(wall_s=5.0))
            r = sb.run(Job(program, T, "f", **kw))
            return [r.verdict.value, r.stdout, r.message]
        def run_c(program, expected):
            tests = StdioTests((StdioCase("", expected),))
            r = sb.run(Job(program, tests, language="c", limits=Limits(wall_s=20.0)))
            return [r.verdict.value, r.stdout, r.message]
        layers = tuple(sys.argv[2].split(","))
        with Sandbox(workers=1, layers=layers, hide=(SECRET,)) as sb:
            out["layers"] = list(sb.layers)
        """
        )
        + textwrap.indent(textwrap.dedent(body), "    ")
        + "\nprint(json.dumps(out))\n"
    )
    path = os.path.join(nobody["base"], "script.py")
    with open(path, "w") as fh:
        fh.write(script)
    os.chmod(path, 0o644)
    done = _as_nobody(nobody["python"], [path, nobody["secret"], ",".join(layers)], nobody["base"])
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_doctor_without_root_reports_the_namespace_layers(nobody):
    out = _as_nobody(
        nobody["python"],
        [
            "-c",
            "import sys; sys.path.insert(0, 'src'); from execrl.sandbox.confine import isolation; "
            "print({s.name: s.available for s in isolation.probe_layers()})",
        ],
        nobody["base"],
    )
    status = eval(out.stdout.strip())  # noqa: S307 - our own printed dict
    assert status["network"] and status["filesystem"] and not status["uid"]


def test_without_root_the_run_is_confined(nobody):
    out = _run(
        nobody,
        """
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        pool = os.getpid()
        out["honest"] = run("def f():\\n    return 1\\n")
        out["network"] = run(
            f"import socket\\ndef f():\\n    socket.create_connection(('127.0.0.1', {port}), 1)\\n"
            "    return 1\\n"
        )
        out["secret"] = run(f"def f():\\n    return 1 if open({SECRET!r} + '/key.txt').read() else 0\\n")
        out["sees_pool"] = run(
            f"import os\\ndef f():\\n    return int(os.path.exists('/proc/{pool}'))\\n"
        )
        out["kill_pool"] = run(
            f"import os, signal\\ndef f():\\n    os.kill({pool}, signal.SIGKILL)\\n    return 1\\n",
            allow_threads=True,
        )
        out["kill_all"] = run(
            "import os, signal\\ndef f():\\n    os.kill(-1, signal.SIGKILL)\\n    return 1\\n",
            allow_threads=True,
        )
        out["write_root"] = run("def f():\\n    open('/usr/execrl-x', 'w')\\n    return 1\\n")
        out["daemon"] = run(
            "import os\\ndef f():\\n    if os.fork() == 0:\\n        os.setsid()\\n"
            "        if os.fork() == 0:\\n            os.execv('/bin/sleep', ['sleep', '37'])\\n"
            "        os._exit(0)\\n    return 1\\n",
            allow_threads=True,
        )
        out["sleepers"] = subprocess.run(
            ["pgrep", "-u", str(os.getuid()), "-f", "sleep 37"], capture_output=True, text=True
        ).stdout
        out["after"] = run("def f():\\n    return 1\\n")
        # No capability left in the run (a Python run does not exec, which would clear them).
        out["no_caps"] = run(
            "def f():\\n    line = [x for x in open('/proc/self/status') if x[:6] == 'CapEff'][0]\\n"
            "    return 1 if int(line.split()[1], 16) == 0 else 0\\n"
        )
        """,
    )
    assert out["layers"] == ["network", "filesystem", "rlimits", "audit"]
    assert out["honest"][0] == "PASSED"
    for attack in ("network", "secret", "sees_pool", "kill_pool", "write_root"):
        assert out[attack][0] != "PASSED", (attack, out[attack])
    assert "Network is unreachable" in out["network"][2]
    # kill(-1) reaches only the run's own namespace: the pool survived to grade the rest.
    assert out["after"][0] == "PASSED"
    assert out["no_caps"][0] == "PASSED", out["no_caps"]
    assert out["daemon"][0] == "PASSED"  # its daemon is no failure, but it is gone after the run
    assert out["sleepers"].strip() == ""


C_ESCAPE = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
int main(int argc, char **argv) {
    const char *dir = "%s";
    int direct = umount2(dir, MNT_DETACH);
    int nested = unshare(CLONE_NEWUSER | CLONE_NEWNS);
    int again = umount2(dir, MNT_DETACH);
    char path[512], buf[64] = "hidden";
    snprintf(path, sizeof path, "%%s/key.txt", dir);
    FILE *f = fopen(path, "r");
    if (f && fgets(buf, sizeof buf, f)) {}
    printf("%%d %%d %%s\n", direct, again, buf);
    return 0;
}
"""
C_HELLO = '#include <stdio.h>\nint main(void) { printf("hello\\n"); return 0; }\n'
C_BYE = C_HELLO.replace("hello", "bye")
# Every binary in the pool's cache directory replaced by a script that prints "hello".
POISON = """import os
def f():
    n = 0
    for d, _, files in os.walk(%r):
        for name in files:
            if name.endswith(".json"):  # the compile's record: left as it is, so it is trusted
                continue
            try:
                with open(os.path.join(d, name), "w") as fh:
                    fh.write("#!/bin/sh\\necho hello\\n")
                n += 1
            except OSError:
                pass
    return 1
"""


def test_without_root_mounts_cannot_be_undone(nobody):
    out = _run(nobody, f"out['escape'] = run_c({C_ESCAPE % nobody['secret']!r}, 'x\\n')")
    direct, again, text = out["escape"][1].split()
    assert (direct, again, text) == ("-1", "-1", "hidden"), out["escape"]


@pytest.mark.parametrize("layers", [NAMESPACED, ("rlimits", "audit")], ids=["userns", "plain"])
def test_without_root_a_run_cannot_replace_compiled_binaries(nobody, layers):
    """Runs have the pool's uid here: a cache of binaries on disk would be theirs to overwrite,
    and a wrong program whose binary was replaced by a right one would pass."""
    out = _run(
        nobody,
        f"""
        out["hello"] = run_c({C_HELLO!r}, "hello\\n")
        out["bye"] = run_c({C_BYE!r}, "hello\\n")
        poison = {POISON!r} % (sb.pool._bin_dir,)
        out["poison"] = run(poison, allow_threads=True)
        out["bye_again"] = run_c({C_BYE!r}, "hello\\n")
        out["hello_again"] = run_c({C_HELLO!r}, "hello\\n")
        """,
        layers,
    )
    assert out["hello"][0] == "PASSED" and out["bye"][0] == "WRONG_ANSWER"
    assert out["bye_again"][0] == "WRONG_ANSWER", out["bye_again"]
    assert out["hello_again"][0] == "PASSED"


def test_without_root_a_run_reads_nothing_an_earlier_run_left_in_tmp(nobody):
    """Runs keep the worker's uid here, so the worker's /tmp is theirs to write: run A leaves
    the answer in /tmp (at its top, in a folder, hidden), and run B, which computes nothing,
    reads it. One worker: both runs land on it."""
    out = _run(
        nobody,
        """
        out["leave"] = run(
            "import os\\ndef f():\\n    os.makedirs('/tmp/d/e', exist_ok=True)\\n"
            "    for p in ('/tmp/answer', '/tmp/d/e/answer', '/tmp/.answer'):\\n"
            "        open(p, 'w').write('1')\\n    return 1\\n"
        )
        for name, path in (("top", "/tmp/answer"), ("nested", "/tmp/d/e/answer"),
                           ("hidden", "/tmp/.answer")):
            out[name] = run(f"def f():\\n    return int(open({path!r}).read())\\n")
        out["listing"] = run("import os\\ndef f():\\n    print(sorted(os.listdir('/tmp')))\\n"
                             "    return 1\\n")
        """,
    )
    assert out["leave"][0] == "PASSED", out["leave"]
    for name in ("top", "nested", "hidden"):
        assert out[name][0] != "PASSED", (name, out[name])
    # the run's scratch, and the compile cache bound back read-only: nothing else
    listing = ast.literal_eval(out["listing"][1].strip())
    assert [n for n in listing if not n.startswith("execrl-bin-")] == ["run"], out["listing"]


def test_without_root_a_job_with_its_own_scratch_size_runs(nobody):
    """A job whose `Limits.scratch_mb` differs from the pool's default: the worker resizes its
    scratch tmpfs before the run, which needs the capability it held before dropping them all;
    the run gets the size it asked for, and it still has no capability."""
    out = _run(
        nobody,
        """
        size = ("import os\\ndef f():\\n    s = os.statvfs('/tmp')\\n"
                "    print(s.f_blocks * s.f_frsize >> 20)\\n"
                "    line = [x for x in open('/proc/self/status') if x[:6] == 'CapEff'][0]\\n"
                "    return 1 if int(line.split()[1], 16) == 0 else 0\\n")
        for mb in (16, 64, 3):
            out[str(mb)] = run(size, limits=Limits(wall_s=5.0, scratch_mb=mb))
        """,
    )
    for mb in (16, 64, 3):
        verdict, stdout, message = out[str(mb)]
        assert verdict == "PASSED" and stdout.split() == [str(mb)], (mb, out[str(mb)])
