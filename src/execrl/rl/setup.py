"""Set-up of a training run: tasks, policy, reference, critic, optimizer, schedule, sampler.

Everything here can fail (a missing benchmark, a model that does not load); none of it writes
to disk, so a failed start leaves no run directory (`rl.run` makes it once set-up is done).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from execrl.models import LoraSpec, load_policy, reference_from
from execrl.models.engines.weights import base_model
from execrl.models.prompting.prompting import with_named_entry_points, with_signature_prompts
from execrl.rl.config.config import ConfigError, OptimConfig, TrainConfig
from execrl.rl.config.curriculum import Curriculum, TaskMix
from execrl.rl.parallel import dist
from execrl.rl.rollout.prompts import PromptSampler
from execrl.rl.update.batch_builder import BatchBuilder
from execrl.rl.update.batch_rows import model_terms
from execrl.rl.update.learner_settings import LearnerSettings
from execrl.rl.update.trainer import Learner
from execrl.sandbox import SandboxConfig, require_toolchains
from execrl.tasks.difficulty import difficulty_level
from execrl.tasks.schema import Task


@dataclass
class Setup:
    config: TrainConfig
    policy: Any  # models.Policy
    builder: BatchBuilder  # scored groups -> the update's batches
    learner: Learner
    sampler: PromptSampler
    tasks: list[Task]
    heldout: list[Task]
    reference: Any = None  # the KL reference (the policy itself under LoRA); None: none loaded


def build(config: TrainConfig, tasks: list[Task] | None, heldout: list[Task] | None) -> Setup:
    c = config
    random.seed(c.run.seed)
    torch.manual_seed(c.run.seed)
    if tasks is None:
        tasks, mix = load_mix(c)
    else:
        mix = TaskMix.single(len(tasks), "tasks", levels_of(tasks, c))
    curriculum = curriculum_for(c, mix)  # before the model loads: its errors are the config's
    heldout = heldout if heldout is not None else (
        load_tasks(c.data.heldout, "test", c.data.n_heldout, c) if c.data.heldout else [])  # fmt: skip
    if not tasks:
        raise ValueError("the training set is empty: nothing to train on")
    require_toolchains(t.language for t in [*tasks, *heldout])  # iverilog, g++: before the model
    if c.data.signature_prompt:
        tasks, heldout = with_signature_prompts(tasks), with_signature_prompts(heldout)
    tasks, heldout = with_named_entry_points(tasks), with_named_entry_points(heldout)
    device = c.model.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    policy = policy_of(c, device)
    reference = reference_from(policy) if c.uses_reference else None
    value_head = None
    if c.algorithm.critic:  # PPO: a value head on the last hidden state
        hidden = policy.model.config.get_text_config().hidden_size
        value_head = torch.nn.Linear(hidden, 1).to(device)
        torch.nn.init.zeros_(value_head.weight)
        torch.nn.init.zeros_(value_head.bias)
    strategy = _strategy(c, policy, reference, value_head, device)  # before the optimizer
    params = [p for p in policy.model.parameters() if p.requires_grad]
    params += list(value_head.parameters()) if value_head is not None else []
    optimizer, scheduler = optimizer_and_schedule(params, c.optim, c.run.steps)
    settings = LearnerSettings.of(c)
    learner = Learner(settings, policy.model, value_head, optimizer, scheduler, strategy=strategy)
    if c.dist.cpu_offload:  # the shards live in host memory; the batches go where it computes
        learner.device = torch.device(device)
    terms = model_terms(policy.model, reference, value_head, c.sampling.temperature,
                        c.rl.logprob_head)  # fmt: skip
    builder = BatchBuilder(settings, terms, policy.tokenizer.pad_token_id, learner.device)
    sampler = PromptSampler(len(tasks), c.run.seed, c.rl.prompt_sampler, c.rl.pass_rate_target,
                            c.rl.pass_rate_decay, mix, curriculum)  # fmt: skip
    return Setup(c, policy, builder, learner, sampler, tasks, heldout, reference)


def policy_of(c: Any, device: str) -> Any:
    """model.path loaded as the run trains it (`c`: `execrl train`'s `TrainConfig` or `execrl
    sft`'s `SFTConfig`, whose `model` is read; SFT sits above this wing, `rl.sft`): with its
    LoRA adapters, before any sharding."""
    lora = (
        LoraSpec(c.model.lora_r, c.model.lora_alpha, 0.0, tuple(c.model.lora_targets))
        if c.model.lora_r
        else None
    )
    return load_policy(
        c.model.path, device=device, dtype=c.model.dtype, lora=lora, pad_token=c.model.pad_token
    )


def _strategy(c: TrainConfig, policy: Any, reference: Any, value_head: Any,
              device: str) -> dist.Strategy:  # fmt: skip
    """How the processes share the model: whole copies, or FSDP's shards (`rl.parallel.fsdp`)."""
    if not c.dist.sharded:
        if c.dist.activation_checkpointing:
            checkpoint_layers(policy.model)
        return dist.Replicated()
    from execrl.rl.parallel import fsdp

    blank = fsdp.blank_batch(policy.tokenizer.pad_token_id, reference is not None,
                             value_head is not None, torch.device(device))  # fmt: skip
    return fsdp.shard(policy.model, reference, value_head, c.dist, blank)


def checkpoint_layers(model: Any) -> None:
    """Hugging Face's gradient checkpointing on a whole (unsharded) policy, non-reentrant so a
    LoRA policy's frozen embeddings need no gradient. It acts in training mode only: the
    engines generate in eval mode, with their KV cache."""
    base = base_model(model)
    if not getattr(base, "supports_gradient_checkpointing", False):
        raise ValueError(
            f"dist.activation_checkpointing: {type(base).__name__} does not support gradient "
            "checkpointing; set it to false"
        )
    enable = getattr(base, "activation_checkpointing_enable", None)  # transformers 5's name
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def workers_beside(sandbox: SandboxConfig) -> int:
    """The sandbox workers on this machine, which run programs while the policy generates."""
    if sandbox.backend == "local":
        return sandbox.workers
    return sandbox.workers * sandbox.ray_actors if sandbox.ray_address == "local" else 0


def run_directory(c: TrainConfig) -> Path:
    """The run's directory: the one resumed, or a new one under run.out_dir (made on rank 0).
    Its default name is rank 0's clock, for every process: each process's own named as many
    directories as seconds the processes reached this line in."""
    if c.run.resume:
        return Path(c.run.resume)
    name = c.run.name or dist.all_gather_objects(time.strftime("%Y%m%d-%H%M%S"))[0]
    run_dir = Path(c.run.out_dir) / name
    if dist.rank() == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
    dist.barrier()
    return run_dir


def name_taken(c: TrainConfig) -> str | None:
    """What to do instead, where run.name names a directory that holds a run already (a second
    run there wrote over the first's files and added its own TensorBoard events beside
    theirs); None where the run may start."""
    if c.run.resume or not c.run.name:
        return None
    run_dir = Path(c.run.out_dir) / c.run.name
    if not run_dir.is_dir() or not any(run_dir.iterdir()):
        return None
    return (
        f"{run_dir} exists (a run named {c.run.name!r}): continue it with --resume {run_dir}, "
        "or choose another run.name"
    )


def optimizer_and_schedule(
    params: list[torch.nn.Parameter], optim: OptimConfig, steps: int
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over `params` as [optim] says, and its learning-rate schedule over `steps` steps
    (`lr_schedule`): the one set-up of `execrl train` and `execrl sft` (`rl.sft.run`)."""
    # One fused kernel per step instead of a dozen ops per tensor (0.8 ms against 4.7 ms a step
    # for the embedded default on a CPU); other devices keep torch's default implementation.
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params)
    optimizer = torch.optim.AdamW(params, lr=optim.lr, betas=(optim.beta1, optim.beta2),
                                  weight_decay=optim.weight_decay, fused=fused or None)  # fmt: skip
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule(optim, steps))


def lr_schedule(optim: OptimConfig, steps: int) -> Callable[[int], float]:
    """The learning-rate factor at each step: linear warm-up over optim.warmup_steps, then
    optim.schedule (constant, linear or cosine to 0 at `steps`, the run's last)."""
    warm, total, kind = optim.warmup_steps, steps, optim.schedule

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        frac = (step - warm) / max(1, total - warm)
        if kind == "linear":
            return max(0.0, 1 - frac)
        if kind == "cosine":
            return 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))
        return 1.0

    return factor


def load_tasks(source: str, split: str, n: int, c: TrainConfig) -> list[Task]:
    """Tasks from the synthetic suite or a named benchmark / jsonl:PATH (at most n)."""
    if source == "synthetic":
        from execrl.models.loading.default import synthetic_tasks

        return synthetic_tasks(seed=c.run.seed, n=n, difficulty=c.data.difficulty, split=split)
    from execrl.sandbox import sandbox_runner
    from execrl.tasks.catalog.registry import load_benchmark

    return load_benchmark(source, reference_runner=sandbox_runner())[:n]


def load_mix(c: TrainConfig) -> tuple[list[Task], TaskMix]:
    """The tasks of every source in data.train, in its order (at most data.n_train each), and
    where each came from. An id two sources share gets its source's name as a prefix."""
    names = source_names(c.data.train)
    parts = []
    for spec in c.data.train:
        part = load_tasks(spec, "train", c.data.n_train, c)
        if not part:
            raise ValueError(f"data.train: {spec!r} gave no tasks: nothing to train on")
        parts.append(part)
    seen: dict[str, int] = {}
    for s, part in enumerate(parts):
        for task in part:
            seen[task.id] = seen.get(task.id, 0) | 1 << s  # the sources that have this id
    shared = {i for i, mask in seen.items() if mask & (mask - 1)}  # more than one bit
    parts = [[dataclasses.replace(t, id=f"{name}/{t.id}") if t.id in shared else t for t in part]
             for name, part in zip(names, parts, strict=True)]  # fmt: skip
    tasks = [t for part in parts for t in part]
    source_of = tuple(s for s, part in enumerate(parts) for _ in part)
    weights = tuple(c.data.weights) or (1.0,) * len(names)
    return tasks, TaskMix(names, weights, source_of, levels_of(tasks, c))


def source_names(specs: list[str]) -> tuple[str, ...]:
    """Each source's name in the log: its spec, a file path cut to the file's name
    (codecontests:/data/cc.jsonl -> codecontests:cc.jsonl) unless two would then be the same."""
    from execrl.tasks.catalog.registry import is_path_benchmark

    def short(spec: str) -> str:
        if spec.startswith("jsonl:") or is_path_benchmark(spec):
            kind, _, path = spec.partition(":")
            return f"{kind}:{Path(path).name}"
        return spec

    names = [short(s) for s in specs]
    return tuple(n if names.count(n) == 1 else s for n, s in zip(names, specs, strict=True))


def levels_of(tasks: list[Task], c: TrainConfig) -> tuple[int, ...]:
    """Each task's difficulty level (`tasks.difficulty`) when a curriculum needs them, else 0."""
    if c.data.curriculum == "none":
        return (0,) * len(tasks)
    levels = []
    for task in tasks:
        try:
            levels.append(difficulty_level(task.metadata.get("difficulty")))
        except ValueError as e:
            raise ConfigError(
                f"data.curriculum = {c.data.curriculum!r}: task {task.id}: {e}; give the task a "
                "known difficulty, or train without a curriculum"
            ) from None
    return tuple(levels)


def curriculum_for(c: TrainConfig, mix: TaskMix) -> Curriculum | None:
    d = c.data
    if d.curriculum == "none":
        return None
    levels = mix.levels()
    if not levels:
        raise ConfigError(
            f"data.curriculum = {d.curriculum!r}, but no training task has a difficulty level "
            f"(sources: {', '.join(mix.names)}); train on sources with levels, e.g. "
            "synthetic:difficulty=mixed or apps:PATH, or set data.curriculum = 'none'"
        )
    if d.curriculum_opens and len(d.curriculum_opens) != len(levels):
        raise ConfigError(
            f"data.curriculum_opens has {len(d.curriculum_opens)} entries, but the training "
            f"tasks have {len(levels)} difficulty levels ({', '.join(map(str, levels))}); give "
            "one fraction of run.steps per level, easiest first"
        )
    return Curriculum(d.curriculum, levels, c.run.steps, tuple(d.curriculum_opens),
                      d.curriculum_target, d.curriculum_window)  # fmt: skip


def rollout_context(c: TrainConfig, tasks: list[Task], heldout: list[Task], tokenizer: Any,
                    chat: bool | None) -> int | None:  # fmt: skip
    """The longest sequence a rollout of this run can be, with room to spare: the longest
    prompt (training and held-out, as the chat template lays them out) plus
    sampling.max_new_tokens, a quarter more and 256 tokens, in steps of 256; None for episodes
    without env.max_tokens, whose context grows turn by turn. vLLM sizes its batches and
    buffers by it: without it, by the model's whole context (Qwen2.5's 32,768 tokens)."""
    from execrl.models.engines.sampling import encode_prompts

    if c.env.by_turn:
        return c.env.max_tokens or None
    prompts = [t.prompt for t in [*tasks, *heldout]]
    longest = max((len(ids) for ids in encode_prompts(tokenizer, prompts, chat=chat)), default=0)
    need = (longest + c.sampling.max_new_tokens) * 5 // 4 + 256
    return -(-need // 256) * 256
