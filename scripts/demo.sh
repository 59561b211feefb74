#!/usr/bin/env bash
# The main job on a fresh machine (until the trainer lands: evaluate the bundled HumanEval samples).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh
.venv/bin/execrl eval-samples examples/humaneval_samples.jsonl --benchmark humaneval "$@"
