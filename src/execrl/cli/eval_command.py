"""`execrl eval`: generate completions with a model and evaluate them, resumably.

    execrl eval --model PATH_OR_HF_ID --benchmark humaneval -n 10 -k 1,10
    execrl eval --model openai:http://localhost:8000/v1#MODEL --benchmark mbpp+
    execrl eval --model runs/RUN/final          # a model execrl trained: as its run evaluated it

A model directory holding `execrl_eval.json` (which `execrl train` saves in final/) is evaluated
by the run's own held-out evaluation (`eval.as_trained`); any other model as the benchmark's
official harness prompts it (`eval.generation`).
Writes, in --out-dir: samples.jsonl (+ samples.meta.json), results.jsonl and summary.json; the
summary is also the last line of stdout with --json, as `eval-samples` prints it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from execrl.cli.progress_bar import progress_bar
from execrl.eval.as_trained import benchmark_for, evaluate_as_trained, spec_for
from execrl.eval.evaluate import (
    evaluate,
    print_summary,
    result_record,
    runs_needed,
    summarize,
    write_jsonl_atomic,
)
from execrl.eval.generation import GenerationMeta, SamplesFile, first_n, generate_missing
from execrl.eval.prompt_style import STYLES
from execrl.eval.samples import Sample
from execrl.models.backends import OPENAI_PREFIX
from execrl.models.device import device_problem
from execrl.models.engine import ENGINES
from execrl.models.prompting import with_named_entry_points
from execrl.models.registry import require_fetched
from execrl.models.sampling import out_of_range
from execrl.models.threads import Machine, choose_threads, threads_used
from execrl.rl.episodes.env import ONE_TURN, is_one_turn
from execrl.rl.eval_spec import HeldoutSpec
from execrl.sandbox import (
    Limits,
    Sandbox,
    SandboxConfigError,
    SandboxUnavailable,
    require_toolchains,
    sandbox_runner,
)
from execrl.tasks.errors import DataNotFound, TaskDataError, UnknownBenchmark
from execrl.tasks.registry import load_benchmark
from execrl.tasks.schema import Task


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


def _sampling_problem(args: argparse.Namespace) -> str | None:
    problem = out_of_range(temperature=args.temperature, top_p=args.top_p)
    if problem is None:
        return None
    name, value, rule = problem
    return f"--{name.replace('_', '-')} {value}: {rule}"


def _fail(message: str) -> int:
    print(f"execrl eval: error: {message}", file=sys.stderr)
    return 2


def run_eval(args: argparse.Namespace) -> int:
    problem = _sampling_problem(args)  # before any model loads
    if problem:
        return _fail(problem)
    problem = device_problem(args.device)
    if problem:
        return _fail(f"--device {problem}")
    if args.batch_size is None:  # vLLM batches a whole call's sequences at each decoding step
        args.batch_size = 64 if args.engine == "vllm" else 16
    if args.threads < 0:
        return _fail(f"--threads {args.threads}: give 0 (chosen at start) or a positive count")
    if args.corrections and is_one_turn(args.env):
        return _fail("--corrections needs episodes with feedback: add --env self_correct")
    if args.corrections and args.model.startswith(OPENAI_PREFIX):
        return _fail("--corrections needs a local model: a server's token ids are not ours")
    try:
        require_fetched(args.model)  # a known model not fetched: before anything loads
    except FileNotFoundError as exc:
        return _fail(str(exc))
    if args.model.startswith(OPENAI_PREFIX):  # the server computes with its own threads
        return _run_eval(args, None)
    try:  # a model execrl trained: read once, here, for every step below
        spec = HeldoutSpec.load(args.model) if Path(args.model).is_dir() else None
    except ValueError as exc:
        return _fail(str(exc))
    if spec is not None and args.prompt is not None and is_one_turn(args.env):
        # a published protocol asked for by name: the trained model is asked as any model is
        print(f"execrl eval: --prompt {args.prompt}: {args.model} is evaluated like any model, "
              "not as trained", file=sys.stderr)  # fmt: skip
        spec = None
    problem = _engine_problem(args, spec)
    if problem:
        return _fail(problem)
    # A model execrl trained samples as its run did: the sandbox scores while it generates
    beside = args.workers if spec is not None else 0
    threads = choose_threads(args.threads, beside, Machine.now(), "--threads")
    print(f"execrl eval: {threads.line()}", file=sys.stderr)
    with threads_used(threads):
        return _run_eval(args, spec)


def _engine_problem(args: argparse.Namespace, spec: HeldoutSpec | None) -> str | None:
    """The engine that will generate cannot run here (vLLM not installed), said before anything
    loads: --engine's, else the trained model's own (as trained, one turn or episodes)."""
    from execrl.models.engine_factory import engine_missing  # imports torch: not for --help

    if args.engine is not None:
        missing = engine_missing(args.engine)
        return None if missing is None else f"--engine {args.engine}: {missing}"
    missing = engine_missing(spec.engine) if spec is not None else None
    if missing is None:  # not a trained model, or its engine is installed
        return None
    return f"{args.model} was trained with sampling.engine = {spec.engine!r} and is evaluated as trained. {missing}"


def _run_eval(args: argparse.Namespace, spec: HeldoutSpec | None) -> int:
    """`spec`: the model's saved `execrl_eval.json` (None: not a model execrl trained)."""
    if not is_one_turn(args.env):  # multi-turn episodes, pass@1 by turn
        if args.prompt is not None:
            return _fail(f"--prompt {args.prompt} with --env {args.env}: episodes prompt as "
                         "training does")  # fmt: skip
        from execrl.eval.episodes_eval import run_episodes_eval

        return run_episodes_eval(args, spec)
    if args.repeat_ngram is not None and args.repeat_ngram < 0:
        return _fail(f"--repeat-ngram {args.repeat_ngram}: give 0 (off) or a token count")
    try:
        ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    except ValueError:
        return _fail(f"-k {args.k!r}: give comma-separated integers, e.g. -k 1,10")
    if spec is not None:
        return _run_as_trained(args, spec, ks)
    for name, default in _DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.n < 1 or not ks or ks[0] < 1 or ks[-1] > args.n:
        return _fail(f"-k {args.k} with -n {args.n}: each k must be between 1 and n")
    temperature = (
        args.temperature if args.temperature is not None else (0.0 if args.n == 1 else 0.8)
    )
    if args.n > 1 and temperature == 0:
        print("execrl eval: warning: greedy decoding gives n identical samples", file=sys.stderr)
    try:
        tasks = load_benchmark(args.benchmark, args.data_dir, reference_runner=sandbox_runner())
    except (TaskDataError, DataNotFound, UnknownBenchmark, OSError) as exc:
        return _fail(str(exc))
    if args.limit > 0:
        tasks = tasks[: args.limit]
    require_toolchains(t.language for t in tasks)  # before generating for a run that cannot run
    tasks = with_named_entry_points(tasks)  # the prompt names the function the tests call
    out_dir = args.out_dir or Path("evals") / _slug(f"{args.benchmark}__{args.model}")
    try:
        generator = _open_generator(args)
    except (ValueError, FileNotFoundError, OSError, ImportError) as exc:
        return _fail(str(exc))
    meta = GenerationMeta(
        args.model,
        args.benchmark,
        args.n,
        temperature,
        args.top_p,
        args.max_new_tokens,
        generator.chat,
        code_end=True,
        repeat_ngram=args.repeat_ngram,
        prompt=args.prompt or "execrl",
    )
    from execrl.models.backends import GenerationParams, ServerError

    params = GenerationParams(temperature, args.top_p, args.max_new_tokens,
                              batch_size=args.batch_size, code_end=meta.code_end,
                              repeat_ngram=meta.repeat_ngram)  # fmt: skip
    started = time.monotonic()
    try:
        samples_file = SamplesFile(out_dir / "samples.jsonl", meta, restart=args.restart)
        with progress_bar(len(tasks) * args.n, "generate") as advance:
            made = generate_missing(generator, tasks, samples_file, params, progress=advance)
        samples = first_n(samples_file.read(tasks), tasks, args.n)
    except (TaskDataError, ServerError) as exc:
        return _fail(str(exc))
    finally:
        if hasattr(generator, "close"):  # an engine's processes and KV cache, before grading
            generator.close()
    print(
        f"generated {made} samples ({len(samples) - made} from an earlier run) in "
        f"{samples_file.path}, {time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    return _evaluate(args, samples, tasks, out_dir, temperature, ks)


# For a model execrl did not train (no execrl_eval.json beside it).
_DEFAULTS = {"benchmark": "humaneval", "n": 1, "top_p": 0.95, "max_new_tokens": 512,
             "chat": "auto", "seed": 0, "repeat_ngram": 32}  # fmt: skip


def _evaluate(args: argparse.Namespace, samples: list[Sample], tasks: list[Task], out_dir: Path,
              temperature: float, ks: list[int]) -> int:  # fmt: skip
    """Run the samples in the sandbox, then write and print the results and the summary."""
    limits = None if args.timeout is None else Limits(wall_s=args.timeout)
    try:
        with Sandbox(workers=args.workers, allow_missing_layers=args.allow_weaker_sandbox) as sb:
            with progress_bar(runs_needed(samples, tasks), "evaluate") as advance:
                results = evaluate(samples, tasks, "solution", sb, limits, progress=advance)
    except (SandboxUnavailable, SandboxConfigError, TaskDataError) as exc:
        return _fail(str(exc))
    summary = {
        **summarize(args.benchmark, results),
        "model": args.model,
        "temperature": temperature,
        "out_dir": str(out_dir),
    }
    write_jsonl_atomic(out_dir / "results.jsonl", [result_record(r) for r in results])
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print_summary(summary, args.json, shown=[f"pass@{k}" for k in ks])
    return 0


def _run_as_trained(args: argparse.Namespace, saved: HeldoutSpec, ks: list[int]) -> int:
    """A model execrl trained: the run's own held-out evaluation (`eval.as_trained`)."""
    try:
        spec = spec_for(args, saved)
    except ValueError as exc:
        return _fail(str(exc))
    n = spec.samples_per_task
    if n < 1 or not ks or ks[0] < 1 or ks[-1] > n:
        return _fail(f"-k {args.k} with -n {n}: each k must be between 1 and n")
    benchmark, limit = benchmark_for(args, spec)
    if not benchmark:
        return _fail(
            f"{args.model}: its run had no held-out tasks (data.heldout = ''); name the tasks "
            "to evaluate on with --benchmark"
        )
    try:
        tasks = load_benchmark(benchmark, args.data_dir, reference_runner=sandbox_runner())
    except (TaskDataError, DataNotFound, UnknownBenchmark, OSError, ValueError) as exc:
        return _fail(str(exc))
    tasks = tasks[:limit] if limit > 0 else tasks
    out_dir = args.out_dir or Path("evals") / _slug(f"{benchmark}__{args.model}")
    try:
        with Sandbox(workers=args.workers, allow_missing_layers=args.allow_weaker_sandbox) as sb:
            summary = evaluate_as_trained(args, spec, tasks, sb, benchmark, out_dir)
    except (SandboxUnavailable, SandboxConfigError, TaskDataError, OSError) as exc:
        return _fail(str(exc))
    print_summary(summary, args.json, shown=[f"pass@{k}" for k in ks])
    return 0


def _open_generator(args: argparse.Namespace):
    import torch

    from execrl.models.backends import open_generator

    torch.manual_seed(args.seed)
    return open_generator(args.model, chat=args.chat, device=args.device,
                          engine=args.engine or "loop", dtype=args.dtype or "")  # fmt: skip


def _slug(text: str) -> str:
    return re.sub(r"[^\w.+-]+", "_", text).strip("_")[:120]
