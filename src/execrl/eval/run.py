"""The run of `execrl eval`: generate completions with a model and evaluate them, resumably.

    execrl eval --model PATH_OR_HF_ID --benchmark humaneval -n 10 -k 1,10
    execrl eval --model openai:http://localhost:8000/v1#MODEL --benchmark mbpp+
    execrl eval --model runs/RUN/final          # a model execrl trained: as its run evaluated it

A model directory holding `execrl_eval.json` (which `execrl train` saves in final/) is evaluated
by the run's own held-out evaluation (`eval.as_trained`); any other model as the benchmark's
official harness prompts it (`eval.generation`); with --env, by episodes (`eval.episodes_eval`).
Writes, in --out-dir: samples.jsonl (+ samples.meta.json), results.jsonl and summary.json; the
summary is also the last line of stdout with --json, as `eval-samples` prints it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from execrl.eval.as_trained import benchmark_for, evaluate_as_trained, spec_for
from execrl.eval.config import EvalConfig, EvalError, check_ks
from execrl.eval.evaluate import (
    evaluate,
    print_summary,
    result_record,
    runs_needed,
    summarize,
    write_jsonl_atomic,
)
from execrl.eval.generation import GenerationMeta, SamplesFile, first_n, generate_missing
from execrl.eval.samples import Sample
from execrl.models import heap
from execrl.models.engines.backends import OPENAI_PREFIX
from execrl.models.loading.registry import require_fetched
from execrl.models.prompting.prompting import with_named_entry_points
from execrl.models.threads import Machine, choose_threads, for_vllm, threads_used
from execrl.rl.episodes.env import is_one_turn
from execrl.rl.eval_spec import HeldoutSpec
from execrl.sandbox import (
    Limits,
    Sandbox,
    SandboxConfigError,
    SandboxUnavailable,
    require_toolchains,
    sandbox_runner,
)
from execrl.tasks.catalog.registry import load_benchmark
from execrl.tasks.errors import DataNotFound, TaskDataError, UnknownBenchmark
from execrl.tasks.schema import Task

# (total, what is counted) -> a context whose value advances the count; the command's is a bar
# on a terminal (the eval layer draws nothing)
Progress = Callable[[int, str], AbstractContextManager[Callable[[int], None]]]


@contextmanager
def no_progress(total: int, desc: str) -> Iterator[Callable[[int], None]]:
    yield lambda done: None


def run_evaluation(config: EvalConfig, progress: Progress = no_progress) -> int:
    """Evaluate as `config` says; the exit status (0, or 2 after episodes printed their error).
    Errors a person can fix are `EvalError`s, found before the model loads where they can be."""
    try:
        require_fetched(config.model)  # a known model not fetched: before anything loads
    except FileNotFoundError as exc:
        raise EvalError(str(exc)) from None
    if config.model.startswith(OPENAI_PREFIX):  # the server computes with its own threads
        return _evaluate_model(config, None, progress)
    spec = _saved_spec(config)  # a model execrl trained: read once, here, for every step below
    problem = _engine_problem(config, spec)
    if problem:
        raise EvalError(problem)
    # A model execrl trained samples as its run did: the sandbox scores while it generates
    beside = config.workers if spec is not None else 0
    threads = choose_threads(config.threads, beside, Machine.now(), "--threads")
    if (config.engine or (spec.engine if spec is not None else "")) == "vllm":
        threads = for_vllm(threads)
    print(f"execrl eval: {threads.line()}", file=sys.stderr)
    heap.keep_heap_small()  # a long generation's freed temporaries leave (`models.heap`)
    with threads_used(threads):
        return _evaluate_model(config, spec, progress)


def _saved_spec(config: EvalConfig) -> HeldoutSpec | None:
    """The model's `execrl_eval.json`, or None: not a model execrl trained, or asked by
    --prompt to be evaluated as any model is."""
    try:
        spec = HeldoutSpec.load(config.model) if Path(config.model).is_dir() else None
    except ValueError as exc:
        raise EvalError(str(exc)) from None
    if spec is not None and config.prompt is not None and is_one_turn(config.env):
        # a published protocol asked for by name: the trained model is asked as any model is
        print(f"execrl eval: --prompt {config.prompt}: {config.model} is evaluated like any "
              "model, not as trained", file=sys.stderr)  # fmt: skip
        return None
    return spec


def _engine_problem(config: EvalConfig, spec: HeldoutSpec | None) -> str | None:
    """The engine that will generate cannot run here (vLLM not installed), said before anything
    loads: --engine's, else the trained model's own (as trained, one turn or episodes)."""
    from execrl.models.engines.engine_factory import engine_missing  # imports torch

    if config.engine is not None:
        missing = engine_missing(config.engine)
        return None if missing is None else f"--engine {config.engine}: {missing}"
    missing = engine_missing(spec.engine) if spec is not None else None
    if missing is None:  # not a trained model, or its engine is installed
        return None
    return (
        f"{config.model} was trained with sampling.engine = {spec.engine!r} and is evaluated "
        f"as trained. {missing}"
    )


def _evaluate_model(config: EvalConfig, spec: HeldoutSpec | None, progress: Progress) -> int:
    """`spec`: the model's saved `execrl_eval.json` (None: not a model execrl trained)."""
    if not is_one_turn(config.env):  # multi-turn episodes, pass@1 by turn
        from execrl.eval.episodes_eval import run_episodes_eval

        return run_episodes_eval(config, spec)
    if spec is not None:
        _run_as_trained(config, spec)
    else:
        _run_one_turn(dataclasses.replace(config, **_defaults(config)), progress)
    return 0


# For a model execrl did not train (no execrl_eval.json beside it).
_DEFAULTS = {"benchmark": "humaneval", "n": 1, "top_p": 0.95, "max_new_tokens": 512,
             "chat": "auto", "seed": 0, "repeat_ngram": 32}  # fmt: skip


def _defaults(config: EvalConfig) -> dict[str, Any]:
    return {name: value for name, value in _DEFAULTS.items() if getattr(config, name) is None}


def _load_tasks(benchmark: str, config: EvalConfig, *errors: type[Exception]) -> list[Task]:
    try:
        return load_benchmark(benchmark, config.data_dir, reference_runner=sandbox_runner())
    except (TaskDataError, DataNotFound, UnknownBenchmark, OSError, *errors) as exc:
        raise EvalError(str(exc)) from None


def _run_one_turn(config: EvalConfig, progress: Progress) -> None:
    """A model as the benchmark's harness prompts it: samples generated (continuing those of an
    earlier run), then run in the sandbox. `config` has every default filled in."""
    check_ks(config, config.n)
    temperature = config.temperature
    if temperature is None:
        temperature = 0.0 if config.n == 1 else 0.8
    if config.n > 1 and temperature == 0:
        print("execrl eval: warning: greedy decoding gives n identical samples", file=sys.stderr)
    tasks = _load_tasks(config.benchmark, config)
    if config.limit > 0:
        tasks = tasks[: config.limit]
    require_toolchains(t.language for t in tasks)  # before generating for a run that cannot run
    tasks = with_named_entry_points(tasks)  # the prompt names the function the tests call
    out_dir = config.out_dir_for(config.benchmark, config.model)
    samples = _generate(config, tasks, out_dir, temperature, progress)
    _grade(config, samples, tasks, out_dir, temperature, progress)


def _generate(config: EvalConfig, tasks: list[Task], out_dir: Path, temperature: float,
              progress: Progress) -> list[Sample]:  # fmt: skip
    """The first n samples of each task: those in out_dir's samples.jsonl, and those missing."""
    from execrl.models.engines.backends import GenerationParams, ServerError

    try:
        generator = _open_generator(config)
    except (ValueError, FileNotFoundError, OSError, ImportError) as exc:
        raise EvalError(str(exc)) from None
    meta = GenerationMeta(config.model, config.benchmark, config.n, temperature, config.top_p,
                          config.max_new_tokens, generator.chat, code_end=True,
                          repeat_ngram=config.repeat_ngram, prompt=config.prompt or "execrl")  # fmt: skip
    params = GenerationParams(temperature, config.top_p, config.max_new_tokens,
                              batch_size=config.batch_size, code_end=meta.code_end,
                              repeat_ngram=meta.repeat_ngram)  # fmt: skip
    started = time.monotonic()
    try:
        samples_file = SamplesFile(out_dir / "samples.jsonl", meta, restart=config.restart)
        with progress(len(tasks) * config.n, "generate") as advance:
            made = generate_missing(generator, tasks, samples_file, params, progress=advance)
        samples = first_n(samples_file.read(tasks), tasks, config.n)
    except (TaskDataError, ServerError) as exc:
        raise EvalError(str(exc)) from None
    finally:
        if hasattr(generator, "close"):  # an engine's processes and KV cache, before grading
            generator.close()
    print(
        f"generated {made} samples ({len(samples) - made} from an earlier run) in "
        f"{samples_file.path}, {time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    return samples


def _grade(config: EvalConfig, samples: list[Sample], tasks: list[Task], out_dir: Path,
           temperature: float, progress: Progress) -> None:  # fmt: skip
    """Run the samples in the sandbox, then write and print the results and the summary."""
    limits = None if config.timeout is None else Limits(wall_s=config.timeout)
    try:
        with _sandbox(config) as sb:
            with progress(runs_needed(samples, tasks), "evaluate") as advance:
                results = evaluate(samples, tasks, "solution", sb, limits, progress=advance)
    except (SandboxUnavailable, SandboxConfigError, TaskDataError) as exc:
        raise EvalError(str(exc)) from None
    summary = {
        **summarize(config.benchmark, results, tasks),
        "model": config.model,
        "temperature": temperature,
        "out_dir": str(out_dir),
    }
    write_jsonl_atomic(out_dir / "results.jsonl", [result_record(r) for r in results])
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print_summary(summary, config.json, shown=[f"pass@{k}" for k in config.ks])


def _run_as_trained(config: EvalConfig, saved: HeldoutSpec) -> None:
    """A model execrl trained: the run's own held-out evaluation (`eval.as_trained`)."""
    try:
        spec = spec_for(config, saved)
    except ValueError as exc:
        raise EvalError(str(exc)) from None
    check_ks(config, spec.samples_per_task)
    benchmark, limit = benchmark_for(config, spec)
    if not benchmark:
        raise EvalError(
            f"{config.model}: its run had no held-out tasks (data.heldout = ''); name the tasks "
            "to evaluate on with --benchmark"
        )
    tasks = _load_tasks(benchmark, config, ValueError)
    tasks = tasks[:limit] if limit > 0 else tasks
    out_dir = config.out_dir_for(benchmark, config.model)
    try:
        with _sandbox(config) as sb:
            summary = evaluate_as_trained(config, spec, tasks, sb, benchmark, out_dir)
    except (SandboxUnavailable, SandboxConfigError, TaskDataError, OSError) as exc:
        raise EvalError(str(exc)) from None
    print_summary(summary, config.json, shown=[f"pass@{k}" for k in config.ks])


def _sandbox(config: EvalConfig) -> Sandbox:
    return Sandbox(workers=config.workers, allow_missing_layers=config.allow_weaker_sandbox)


def _open_generator(config: EvalConfig) -> Any:
    import torch

    from execrl.models.engines.backends import open_generator

    torch.manual_seed(config.seed)
    return open_generator(config.model, chat=config.chat, device=config.device,
                          engine=config.engine or "loop", dtype=config.dtype or "")  # fmt: skip
