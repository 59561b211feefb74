#!/usr/bin/env bash
# The test suite: lint and format check, then pytest (arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh
.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/python -m pytest -q -m "not slow" "$@"
