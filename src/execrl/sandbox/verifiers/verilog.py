"""`verilog`: the candidate module simulated with Icarus Verilog, its outputs compared in the
parent, vector by vector, with a reference model's outputs (docs/verifiers.md).

The sandbox gets the candidate followed by a testbench that drives the task's input vectors
and prints the design's outputs on lines tagged with a per-program key (for a clocked design:
inputs set, a rising edge, then the outputs). The testbench holds no expected value and decides
nothing: the parent reads the tagged lines and compares them with `spec.expected`, which the
task's Python reference model computed. A design that prints "PASS", calls `$finish` early or
prints lines of its own gains nothing: a vector reported twice, or not at all, is a failed
simulation. The waveform (`wave.vcd`) comes back as an artifact.

Components, for hierarchical rewards (the seeds' parse / elaborate / simulate / match levels):
`parses` (no syntax error), `elaborates` (compiles with the testbench: the ports match),
`simulates` (the testbench ran every vector within the limits), `matches` (the fraction of
vectors whose outputs all equal the reference's). Score = 0.1 parses + 0.1 elaborates +
0.1 simulates + 0.7 matches; PASSED when every vector matches.

spec: `module` (the top module's name), `inputs` and `outputs` ([[name, width], ...]),
`vectors` ([[value per input], ...]), `expected` ([[value per output], ...]), optional `clock`
(the name of a clock input the testbench drives; not listed in `inputs`).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence
from typing import Any

from execrl.sandbox.grading.artifacts import ArtifactSpec, program_job, program_run
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.sandbox.verifiers.base import (
    Verification,
    VerifierSpecError,
    VerifyRequest,
    strip_fence,
)

WEIGHTS = {"parses": 0.1, "elaborates": 0.1, "simulates": 0.1, "matches": 0.7}
WAVEFORM = ArtifactSpec("wave.vcd", "waveform", 256 << 10)
_KEY = secrets.token_bytes(16)  # per process: the tag of a program's output lines
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class VerilogVerifier:
    name = "verilog"
    components = ("parses", "elaborates", "simulates", "matches")

    def jobs(self, request: VerifyRequest) -> Sequence[Job]:
        bench = testbench(request, _tag(request))
        program = strip_fence(request.program).rstrip() + "\n\n" + bench
        return [
            program_job(
                program,
                language="verilog",
                collect=(WAVEFORM,),
                limits=request.limits,
                job_id=request.task_id,
            )
        ]

    def verify(self, request: VerifyRequest, runs: Sequence[ExecutionResult]) -> Verification:
        run = program_run(runs[0], (WAVEFORM,))
        artifacts = tuple(run.artifacts.values())
        if not run.compiled:
            syntax = "syntax error" in run.compile_output
            parts = {"parses": float(not syntax), "elaborates": 0.0, "simulates": 0.0}
            return _scored(
                {**parts, "matches": 0.0},
                Verdict.SYNTAX_ERROR,
                "the design does not compile with the testbench:\n"
                + run.compile_output.strip()[:1500],
            )
        base = {"parses": 1.0, "elaborates": 1.0}
        if not run.ran:
            return _scored(
                {**base, "simulates": 0.0, "matches": 0.0},
                run.verdict,
                f"the simulation failed: {run.message}",
                artifacts,
            )
        vectors = request.spec["vectors"]
        outputs, problem = _read_outputs(run.stdout, _tag(request), len(vectors))
        if outputs is None:
            return _scored(
                {**base, "simulates": 0.0, "matches": 0.0},
                Verdict.WRONG_ANSWER,
                f"the simulation did not report every vector once: {problem}",
                artifacts,
            )
        widths = [int(w) for _, w in request.spec["outputs"]]
        right = [
            _same(got, want, widths)
            for got, want in zip(outputs, request.spec["expected"], strict=True)
        ]
        matches = sum(right) / len(right)
        components = {**base, "simulates": 1.0, "matches": matches}
        if matches == 1.0:
            return _scored(components, Verdict.PASSED, "every vector matches", artifacts)
        first = right.index(False)
        ins = ", ".join(
            f"{name}={value}"
            for (name, _), value in zip(request.spec["inputs"], vectors[first], strict=True)
        )
        return _scored(
            components,
            Verdict.WRONG_ANSWER,
            f"{len(right) - sum(right)} of {len(right)} vectors give wrong outputs; the first "
            f"is vector {first} ({ins}), where the design gave " + _shown(request, outputs[first]),
            artifacts,
        )


def testbench(request: VerifyRequest, tag: str) -> str:
    """A testbench that prints the design's outputs for each vector; it compares nothing."""
    module = request.field("module", str)
    inputs = _ports(request, "inputs")
    outputs = _ports(request, "outputs")
    vectors = request.field("vectors", list)
    if len(request.field("expected", list)) != len(vectors) or not vectors:
        raise VerifierSpecError(
            f"task {request.task_id}: spec.expected needs one entry per vector (and vectors)"
        )
    clock = request.spec.get("clock")
    if clock is not None and not (isinstance(clock, str) and _NAME.match(clock)):
        raise VerifierSpecError(f"task {request.task_id}: spec.clock must be a port name")
    bench = f"execrl_tb_{tag}"
    lines = [f"module {bench};"]
    lines += [f"  reg [{w - 1}:0] {n};" for n, w in inputs]
    lines += [f"  wire [{w - 1}:0] {n};" for n, w in outputs]
    conns = [f".{n}({n})" for n, _ in inputs + outputs]
    if clock:
        lines.append(f"  reg {clock};")
        conns.append(f".{clock}({clock})")
    lines.append(f"  {module} dut({', '.join(conns)});")
    lines.append("  initial begin")
    lines.append(f'    $dumpfile("wave.vcd"); $dumpvars(0, {bench});')
    if clock:
        lines.append(f"    {clock} = 0;")
    show = ", ".join(n for n, _ in outputs)
    fmt = " ".join("%b" for _ in outputs)
    for i, vector in enumerate(vectors):
        if len(vector) != len(inputs):
            raise VerifierSpecError(
                f"task {request.task_id}: spec.vectors[{i}] needs one value per input"
            )
        sets = " ".join(f"{n} = {w}'d{int(v)};" for (n, w), v in zip(inputs, vector, strict=True))
        step = f"#1 {clock} = 1; #1" if clock else "#1"
        after = f" {clock} = 0;" if clock else ""
        lines.append(f'    {sets} {step} $display("@{tag} {i} {fmt}", {show});{after}')
    lines += [f'    $display("@{tag}-end {len(vectors)}");', "    $finish;", "  end", "endmodule"]
    return "\n".join(lines) + "\n"


def _ports(request: VerifyRequest, key: str) -> list[tuple[str, int]]:
    ports = request.field(key, list)
    out = []
    for port in ports:
        ok = isinstance(port, list) and len(port) == 2 and isinstance(port[0], str)
        if not ok or not _NAME.match(port[0]) or not isinstance(port[1], int) or port[1] < 1:
            raise VerifierSpecError(f"task {request.task_id}: spec.{key} entries are [name, width]")
        out.append((port[0], port[1]))
    if not out:
        raise VerifierSpecError(f"task {request.task_id}: spec.{key} is empty")
    return out


def _tag(request: VerifyRequest) -> str:
    """A key per program, unknown to it: its own lines cannot pass for the testbench's."""
    data = f"{request.task_id}\0{request.program}".encode()
    return hashlib.blake2b(data, key=_KEY, digest_size=8).hexdigest()


def _read_outputs(stdout: str, tag: str, n: int) -> tuple[list[list[str]] | None, str]:
    """Each vector's output bit strings, or None and why not."""
    seen: dict[int, list[str]] = {}
    ended = False
    for line in stdout.splitlines():
        if line == f"@{tag}-end {n}":
            ended = True
        elif line.startswith(f"@{tag} "):
            fields = line.split()[1:]
            if not fields or not fields[0].isdigit() or int(fields[0]) in seen:
                return None, "a vector was reported twice"
            seen[int(fields[0])] = fields[1:]
    if not ended or sorted(seen) != list(range(n)):
        return None, f"{len(seen)} of {n} vectors reported before the end"
    return [seen[i] for i in range(n)], ""


def _same(got: list[str], want: list[Any], widths: list[int]) -> bool:
    if len(got) != len(want):
        return False
    for bits, value, width in zip(got, want, widths, strict=True):
        if not bits or set(bits) - {"0", "1"}:  # x or z: never equal to a value
            return False
        if int(bits, 2) != int(value) % (1 << width):
            return False
    return True


def _scored(
    components: dict[str, float], verdict: Verdict, feedback: str, artifacts: tuple = ()
) -> Verification:
    score = sum(WEIGHTS[k] * components[k] for k in WEIGHTS)
    return Verification(round(score, 12), components, verdict, feedback, artifacts)


def _shown(request: VerifyRequest, bits: list[str]) -> str:
    names = [name for name, _ in request.spec["outputs"]]
    return ", ".join(f"{n}={b}" for n, b in zip(names, bits, strict=False))
