"""Batched sampling from a policy, recording the behaviour log-probabilities of every token.

Two engines. "loop" (the default) is execrl's own KV-cache loop (`models.engines.decode`, with the
lean Llama/Qwen2 forward where it applies). "hf" runs `model.generate` (any HF causal LM and its
cache) with two small hooks: one records log pi(token) from the raw logits divided by the
temperature, before top-p, so the number matches what the trainer recomputes
(`rl.objective.logprobs`); the other ends a row at eos, at a stop sequence or by a stop rule
(`models.engines.stop_rules`: the end of the fenced code block the prompt asked for, a repetition
loop) and remembers where, so the kept tokens are exact. The loop records the same numbers and
applies the same rules itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from execrl.models.engines.stop_rules import RowStops
from execrl.models.prompting.chat import format_prompt, uses_chat_template


def out_of_range(
    *, temperature: float | None = None, top_p: float | None = None
) -> tuple[str, float, str] | None:
    """The first of the given sampler numbers that sampling cannot use, as (name, value, rule),
    or None. The one home of these ranges: the train config and `execrl eval` ask it before any
    model loads, and SamplingParams on construction."""
    if temperature is not None and not temperature >= 0:  # NaN too
        return "temperature", temperature, "it must be at least 0 (0: greedy)"
    if top_p is not None and not 0 < top_p <= 1:  # NaN too
        return "top_p", top_p, "it must be in (0, 1]"
    return None


@dataclass(frozen=True, slots=True)
class SamplingParams:
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    max_new_tokens: int = 128  # the token budget of one completion
    stop: tuple[str, ...] = ()  # a completion ends at the first of these (kept out of its text)
    batch_size: int = 64  # sequences per generate call, to bound memory
    # "loop": execrl's KV-cache loop (`models.engines.decode`), several times less overhead per
    # token on small models; "hf": `model.generate`, for models whose cache the loop does not drive
    engine: str = "loop"
    # Stop rules (`models.engines.stop_rules`): end a row at the line closing its first fenced block
    # in `code_language` (the call's tasks' language; untagged blocks too) when its prompt shows a
    # ``` fence (for one-turn code answers: an agent's or an episode's turn may go on after a
    # block); end a row whose last repeat_ngram tokens appeared REPEAT_COPIES times (a loop; 0
    # turns it off)
    code_end: bool = False
    repeat_ngram: int = 0
    code_language: str = "python"

    def __post_init__(self) -> None:
        problem = out_of_range(temperature=self.temperature, top_p=self.top_p)
        if problem:
            name, value, rule = problem
            raise ValueError(f"sampling.{name} = {value}; {rule}")
        if self.max_new_tokens < 1:
            raise ValueError(f"sampling.max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.repeat_ngram < 0:
            raise ValueError(
                f"sampling.repeat_ngram must be >= 0 (0: off), got {self.repeat_ngram}"
            )
        if self.engine not in ("loop", "hf"):
            raise ValueError(f"sampling.engine must be 'loop' or 'hf', got {self.engine!r}")


TRUNCATED = ("length", "repeat")  # finishes of a row that ran (or would have run) to the budget


@dataclass(frozen=True, slots=True)
class Completion:
    """One sampled completion of one prompt."""

    prompt_index: int  # index of its prompt in the list given to `sample`
    text: str  # decoded generated text, cut before the stop sequence
    prompt_ids: torch.Tensor  # (P,) long: the prompt tokens, unpadded
    token_ids: torch.Tensor  # (T,) long: generated tokens, through eos or the stop sequence
    logprobs: torch.Tensor  # (T,) float32: behaviour log pi(token_t | prefix) at the temperature
    # "eos", "stop", "length" (the token budget ran out), or a stop rule's: "code_end" (its
    # fenced block closed), "repeat" (a loop, cut short of the budget it would have run to)
    finish: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def truncated(self) -> bool:
        return self.finish in TRUNCATED

    @property
    def n_tokens(self) -> int:
        return int(self.token_ids.numel())


def encode_prompts(
    tokenizer: Any, prompts: Sequence[str], *, chat: bool | None = None, reply_prefix: str = ""
) -> list[list[int]]:
    """Prompt token ids, after the chat template when one applies (it adds its own bos);
    `reply_prefix` begins the model's reply (chat only)."""
    templated = uses_chat_template(tokenizer, chat)
    return [
        tokenizer(
            format_prompt(tokenizer, p, chat=chat, reply_prefix=reply_prefix),
            add_special_tokens=not templated,
        )["input_ids"]
        for p in prompts
    ]


@torch.no_grad()
def sample(
    model: Any,
    tokenizer: Any,
    prompt_ids: Sequence[Sequence[int]],
    params: SamplingParams,
    *,
    n: int = 1,
) -> list[Completion]:
    """n completions per prompt, prompt-major: prompt i owns results [i*n, (i+1)*n)."""
    rows = [i for i in range(len(prompt_ids)) for _ in range(n)]
    was_training = model.training
    model.eval()
    try:
        out: list[Completion] = []
        for start in range(0, len(rows), params.batch_size):
            chunk = rows[start : start + params.batch_size]
            out.extend(
                _sample_chunk(model, tokenizer, [prompt_ids[i] for i in chunk], chunk, params)
            )
        return out
    finally:
        model.train(was_training)


def _sample_chunk(model, tokenizer, prompts, indices, params: SamplingParams) -> list[Completion]:
    device = next(model.parameters()).device
    width = max(len(p) for p in prompts)
    input_ids = torch.full((len(prompts), width), tokenizer.pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)  # both (B, P), left-padded
    for row, p in enumerate(prompts):
        input_ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        attention[row, width - len(p) :] = 1
    engine = _decode_loop if params.engine == "loop" else _generate
    rules = RowStops.of(
        tokenizer, prompts, params.code_end, params.repeat_ngram, params.code_language
    )
    generated, logprobs, ends = engine(
        model, tokenizer, input_ids.to(device), attention.to(device), params, rules
    )
    results = []
    for row, index in enumerate(indices):
        length, how = ends[row]
        tokens = generated[row, :length].clone()
        text = tokenizer.decode(tokens, skip_special_tokens=True)
        if how == "stop":
            text = _cut_at_stop(text, params.stop)
        results.append(
            Completion(
                prompt_index=index,
                text=text,
                prompt_ids=torch.tensor(prompts[row], dtype=torch.long),
                token_ids=tokens,
                logprobs=logprobs[row, :length].clone(),
                finish=how,
            )
        )
    return results


# Each engine: (generated (B, T) long, behaviour logprobs (B, T), per row (kept length, how)).


def _decode_loop(model, tokenizer, input_ids, attention, params: SamplingParams, rules):
    from execrl.models.engines.decode import decode

    def stop_hit(row: int, ids: torch.Tensor) -> str | None:
        return _ended(tokenizer, row, ids, params.stop, rules)

    return decode(
        model,
        input_ids,
        attention,
        temperature=params.temperature,
        top_p=params.top_p,
        max_new_tokens=params.max_new_tokens,
        eos_ids=_eos_ids(model, tokenizer),
        pad_id=tokenizer.pad_token_id,
        stop_hit=stop_hit if params.stop or rules is not None else None,
    )


def _generate(model, tokenizer, input_ids, attention, params: SamplingParams, rules):
    from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

    width = input_ids.shape[1]
    eos_ids = _eos_ids(model, tokenizer)
    recorder = _BehaviourLogprobs(params.temperature)
    finish = _Finish(width, eos_ids, params.stop, tokenizer, rules)
    greedy = params.temperature == 0
    config = GenerationConfig(
        do_sample=not greedy,
        temperature=None if greedy else params.temperature,
        top_p=None if greedy else params.top_p,
        top_k=None,
        max_new_tokens=params.max_new_tokens,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=eos_ids,
        bos_token_id=None,
    )
    sequences = model.generate(
        input_ids=input_ids,
        attention_mask=attention,
        generation_config=config,
        logits_processor=LogitsProcessorList([recorder]),
        stopping_criteria=StoppingCriteriaList([finish]),
    ).cpu()  # (B, P + T_max)
    generated = sequences[:, width:]  # (B, T_max)
    ends = [finish.result(row, generated.shape[1]) for row in range(generated.shape[0])]
    return generated, recorder.finish(sequences), ends


def _has_stop(tokenizer, ids: torch.Tensor, stop: Sequence[str]) -> bool:
    text = tokenizer.decode(ids, skip_special_tokens=True)
    return any(s in text for s in stop)


def _ended(tokenizer, row: int, ids: torch.Tensor, stop: Sequence[str],
           rules: RowStops | None) -> str | None:  # fmt: skip
    """Why row `row` ends after its generated `ids`: "stop" (a stop sequence), a stop rule's
    reason, or None; both engines ask after every token."""
    if stop and _has_stop(tokenizer, ids, stop):
        return "stop"
    return None if rules is None else rules.check(row, ids)


def _eos_ids(model, tokenizer) -> list[int]:
    ids = {tokenizer.eos_token_id}
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(configured)
    return sorted(i for i in ids if i is not None)


def _cut_at_stop(text: str, stop: Sequence[str]) -> str:
    cuts = [text.find(s) for s in stop if s in text]
    return text[: min(cuts)] if cuts else text


class _BehaviourLogprobs:
    """A logits processor placed before HF's temperature/top-p warpers: sees the raw logits."""

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature if temperature > 0 else 1.0
        self.previous: torch.Tensor | None = None  # (B, V) log-probs of the last step
        self.taken: list[torch.Tensor] = []  # each (B,)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.previous is not None:
            self._take(input_ids[:, -1])
        self.previous = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def _take(self, tokens: torch.Tensor) -> None:
        self.taken.append(
            self.previous.gather(1, tokens.view(-1, 1).to(self.previous.device))[:, 0].cpu()
        )

    def finish(self, sequences: torch.Tensor) -> torch.Tensor:
        if self.previous is not None:
            self._take(sequences[:, -1])
            self.previous = None
        if not self.taken:
            return torch.zeros((sequences.shape[0], 0))
        return torch.stack(self.taken, dim=1)  # (B, T_max)


class _Finish:
    """A stopping criterion that ends rows at eos or a stop sequence and records the length."""

    def __init__(self, prompt_width: int, eos_ids: list[int], stop: Sequence[str], tokenizer,
                 rules: RowStops | None) -> None:  # fmt: skip
        self.prompt_width = prompt_width
        self.eos = torch.tensor(eos_ids, dtype=torch.long)
        self.stop = tuple(stop)
        self.tokenizer, self.rules = tokenizer, rules
        self.ends: dict[int, tuple[int, str]] = {}  # row -> (kept length, how)

    def __call__(
        self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any
    ) -> torch.Tensor:
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        length = input_ids.shape[1] - self.prompt_width
        last = input_ids[:, -1].cpu()
        for row in range(input_ids.shape[0]):
            if row in self.ends:
                done[row] = True
                continue
            if bool(torch.isin(last[row], self.eos)):
                self.ends[row] = (length, "eos")
            else:
                ids = input_ids[row, self.prompt_width :]
                reason = _ended(self.tokenizer, row, ids, self.stop, self.rules)
                if reason is not None:
                    self.ends[row] = (length, reason)
            done[row] = row in self.ends
        return done

    def result(self, row: int, generated: int) -> tuple[int, str]:
        return self.ends.get(row, (generated, "length"))
