"""The execution-free analyses of a program, as values that can run ahead of scoring
(`analysis`: pyflakes, pycodestyle, bandit, one shared parse), in worker processes
(`analysis_worker`) or batched through ruff (`ruff_backend`); unreachable code counted on the
syntax tree (`unreachable`) and programs that hard-code the visible tests (`hardcode`). The
lowest of rewards' wings: it reads programs, never a sample or a reward."""
