"""The one interface for generating rollouts: prompt token ids in; completion token ids,
behaviour log-probabilities and finish reasons out (`Completion`).

Every engine serves the same three calls, in the order a trainer makes them:

    engine = make_engine("loop", policy.model, tokenizer)    # or "hf", or "vllm"
    for step in ...:
        completions = engine.generate(prompt_ids, params, n=group_size)   # batched, prompt-major
        ... score, compute advantages, update the policy ...
        engine.sync_weights(policy.model)                  # after every optimizer update
    engine.close()

Why token ids and not text: the trainer recomputes log pi(token | prefix) on exactly the tokens
the engine produced, so the text must never be re-tokenized in between (a re-tokenization can
split differently and make the importance ratio meaningless). A multi-turn episode is a sequence
of `generate` calls whose prompt is the conversation so far, in token ids: the engine keeps no
per-episode state, so the caller decides what each turn sees (tool output, the sandbox's
verdict) and appends the engine's token ids verbatim.

Why `sync_weights`: an engine that holds its own copy of the weights (vLLM, a server) samples
from a stale policy unless the trainer pushes the new weights after each update. The in-process
engines ("loop", "hf") generate with the policy module itself, so for them it only adopts the
module it is given (a DDP wrapper or a new object after a reload) and copies nothing.

`make_engine` (`models.engines.engine_factory`) builds one by name. Devices: `make_engine(...,
device="cuda:1")` runs any of them in a process of its own on that device
(`models.engines.remote_engine`, `sampling.engine_devices`), its weights pushed over a process
group.

Fault tolerance: an engine with its own copy of the policy and its own processes (vLLM, or one on
a device of its own) can die or hang while the trainer is fine, so `make_engine` hands it out
under `SupervisedEngine`, which restarts it from the current weights and repeats the call (the
same draws); no rollout is lost or scored 0 for the engine's failure.

Seeding: the in-process engines draw from torch's global generator, so a caller that seeds it
(`torch.manual_seed`, as `rl.rollout.rollouts` does per chunk) gets the same completions as calling
`models.engines.sampling.sample` directly; an engine with its own sampler derives its per-request
seeds from the same generator, so seeded runs stay reproducible on one machine.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar, runtime_checkable

import torch

from execrl.models.engines.sampling import Completion, SamplingParams, sample

ENGINES = ("loop", "hf", "vllm")


def refuse_options(name: str, options: Any) -> None:
    """Only vLLM takes engine options: another engine given some is a config error."""
    if name != "vllm" and options:
        raise ValueError(f"sampling.engine = {name!r} takes no engine options, got "
                         f"{', '.join(options)}")  # fmt: skip


@runtime_checkable
class RolloutEngine(Protocol):
    """Generates completions for batches of tokenized prompts with the current policy."""

    name: str  # "loop", "hf" or "vllm": what `sampling.engine` names

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams, *, n: int
    ) -> list[Completion]:
        """n completions per prompt, prompt-major: prompt i owns results [i*n, (i+1)*n).
        Each carries its prompt's ids, the generated ids, the behaviour log-probabilities
        log softmax(logits / T)[token] (before top-p, as the trainer recomputes them) and how it
        ended ("eos", "stop" or "length")."""
        ...

    def sync_weights(self, model: Any) -> None:
        """Make the next `generate` sample from `model`'s current weights."""
        ...

    def close(self) -> None:
        """Free what the engine holds (processes, KV cache); the engine is unusable after."""
        ...


class InProcessEngine:
    """execrl's decode loop ("loop") or Hugging Face `generate` ("hf") on the policy module itself.

    Both run `models.engines.sampling.sample` unchanged: the same numerics, the same RNG draws.
    """

    def __init__(self, name: str, model: Any, tokenizer: Any) -> None:
        if name not in ("loop", "hf"):
            raise ValueError(f"an in-process engine is 'loop' or 'hf', not {name!r}")
        self.name, self.model, self.tokenizer = name, model, tokenizer
        self.closed = False

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams, *, n: int
    ) -> list[Completion]:
        if self.closed:
            raise RuntimeError(f"the {self.name!r} rollout engine was closed")
        if n < 1:
            raise ValueError(f"n (completions per prompt) must be >= 1, got {n}")
        # The engine, not the parameters, chooses the decoder: sampling.engine was resolved once.
        return sample(
            self.model, self.tokenizer, prompt_ids, replace(params, engine=self.name), n=n
        )

    def sync_weights(self, model: Any) -> None:
        # The weights are the module's own parameters: nothing to copy, only the module to use.
        self.model = model

    def close(self) -> None:
        self.closed = True


class EngineFailure(RuntimeError):
    """The engine itself failed (its process died, or it stopped answering), not the request:
    a restarted engine can serve the same request."""


class SupervisableEngine(RolloutEngine, Protocol):
    """An engine that holds its own copy of the policy, which a supervisor can check and kill."""

    def alive(self) -> bool:
        """False once the engine can no longer answer (its process exited); cheap, no I/O."""
        ...

    def kill(self) -> None:
        """Stop the engine at once, even mid-call, and free it: a call blocked on it returns
        (with an error) or is abandoned; the engine is unusable after."""
        ...


_T = TypeVar("_T")


class SupervisedEngine:
    """An engine with its own copy of the policy (vLLM, or one in a process of its own),
    restarted when it dies or hangs.

    Every call runs in a watcher thread while this one checks the engine's health every
    `poll_s` seconds: a dead engine (its process exited, killed or crashed) is seen within
    `poll_s`, a hung one (alive but with no answer in `timeout_s`) at the deadline. Either way
    it is killed, a new engine is started from the policy the trainer last pushed (the current
    weights, so no rollout comes from a stale policy), and the call is repeated with the same
    draws from torch's generator: the retried rollouts are the ones the fault-free call would
    have sampled, never scored 0 or dropped. A call that fails `restarts` + 1 times in a row
    raises, with what to look at.

    `timeout_s` bounds one whole call, not one token, so it must exceed the slowest healthy
    `generate` (the default allows 10 minutes). The in-process engines ("loop", "hf") are not
    supervised: they generate with the trainer's own module in the trainer's process, where a
    crash is the trainer's and a restart could not help.
    """

    def __init__(self, start: Callable[[Any], SupervisableEngine], model: Any, *,
                 timeout_s: float = 600.0, restarts: int = 2, poll_s: float = 0.5,
                 log: Callable[[str], None] | None = None) -> None:  # fmt: skip
        if timeout_s <= 0 or poll_s <= 0 or restarts < 0:
            raise ValueError(
                f"engine supervision needs timeout_s > 0, poll_s > 0 and restarts >= 0; got "
                f"timeout_s={timeout_s}, poll_s={poll_s}, restarts={restarts}"
            )
        self.start, self.model = start, model
        self.timeout_s, self.max_restarts, self.poll_s = timeout_s, restarts, poll_s
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.engine = start(model)
        self.name = self.engine.name
        self.restarts = 0  # over the engine's life, for the run's log

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams, *, n: int
    ) -> list[Completion]:
        rng = torch.random.get_rng_state()  # a retry draws the same per-request seeds
        for attempt in range(self.max_restarts + 1):
            if attempt:
                torch.random.set_rng_state(rng)
            try:
                return self._watch(
                    "generate", lambda: self.engine.generate(prompt_ids, params, n=n)
                )
            except EngineFailure as failure:
                self._restart(failure, attempt, f"retrying its {len(prompt_ids)} prompts")
        raise AssertionError("unreachable: the last failed attempt raised")

    def sync_weights(self, model: Any) -> None:
        self.model = model  # what a restarted engine starts from, from now on
        try:
            self._watch("sync_weights", lambda: self.engine.sync_weights(model))
        except EngineFailure as failure:  # the new engine loads `model`: the push is done
            self._restart(failure, 0, "it starts from the pushed weights")

    def close(self) -> None:
        self.engine.close()

    def _watch(self, what: str, call: Callable[[], _T]) -> _T:
        """`call()`'s result; EngineFailure if the engine dies or does not answer in time."""
        if not self.engine.alive():  # the health check: dead since the last call
            raise EngineFailure(f"the engine was dead before {what}")
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["result"] = call()
            except BaseException as exc:  # noqa: BLE001 -- handed to the caller's thread
                box["error"] = exc

        # a daemon thread: one blocked on a hung engine must not keep the process alive
        thread = threading.Thread(target=run, name=f"execrl-{self.name}-{what}", daemon=True)
        deadline = time.monotonic() + self.timeout_s
        thread.start()
        while thread.is_alive():
            thread.join(self.poll_s)
            if not thread.is_alive():
                break
            if not self.engine.alive():
                raise EngineFailure(f"the engine process died during {what}")
            if time.monotonic() > deadline:
                raise EngineFailure(f"{what} had no answer in {self.timeout_s:g} s (hung)")
        if "error" in box:
            if not self.engine.alive():  # its death surfaced as the call's error
                raise EngineFailure(f"the engine died during {what}: {box['error']!r}")
            raise box["error"]
        return box["result"]

    def _restart(self, failure: EngineFailure, attempt: int, then: str) -> None:
        if attempt >= self.max_restarts:
            self.engine.kill()
            raise RuntimeError(
                f"the {self.name!r} rollout engine failed {attempt + 1} times in a row, the "
                f"last time: {failure}. Look at the engine's own log above (out of memory? "
                f"on a CPU, lower VLLM_CPU_KVCACHE_SPACE or sampling.max_new_tokens), then "
                f"resume the run from its last checkpoint (execrl train --resume RUN_DIR)"
            ) from failure
        start = time.perf_counter()
        self.engine.kill()
        self.engine = self.start(self.model)
        self.restarts += 1
        self.log(
            f"execrl: the {self.name!r} rollout engine failed ({failure}); restarted with "
            f"the current weights in {time.perf_counter() - start:.1f} s, {then} "
            f"(restart {self.restarts}; {self.max_restarts - attempt - 1} more for this call)"
        )
