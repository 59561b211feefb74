"""A benchmark with no data here, offline (issue 42): `execrl eval-samples --benchmark mbpp`
says where the data goes at once, instead of retrying a download for half a minute."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "humaneval_samples.jsonl"
PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy")


@pytest.mark.parametrize(("setting", "why"), [
    ({"HF_ENDPOINT": "http://127.0.0.1:9"}, "127.0.0.1:9 cannot be reached"),  # nobody listens
    ({"HF_DATASETS_OFFLINE": "1"}, "HF_DATASETS_OFFLINE is set"),
])  # fmt: skip
def test_missing_data_offline_is_one_line_at_once_saying_where_it_goes(tmp_path, setting, why):
    env = {k: v for k, v in os.environ.items() if k not in (*PROXIES, "EXECRL_DATA_DIR")}
    env.update(EXECRL_CACHE_DIR=str(tmp_path / "cache"), HF_HOME=str(tmp_path / "hf"), **setting)
    argv = [sys.executable, "-m", "execrl.cli", "eval-samples", str(SAMPLES), "--benchmark", "mbpp"]
    start = time.monotonic()
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - start
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr[-2000:]
    assert "Put mbpp.jsonl at <data dir>/mbpp/mbpp.jsonl" in done.stderr
    assert f"a download of google-research-datasets/mbpp (not tried: {why}" in done.stderr
    assert took < 25, took  # `datasets` alone retried for 26 s before
