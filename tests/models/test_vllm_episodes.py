"""vLLM as the rollout engine of multi-turn episodes: the engine's behaviour log-probabilities
over a whole self-correction trajectory (its feedback turn appended as token ids) equal the
trainer's forward over the same ids, on the policy's tokens. Marked `vllm`."""

import json

from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)
from execrl.tasks import CallTests, Task

from .test_vllm_engine import LetterE, pytestmark  # noqa: F401 - marked vllm, skipped without it

CORPUS = ["def f(x):\n    return x + 1\n", "Feedback: Test: f(1) Expected: 2 returned"] * 10
# long enough for the prompt, two attempts and the feedback between them
SHAPE = TinyLlamaShape(hidden=64, layers=2, heads=2, kv_heads=1, intermediate=128,
                       max_positions=1024)  # fmt: skip


def test_self_correct_episodes_train_through_vllm_with_matching_logprobs(tmp_path):
    from execrl.rl.config.config import load_config
    from execrl.rl.run import train

    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    model_dir = save_pretrained(new_llama(tokenizer, SHAPE, seed=0), tokenizer, tmp_path / "m")
    # the visible test (shown in feedback) differs from the hidden ones: a random model fails
    # it, so every episode takes both turns
    tasks = [Task(id=f"t{i}", prompt=f"Write f {i}:", tests=CallTests(((1,), (5,)), (2, 6)),
                  entry_point="f", visible_tests=CallTests(((3,),), (4,))) for i in range(2)]  # fmt: skip
    config = load_config(None, [
        f"model.path={str(model_dir)!r}", f"run.out_dir={str(tmp_path)!r}", "run.name='ep'",
        "run.steps=2", "data.heldout=''", "rl.group_size=2", "rl.groups_per_step=2",
        "rl.dynamic_sampling=false", "sampling.max_new_tokens=8", "sampling.engine='vllm'",
        "sandbox.workers=1", "optim.lr=0.01", "run.trackers='none'",
        "env.name='self_correct'", "env.max_turns=2", "env.max_tokens=900",
    ])  # fmt: skip
    train(config, tasks=tasks, heldout=[], reward=LetterE(), quiet=True)
    rows = [json.loads(x) for x in (tmp_path / "ep" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["episode/turns_mean"] == 2.0 and row["episode/masked_token_frac"] > 0
    # the engine sampled each policy token from the pushed weights, given the exact ids; a step
    # whose group rewards came out alike has no row to update on, and no gap to log
    updated = [row for row in rows if "engine/logprob_diff_mean" in row]
    assert updated
    for row in updated:
        assert 0 <= row["engine/logprob_diff_mean"] <= row["engine/logprob_diff_max"] < 1e-3
