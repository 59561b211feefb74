#!/usr/bin/env bash
# Create or refresh .venv with execrl and its dev tools; a no-op when pyproject.toml is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
stamp=.venv/.installed
want="$(cat pyproject.toml scripts/venv.sh | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/python ]; then
    exit 0
fi
"$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
# EvalPlus's own evaluator, for tests/eval/test_evalplus_agreement.py. Without its dependencies:
# they are LLM API clients; the evaluator needs numpy and psutil (installed above) and the three
# small modules its data package imports; its sanitiser (benchmarks/evalplus_fidelity.py) needs
# tree-sitter and its Python grammar.
.venv/bin/python -m pip install --quiet --no-deps evalplus==0.3.1 appdirs==1.4.4 tempdir==0.7.1 wget==3.2 \
    tree-sitter==0.26.1 tree-sitter-python==0.25.0
echo "$want" > "$stamp"
