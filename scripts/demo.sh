#!/usr/bin/env bash
# The main job on a fresh machine: train the embedded default with GRPO on the procedural suite
# (the model is built on first use), printing held-out pass@1 before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh
.venv/bin/execrl train "$@"
