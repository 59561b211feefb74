"""`execrl eval`: generate completions with a model and evaluate them, resumably.

    execrl eval --model PATH_OR_HF_ID --benchmark humaneval -n 10 -k 1,10
    execrl eval --model openai:http://localhost:8000/v1#MODEL --benchmark mbpp+
    execrl eval --model runs/RUN/final          # a model execrl trained: as its run evaluated it

This module reads the flags into the evaluation's record (`eval.config.EvalConfig`, whose
checks name the flag at fault before any model loads) and runs it (`eval.run`), with a progress
bar on a terminal. Errors a person can fix are one line and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from execrl.eval.prompt_style import STYLES
from execrl.models.engines.engine import ENGINES
from execrl.rl.episodes.env import ONE_TURN


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="generate completions with a model and evaluate them")
    p.add_argument(
        "--model",
        required=True,
        help="a model directory in Hugging Face format, a hub id, 'default', "
        "or openai:URL#MODEL for an OpenAI-compatible completion server",
    )
    p.add_argument(
        "--benchmark",
        default=None,
        help="benchmark name, or jsonl:PATH (default: humaneval; for a model execrl trained, "
        "the held-out tasks of its run)",
    )
    p.add_argument("-n", type=int, default=None, help="samples per task (default 1, or as trained)")
    p.add_argument("-k", default="1", help="comma-separated k of pass@k to print, each <= n")
    _add_generation_arguments(p)
    p.add_argument("--limit", type=int, default=0, help="only the first N tasks (0: all)")
    p.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="where samples, results and summary go (default: evals/BENCH__MODEL)",
    )
    p.add_argument("--restart", action="store_true", help="discard samples from an earlier run")
    p.add_argument("--workers", type=int, default=2, help="sandbox workers")
    p.add_argument("--threads", type=int, default=0, help="torch's CPU threads for a local model "
                   "(default 0: chosen from the cores free at start, or OMP_NUM_THREADS)")  # fmt: skip
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="wall-clock seconds per sample (default: the benchmark's own limits)",
    )
    p.add_argument("--data-dir", default=None, help="benchmark data directory")
    p.add_argument("--json", action="store_true", help="print the summary as JSON, last line")
    p.add_argument(
        "--allow-weaker-sandbox",
        action="store_true",
        help="run even if some isolation layers are unavailable",
    )
    _add_episode_arguments(p)
    p.set_defaults(handler=run_eval)


def _add_generation_arguments(p: argparse.ArgumentParser) -> None:
    """How samples are generated: sampling, the engine, the prompt, the weights' dtype."""
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="sampling temperature (default: 0, greedy, when n = 1, else 0.8; or as trained)",
    )
    p.add_argument("--top-p", type=float, default=None, help="default 0.95, or as trained")
    p.add_argument("--max-new-tokens", type=int, default=None, help="default 512, or as trained")
    p.add_argument(
        "--repeat-ngram",
        type=int,
        default=None,
        help="end a sample whose last N tokens have appeared 4 times, a loop that would run to "
        "--max-new-tokens (default 32; 0: off; or as trained)",
    )
    p.add_argument(
        "--chat",
        choices=("auto", "on", "off"),
        default=None,
        help="use the chat template (auto, the default: when the tokenizer has one; servers: off)",
    )
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:1, or auto")
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help="the engine that generates: loop (execrl's decode loop, the default), hf (Hugging "
        "Face generate) or vllm (needs vLLM: docs/engines.md); a model execrl trained: as trained",
    )
    p.add_argument(
        "--prompt",
        choices=tuple(STYLES),
        default=None,
        help="how the model is asked and its program read (docs/benchmarks.md): execrl (the "
        "default) or evalplus (EvalPlus's instruct prompt, response prefix and sanitiser, as "
        "published instruct-model figures were made); a model execrl trained is then asked as any "
        "model is, not as trained",
    )
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        default=None,
        help="the weights' dtype while generating (default: float32 on a CPU, bfloat16 on a GPU; "
        "bfloat16 decodes about twice as fast on a CPU with avx512_bf16)",
    )
    p.add_argument("--batch-size", type=int, default=None,
                   help="sequences per generate call (default 16; --engine vllm: 64)")  # fmt: skip
    p.add_argument("--seed", type=int, default=None, help="default 0, or as trained")


def _add_episode_arguments(p: argparse.ArgumentParser) -> None:
    """`--env` and what goes with it: evaluation by episodes (docs/episodes.md)."""
    p.add_argument(
        "--env",
        default=ONE_TURN,
        help="episodes: single (one turn), self_correct, tool, or module:Class (docs/episodes.md)",
    )
    p.add_argument("--turns", type=int, default=2, help="--env: model turns per episode")
    p.add_argument(
        "--feedback",
        choices=("full", "verdict"),
        default="full",
        help="--env self_correct: full feedback (the failed visible test, input, returned and "
        "expected value, exception) or only the verdict, the control for whether a model "
        "reads the feedback or only retries",
    )
    p.add_argument(
        "--corrections",
        action="store_true",
        help="--env: also write corrections.jsonl (each failed attempt's conversation up to the "
        "next turn, as token ids, with the reference solution): SFT data for `execrl sft`",
    )


def run_eval(args: argparse.Namespace) -> int:
    from execrl.cli.progress_bar import progress_bar
    from execrl.eval.config import EvalConfig, EvalError
    from execrl.eval.run import run_evaluation

    # the record's fields are the flags' argparse names
    flags = {f.name: getattr(args, f.name) for f in dataclasses.fields(EvalConfig) if f.init}
    try:
        return run_evaluation(EvalConfig(**flags), progress_bar)
    except EvalError as exc:
        print(f"execrl eval: error: {exc}", file=sys.stderr)
        return 2
