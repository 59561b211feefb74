"""The `verilog` suite: write a module `top`; it is simulated with Icarus Verilog and its
outputs compared, vector by vector, with a Python reference model's.

Level 1: one-bit gates and a multiplexer (every input combination). Level 2: n-bit adders,
subtractors, comparators, max and population count (edge cases and random vectors). Level 3:
clocked designs (counter with enable, accumulator, shift register, synchronous reset) driven
through a random input sequence that starts with a reset. Each design comes with a reference
module (checked against the Python model by `execrl tasks validate`: the two agree on every
vector) and a wrong module whose Python model must disagree on some vector.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.tasks.schema import Task, VerifierTests

Ports = list[list[Any]]  # [[name, width], ...]
Model = Callable[[list[list[int]]], list[list[int]]]  # input vectors -> output vectors


@dataclass(frozen=True)
class Design:
    what: str  # the behaviour, for the prompt
    inputs: Ports
    outputs: Ports
    model: Model
    body: str  # the reference module's body
    wrong_model: Model
    wrong_body: str
    clocked: bool = False


def _comb(fn: Callable[..., list[int]]) -> Model:
    return lambda vectors: [fn(*v) for v in vectors]


def _logic(rng: random.Random) -> Design | None:
    """A random function of 2 or 3 one-bit inputs, given to the model as its truth table."""
    names = ["a", "b", "c"][: rng.choice((2, 3))]

    def term(name: str) -> str:
        return f"~{name}" if rng.random() < 0.3 else name

    ops = ["&", "|", "^"]
    left = f"({term(names[0])} {rng.choice(ops)} {term(names[1])})"
    top = rng.choice(ops)
    right = term(names[-1]) if len(names) == 3 else term(rng.choice(names))
    expr = f"{left} {top} {right}"
    wrong = f"{left} {ops[(ops.index(top) + 1) % 3]} {right}"

    def model_of(e: str) -> Model:
        code = compile(e, "<logic>", "eval")  # our own expression, over 0/1 ints
        return _comb(lambda *v: [eval(code, {}, dict(zip(names, v, strict=True))) & 1])

    table = [
        [(k >> (len(names) - 1 - i)) & 1 for i in range(len(names))] for k in range(1 << len(names))
    ]
    ones = [v for v, (y,) in zip(table, model_of(expr)(table), strict=True) if y]
    if not ones or len(ones) == len(table):
        return None  # a constant: no logic to write
    rows = ", ".join("".join(map(str, v)) for v in ones)
    return Design(
        f"y is 1 exactly for these values of ({', '.join(names)}): {rows}; 0 otherwise",
        [[n, 1] for n in names],
        [["y", 1]],
        model_of(expr),
        f"  assign y = {expr};",
        model_of(wrong),
        f"  assign y = {wrong};",
    )


def _arith(n: int) -> list[Design]:
    m = (1 << n) - 1
    pc = n.bit_length()
    two = [["a", n], ["b", n]]
    return [
        Design(f"y is the {n + 1}-bit sum a + b (the carry is y's top bit)", two, [["y", n + 1]],
               _comb(lambda a, b: [a + b]), "  assign y = a + b;",
               _comb(lambda a, b: [a ^ b]), "  assign y = a ^ b;"),
        Design(f"y is a - b modulo 2**{n}", two, [["y", n]],
               _comb(lambda a, b: [(a - b) & m]), "  assign y = a - b;",
               _comb(lambda a, b: [(b - a) & m]), "  assign y = b - a;"),
        Design("y is the larger of a and b (unsigned)", two, [["y", n]],
               _comb(lambda a, b: [max(a, b)]), "  assign y = a > b ? a : b;",
               _comb(lambda a, b: [min(a, b)]), "  assign y = a < b ? a : b;"),
        Design("gt is 1 when a > b (unsigned), eq is 1 when a == b", two, [["gt", 1], ["eq", 1]],
               _comb(lambda a, b: [int(a > b), int(a == b)]),
               "  assign gt = a > b;\n  assign eq = a == b;",
               _comb(lambda a, b: [int(a >= b), int(a == b)]),
               "  assign gt = a >= b;\n  assign eq = a == b;"),
        Design(f"y is the number of 1 bits in a ({pc} bits wide)", [["a", n]], [["y", pc]],
               _comb(lambda a: [bin(a).count("1")]),
               f"  integer i;\n  always @* begin\n    y = 0;\n    for (i = 0; i < {n}; i = i + 1)"
               " y = y + a[i];\n  end",
               _comb(lambda a: [n - bin(a).count("1")]),
               f"  integer i;\n  always @* begin\n    y = 0;\n    for (i = 0; i < {n}; i = i + 1)"
               " y = y + !a[i];\n  end"),
    ]  # fmt: skip


def _seq(step: Callable[[int, list[int]], int]) -> Model:
    def model(vectors: list[list[int]]) -> list[list[int]]:
        q, out = 0, []
        for v in vectors:
            q = step(q, v)
            out.append([q])
        return out

    return model


def _clocked(n: int) -> list[Design]:
    m = (1 << n) - 1
    reg = "  always @(posedge clk)\n    if (rst) q <= 0;\n    else "
    return [
        Design(f"q counts up by 1 (mod 2**{n}) on each rising clock edge while en is 1",
               [["rst", 1], ["en", 1]], [["q", n]],
               _seq(lambda q, v: 0 if v[0] else (q + v[1]) & m), reg + "if (en) q <= q + 1;",
               _seq(lambda q, v: 0 if v[0] else (q + 1) & m), reg + "q <= q + 1;", True),
        Design(f"q adds d to itself (mod 2**{n}) on each rising clock edge",
               [["rst", 1], ["d", n]], [["q", n]],
               _seq(lambda q, v: 0 if v[0] else (q + v[1]) & m), reg + "q <= q + d;",
               _seq(lambda q, v: 0 if v[0] else v[1]), reg + "q <= d;", True),
        Design("q shifts left by one on each rising clock edge, din entering at bit 0",
               [["rst", 1], ["din", 1]], [["q", n]],
               _seq(lambda q, v: 0 if v[0] else ((q << 1) | v[1]) & m),
               reg + f"q <= {{q[{n - 2}:0], din}};",
               _seq(lambda q, v: 0 if v[0] else (q >> 1) | (v[1] << (n - 1))),
               reg + f"q <= {{din, q[{n - 1}:1]}};", True),
    ]  # fmt: skip


def make(rng: random.Random, level: int, data_dir: Path | None = None) -> Task | None:
    if level == 1:
        found = _logic(rng)
        if found is None:
            return None
        design = found
        k = len(design.inputs)
        vectors = [[(row >> (k - 1 - i)) & 1 for i in range(k)] for row in range(1 << k)]
    elif level == 2:
        n = rng.choice((4, 6, 8))
        design = rng.choice(_arith(n))
        vectors = _vectors(rng, [w for _, w in design.inputs], n)
    else:
        design = rng.choice(_clocked(rng.choice((4, 8))))
        vectors = [[1] + [0] * (len(design.inputs) - 1)]
        for _ in range(15):
            rest = [rng.randrange(1 << w) for _, w in design.inputs[1:]]
            vectors.append([int(rng.random() < 0.1)] + rest)
    expected = design.model(vectors)
    if design.wrong_model(vectors) == expected:
        return None
    spec: dict[str, Any] = {
        "module": "top",
        "inputs": design.inputs,
        "outputs": design.outputs,
        "vectors": vectors,
        "expected": expected,
    }
    if design.clocked:
        spec["clock"] = "clk"
    return Task(
        id="",
        prompt=_prompt(design),
        tests=VerifierTests("verilog", spec, _module(design, design.wrong_body)),
        language="verilog",
        reference=_module(design, design.body),
    )


def _vectors(rng: random.Random, widths: list[int], n: int) -> list[list[int]]:
    top = (1 << n) - 1
    edges = [[0, 0], [1, 1], [top, 1], [top, top], [5 & top, 5 & top], [3, 9 & top]]
    out = [e[: len(widths)] for e in edges]
    out += [[rng.randrange(1 << w) for w in widths] for _ in range(10)]
    return out


def _decl(design: Design) -> str:
    ports = ["input clk"] if design.clocked else []
    ports += [f"input {_range(w)}{name}" for name, w in design.inputs]
    kind = "reg " if design.clocked or "always" in design.body else ""
    ports += [f"output {kind}{_range(w)}{name}" for name, w in design.outputs]
    return "module top(" + ", ".join(ports) + ");"


def _range(width: int) -> str:
    return f"[{width - 1}:0] " if width > 1 else ""


def _module(design: Design, body: str) -> str:
    return f"{_decl(design)}\n{body}\nendmodule\n"


def _prompt(design: Design) -> str:
    return (
        "Write a Verilog module (Icarus Verilog, -g2012) with exactly this header:\n\n"
        f"{_decl(design)}\n\nwhere {design.what}."
        + (" rst is a synchronous reset to 0." if design.clocked else "")
        + "\nAnswer with the whole module in a ``` block without a language tag."
    )
