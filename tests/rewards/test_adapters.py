"""Adapters: verl's compute_score (without verl) and TRL's GRPOTrainer for one step on CPU."""

from __future__ import annotations

import inspect
import time

import pytest

from execrl.rewards import RewardConfig, RewardScorer
from execrl.rewards.adapters import verl_adapter
from execrl.rewards.adapters.ground_truth import task_from_json, task_to_json
from execrl.rewards.adapters.trl_adapter import TRLReward, completion_text
from execrl.tasks import CallTests, Task

from .conftest import TASK

GOOD = "```python\ndef f(x):\n    return x + 1\n```"
BAD = "```python\ndef f(x):\n    return x\n```"


def test_ground_truth_round_trip():
    call = Task("c", "p", CallTests(inputs=(((1, 2),), ({3},)), expected=((1, 2), b"x")), "f")
    for task in (TASK, call):
        back = task_from_json(task_to_json(task))
        assert back.tests == task.tests and back.entry_point == task.entry_point
    with pytest.raises(ValueError, match="not an execrl task"):
        task_from_json("{}")


def test_verl_signature_and_results():
    params = list(inspect.signature(verl_adapter.compute_score).parameters)
    assert params[:4] == ["data_source", "solution_str", "ground_truth", "extra_info"]
    gt = task_to_json(TASK)
    try:
        good = verl_adapter.compute_score("execrl/inc", GOOD, gt, {"index": 0})
        assert good["score"] == 1.0 and good["masked"] is False and good["component/pass"] == 1.0
        assert verl_adapter.compute_score("execrl/inc", BAD, gt)["score"] == 0.0
        # verl's batch reward manager passes lists
        batch = verl_adapter.compute_score(["a", "a"], [GOOD, "no code"], [gt, gt], [{}, {}])
        assert [b["score"] for b in batch] == [1.0, 0.0] and batch[1]["flag/no_code"] == 1.0
    finally:
        verl_adapter.close_all()


def test_trl_reward_function_contract(sandbox):
    reward = TRLReward(tasks={"inc": TASK}, scorer=RewardScorer(RewardConfig(), sandbox=sandbox))
    logged = {}
    out = reward(
        prompts=["p", "p"],
        completions=[GOOD, [{"role": "assistant", "content": BAD}]],
        completion_ids=[[1, 2], [3]],
        task_id=["inc", "inc"],
        log_metric=lambda k, v: logged.__setitem__(k, v),
    )
    assert out == [1.0, 0.0] and logged["execrl/flag/tampering"] == 0.0
    by_json = TRLReward(scorer=reward.scorer)(["p"], [GOOD], ground_truth=[task_to_json(TASK)])
    assert by_json == [1.0]
    with pytest.raises(KeyError, match="needs a 'task_id' column"):
        TRLReward(scorer=reward.scorer)(["p"], [GOOD])
    assert completion_text([{"role": "assistant", "content": "x"}]) == "x"


def tiny_model(path):
    """A random 1-layer Llama and a byte-level BPE tokenizer trained here: nothing downloaded."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    corpus = ["def f(x):\n    return x + 1\n", "```python\n", "Write f(x) returning x + 1."]
    bpe.train_from_iterator(corpus * 10, vocab_size=300, special_tokens=["<eos>", "<pad>"])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<eos>", pad_token="<pad>")
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    tok.save_pretrained(path)
    return tok


@pytest.mark.slow
def test_trl_grpo_one_step_on_cpu(tmp_path, sandbox):
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model_dir = tmp_path / "model"
    tok = tiny_model(model_dir)
    dataset = Dataset.from_dict({"prompt": [TASK.prompt] * 2, "task_id": ["inc"] * 2})
    reward = TRLReward(tasks={"inc": TASK}, scorer=RewardScorer(RewardConfig(), sandbox=sandbox))
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        max_steps=1,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        processing_class=tok,
    )
    t0 = time.perf_counter()
    trainer.train()
    assert trainer.state.global_step == 1
    logs = {k: v for entry in trainer.state.log_history for k, v in entry.items()}
    # a random model writes no code: every completion is NO_CODE, binary pass 0.0
    assert logs["rewards/execrl/mean"] == 0.0
    assert "execrl/flag/no_code" in logs and logs["execrl/masked"] == 0.0
    assert len(reward.last_results) == 2 and all(r.score == 0.0 for r in reward.last_results)
    assert time.perf_counter() - t0 < 120
