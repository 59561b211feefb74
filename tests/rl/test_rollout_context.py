"""The context a run's vLLM engine is sized for: the longest prompt plus the new tokens, with
room to spare, not the model's whole context (which sizes vLLM's batches and buffers)."""

from __future__ import annotations

from transformers import AutoTokenizer

from execrl.models.engines.sampling import encode_prompts
from execrl.rl.config.config import load_config
from execrl.rl.setup import rollout_context
from execrl.tasks import CallTests, Task


def _task(i: int, words: int) -> Task:
    return Task(id=f"t{i}", prompt="Write f. " + "please " * words, tests=CallTests(((1,),), (2,)),
                entry_point="f")  # fmt: skip


def test_one_turn_context_is_the_longest_prompt_and_the_new_tokens_with_room(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tasks, heldout = [_task(0, 3), _task(1, 40)], [_task(2, 90)]  # the held-out one is longest
    config = load_config(None, ["sampling.max_new_tokens=100"], this_machine=False)
    longest = max(len(ids) for ids in encode_prompts(tokenizer, [heldout[0].prompt], chat=None))
    got = rollout_context(config, tasks, heldout, tokenizer, None)
    assert got % 256 == 0 and got >= (longest + 100) * 5 // 4 + 256 > got - 256


def test_episodes_are_bounded_by_env_max_tokens_or_not_at_all(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    bounded = load_config(None, ["env.name='self_correct'", "env.max_tokens=900"],
                          this_machine=False)  # fmt: skip
    assert rollout_context(bounded, [_task(0, 3)], [], tokenizer, None) == 900
    growing = load_config(None, ["env.name='self_correct'"], this_machine=False)
    assert rollout_context(growing, [_task(0, 3)], [], tokenizer, None) is None
