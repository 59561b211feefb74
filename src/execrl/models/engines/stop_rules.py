"""Stop rules: end a row early once what it would still write cannot change what is scored.

Greedy answers of small models often loop to the token budget (SmolLM2-135M-Instruct: 17 of 164
HumanEval answers, issue 27), and a batch waits for its longest row. Two rules, set in
`SamplingParams`, checked after every token by every engine (execrl's decode loop and Hugging
Face `generate`; vLLM has no per-token hook for them, so its completions are cut at the same
token afterwards: the same completions, without the time saved):

- `code_end`: a row whose prompt shows a ``` fence (it asks for a fenced answer) ends at the line
  that closes its first complete fenced block in the call's task language (`code_language`: a
  block tagged as `tasks.languages.fence_tags` says, or untagged), outside reasoning blocks. The
  closing fence is kept, so the block is complete and `rewards.leaves.extract` finds it; what the
  model would have written after it (prose, usage examples, a second answer the prompt did not ask
  for) is not scored. Finish reason "code_end".
- `repeat_ngram` = n > 0: a row ends once its last n tokens have appeared `REPEAT_COPIES` times:
  it is looping, and a loop runs to the budget. Its text is the loop's start; it counts as
  truncated (finish "repeat", `Completion.truncated`), as the row it replaces would have.

What a block is follows `rewards.leaves.extract.fences`: both read its opening and closing lines
with `tasks.languages.FENCE_OPENING` / `FENCE_CLOSING` (the models layer sits below rewards);
tests/models/test_stop_rules.py pins the two together.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from execrl.tasks.languages import FENCE_CLOSING, FENCE_OPENING, fence_tags

REPEAT_COPIES = 4  # an n-gram seen this many times in one row is a loop
_PYTHON_TAGS = fence_tags("python")
_REASONING = re.compile(r"<think>.*?(?:</think>|\Z)", re.S)


def closes_code_block(text: str, tags: frozenset[str] = _PYTHON_TAGS) -> bool:
    """Whether `text`, outside reasoning blocks, holds a complete fenced block tagged with one of
    `tags` (lower case; "" is untagged) whose closing line has ended (a newline follows it)."""
    # reasoning blocks blanked as `rewards.leaves.extract.blank_reasoning` does (an unclosed one
    # runs to the end): a block there is not the answer
    text = _REASONING.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    opening: str | None = None
    for line in text.split("\n")[:-1]:  # whole lines only
        if opening is None:
            match = FENCE_OPENING.match(line)
            opening = None if match is None else match.group(1)
        elif FENCE_CLOSING.fullmatch(line):
            if opening.lower() in tags:
                return True
            opening = None
    return False


class RowStops:
    """The stop rules of one batch of rows: `check(row, generated ids)` after each token."""

    def __init__(self, tokenizer: Any, prompts: Sequence[Sequence[int]], code_end: bool,
                 repeat_ngram: int, code_language: str = "python") -> None:  # fmt: skip
        self.tokenizer, self.n = tokenizer, repeat_ngram
        self.tags = fence_tags(code_language)
        asked = [code_end and "```" in tokenizer.decode(list(p)) for p in prompts]
        self.code_end = asked
        self.fence_ids = _fence_ids(tokenizer) if any(asked) else frozenset()
        self.seen = [0] * len(prompts)  # generated tokens already counted, per row
        self.counts: list[dict[tuple[int, ...], int]] = [{} for _ in prompts]

    @classmethod
    def of(cls, tokenizer: Any, prompts: Sequence[Sequence[int]], code_end: bool,
           repeat_ngram: int, code_language: str = "python") -> RowStops | None:  # fmt: skip
        """The rules for these rows, or None when none can fire (nothing to check)."""
        rules = cls(tokenizer, prompts, code_end, repeat_ngram, code_language)
        return rules if any(rules.code_end) or repeat_ngram > 0 else None

    def check(self, row: int, ids: Any) -> str | None:
        """The finish reason ("repeat", "code_end") when row `row` must end after `ids` (its
        generated token ids so far, a list or a 1-d tensor)."""
        seen, self.seen[row] = self.seen[row], len(ids)
        if self.n and len(ids) >= self.n:
            # the n-grams ending at each token not yet counted (one per call, in a decode)
            tail = _ints(ids[max(0, seen - self.n + 1) :])
            ngrams = [tuple(tail[i : i + self.n]) for i in range(len(tail) - self.n + 1)]
            counted = [self._repeats(row, g) for g in ngrams]  # count each, then decide
            if any(counted):
                return "repeat"
        if self.code_end[row] and any(t in self.fence_ids for t in _ints(ids[-2:])):
            # a closing fence is typed, then its newline (often one token, "```\n")
            text = self.tokenizer.decode(_ints(ids), skip_special_tokens=True)
            if closes_code_block(text, self.tags):
                return "code_end"
        return None

    def _repeats(self, row: int, ngram: tuple[int, ...]) -> bool:
        count = self.counts[row].get(ngram, 0) + 1
        self.counts[row][ngram] = count
        return count >= REPEAT_COPIES


def _ints(ids: Any) -> list[int]:
    return ids.tolist() if hasattr(ids, "tolist") else list(ids)


@lru_cache(maxsize=8)
def _fence_ids_cached(tokenizer: Any) -> frozenset[int]:
    return frozenset(i for token, i in tokenizer.get_vocab().items() if "`" in token)


def _fence_ids(tokenizer: Any) -> frozenset[int]:
    """The ids of tokens that write a backtick (byte-level BPE keeps "`" as it is)."""
    try:
        return _fence_ids_cached(tokenizer)
    except TypeError:  # an unhashable tokenizer: compute it each time
        return _fence_ids_cached.__wrapped__(tokenizer)
