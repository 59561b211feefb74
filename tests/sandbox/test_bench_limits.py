"""`execrl sandbox bench` runs each reference under the limits `execrl tasks validate` gives it
(the benchmark's own), so the two never disagree about a reference: bench reported HumanEval+'s
HumanEval/15 and /130 and MBPP's Mbpp/123 as TIMEOUT under a flat 3 s while validate passed
them. `--timeout` still replaces the clocks, and its default is in `--help`."""

from __future__ import annotations

import json

import pytest

from execrl.cli import main
from execrl.cli.sandbox_command import _bench_limits
from execrl.sandbox.grading.job import reference_limits
from execrl.tasks.jsonl import write_tasks
from execrl.tasks.schema import AssertTests, Task, TimeLimit

# A reference that needs more than bench's old flat 3 s, inside its benchmark's 6 s.
SLOW = Task(
    id="slow/0",
    prompt="def f():\n",
    tests=AssertTests("", ("assert f() == 1",)),
    entry_point="f",
    reference="import time\ndef f():\n    time.sleep(3.2)\n    return 1\n",
    time_limits={"tests": TimeLimit(wall_s=6.0)},
)


@pytest.mark.slow
def test_bench_gives_each_reference_the_limits_validate_gives_it(tmp_path, capsys):
    path = tmp_path / "slow.jsonl"
    write_tasks(path, [SLOW])
    assert main(["tasks", "validate", f"jsonl:{path}", "--workers", "1"]) == 0
    capsys.readouterr()
    assert (
        main(["sandbox", "bench", "--benchmark", f"jsonl:{path}", "--workers", "1", "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["all_passed"] is True


def test_bench_limits_are_validate_s_unless_a_timeout_is_given():
    assert _bench_limits(SLOW, None) == reference_limits(SLOW)
    assert reference_limits(SLOW).wall_s == 6.0
    given = _bench_limits(SLOW, 2.0)
    assert (given.wall_s, given.test_wall_s) == (2.0, None)


def test_bench_help_names_the_default_timeout(capsys):
    with pytest.raises(SystemExit):
        main(["sandbox", "bench", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--timeout SECONDS" in help_text
    assert "default: each task's own limits" in help_text and "10 s a run" in help_text
