"""The verifier interface: a domain check that runs what it needs in the sandbox and scores
the program in the trusted parent (docs/verifiers.md).

A verifier works in two steps, so that the runs of a whole batch share the sandbox's workers:

    jobs(request)          -> the runs it needs (`artifacts.program_job`), in any language
    verify(request, runs)  -> a `Verification`: score, named components, verdict, feedback

`request.tests.spec` is the task's data. What a verifier puts in a job (a schema, an instance,
a testbench that prints the design's outputs) enters the sandbox; what it compares against
(expected rows, outputs of a reference model, the best known objective, a reference chart)
must stay in `verify`, which runs in the parent on what the runs gave back. A program that
could read the expected results could print them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from execrl.sandbox.grading.artifacts import Artifact
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.limits import Limits
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import VerifierTests


class VerifierSpecError(TaskDataError):
    """A task's verifier data is malformed, or its verifier unknown; the message names the task
    and the field."""


@dataclass(frozen=True, slots=True)
class VerifyRequest:
    """One program to verify against one task."""

    task_id: str
    program: str  # the candidate: a Verilog module, a SQL query, a Python program, ...
    tests: VerifierTests  # the verifier's name and the task's data for it
    limits: Limits  # the caller's limits for one run

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.tests.spec

    def field(self, key: str, kind: type | tuple[type, ...] = object) -> Any:
        """`spec[key]`, or VerifierSpecError naming the task and the key."""
        if key not in self.tests.spec:
            raise VerifierSpecError(
                f"task {self.task_id}: the {self.tests.verifier} verifier needs spec.{key}"
            )
        value = self.tests.spec[key]
        if not isinstance(value, kind):
            raise VerifierSpecError(
                f"task {self.task_id}: spec.{key} must be {_kind_name(kind)}, "
                f"got {type(value).__name__}"
            )
        return value


@dataclass(frozen=True, slots=True)
class Verification:
    """A verifier's judgement of one program.

    `score` is in [0, 1] and 1.0 is the maximum a program can get; `components` are the named
    parts of it (each in [0, 1]) that a reward tree can read one by one; `verdict` is PASSED only
    for a program that does what the task asks; `feedback` is for the model in a multi-turn
    episode and says what went wrong without revealing expected results."""

    score: float
    components: Mapping[str, float] = field(default_factory=dict)
    verdict: Verdict = Verdict.WRONG_ANSWER
    feedback: str = ""
    artifacts: tuple[Artifact, ...] = ()  # what the runs wrote, kept for the report

    def __post_init__(self) -> None:
        values = {"score": self.score, **self.components}
        for name, value in values.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"verification {name} = {value} is outside [0, 1]")


@runtime_checkable
class Verifier(Protocol):
    """What `"verifier": "NAME"` in a task file names; a user's own is `module:Class`."""

    name: str

    def jobs(self, request: VerifyRequest) -> Sequence[Job]: ...

    def verify(self, request: VerifyRequest, runs: Sequence[ExecutionResult]) -> Verification: ...


def failed(verdict: Verdict, feedback: str, **components: float) -> Verification:
    """The minimum score, for a program that did not get as far as being compared."""
    return Verification(0.0, components, verdict, feedback)


def strip_fence(program: str) -> str:
    """The code inside a ``` fence (any language tag), when the whole program is one: code
    extraction keeps untagged and Python fences, and a model may still send ```sql."""
    text = program.strip()
    if text.startswith("```") and text.endswith("```") and "\n" in text:
        return text.split("\n", 1)[1][:-3]
    return program


def verification_of(result: ExecutionResult) -> Verification | None:
    """The verification behind a result, for tasks graded by a verifier (else None)."""
    found = result.extra.get("verification")
    return found if isinstance(found, Verification) else None


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)
