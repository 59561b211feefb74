"""The ruff backend of the `static`, `style` and `security` leaves: one `ruff check` per batch.

ruff reimplements pyflakes (F), pycodestyle (E, W) and bandit (S) in one native binary. Run once
per program it would cost a process start each; batched (`Analysis.batched`), a chunk's distinct
programs are written to a private temporary directory, one file each, and checked by ONE
subprocess with every F, E, W and S rule, so the three leaves share the call and its cached
result (`RuffFindings`) and each reads the rules it counts. docs/rewards.md lists how the rules
map to the categories of the pyflakes, pycodestyle and bandit backends, and what differs.

The flags are fixed so that nothing outside this module changes the result: `--isolated` (no
configuration files), `--preview` (most pycodestyle rules, E1 to E3, and the S4 import rules are
preview-only in ruff 0.17), `--ignore-noqa` (a program cannot silence its own findings with
`# noqa`), the running interpreter's `--target-version`, and `--exit-zero`, so that any other exit
status is a failure that surfaces with ruff's message, never a silent zero.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from execrl.rewards.analysis.analysis import Analysis, AnalysisError, Failed
from execrl.rewards.analysis.unreachable import unreachable_blocks

RUFF_VERSION = "0.17.6"  # the version the mapping below was checked against (pyproject pins it)
SELECT = "F,E,W,S"
TIMEOUT_S = 120.0  # a batch of a few hundred programs takes well under a second
SYNTAX = "invalid-syntax"  # ruff reports syntax errors with no rule code

# Categories of the static leaf (static_analysis.py); every other F code is "other".
STATIC_CATEGORIES = {
    "F821": "undefined",  # undefined-name          pyflakes UndefinedName
    "F822": "undefined",  # undefined-export        UndefinedExport
    "F823": "undefined",  # undefined-local         UndefinedLocal
    "F401": "unused",  # unused-import              UnusedImport
    "F841": "unused",  # unused-variable            UnusedVariable
    "F842": "unused",  # unused-annotation          UnusedAnnotation
}

# bandit's severity of the test each S rule reimplements (S602 is bandit's B602, and so on), read
# from bandit 1.8's plugins and blacklists. Where bandit's severity depends on the code, `_CONTEXT`
# reads ruff's message; where ruff's message cannot tell, the level given is bandit's usual one.
SEVERITY = {
    **dict.fromkeys(("S101", "S105", "S106", "S107", "S110", "S112"), "LOW"),
    **dict.fromkeys(("S102", "S104", "S108", "S113"), "MEDIUM"),
    "S103": "MEDIUM",  # HIGH when the mask is world-writable: _CONTEXT
    "S201": "HIGH",
    "S202": "HIGH",  # bandit: LOW or MEDIUM when it sees a members= filter
    **dict.fromkeys(("S301", "S302", "S303", "S305", "S306", "S307", "S308", "S310"), "MEDIUM"),
    "S311": "LOW",
    **dict.fromkeys(("S304", "S312", "S321", "S324"), "HIGH"),
    **dict.fromkeys(("S313", "S314", "S315", "S316", "S317", "S318", "S319"), "MEDIUM"),
    "S320": "MEDIUM",  # lxml: removed from bandit's blacklist, MEDIUM when it was there
    "S323": "MEDIUM",
    **dict.fromkeys(("S401", "S402", "S411", "S412", "S413", "S415"), "HIGH"),
    **dict.fromkeys(("S403", "S404", "S405", "S406", "S407", "S408", "S409"), "LOW"),
    "S410": "LOW",  # lxml import: removed from bandit's blacklist, LOW when it was there
    **dict.fromkeys(("S501", "S502", "S507"), "HIGH"),
    **dict.fromkeys(("S503", "S506", "S508", "S509"), "MEDIUM"),
    "S504": "LOW",
    "S505": "MEDIUM",  # bandit: HIGH below its lower key-size threshold; ruff's message omits size
    "S601": "MEDIUM",
    "S602": "HIGH",  # LOW when the command is a literal: _CONTEXT
    "S603": "LOW",
    "S604": "MEDIUM",
    "S605": "HIGH",  # LOW when the command is a literal: _CONTEXT
    **dict.fromkeys(("S606", "S607"), "LOW"),
    "S608": "MEDIUM",
    "S609": "HIGH",
    **dict.fromkeys(("S610", "S611", "S612"), "MEDIUM"),
    "S701": "HIGH",
    **dict.fromkeys(("S702", "S704"), "MEDIUM"),
}
UNKNOWN_SEVERITY = "MEDIUM"  # an S rule newer than this table: counted, at bandit's middle level
_MASK = re.compile(r"mask `(0o[0-7]+)`")


def _shell_severity(message: str) -> str:
    # bandit B602/B605: a literal command "seems safe" (LOW); anything else may be injected (HIGH)
    return "LOW" if "seems safe" in message else "HIGH"


def _mask_severity(message: str) -> str:
    found = _MASK.search(message)  # bandit B103: HIGH when others may write, MEDIUM otherwise
    return "HIGH" if found and int(found.group(1), 8) & 0o002 else "MEDIUM"


_CONTEXT = {"S602": _shell_severity, "S605": _shell_severity, "S103": _mask_severity}


@dataclass(frozen=True, slots=True)
class RuffFindings:
    """What ruff found in one program: F, E and W rule codes (one per finding, sorted; syntax
    errors as `SYNTAX`), (severity, code) per S finding, and the unreachable blocks (counted on
    the AST, as the pyflakes backend does: ruff 0.17 has no unreachable-code rule)."""

    codes: tuple[str, ...]
    security: tuple[tuple[str, str], ...]
    unreachable: int


class RuffMissing(AnalysisError):
    """No ruff executable: the ruff backend cannot run."""


@functools.cache
def ruff_bin() -> str:
    """The ruff executable: the `ruff` package's, else the first `ruff` on PATH."""
    try:
        from ruff import find_ruff_bin

        return str(find_ruff_bin())
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("ruff")
    if found is None:
        raise RuffMissing(
            f"the ruff backend needs the ruff executable: pip install 'execrl[rewards]' (ruff=="
            f"{RUFF_VERSION}) or put ruff on PATH; or set backend to the pure-Python analyser "
            '(static: "pyflakes", style: "pycodestyle", security: "bandit")'
        )
    return found


@functools.cache
def _scratch_dir() -> str | None:
    """/dev/shm when writable (memory: nothing journalled; creating a file in /tmp cost 0.9 ms of
    CPU on the development VM's disk, 0.015 ms there), else the default temporary directory."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def ruff_findings(
    programs: Sequence[str], trees: Sequence[ast.Module], line_length: int
) -> list[RuffFindings | Failed]:
    """The batched `Analysis`: one `ruff check` over all `programs` (they all parse)."""
    with tempfile.TemporaryDirectory(prefix="execrl-ruff-", dir=_scratch_dir()) as tmp:
        paths: dict[str, int] = {}
        failed: dict[int, Failed] = {}
        for i, program in enumerate(programs):
            with open(os.path.join(tmp, f"p{i}.py"), "wb") as f:
                f.write(program.encode("utf-8"))  # it parsed, so it encodes
            paths[f"p{i}.py"] = i
        diagnostics = _check(list(paths), tmp, line_length) if paths else []
    codes: list[list[str]] = [[] for _ in programs]
    security: list[list[tuple[str, str]]] = [[] for _ in programs]
    for d in diagnostics:
        i = paths[os.path.basename(d["filename"])]
        code = d.get("code") or SYNTAX
        if code == "E902":  # ruff could not read the file it was given
            failed[i] = Failed(f"ruff could not read the program: {d.get('message')}")
        elif code.startswith("S"):
            sev = _CONTEXT.get(code)
            level = sev(d.get("message", "")) if sev else SEVERITY.get(code, UNKNOWN_SEVERITY)
            security[i].append((level, code))
        else:
            codes[i].append(code)
    return [
        failed[i]
        if i in failed
        else RuffFindings(
            tuple(sorted(codes[i])), tuple(sorted(security[i])), unreachable_blocks(trees[i])
        )
        for i in range(len(programs))
    ]


def _check(files: list[str], cwd: str, line_length: int) -> list[dict[str, Any]]:
    binary = ruff_bin()
    command = [
        binary,
        "check",
        "--isolated",
        "--no-cache",
        "--preview",
        "--ignore-noqa",
        "--exit-zero",
        "--output-format",
        "json",
        "--select",
        SELECT,
        "--target-version",
        f"py{sys.version_info.major}{sys.version_info.minor}",
        "--line-length",
        str(line_length),
        *files,
    ]
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AnalysisError(
            f"ruff ({binary}) could not check {len(files)} programs: {exc}"
        ) from exc
    stderr = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode != 0:
        raise AnalysisError(
            f"ruff ({binary}) failed with exit status {done.returncode} on {len(files)} "
            f"program{'s' if len(files) > 1 else ''}: {stderr[-2000:] or 'no message'}"
        )
    try:
        found = json.loads(done.stdout)
        if not isinstance(found, list):
            raise ValueError(f"expected a JSON list, got {type(found).__name__}")
    except ValueError as exc:
        raise AnalysisError(
            f"ruff ({binary}) printed no JSON list of diagnostics ({exc}); stderr: {stderr[-2000:]}"
        ) from exc
    return found


@functools.cache
def ruff_analysis(line_length: int = 100) -> Analysis:
    """The one ruff analysis per line length: leaves at the same length share its call."""
    return Analysis("ruff", ruff_findings, (line_length,), batched=True)


def static_counts(findings: RuffFindings) -> Counter[str]:
    """The static leaf's categories: undefined, unused, unreachable, other (as for pyflakes)."""
    counts: Counter[str] = Counter()
    for code in findings.codes:
        if code.startswith("F") or code == SYNTAX:
            counts[STATIC_CATEGORIES.get(code, "other")] += 1
    counts["unreachable"] = findings.unreachable
    return counts


def style_count(findings: RuffFindings, ignore: tuple[str, ...]) -> int:
    """E and W findings whose code starts with none of `ignore` (pycodestyle's prefix rule)."""
    return sum(1 for c in findings.codes if c[0] in "EW" and not c.startswith(ignore))
