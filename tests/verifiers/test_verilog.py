"""The verilog verifier: simulation against a reference model's outputs, graded by level."""

from __future__ import annotations

import json

import pytest

from execrl.sandbox import Verdict
from execrl.sandbox.verifiers import VerifierSpecError
from execrl.tasks.schema import VerifierTests
from verifiers.verifier_helpers import needs_iverilog, verify

VECTORS = [[3, 5], [15, 1], [0, 0], [8, 4]]
ADDER = VerifierTests(
    "verilog",
    {
        "module": "top",
        "inputs": [["a", 4], ["b", 4]],
        "outputs": [["y", 5]],
        "vectors": VECTORS,
        "expected": [[a + b] for a, b in VECTORS],  # the Python reference model
    },
)
HEADER = "module top(input [3:0] a, input [3:0] b, output [4:0] y);\n"


@pytest.fixture(autouse=True)
def _iverilog():
    needs_iverilog()


def test_components_grade_each_level_of_the_hierarchy(sandbox):
    results = verify(
        sandbox,
        ADDER,
        HEADER + "  assign y = a + b;\nendmodule\n",
        HEADER
        + "  assign y = a | b;\nendmodule\n",  # a | b == a + b where a & b == 0: vectors 2 and 3
        HEADER + "  assign y = a + ;\nendmodule\n",
        "module top(input [3:0] a, input [3:0] c, output [4:0] y);\n  assign y = a;\nendmodule\n",
    ) + verify(  # a simulation that never ends, until its own 2 s (the compile has its 10 s)
        sandbox,
        ADDER,
        HEADER.replace("output [4:0] y", "output reg [4:0] y")
        + "  initial forever #0 y = a;\nendmodule\n",
        wall_s=2.0,
    )
    (ok, v_ok), (partial, v_part), (syntax, v_syn), (ports, v_ports), (hang, v_hang) = results
    assert ok.passed and v_ok.score == 1.0
    assert v_ok.components == {"parses": 1.0, "elaborates": 1.0, "simulates": 1.0, "matches": 1.0}
    assert any(a.path == "wave.vcd" and a.data for a in v_ok.artifacts)
    # 0.1 + 0.1 + 0.1 + 0.7 * 2/4 = 0.65
    assert partial.verdict is Verdict.WRONG_ANSWER and v_part.score == pytest.approx(0.65)
    assert "vector 0 (a=3, b=5)" in v_part.feedback and "y=00111" in v_part.feedback
    assert syntax.verdict is Verdict.SYNTAX_ERROR and v_syn.score == 0.0
    assert v_syn.components["parses"] == 0.0 and "syntax error" in v_syn.feedback
    # Parses, but does not elaborate with the testbench: the port b is missing.
    assert ports.verdict is Verdict.SYNTAX_ERROR and v_ports.score == pytest.approx(0.1)
    assert v_ports.components["parses"] == 1.0 and v_ports.components["elaborates"] == 0.0
    assert hang.verdict is Verdict.TIMEOUT and v_hang.score == pytest.approx(0.2)


def test_a_design_cannot_fake_a_testbench_pass_with_finish_or_display(sandbox):
    """The testbench decides nothing and the parent reads only lines tagged with a key the
    design does not know: printing a pass, an end marker or result lines, or ending the
    simulation early, never passes."""
    attacks = [
        # A pass message and an early $finish, as a self-checking testbench would print.
        HEADER + '  assign y = 0;\n  initial begin $display("ALL TESTS PASSED"); $finish; end\n'
        "endmodule\n",
        # Result lines in every guessable format, then the end marker, then $finish.
        HEADER + "  assign y = 0;\n  initial begin\n"
        '    $display("@execrl 0 01000"); $display("@execrl-end 4");\n'
        '    $display("0 01000"); $display("PASS"); $finish(0);\n  end\nendmodule\n',
        # Right outputs for the first vector only, then stop the simulation.
        HEADER + "  assign y = a + b;\n  initial #1.5 $finish;\nendmodule\n",
        # $fatal / $stop with a zero status.
        HEADER + "  assign y = 0;\n  initial $stop;\nendmodule\n",
    ]
    for (r, v), design in zip(verify(sandbox, ADDER, *attacks), attacks, strict=True):
        assert not r.passed and v.components["matches"] == 0.0, (design, v.feedback)
        assert v.score <= 0.3, design


def test_a_clocked_design_is_driven_edge_by_edge(sandbox):
    vectors = [[1, 0], [0, 1], [0, 1], [0, 0], [0, 1], [1, 1], [0, 1]]
    q, expected = 0, []
    for rst, en in vectors:  # the reference model: synchronous reset, count while en
        q = 0 if rst else (q + en) % 16
        expected.append([q])
    counter = VerifierTests(
        "verilog",
        {
            "module": "top",
            "inputs": [["rst", 1], ["en", 1]],
            "outputs": [["q", 4]],
            "clock": "clk",
            "vectors": vectors,
            "expected": expected,
        },
    )
    head = "module top(input clk, input rst, input en, output reg [3:0] q);\n"
    right = head + "  always @(posedge clk) if (rst) q <= 0; else if (en) q <= q + 1;\nendmodule\n"
    no_enable = head + "  always @(posedge clk) if (rst) q <= 0; else q <= q + 1;\nendmodule\n"
    (ok, _), (wrong, v) = verify(sandbox, counter, right, no_enable)
    assert ok.passed and not wrong.passed and 0 < v.components["matches"] < 1


def test_a_malformed_spec_is_an_error_naming_the_task(sandbox):
    bad = VerifierTests("verilog", {**ADDER.spec, "outputs": [["y", 0]]})
    with pytest.raises(VerifierSpecError, match=r"task t0: spec.outputs"):
        verify(sandbox, bad, HEADER + "endmodule\n")


def test_sandbox_doctor_reports_icarus_verilog(capsys):
    from execrl.cli import main

    main(["sandbox", "doctor", "--json"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    (verilog,) = [lang for lang in report["languages"] if lang["language"] == "verilog"]
    assert verilog["available"] and "Icarus Verilog" in verilog["detail"]
