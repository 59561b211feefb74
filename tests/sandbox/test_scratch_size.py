"""A job's `Limits.scratch_mb` is the size of the scratch filesystem its run writes to: it was a
setting nothing read (the worker's tmpfs was sized once by a second setting, the pool's), so a
job that asked for 256 MiB (the reference runner's) got 64, and one that asked for 1 got 64."""

from __future__ import annotations

import dataclasses

import pytest

from execrl.sandbox import Job, Limits, Sandbox, Verdict
from execrl.tasks.schema import StdioCase, StdioTests

WRITE_4MB = (
    "import os\n"
    "with open(os.path.join(os.environ['TMPDIR'], 'big'), 'wb') as fh:\n"
    "    fh.write(b'x' * (4 << 20))\n"
    "print('ok')\n"
)
JOB = Job(WRITE_4MB, StdioTests((StdioCase("", "ok"),)), limits=Limits(wall_s=10, file_size_mb=8))


def test_a_jobs_scratch_limit_is_the_size_of_its_scratch():
    with Sandbox(workers=1) as sb:
        if "filesystem" not in sb.layers:
            pytest.skip("the scratch filesystem is the filesystem layer's (root or userns)")
        small = dataclasses.replace(JOB, limits=dataclasses.replace(JOB.limits, scratch_mb=2))
        roomy = dataclasses.replace(JOB, limits=dataclasses.replace(JOB.limits, scratch_mb=16))
        # one worker: the same tmpfs resized between runs, both ways
        verdicts = [r.verdict for r in sb.run_many([small, roomy, small, JOB])]
        assert verdicts == [Verdict.RUNTIME_ERROR, Verdict.PASSED, Verdict.RUNTIME_ERROR,
                            Verdict.PASSED]  # fmt: skip
        assert "OSError" in sb.run(small).message  # ENOSPC: the scratch is full


def test_the_old_pool_setting_is_a_deprecated_name_of_the_limit(capsys):
    from execrl.rl.config.config import load_config

    config = load_config(None, ["sandbox.scratch_mb=32"])
    assert config.sandbox.limits.scratch_mb == 32
    assert "sandbox.scratch_mb is deprecated" in capsys.readouterr().err
