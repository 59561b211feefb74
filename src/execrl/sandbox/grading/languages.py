"""Languages other than Python: where their toolchains are, and how a unit compiles and runs.

Python goes through the in-process harness (`harness`), a fork of a pre-warmed interpreter. Every
other language runs as a program the confined child `exec`s after confinement: the compiler first
(inside the sandbox too, under `Limits.compile_wall_s`, its binary cached by the worker per
distinct source), then the binary or the interpreter, once per stdin/stdout case. Their tests are
stdin/stdout only: the verdict comes from the exit status, the limits the worker enforces from
outside, and the parent's comparison of stdout; there is no harness inside the program to trust.

Toolchains are looked up under the sandbox's PATH (`/usr/local/bin:/usr/bin:/bin`), which the
filesystem layer leaves visible read-only.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from execrl.sandbox.confine import isolation
from execrl.tasks.languages import ALIASES, canonical_name

PYTHON = "python"
BINARY = "{bin}"  # in a run command: the cached output of the compile step


@dataclass(frozen=True, slots=True)
class LanguageSpec:
    name: str
    source: str  # file name the program is written to in the scratch directory
    tools: tuple[str, ...]  # executables the toolchain needs, looked up on the sandbox PATH
    compile: tuple[str, ...] | None  # compile command (tool names resolved), None: interpreted
    run: tuple[str, ...]  # run command; BINARY stands for the compiled output
    version: tuple[str, ...]  # prints the toolchain's version
    install: str  # what to do when the toolchain is missing


SPECS: dict[str, LanguageSpec] = {
    "c": LanguageSpec(
        "c",
        "main.c",
        ("gcc",),
        ("gcc", "-O2", "-pipe", "-std=gnu17", "-o", "prog", "main.c", "-lm"),
        (BINARY,),
        ("gcc", "--version"),
        "apt-get install gcc",
    ),
    "cpp": LanguageSpec(
        "cpp",
        "main.cpp",
        ("g++",),
        ("g++", "-O2", "-pipe", "-std=gnu++17", "-o", "prog", "main.cpp", "-lm"),
        (BINARY,),
        ("g++", "--version"),
        "apt-get install g++",
    ),
    "javascript": LanguageSpec(
        "javascript",
        "main.js",
        ("node",),
        None,
        ("node", "main.js"),
        ("node", "--version"),
        "apt-get install nodejs",
    ),
    "bash": LanguageSpec(
        "bash",
        "main.sh",
        ("bash",),
        None,
        ("bash", "main.sh"),
        ("bash", "--version"),
        "apt-get install bash",
    ),
    "verilog": LanguageSpec(
        "verilog",
        "main.v",
        ("iverilog", "vvp"),
        ("iverilog", "-g2012", "-o", "prog", "main.v"),
        ("vvp", "-n", BINARY),
        ("iverilog", "-V"),
        "apt-get install iverilog",
    ),
}
LANGUAGES = (PYTHON, *SPECS)


class LanguageUnavailable(ValueError):
    """The language is unknown, or its toolchain is not installed."""


def canonical(language: str) -> str:
    """The language's name here, or LanguageUnavailable naming the known ones."""
    name = canonical_name(language)
    if name != PYTHON and name not in SPECS:
        known = ", ".join([*LANGUAGES, *ALIASES])
        raise LanguageUnavailable(f"unknown language {language!r}; known: {known}")
    return name


def require_toolchains(names: Iterable[str]) -> None:
    """LanguageUnavailable, naming the install command, for the first of `names` whose
    toolchain is missing here: asked when the tasks load, before a model loads or a run needs
    it. Names this module does not run (a verifier's "sql") are the verifier's to check."""
    for name in sorted(set(names)):
        if canonical_name(name) in SPECS:
            commands(name)


@functools.cache
def _which(tool: str) -> str | None:
    return shutil.which(tool, path=isolation.ENV_PATH)


def missing_tools(language: str) -> list[str]:
    name = canonical(language)
    return [] if name == PYTHON else [t for t in SPECS[name].tools if _which(t) is None]


def commands(language: str) -> dict[str, object]:
    """What the worker needs for a unit of `language`: absolute commands, the source file name."""
    name = canonical(language)
    spec = SPECS[name]
    missing = missing_tools(name)
    if missing:
        raise LanguageUnavailable(
            f"language {name!r} needs {', '.join(missing)}, not found on {isolation.ENV_PATH}; "
            f"install it ({spec.install}) or choose another language"
        )

    def resolve(argv: tuple[str, ...]) -> list[str]:
        return [(_which(a) or a) if i == 0 and a != BINARY else a for i, a in enumerate(argv)]

    out: dict[str, object] = {"source": spec.source, "run": resolve(spec.run)}
    if spec.compile is not None:
        out["compile"] = {"argv": resolve(spec.compile), "output": "prog"}
    return out


@dataclass(frozen=True, slots=True)
class LanguageStatus:
    name: str
    available: bool
    detail: str  # the toolchain's version, or what is missing and how to install it


def probe_languages() -> list[LanguageStatus]:
    """Each language and whether its toolchain is present (with its version)."""
    import sys

    out = [LanguageStatus(PYTHON, True, f"Python {sys.version.split()[0]} (in-process harness)")]
    for name, spec in SPECS.items():
        missing = missing_tools(name)
        if missing:
            out.append(LanguageStatus(name, False, f"missing {', '.join(missing)}: {spec.install}"))
            continue
        out.append(LanguageStatus(name, True, _version(spec)))
    return out


def _version(spec: LanguageSpec) -> str:
    argv = [_which(spec.version[0]) or spec.version[0], *spec.version[1:]]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=10, env={"PATH": isolation.ENV_PATH}
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{argv[0]}: {exc}"
    text = (proc.stdout or proc.stderr).strip().splitlines()
    return f"{argv[0]}: {text[0] if text else 'no version output'}"
