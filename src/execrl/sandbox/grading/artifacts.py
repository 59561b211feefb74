"""Runs that produce something to score: one program, files staged in its scratch directory,
and the files it writes collected back (images, waveforms, JSON), each under a size cap.

A domain verifier (`execrl.sandbox.verifiers`) builds its runs with `program_job` and reads them
back with `program_run`. The run is an ordinary stdin/stdout job of one case whose expected
stdout is empty: nothing the verifier compares against enters the sandbox, and the verdict that
matters is whether the program ran (`ProgramRun.ran`), not whether it printed nothing. The
worker reads back only regular files inside the scratch directory, never through a link, at
most `executil.FETCH_CAP` bytes in all; each artifact's own cap is applied here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.limits import Limits
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.tasks.schema import StdioCase, StdioTests

DEFAULT_ARTIFACT_BYTES = 1 << 20  # an image or a JSON file of a run; larger ones are dropped


@dataclass(frozen=True, slots=True)
class ArtifactSpec:
    """A file a run is expected to write, relative to its scratch directory."""

    path: str
    kind: str = "file"  # "image", "json", "waveform", "text", "file": how a report shows it
    max_bytes: int = DEFAULT_ARTIFACT_BYTES


@dataclass(frozen=True, slots=True)
class Artifact:
    """A file a run wrote, collected back into the trusted parent."""

    path: str
    kind: str
    data: bytes


@dataclass(frozen=True, slots=True)
class ProgramRun:
    """What one program run gave back, as a verifier reads it."""

    result: ExecutionResult  # the sandbox's own record of the run
    ran: bool  # compiled (where it compiles), exited 0, within every limit
    stdout: str  # the whole of it (up to Limits.output_bytes)
    compile_output: str  # the compiler's messages, where there was a compile step
    compiled: bool  # False only when a compile step failed
    artifacts: dict[str, Artifact]  # by path: the collected files that exist and fit their cap
    oversized: tuple[str, ...] = ()  # files over their cap, dropped

    @property
    def verdict(self) -> Verdict:
        """The run's own verdict class: PASSED when it ran (whatever it printed)."""
        return Verdict.PASSED if self.ran else self.result.verdict

    @property
    def message(self) -> str:
        return self.result.message


def program_job(
    program: str,
    *,
    language: str = "python",
    stdin: str = "",
    files: Sequence[tuple[str, bytes]] = (),
    collect: Sequence[ArtifactSpec] = (),
    limits: Limits | None = None,
    job_id: str = "",
) -> Job:
    """One run of `program` (in any sandbox language) with `files` in its scratch directory."""
    return Job(
        program=program,
        tests=StdioTests((StdioCase(stdin, ""),)),
        limits=limits or Limits(),
        id=job_id,
        language=language,
        files=tuple(files),
        fetch_files=tuple(a.path for a in collect),
    )


def program_run(result: ExecutionResult, collect: Sequence[ArtifactSpec] = ()) -> ProgramRun:
    """Read a `program_job`'s result: did it run, what it printed, what it wrote."""
    outcome = result.tests[0] if result.tests else None
    # Stdio grading compares stdout with "": a WRONG_ANSWER there only means it printed.
    ran = outcome is not None and outcome.verdict in (Verdict.PASSED, Verdict.WRONG_ANSWER)
    extra = result.extra
    full = extra.get("stdout")
    stdout = full if isinstance(full, str) else result.stdout
    info = extra.get("compile")
    compiled = not (isinstance(info, dict) and not info.get("ok"))
    compile_output = ""
    if isinstance(info, dict):
        compile_output = f"{info.get('stdout') or ''}{info.get('stderr') or ''}"
    files = extra.get("files")
    got: dict[str, Artifact] = {}
    oversized: list[str] = []
    for spec in collect:
        data = files.get(spec.path) if isinstance(files, dict) else None
        if not isinstance(data, bytes):
            continue
        if len(data) > spec.max_bytes:
            oversized.append(spec.path)
            continue
        got[spec.path] = Artifact(spec.path, spec.kind, data)
    return ProgramRun(result, ran, stdout, compile_output, compiled, got, tuple(oversized))
