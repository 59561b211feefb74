"""`execrl eval` of a model execrl trained: evaluated exactly as its training evaluated it.

`execrl train` saves `final/execrl_eval.json` (`rl.eval_spec.HeldoutSpec`: held-out tasks, prompt
format, chat template, sampling settings and seeds, program building, time limit). With that
file in the model directory, `execrl eval` runs `rl.eval_spec.run_heldout`, the function behind
the run's held-out pass@1, so the same checkpoint gives the same number. A flag given on the
command line (-n, --temperature, --top-p, --max-new-tokens, --seed, --chat, --timeout,
--benchmark, --limit, --engine, --dtype) replaces the saved value; the prompt format and the
program building stay those the model was trained with. The samples are generated in one go (a deterministic function
of the seed): an interrupted run starts over rather than continuing.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from execrl.eval.config import EvalConfig
from execrl.eval.evaluate import SampleResult, result_record, summarize, write_jsonl_atomic
from execrl.eval.generation import GenerationMeta
from execrl.eval.samples import Sample
from execrl.rl.eval_spec import HeldoutSpec, run_heldout
from execrl.rl.rollout.scored import Scored
from execrl.sandbox import Limits
from execrl.tasks.schema import Task


def spec_for(args: EvalConfig, spec: HeldoutSpec) -> HeldoutSpec:
    """The saved spec with what the command line gave explicitly put in its place."""
    given = {
        "samples_per_task": args.n,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_new_tokens": args.max_new_tokens,
        "seed": args.seed,
        "chat": args.chat,
        "repeat_ngram": args.repeat_ngram,
        "engine": args.engine,
        "dtype": args.dtype,
    }
    # The saved limits are the run's, for its own held-out tasks: another task set is graded
    # with each task's own (its benchmark's), never with a file's (None: `run_heldout`)
    limits = spec.limits if args.benchmark in (None, "", spec.benchmark) else None
    if args.timeout is not None:  # --timeout: the wall clock of each run, as `execrl eval`'s
        limits = dataclasses.replace(limits or Limits(), wall_s=args.timeout)
    given = {k: v for k, v in given.items() if v is not None}
    return dataclasses.replace(spec, limits=limits, **given)


def benchmark_for(args: EvalConfig, spec: HeldoutSpec) -> tuple[str, int]:
    """(benchmark, how many of its tasks): the saved held-out set unless --benchmark names
    another; --limit wins over the saved count."""
    benchmark = args.benchmark or spec.benchmark
    limit = spec.limit if benchmark == spec.benchmark else 0
    return benchmark, args.limit or limit


def evaluate_as_trained(
    args: EvalConfig, spec: HeldoutSpec, tasks: Sequence[Task], sandbox: Any,
    benchmark: str, out_dir: Path,
) -> dict[str, Any]:  # fmt: skip
    """Generate and run the samples of `tasks` as `spec` says; writes samples.jsonl (with its
    meta), results.jsonl and summary.json in out_dir; returns the summary."""
    import torch

    from execrl.models.engines.engine_factory import make_engine
    from execrl.models.loading.loading import load_policy
    from execrl.models.prompting.chat import chat_wanted, uses_chat_template

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    policy = load_policy(args.model, device=device, dtype=spec.dtype)
    engine = make_engine(spec.engine, policy.model, policy.tokenizer)
    print(
        f"execrl eval: {args.model} holds {Path(args.model, 'execrl_eval.json')}: evaluating as "
        f"trained ({spec.prompt_format} prompts, {spec.samples_per_task} samples per task at "
        f"temperature {spec.temperature})",
        file=sys.stderr,
    )
    try:
        done = run_heldout(spec, engine, policy.tokenizer, tasks, sandbox)
    finally:
        engine.close()
    chat = uses_chat_template(policy.tokenizer, chat_wanted(spec.chat))
    meta = GenerationMeta(args.model, benchmark, spec.samples_per_task, spec.temperature,
                          spec.top_p, spec.max_new_tokens, chat, spec.code_end,
                          spec.repeat_ngram)  # fmt: skip
    samples_path = out_dir / "samples.jsonl"
    results = _results(done, spec, tasks, samples_path)
    write_jsonl_atomic(samples_path, [r.sample.record for r in results])
    meta_path = samples_path.with_name("samples.meta.json")
    meta_path.write_text(json.dumps(dataclasses.asdict(meta), indent=1) + "\n")
    summary = {
        **summarize(benchmark, results, tasks),
        "model": args.model,
        "temperature": spec.temperature,
        "as_trained": dataclasses.asdict(spec),
        "out_dir": str(out_dir),
    }
    write_jsonl_atomic(out_dir / "results.jsonl", [result_record(r) for r in results])
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _results(done: Sequence[Scored], spec: HeldoutSpec, tasks: Sequence[Task],
             samples_path: Path) -> list[SampleResult]:  # fmt: skip
    """The held-out samples as the eval layer's records (EvalPlus's samples format)."""
    out = []
    for line, x in enumerate(done, 1):
        task, program = x.sample.task, x.sample.program or ""
        completion_id = (line - 1) % spec.samples_per_task  # run_heldout is task-major
        record = {
            "task_id": task.id,
            "completion_id": completion_id,
            "solution": program,
            "raw": x.completion.text,
            "prompt": task.prompt,
        }
        sample = Sample(task.id, program, f"{samples_path}:{line}", record)
        assert x.result is not None  # the pass reward runs every program (no code: SYNTAX_ERROR)
        out.append(SampleResult(sample, completion_id, x.result))
    return out
