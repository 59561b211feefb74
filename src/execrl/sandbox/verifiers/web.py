"""`web`: a site (HTML, CSS, JavaScript) opened and driven in headless Chromium, in the sandbox,
and scored by a cascade against the task's checks and the reference's screenshots.

The answer is a site in one fenced block (`tasks.suites.web_answer`). Each program is one run:
its files go under `site/` in the run's scratch with the plan (`web_spec.plan_of`: pages,
selectors, actions, no expected value) and the driver (`web_driver.py`), which Playwright runs
against the system's Chromium; what it saw comes back as `web.json` and a screenshot per page
(`web_seen`). The reference site is run the same way, in a run of its own (its files are never
in a candidate's run: no page can read them, over HTTP or file://), once per process, and kept
in the parent's memory; a candidate that is the reference is run once. The parent scores
(`web_score`): structure gates function, which gates appearance.

Limits: the caller's, raised to what a browser needs (`BROWSER`): Chromium is a dozen
processes of many threads and file descriptors, and its V8 and Oilpan cages reserve tens of
GiB of address space they never touch, so the run's address-space limit (and with it the
memory cgroup's, which the sandbox sets from the same field) is set to `ADDRESS_SPACE_MB`, and
the memory a page can use is bounded per process by the driver (RLIMIT_DATA, one renderer, a
JavaScript heap cap). The driver stops at its deadline, a little inside the run's wall clock,
and kills every process it started; the sandbox kills whatever is left at the end of the run.

spec: `web_spec` (reference, files, pages, elements, links, scenarios, viewport).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import secrets
import shutil
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from execrl.sandbox.confine.hidden_paths import sandbox_interpreter
from execrl.sandbox.grading.artifacts import Artifact, program_job, program_run
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.limits import Limits
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.sandbox.verifiers import web_score
from execrl.sandbox.verifiers.base import (
    Verification,
    VerifierSpecError,
    VerifyRequest,
    failed,
    strip_fence,
)
from execrl.sandbox.verifiers.web_seen import RESULT, SHOTS, Seen, read_seen
from execrl.sandbox.verifiers.web_spec import WebSpec, parse_spec, plan_of
from execrl.tasks.suites.web_answer import AnswerFormatError, WebFile, parse_answer

ORIGIN = "http://site.test"  # the made-up origin the site is served on
BROWSER = Limits(wall_s=30.0, processes=256, open_files=1024, scratch_mb=256)
ADDRESS_SPACE_MB = 128 << 10  # Chromium's cages need 70-100 GiB of it (measured: 64 fails)
DEADLINE_MARGIN_S = 4.0  # the driver stops this long before the run's wall clock
CHROMIUM_PATHS = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")
_SECRET = secrets.token_bytes(16)  # per process: the keys the runs' results carry back


def chromium_path() -> str | None:
    """The browser: $EXECRL_CHROMIUM, Debian's binary (not its wrapper script), or on PATH."""
    override = os.environ.get("EXECRL_CHROMIUM")
    if override:
        return override if os.access(override, os.X_OK) else None
    for path in CHROMIUM_PATHS:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium") or shutil.which("chromium-browser")


def missing_browser() -> str:
    """What is missing to run the web verifier, with how to install it ("" when nothing)."""
    if chromium_path() is None:
        return "Chromium is not installed: apt-get install chromium (or set EXECRL_CHROMIUM)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed: pip install 'execrl[web]'"
    return ""


class WebVerifier:
    name = "web"
    components = ("structure", "function", "appearance")

    def __init__(self) -> None:
        self._references: dict[str, Seen] = {}  # spec key -> the reference as seen
        # The reference is rendered by the first job of a batch that needs it; the rest of that
        # batch (the same thread: `run_verified` plans, runs, then verifies in order) waits for
        # its render instead of starting a browser each (a GRPO group is G samples of one task).
        self._claims: dict[str, int] = {}  # spec key -> the claiming thread
        self._lock = threading.Lock()

    def jobs(self, request: VerifyRequest) -> Sequence[Job]:
        spec = parse_spec(request.task_id, request.spec)
        missing = missing_browser()
        if missing:
            raise VerifierSpecError(
                f"task {request.task_id}: the web verifier needs a browser: {missing}"
            )
        reference = _reference_files(request, spec)
        try:
            files = parse_answer(strip_fence(request.program))
        except AnswerFormatError:
            return []  # no run: verify says why
        runs = [_job(files, spec, request)]
        key, me = _spec_key(request), threading.get_ident()
        with self._lock:
            if key in self._references or self._claims.get(key) == me:
                return runs
            self._claims[key] = me
        if files == reference:
            return runs  # the reference itself: its one run serves as both
        return [*runs, _job(reference, spec, request)]

    def verify(self, request: VerifyRequest, runs: Sequence[ExecutionResult]) -> Verification:
        spec = parse_spec(request.task_id, request.spec)
        reference_files = _reference_files(request, spec)
        try:
            files = parse_answer(strip_fence(request.program))
        except AnswerFormatError as exc:
            return failed(Verdict.WRONG_ANSWER, f"the answer is not a site: {exc}", **_zero())
        seen = _read(runs[0], files, request)
        key = _spec_key(request)
        with self._lock:
            known = key in self._references
        if len(runs) == 2:
            self._remember(request, spec, reference_files, _read(runs[1], reference_files, request))
        elif files == reference_files and not known:
            self._remember(request, spec, reference_files, seen)
        with self._lock:
            reference = self._references.get(key)
            if reference is None:  # its claimant's run failed for the sandbox's sake
                self._claims.pop(key, None)
        if reference is None:
            raise VerifierSpecError(
                f"task {request.task_id}: the reference site's run failed in this batch"
            )
        if isinstance(seen, str):
            return failed(_failure_verdict(runs[0], seen), seen, **_zero())
        return _judge(spec, files, seen, reference)

    def _remember(
        self, request: VerifyRequest, spec: WebSpec, files: tuple[WebFile, ...], seen: Seen | str
    ) -> None:
        """Keep the reference's render once it meets every check of its own task."""
        with self._lock:
            self._claims.pop(_spec_key(request), None)  # the next batch tries again if it failed
        if isinstance(seen, str):
            raise VerifierSpecError(f"task {request.task_id}: the reference site failed: {seen}")
        structure = web_score.structure(spec, [f.name for f in files], seen, ORIGIN)
        function = web_score.function(spec, seen)
        if not web_score.cascade(structure.value, function.value, 1.0).passed:
            problems = (*structure.problems, *function.problems)
            raise VerifierSpecError(
                f"task {request.task_id}: the reference site fails its own checks: "
                + "; ".join(problems[:3])
            )
        with self._lock:
            self._references[_spec_key(request)] = seen


def _judge(spec: WebSpec, files: tuple[WebFile, ...], seen: Seen, reference: Seen) -> Verification:
    names = [f.name for f in files]
    structure = web_score.structure(spec, names, seen, ORIGIN)
    function = web_score.function(spec, seen)
    appearance = web_score.appearance(seen, reference, spec.pages)
    result = web_score.cascade(structure.value, function.value, appearance.value)
    if structure.value < 1.0:
        feedback = "structure: " + "; ".join(structure.problems[:5])
    elif function.value < 1.0:
        feedback = "function: " + "; ".join(function.problems[:5])
    else:
        feedback = "the site works as asked; " + (
            appearance.problems[0] if appearance.problems else "it looks like the reference"
        )
    artifacts = [
        Artifact(f"page-{i}.png", "image", p.shot) for i, p in enumerate(seen.pages) if p.shot
    ]
    artifacts += [
        Artifact(f"reference-{i}.png", "image", p.shot)
        for i, p in enumerate(reference.pages)
        if p.shot
    ]
    verdict = Verdict.PASSED if result.passed else Verdict.WRONG_ANSWER
    score = min(1.0, result.score)
    return Verification(score, result.components(), verdict, feedback, tuple(artifacts))


def _failure_verdict(result: ExecutionResult, why: str) -> Verdict:
    """A run that gave no observation: out of time (the driver's deadline or the sandbox's),
    over a limit, or failed."""
    if "deadline" in why:
        return Verdict.TIMEOUT
    limits = (Verdict.TIMEOUT, Verdict.MEMORY_LIMIT, Verdict.OUTPUT_LIMIT)
    return result.verdict if result.verdict in limits else Verdict.RUNTIME_ERROR


def _zero() -> dict[str, float]:
    return {"structure": 0.0, "function": 0.0, "appearance": 0.0}


def _reference_files(request: VerifyRequest, spec: WebSpec) -> tuple[WebFile, ...]:
    try:
        return parse_answer(spec.reference)
    except AnswerFormatError as exc:
        raise VerifierSpecError(f"task {request.task_id}: spec.reference: {exc}") from None


def _job(files: tuple[WebFile, ...], spec: WebSpec, request: VerifyRequest) -> Job:
    limits = _browser_limits(request.limits)
    plan = {
        **plan_of(spec),
        "origin": ORIGIN,
        "chromium": chromium_path(),
        "deadline_s": limits.wall_s - DEADLINE_MARGIN_S,
    }
    # A separate interpreter (bash execs it, confined like any run) with site-packages, where
    # Playwright is: -I ignores the environment and the user's site directory.
    launcher = f"exec {sandbox_interpreter()} -I driver.py\n"
    staged = (
        ("driver.py", _driver_source()),
        ("plan.json", json.dumps(plan).encode()),
        *((f"site/{f.name}", f.text.encode()) for f in files),
    )
    return program_job(
        launcher,
        language="bash",
        stdin=_key_of(files, request) + "\n",
        files=staged,
        collect=(RESULT, *SHOTS[: len(spec.pages)]),
        limits=limits,
        job_id=request.task_id,
    )


def _browser_limits(limits: Limits) -> Limits:
    return replace(
        limits,
        wall_s=max(limits.wall_s, BROWSER.wall_s),
        cpu_s=None,
        memory_mb=ADDRESS_SPACE_MB,
        processes=max(limits.processes, BROWSER.processes),
        open_files=max(limits.open_files, BROWSER.open_files),
        scratch_mb=max(limits.scratch_mb, BROWSER.scratch_mb),
    )


def _read(
    result: ExecutionResult, files: tuple[WebFile, ...], request: VerifyRequest
) -> Seen | str:
    run = program_run(result, (RESULT, *SHOTS))
    seen = read_seen(run, _key_of(files, request))
    if isinstance(seen, Seen) and seen.status != "ok":
        return f"the browser run stopped: {seen.status}"
    return seen


@functools.cache
def _driver_source() -> bytes:
    return (Path(__file__).parent / "web_driver.py").read_bytes()


def _spec_key(request: VerifyRequest) -> str:
    """The reference's render depends on the whole spec (pages, viewport), not only its site."""
    return hashlib.sha256(
        json.dumps(request.spec, sort_keys=True, default=str).encode()
    ).hexdigest()


def _key_of(files: tuple[WebFile, ...], request: VerifyRequest) -> str:
    """The key a run's result carries back: derived from the site and a per-process secret."""
    data = json.dumps([request.task_id, [(f.name, f.text) for f in files]]).encode()
    return hashlib.blake2b(data, key=_SECRET, digest_size=16).hexdigest()
