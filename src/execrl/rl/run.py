"""A whole training run: set-up, the step loop, held-out pass@1 before and after, checkpoints.

One step reads top to bottom in `train_step`: draw prompts -> sample -> score -> filter groups
(`groups.gather`, with DAPO's bounded refills) -> batches with their advantages
(`rl.update.batch_builder`) -> update (`rl.update.trainer`) -> log. With `rl.max_staleness` = k > 0
the first stages run ahead on a rollout thread, from a policy k updates old (`rl.prefetch`), while
the update runs.

The run directory holds `config.toml` (resolved), `metrics.jsonl` (one line per step),
`flagged.jsonl` (samples the reward flagged), `checkpoint/state.pt` (everything `--resume`
needs; an asynchronous run adds `prefetched-<step>.pt`, the batches gathered ahead), `final/`
(the policy in Hugging Face format, once the run finished; a LoRA run merges its adapter in
unless `run.merge_lora` is false) and `summary.json`. It is made only once set-up succeeded.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from execrl.models import SamplingParams, heap
from execrl.models.engines.engine import InProcessEngine, RolloutEngine
from execrl.models.engines.engine_factory import make_engine
from execrl.models.loading.adapter import absolute_base
from execrl.models.prompting.chat import chat_wanted
from execrl.models.threads import (
    Machine,
    choose_threads,
    for_vllm,
    threads_used,
    with_threads,
)
from execrl.rewards.scoring.config import node_names
from execrl.rewards.scoring.scorer import RewardScorer
from execrl.rl import setup
from execrl.rl.checkpoint import Unwritable, load_checkpoint, save_checkpoint, save_model_dir
from execrl.rl.config.config import ConfigError, TrainConfig, names_code, to_dict, to_toml
from execrl.rl.eval_spec import heldout_spec
from execrl.rl.heldout import heldout_pass_at_1, heldout_pass_at_1_by_turn
from execrl.rl.metrics import MetricsLog, mix_metrics, source_kl, step_metrics
from execrl.rl.parallel import dist
from execrl.rl.parallel.memory import memory_metrics
from execrl.rl.prefetch import (
    Prefetcher,
    load_prefetched,
    policy_copy,
    prune_prefetched,
    save_prefetched,
    staleness_summary,
)
from execrl.rl.progress import IdleWatch, Progress, StopRequest, command_as_run, setup_warnings
from execrl.rl.rollout.episode_sources import episode_source
from execrl.rl.rollout.groups import Gathered, gather
from execrl.rl.rollout.rollouts import Rollouts, idle_processes
from execrl.rl.update.batch_builder import NOTHING
from execrl.tasks.schema import Task


class StepObserver(Protocol):
    """What watches a run from above this layer (the report layer's telemetry)."""

    def step(self, row: dict[str, Any], collected: Any) -> None: ...

    def end(self, summary: dict[str, Any]) -> Any: ...


# (run_dir, config, training tasks, first step, whether this process reports) -> observer
ObserverFactory = Callable[[Path, TrainConfig, list[Task], int, bool], StepObserver]


class _Unobserved:
    def step(self, row: dict[str, Any], collected: Any) -> None:
        return None

    def end(self, summary: dict[str, Any]) -> None:
        return None


@dataclass
class Run:
    """Everything a step needs, built once at set-up."""

    config: TrainConfig
    run_dir: Path
    built: setup.Setup
    engine: RolloutEngine
    rollouts: Rollouts
    nodes: list[str]  # the reward tree's node names: each is logged as reward/<name>
    rollouts_on: Callable[[RolloutEngine], Rollouts]  # the rollout stage on another engine
    prefetch: Prefetcher | None = None  # rl.max_staleness > 0: the rollout thread
    unsaved: Unwritable | None = None  # the last checkpoint's failure, raised once final/ is saved


def train_step(run: Run, step: int) -> tuple[dict[str, Any], Gathered]:
    """One step, top to bottom; returns its metrics row and what it gathered."""
    builder, learner = run.built.builder, run.built.learner
    start = time.perf_counter()
    if run.prefetch is None:  # draw prompts -> sample -> score -> filter groups (refills)
        with _sampling(run):
            got, sampled = _gather(run, run.rollouts, step)
    else:  # gathered ahead by the rollout thread, from a policy at most rl.max_staleness old
        ahead = run.prefetch.take(step)
        got, sampled = ahead.gathered, {**ahead.sampled, "async/staleness": ahead.staleness}
    gathered = time.perf_counter()
    denominator = builder.denominator(got.kept)  # the global batch's tokens or sequences
    with learner.strategy.gathered(learner.model, run.built.reference, learner.value_head):
        built = builder.build(got.local) if denominator else NOTHING  # advantages: (B, T)
    update = learner.update(built.batches, denominator)
    if run.prefetch is None:
        run.engine.sync_weights(run.built.policy.model)  # the next rollouts sample the new policy
    else:  # version step + 1; the rollout thread loads it when a step's batch needs it
        run.prefetch.publish(step + 1, run.built.policy.model)
    row = step_metrics(step, got, update, gathered - start, time.perf_counter() - gathered,
                       run.nodes, by_turn=run.config.env.by_turn)  # fmt: skip
    row.update(sampled)
    heap.release()  # the step's freed temporaries go back before the next step's draws
    row.update(memory_metrics(learner.device))
    row.update(source_kl(update.kl_by_task, run.built.sampler))
    if run.config.credit.correction_coef > 0:
        row["episode/correction_samples"] = built.correction_rows
    if run.config.env.kind.runs_harness:  # segments of rewritten histories, trained
        row["episode/segment_samples"] = built.segment_rows
    return row, got


def _sampling(run: Run) -> contextlib.AbstractContextManager[None]:
    """What generating needs of the trainer's module: an in-process engine samples it, so FSDP
    gathers it whole; an engine with its own copy (vLLM, one on a device of its own) needs
    nothing of it, and the process keeps only its shards."""
    if isinstance(run.engine, InProcessEngine):
        return run.built.learner.strategy.gathered(run.built.policy.model)
    return contextlib.nullcontext()


def _gather(run: Run, rollouts: Rollouts, step: int) -> tuple[Gathered, dict[str, Any]]:
    """Draw prompts, sample and score their groups, keep the informative ones (refilled while
    too few are), with what the prompt sampler says of the step (per source, curriculum level),
    read right after its draws: a rollout thread may be drawing the next step's by the update."""
    c = run.config
    got = gather(run.built.sampler, rollouts, c.rl.group_size, c.rl.groups_per_step,
                 c.rl.dynamic_sampling, c.rl.max_sample_rounds, step)  # fmt: skip
    return got, mix_metrics(got.every, run.built.sampler)


def train(config: TrainConfig, *, tasks: list[Task] | None = None, heldout: list[Task] | None = None,
          reward: Any = None, quiet: bool = False,
          observer: ObserverFactory | None = None) -> dict[str, Any]:  # fmt: skip
    """Run the training `config` describes; returns the summary (also written to summary.json).
    `reward` replaces the config's reward tree with a Python object; `observer` builds what is
    told of each step and of the end (`execrl train` passes the report layer's telemetry)."""
    start = time.time()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if config.rl.max_staleness and world > 1:  # the thread's all-gathers would cross the update's
        raise ConfigError(
            f"rl.max_staleness = {config.rl.max_staleness} with {world} processes (WORLD_SIZE): "
            "asynchronous training runs in one process; set rl.max_staleness = 0 to train on "
            "several, or run one process"
        )
    dist.init_from_env()
    with dist.group_of_one(config.dist.sharded):  # FSDP in one process (`rl.config.dist_config`)
        return _train_threads(config, tasks, heldout, reward, quiet, observer, start)


def _train_threads(config: TrainConfig, tasks: list[Task] | None, heldout: list[Task] | None,
                   reward: Any, quiet: bool, observer: ObserverFactory | None,
                   start: float) -> dict[str, Any]:  # fmt: skip
    talk = not quiet and dist.rank() == 0
    log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if talk else (lambda msg: None)
    threads = choose_threads(config.model.threads, setup.workers_beside(config.sandbox),
                             Machine.now(), "model.threads")  # fmt: skip
    if config.sampling.engine == "vllm":
        threads = for_vllm(threads)
    log(threads.line())
    heap.keep_heap_small()  # large temporaries leave when freed (`models.heap`)
    idle = idle_processes(config.rl.groups_per_step, config.sampling.groups_per_generate,
                          dist.world_size())  # fmt: skip
    if idle:
        log(f"execrl: warning: {idle}")
    with threads_used(threads):
        return _train(
            with_threads(config, threads), tasks, heldout, reward, quiet, observer, log, start
        )


def _train(config: TrainConfig, tasks: list[Task] | None, heldout: list[Task] | None,
           reward: Any, quiet: bool, observer: ObserverFactory | None,
           log: Callable[[str], None], start: float) -> dict[str, Any]:  # fmt: skip
    from execrl.sandbox import open_sandbox

    for warning in setup_warnings(config):
        log(warning)
    built = setup.build(config, tasks, heldout)
    c = built.config
    with (
        open_sandbox(c.sandbox) as sandbox,
        RewardScorer(c.reward, sandbox, reward, sandbox_config=c.sandbox) as scorer,
    ):
        tok = built.policy.tokenizer
        chat = chat_wanted(c.model.chat)
        # an engine with its own copy (vLLM, or any engine on a device of its own) takes the
        # weights as the strategy yields them (FSDP: one decoder layer gathered at a time)
        device = c.sampling.engine_devices[dist.rank()] if c.sampling.engine_devices else ""
        own_copy = c.sampling.engine == "vllm" or device
        pushed = {"weights": built.learner.strategy.weights} if own_copy else {}
        if c.sampling.engine == "vllm":
            pushed["gpu_memory_utilization"] = c.sampling.engine_memory
            pushed["max_model_len"] = setup.rollout_context(c, built.tasks, built.heldout, tok,
                                                            chat)  # fmt: skip
        engine = make_engine(c.sampling.engine, built.policy.model, tok, device=device, **pushed)
        params = SamplingParams(c.sampling.temperature, c.sampling.top_p,
                                c.sampling.max_new_tokens, tuple(c.sampling.stop),
                                code_end=c.sampling.code_end,  # where env's turns allow it
                                repeat_ngram=c.sampling.repeat_ngram)  # fmt: skip

        def rollouts_on(engine: RolloutEngine) -> Rollouts:
            source = episode_source(c.env, engine, tok, built.tasks, scorer, params, chat,
                                    c.segment_training)  # fmt: skip
            return Rollouts(source, c.run.seed, c.sampling.groups_per_generate)

        rollouts = rollouts_on(engine)
        run_dir = setup.run_directory(c)  # set-up succeeded: from here the run has a directory
        run = Run(c, run_dir, built, engine, rollouts, node_names(scorer.reward), rollouts_on)
        try:
            summary, telemetry = _loop(run, sandbox, log, quiet, observer)
        finally:
            if run.prefetch is not None:
                run.prefetch.close()
            rollouts.close()
            engine.close()
    summary.update(seconds=round(time.time() - start, 1), run_dir=str(run_dir))
    # An interrupted run's policy is in its checkpoint, not in final/, which is a finished
    # model to whoever finds it; with the checkpoint unsaved (a full disk) final/ is all there is
    finished = "interrupted_at" not in summary or run.unsaved is not None
    model = _final_model(run) if finished else None  # every process: FSDP gathers to rank 0
    if dist.rank() == 0:
        if finished:
            _save_final(run, model)
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    telemetry.end(summary)  # after summary.json: the report reads this run's, not a stale one
    if run.unsaved is not None:
        raise run.unsaved
    return summary


def _loop(run: Run, sandbox: Any, log: Callable[[str], None], quiet: bool,
          observer: ObserverFactory | None) -> tuple[dict[str, Any], StepObserver]:  # fmt: skip
    c, built = run.config, run.built
    first_step, summary = 0, {}
    if c.run.resume:
        first_step, summary = load_checkpoint(run.run_dir, built.learner, built.sampler)
        # An engine with its own copy (vLLM) was built from the weights before the checkpoint
        run.engine.sync_weights(built.policy.model)
    if dist.rank() == 0:
        (run.run_dir / "config.toml").write_text(to_toml(c))
    metrics = MetricsLog(run.run_dir / "metrics.jsonl", keep_steps=first_step,
                         enabled=dist.rank() == 0)  # fmt: skip
    flagged = FlaggedLog(run.run_dir / "flagged.jsonl", first_step, dist.rank() == 0)
    make = observer or (lambda *_: _Unobserved())
    telemetry = make(run.run_dir, c, built.tasks, first_step, dist.rank() == 0)
    if built.heldout and first_step == 0:
        _evaluate_heldout(run, sandbox, summary, "before", log)
    progress = Progress(c.run.steps, first_step, quiet or dist.rank() != 0, log)
    idle = IdleWatch(log, c.rl.dynamic_sampling)
    step = first_step
    with StopRequest() as stop:
        if c.rl.max_staleness:  # after the held-out evaluation: the thread seeds torch's RNG
            run.prefetch = _prefetcher(run, first_step)
        while step < c.run.steps and not _stopping(stop):
            row, got = train_step(run, step)
            idle.step(row)
            metrics.write(row)
            flagged.write(step, got)
            telemetry.step(row, got)
            progress.step(row)
            step += 1
            if c.run.checkpoint_every and step % c.run.checkpoint_every == 0:
                _checkpoint(run, step, summary)
    progress.close()
    try:
        _checkpoint(run, step, summary, last=True)
    except Unwritable as error:  # a full disk: final/ is smaller and what a user wants most
        run.unsaved = error
        log(f"{error}\nThe run saves final/ first, then stops with this error.")
    if run.prefetch is not None:  # the thread is done; the engine takes the final policy
        run.prefetch.close()
        run.engine.sync_weights(built.policy.model)
        summary.update(staleness_summary(metrics.rows))
    if step < c.run.steps:
        # the person who started the run trusts the code its config names (`--trust-code`)
        trust = " --trust-code" if names_code(to_dict(c)) else ""
        log(f"stopped at step {step} of {c.run.steps}; checkpoint saved, no final/ yet. Resume "
            f"with:\n    {command_as_run()} train --resume {run.run_dir}{trust}")  # fmt: skip
        summary["interrupted_at"] = step
    elif built.heldout:
        _evaluate_heldout(run, sandbox, summary, "after", log)
    summary.update(steps=step, reward_first=metrics.first("reward_mean"),
                   reward_last=metrics.last("reward_mean"))  # fmt: skip
    return summary, telemetry


def _prefetcher(run: Run, first_step: int) -> Prefetcher:
    """The rollout thread (`rl.prefetch`), on its own copy of the policy; an engine with its own
    weights (vLLM, or one on a device of its own) is the thread's alone to push to and sample
    while the steps run."""
    c, policy = run.config, run.built.policy
    shadow = policy_copy(policy.model)
    own = isinstance(run.engine, InProcessEngine)  # else it holds its own copy of the weights
    engine = make_engine(run.engine.name, shadow, policy.tokenizer) if own else run.engine
    rollouts = run.rollouts_on(engine)
    queued = load_prefetched(run.run_dir, first_step) if c.run.resume else []

    def close() -> None:
        rollouts.close()
        if own:
            engine.close()

    return Prefetcher(lambda step: _gather(run, rollouts, step), shadow, engine,
                      c.rl.max_staleness, first_step, c.run.steps, queued,
                      close).start(policy.model)  # fmt: skip


def _checkpoint(run: Run, step: int, summary: dict[str, Any], last: bool = False) -> None:
    """checkpoint/state.pt; an asynchronous run first lets its thread gather what it may (it
    then waits, the sampler at rest) and saves the batches gathered ahead beside it."""
    built = run.built
    if run.prefetch is not None and dist.rank() == 0:
        save_prefetched(run.run_dir, step, run.prefetch.drain())
    save_checkpoint(run.run_dir, step, built.learner, built.sampler, summary, last=last)
    if run.prefetch is not None and dist.rank() == 0:
        prune_prefetched(run.run_dir, step)


def _stopping(stop: StopRequest) -> bool:
    """Every process stops at the same step when any of them was asked to."""
    import torch

    return bool(dist.all_reduce_sum(torch.tensor([float(stop.requested)]))[0] > 0)


def _evaluate_heldout(run: Run, sandbox: Any, summary: dict[str, Any], when: str,
                      log: Callable[[str], None]) -> None:  # fmt: skip
    """Held-out pass@1 `when` ("before", "after") into the summary, and logged; a multi-turn
    run adds it by turn, through its environment."""
    with _sampling(run):
        summary[f"heldout_pass@1_{when}"] = _heldout(run, sandbox)
        if run.config.env.by_turn:
            summary[f"heldout_pass@1_by_turn_{when}"] = _heldout_by_turn(run, sandbox)
    for line in heldout_lines(summary, when, run.config.env.name):
        log(line)


def heldout_lines(summary: dict[str, Any], when: str, env: str) -> list[str]:
    """The held-out figures as logged. A multi-turn run (a harness) has two, each saying what
    it measures: they differ, and a bare "before" twice read as a contradiction."""
    one = f"held-out pass@1 {when}: {summary[f'heldout_pass@1_{when}']:.3f}"
    by_turn = summary.get(f"heldout_pass@1_by_turn_{when}")
    if by_turn is None:  # one turn
        return [one]
    return [
        f"{one} (one turn: the policy alone on each task's prompt, without env {env!r})",
        f"held-out pass@1 by turn {when}: {by_turn} (through env {env!r}: the answers standing "
        "after turn 1, 2, ...; a harness's turn is a call to the policy)",
    ]


def _heldout(run: Run, sandbox: Any) -> float:
    built = run.built
    return heldout_pass_at_1(run.config, run.engine, built.policy.tokenizer, built.heldout,
                             sandbox)  # fmt: skip


def _heldout_by_turn(run: Run, sandbox: Any) -> list[float]:
    built = run.built
    return heldout_pass_at_1_by_turn(run.config, run.engine, built.policy.tokenizer,
                                     built.heldout, sandbox)  # fmt: skip


def _final_model(run: Run) -> Any:
    """The policy as trained, whole, on rank 0: under FSDP its shards gathered into a fresh
    copy of model.path (with the run's adapters), which saves as any unsharded policy does."""
    model = run.built.policy.model
    if not run.config.dist.sharded:
        return model
    from execrl.rl.parallel.fsdp import full_state_dict

    weights = full_state_dict(model)
    if dist.rank() != 0:
        return None
    whole = setup.policy_of(run.config, "cpu").model
    whole.load_state_dict(weights)
    return whole


def _save_final(run: Run, model: Any) -> None:
    """final/: the policy as trained. A LoRA run saves the base with the adapter merged in (a
    full model that eval and vLLM load without peft); with run.merge_lora = false the adapter
    alone, naming its base by an absolute path (`models.loading.adapter`: eval merges it on
    load)."""
    final = run.run_dir / "final"
    if hasattr(model, "merge_and_unload"):
        if run.config.run.merge_lora:
            model = model.merge_and_unload()
        else:
            absolute_base(model)

    def write(directory: Path) -> None:
        model.save_pretrained(directory)
        run.built.policy.tokenizer.save_pretrained(directory)
        heldout_spec(run.config).save(directory)  # `execrl eval --model final` as trained

    save_model_dir(final, write)


class FlaggedLog:
    """flagged.jsonl: every sample the reward flagged as a possible hack or failure of the
    machinery (task, completion, flags, reason), one line each, appended step by step."""

    def __init__(self, path: Path, keep_steps: int, enabled: bool) -> None:
        self.path, self.enabled = path, enabled
        if enabled and path.exists():  # on resume, drop what was logged after the checkpoint
            rows = [x for x in path.read_text().splitlines() if x.strip()]
            path.write_text("".join(x + "\n" for x in rows if json.loads(x)["step"] < keep_steps))

    def write(self, step: int, got: Gathered) -> None:
        if not self.enabled:
            return
        rows = [{"step": step, **asdict(f)} for g in got.every for f in g.flagged]
        if rows:
            with self.path.open("a") as f:
                f.write("".join(json.dumps(r) + "\n" for r in rows))
