"""Other languages than Python: same verdicts and limits, compile once per source, confined."""

from __future__ import annotations

from pathlib import Path

import pytest

from execrl.sandbox import Job, Limits, Verdict
from execrl.sandbox.grading import languages
from execrl.tasks.schema import AssertTests, StdioCase, StdioTests

ADD = StdioTests((StdioCase("3 4\n", "7\n"), StdioCase("1 1\n", "2\n")))
PROGRAMS = {
    "c": '#include <stdio.h>\nint main(){int a,b;scanf("%d %d",&a,&b);printf("%d\\n",a+b);return 0;}',
    "cpp": "#include <iostream>\nint main(){int a,b;std::cin>>a>>b;std::cout<<a+b<<std::endl;}",
    "javascript": 'const v=require("fs").readFileSync(0,"utf8").trim().split(/\\s+/).map(Number);\n'
    "console.log(v[0]+v[1]);",
    "bash": "read a b\necho $((a+b))",
    "verilog": 'module main; integer a, b, r;\ninitial begin r = $fscanf(32\'h8000_0000, "%d %d", a, b);'
    ' $display("%0d", a + b); $finish; end\nendmodule',
}


def needs(lang: str) -> None:
    if languages.missing_tools(lang):
        pytest.skip(f"{lang} toolchain not installed: {languages.missing_tools(lang)}")


@pytest.mark.parametrize("lang", list(PROGRAMS))
def test_correct_program_passes_every_case(sandbox, lang):
    needs(lang)
    r = sandbox.run(Job(PROGRAMS[lang], ADD, language=lang))
    assert r.verdict is Verdict.PASSED, r.message
    assert r.n_passed == 2 and r.extra["exit_codes"] == [0, 0]


@pytest.mark.parametrize(
    "lang,program,verdict",
    [
        ("c", 'int main(){puts("8");return 0;}', Verdict.WRONG_ANSWER),  # implicit decl: ok C
        ("c", "int main({", Verdict.SYNTAX_ERROR),
        ("cpp", "int main(){ return 3; }", Verdict.RUNTIME_ERROR),
        ("c", "int main(){int *p=0; return *p;}", Verdict.RUNTIME_ERROR),
        ("javascript", "throw new Error('boom')", Verdict.RUNTIME_ERROR),
        ("javascript", "console.log(", Verdict.RUNTIME_ERROR),  # node: a syntax error exits 1
        ("bash", "while true; do :; done", Verdict.TIMEOUT),
        (
            "c",
            '#include <stdio.h>\nint main(){for(;;)puts("xxxxxxxxxxxxxxxx");}',
            Verdict.OUTPUT_LIMIT,
        ),
        ("verilog", 'module main; initial begin $display("8"); end', Verdict.SYNTAX_ERROR),
    ],
)
def test_verdicts(sandbox, lang, program, verdict):
    needs(lang)
    r = sandbox.run(Job(program, ADD, language=lang, limits=Limits(wall_s=1.5)))
    assert r.verdict is verdict, (r.message, r.stderr)


def test_memory_limit_is_enforced_for_c(sandbox):
    needs("c")
    hog = (
        "#include <stdlib.h>\n#include <string.h>\n#include <stdio.h>\n"
        "int main(){for(int i=0;i<64;i++){char*p=malloc(64<<20); if(!p) return 3;"
        ' memset(p,1,64<<20);} puts("7"); return 0;}'
    )
    r = sandbox.run(Job(hog, ADD, language="c", limits=Limits(memory_mb=256)))
    assert r.verdict is Verdict.RUNTIME_ERROR and r.extra["exit_codes"][0] == 3


def test_compile_is_cached_across_workers_and_cases(sandbox):
    needs("cpp")
    program = PROGRAMS["cpp"] + "\n// cache probe\n"
    first = sandbox.run(Job(program, ADD, language="cpp"))
    assert first.extra["compile"]["cached"] is False  # one compile served both cases
    again = sandbox.run_many([Job(program, ADD, language="cpp")] * 4)
    assert all(r.passed and r.extra["compile"]["cached"] for r in again)


def test_compile_timeout_is_its_own_limit(sandbox):
    needs("cpp")
    # The whole standard library: over a second of g++ on this machine, far over 0.2 s.
    bomb = "#include <bits/stdc++.h>\nint main(){ std::map<int, std::string> m; return 0; }\n"
    r = sandbox.run(Job(bomb, ADD, language="cpp", limits=Limits(compile_wall_s=0.2)))
    assert r.verdict is Verdict.TIMEOUT and "compile" in r.message


def _code_under_root() -> list[str]:
    """What a run sees in /root by design: the first folder of the interpreter's and execrl's
    own paths where they lie under /root (a checkout in /root/project shows `project`)."""
    import sys

    import execrl

    paths = (sys.prefix, sys.base_prefix, execrl.__file__)
    return sorted({Path(p).parts[2] for p in paths if Path(p).parts[1:2] == ("root",)})


def test_programs_are_confined(sandbox):
    needs("bash")
    shown = "".join(f" -e {name}" for name in _code_under_root())
    keep = f" | grep -vxF{shown}" if shown else ""
    spy = (
        "cat /etc/shadow && exit 10\n"
        f"ls /root/ 2>/dev/null{keep} | grep -q . && exit 11\n"
        "touch /usr/x 2>/dev/null && exit 12\n"
        'for d in /tmp/execrl-bin-*; do touch "$d/evil" 2>/dev/null && exit 13; done\n'
        "echo 7"
    )
    r = sandbox.run(Job(spy, StdioTests((StdioCase("", "7"),)), language="bash"))
    assert r.verdict is Verdict.PASSED, (r.message, r.stderr)


def test_fork_bomb_is_bounded_and_cleaned(sandbox):
    needs("bash")
    r = sandbox.run(Job(":(){ :|:& };:\necho 7", ADD, language="bash", limits=Limits(wall_s=2)))
    assert r.verdict is not Verdict.SANDBOX_ERROR
    after = sandbox.run(Job(PROGRAMS["bash"], ADD, language="bash"))
    assert after.passed  # the run uid's process slots were freed


def test_files_in_and_out(sandbox):
    job = Job(
        "print(open('data/in.txt').read().upper(), end='')\nopen('out.txt', 'w').write('done')",
        StdioTests((StdioCase("", "HELLO"),)),
        files=(("data/in.txt", b"hello"),),
        fetch_files=("out.txt", "missing.txt"),
    )
    r = sandbox.run(job)
    assert r.passed and r.extra["files"] == {"out.txt": b"done", "missing.txt": None}


def test_fetch_never_follows_links(sandbox):
    job = Job(
        "import os\nos.symlink('/etc/passwd', 'leak')\nprint(1)",
        StdioTests((StdioCase("", "1"),)),
        fetch_files=("leak",),
    )
    assert sandbox.run(job).extra["files"] == {"leak": None}


def test_bad_jobs_are_refused():
    with pytest.raises(ValueError, match="unknown language 'cobol'"):
        Job("x", ADD, language="cobol")
    with pytest.raises(ValueError, match="stdin/stdout tests only"):
        Job("x", AssertTests("", ("assert 1",)), language="c")
    with pytest.raises(ValueError, match="must be relative"):
        Job("x", ADD, files=(("../etc/x", b""),))


def test_doctor_lists_languages():
    names = {s.name: s for s in languages.probe_languages()}
    assert set(names) == set(languages.LANGUAGES)
    assert names["python"].available
