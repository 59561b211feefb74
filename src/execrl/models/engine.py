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

Seeding: the in-process engines draw from torch's global generator, so a caller that seeds it
(`torch.manual_seed`, as `rl.rollout` does per chunk) gets the same completions as calling
`models.sampling.sample` directly; an engine with its own sampler derives its per-request seeds
from the same generator, so seeded runs stay reproducible on one machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from execrl.models.sampling import Completion, SamplingParams, sample

ENGINES = ("loop", "hf", "vllm")


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

    Both run `models.sampling.sample` unchanged: the same numerics, the same RNG draws.
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


def make_engine(name: str, model: Any, tokenizer: Any, **options: Any) -> RolloutEngine:
    """The engine `sampling.engine` names, generating with `model` (a HF causal LM) and
    `tokenizer`. `options` go to engines that take them (vLLM: `models.vllm_engine`)."""
    if name in ("loop", "hf"):
        if options:
            raise ValueError(
                f"sampling.engine = {name!r} takes no engine options, got {', '.join(options)}"
            )
        return InProcessEngine(name, model, tokenizer)
    if name == "vllm":
        from execrl.models.vllm_engine import VLLMEngine

        return VLLMEngine(model, tokenizer, **options)
    raise ValueError(f"sampling.engine = {name!r}; choose one of {', '.join(ENGINES)}")
