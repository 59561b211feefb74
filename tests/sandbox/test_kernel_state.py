"""Nothing outlives a run: no kernel object one run makes reaches a later run of any worker.

Processes and SysV/POSIX IPC have their own tests (test_adversarial, test_ipc); here the kernel
keyrings, which are kept per uid and would carry an answer from a run that computed it to a run
of the same worker that did not."""

from __future__ import annotations

import pytest

from execrl.sandbox import Job, Limits, Sandbox, Verdict
from execrl.sandbox.grading import languages
from execrl.tasks.schema import StdioCase, StdioTests
from sandbox.test_userns import _run, nobody  # noqa: F401 - nobody is a fixture used here

# Stores its input under a key in every keyring a later run could reach (user, user-session,
# session, persistent), through the native system calls and through the 32-bit table (int
# 0x80, buffers below 4 GiB), and prints whatever an earlier run stored. Prints "none" if the
# kernel refused all of it.
KEY_LEAK = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#define SPEC_SESSION -3
#define SPEC_USER -4
#define SPEC_USER_SESSION -5
static long keyctl(long op, long a, long b, long c, long d) {
    return syscall(SYS_keyctl, op, a, b, c, d);
}
static int find(long ring, char *out) {
    long id = keyctl(10 /* SEARCH */, ring, (long)"user", (long)"execrl-leak", 0);
    if (id < 0) return 0;
    long n = keyctl(11 /* READ */, id, (long)out, 255, 0);
    if (n <= 0) return 0;
    out[n < 255 ? n : 255] = 0;
    return 1;
}
static long compat_add_key(const char *payload) {
    /* add_key through the i386 table: arguments must be 32-bit addresses */
    char *low = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (low == MAP_FAILED) return -1;
    strcpy(low, "user"); strcpy(low + 16, "execrl-leak"); strcpy(low + 64, payload);
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret)
                     : "a"(286), "b"(low), "c"(low + 16), "d"(low + 64),
                       "S"((long)strlen(payload)), "D"((long)SPEC_USER)
                     : "memory");
    return ret;
}
int main(void) {
    char in[256] = {0}, seen[256];
    if (!fgets(in, sizeof in, stdin)) in[0] = 0;
    in[strcspn(in, "\n")] = 0;
    long persistent = keyctl(22 /* GET_PERSISTENT */, -1, SPEC_SESSION, 0, 0);
    long rings[] = {SPEC_USER, SPEC_USER_SESSION, SPEC_SESSION, persistent};
    for (int k = 0; k < 4; k++) {
        if (rings[k] != -1 && find(rings[k], seen)) { printf("%s\n", seen); return 0; }
    }
    if (in[0]) {
        for (int k = 0; k < 4; k++)
            if (rings[k] != -1)
                syscall(SYS_add_key, "user", "execrl-leak", in, strlen(in), rings[k]);
        compat_add_key(in);
    }
    printf("none\n");
    return 0;
}
"""


def _job(stdin: str, expected: str) -> Job:
    return Job(KEY_LEAK, StdioTests((StdioCase(stdin, expected),)), language="c")


def test_a_key_stored_by_one_run_cannot_be_read_by_a_later_run():
    if languages.missing_tools("c"):
        pytest.skip("no C compiler")
    with Sandbox(workers=1) as sb:
        # The first run sees the answer in its input and stores it; the second is given nothing
        # and would print it, passing a task whose input it never read.
        first = sb.run(_job("the-answer-42\n", "none\n"))
        assert first.passed, (first.verdict, first.message, first.stdout)
        second = sb.run(_job("", "the-answer-42\n"))
        assert second.verdict is Verdict.WRONG_ANSWER, (second.verdict, second.stdout)
        assert second.stdout.strip() == "none"


# Every way into the key system calls: native, the i386 table (int 0x80), the x32 numbers.
KEY_CALLS = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void) {
    char *low = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    strcpy(low, "user"); strcpy(low + 16, "k"); strcpy(low + 64, "v");
    long native = syscall(SYS_add_key, "user", "k", "v", 1, -4L);
    int native_errno = errno;
    long compat;
    __asm__ volatile("int $0x80" : "=a"(compat)
                     : "a"(286), "b"(low), "c"(low + 16), "d"(low + 64), "S"(1L), "D"(-4L)
                     : "memory");
    long x32 = syscall(0x40000000 | SYS_keyctl, 0 /* GET_KEYRING_ID */, -4L, 0);
    int x32_errno = errno;
    printf("%ld %d %ld %ld %d\n", native, native_errno, compat, x32, x32_errno);
    return 0;
}
"""


def test_every_system_call_table_refuses_the_key_calls():
    import os

    if languages.missing_tools("c"):
        pytest.skip("no C compiler")
    if os.uname().machine != "x86_64":
        pytest.skip("the program speaks x86-64's system call tables")
    with Sandbox(workers=1) as sb:
        r = sb.run(Job(KEY_CALLS, StdioTests((StdioCase("", "-1 1 -1 -1 1\n"),)), language="c"))
        assert r.passed, (r.verdict, r.stdout)  # EPERM (1) from each table


def test_without_root_a_key_stored_by_one_run_cannot_be_read_by_a_later_run(nobody):  # noqa: F811
    """Without the uid layer every run has the user's own uid: the same refusal holds."""
    if languages.missing_tools("c"):
        pytest.skip("no C compiler")
    body = f"""
    def leak(stdin, expected):
        tests = StdioTests((StdioCase(stdin, expected),))
        r = sb.run(Job({KEY_LEAK!r}, tests, language="c", limits=Limits(wall_s=20.0)))
        return [r.verdict.value, r.stdout]
    out["first"] = leak("the-answer-42\\n", "none\\n")
    out["second"] = leak("", "the-answer-42\\n")
    """
    out = _run(nobody, body)
    assert out["first"] == ["PASSED", "none\n"], out
    assert out["second"] == ["WRONG_ANSWER", "none\n"], out


# The next pid is a counter every run of a worker draws from: a run that starts `k` threads
# moves it by `k`, and the next run reads `k` back from its own pid. One thread at a time,
# so the run's process limit never binds.
PID_PROBE = "import os\nprint(os.getpid())\n"
PID_SPENDER = "import threading\nfor _ in range({k}):\n    t = threading.Thread(target=int)\n    t.start()\n    t.join()\n"


def _pid(sb) -> int:
    r = sb.run(Job(PID_PROBE, StdioTests((StdioCase("", ""),))))
    return int(r.stdout)


def _spend(sb, k: int) -> None:
    # a thousand threads one after another: seconds on a loaded 2-core host (load 11 timed out
    # at the default 3 s), and the test is about the pids, not the time
    job = Job(PID_SPENDER.format(k=k), StdioTests((StdioCase("", ""),)), allow_threads=True,
              limits=Limits(wall_s=30.0))  # fmt: skip
    result = sb.run(job)
    assert result.passed, (result.verdict, result.message)


@pytest.mark.parametrize("case_server", [True, False])
def test_a_run_cannot_leave_a_message_in_the_next_run_s_pid(case_server):
    """Two trials of sending 1000 through the pid counter (a run spends that many pids; the
    next run decodes it from its pid, against a trial spending none): the receiver must not
    read the message, to within the pids other processes take meanwhile, in either trial.
    Runs forked by the worker and by a stdin/stdout sample's case server alike."""
    with Sandbox(workers=1, case_server=case_server) as sb:
        decoded = []
        for _ in range(2):
            before = _pid(sb)
            _spend(sb, 0)
            quiet = _pid(sb) - before
            before = _pid(sb)
            _spend(sb, 1000)
            loud = _pid(sb) - before
            decoded.append(abs(loud - quiet - 1000) <= 30)
        assert not all(decoded), decoded
