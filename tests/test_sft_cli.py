"""`execrl sft` end to end: on the embedded default (a tiny build of it), then `execrl train`
from its final/ directory; resume equal to an uninterrupted run; loss on completion tokens only;
LoRA merged into final/; errors before any model loads."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from execrl.cli import main

PAIRS = [
    {"prompt": f"# return {i}\ndef f():\n", "completion": f"    return {i}\n"} for i in range(8)
]


@pytest.fixture(scope="module")
def default_model(tmp_path_factory):
    """A tiny build of the embedded default, where `model.path = "default"` finds it."""
    from execrl.models.loading.default import DefaultRecipe, build_default_model, synthetic_tasks
    from execrl.models.loading.sft import SFTSettings
    from execrl.models.loading.tiny import TinyLlamaShape

    recipe = DefaultRecipe(
        shape=TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64),
        vocab_size=300, sft=SFTSettings(steps=1, batch_size=4, warmup=1),
    )  # fmt: skip
    cache = tmp_path_factory.mktemp("default")
    return build_default_model(cache, synthetic_tasks(0, 16, 1, "train"), recipe,
                               log=lambda m: None)  # fmt: skip


@pytest.fixture
def on_default(default_model, monkeypatch):
    monkeypatch.setenv("EXECRL_DEFAULT_MODEL_DIR", str(default_model))


def sets(*items: str) -> list[str]:
    return sum((["--set", s] for s in items), [])


def sft_args(tmp_path: Path, name: str, *extra: str) -> list[str]:
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
    return ["sft", *sets(f"data.train={str(data)!r}", "model.path='default'", "run.steps=4",
                         "run.batch_size=4", "optim.lr=0.01", f"run.out_dir={str(tmp_path)!r}",
                         f"run.name={name!r}", *extra)]  # fmt: skip


def weights(model_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(model_dir / "model.safetensors")


def test_sft_then_train_from_its_output(on_default, default_model, tmp_path, capsys):
    assert main(sft_args(tmp_path, "warm")) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    final = Path(summary["final"])
    assert (final / "config.json").is_file() and (final / "tokenizer.json").is_file()
    assert summary["loss_last"] < summary["loss_first"]  # four steps on eight pairs
    before, after = weights(default_model), weights(final)
    assert any(not torch.equal(before[k], after[k]) for k in before)
    rows = [json.loads(x) for x in (tmp_path / "warm" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    small = ["data.n_train=4", "data.n_heldout=2", "data.heldout_samples=1", "run.steps=1",
             "rl.group_size=2", "rl.groups_per_step=2", "sampling.max_new_tokens=8",
             "sandbox.workers=1", f"run.out_dir={str(tmp_path)!r}", "run.name='rl'",
             f"model.path={str(final)!r}"]  # fmt: skip
    assert main(["train", *sets(*small)]) == 0
    trained = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert trained["steps"] == 1


def test_sft_output_is_evaluated_as_its_base_was_prompted(on_default, tmp_path, capsys):
    """final/execrl_eval.json: from the embedded default, the spec `execrl train` saves with
    its defaults (signature prompts: the default continues a `def` line); from a model with a
    spec, that spec; from any other model, none (the benchmark's harness prompts it)."""
    from execrl.rl.config.config import load_config
    from execrl.rl.eval_spec import HeldoutSpec, heldout_spec

    assert main(sft_args(tmp_path, "warm")) == 0
    final = tmp_path / "warm" / "final"
    assert HeldoutSpec.load(final) == heldout_spec(load_config(None, []))
    assert HeldoutSpec.load(final).prompt_format == "signature"
    custom = replace(HeldoutSpec.load(final), limit=3)
    custom.save(final)
    assert main(sft_args(tmp_path, "again", f"model.path={str(final)!r}")) == 0
    assert HeldoutSpec.load(tmp_path / "again" / "final") == custom
    (final / "execrl_eval.json").unlink()
    assert main(sft_args(tmp_path, "plain", f"model.path={str(final)!r}")) == 0
    assert HeldoutSpec.load(tmp_path / "plain" / "final") is None
    capsys.readouterr()


def test_resume_continues_as_an_uninterrupted_run(on_default, tmp_path, capsys):
    assert main(sft_args(tmp_path, "whole")) == 0
    assert main(sft_args(tmp_path, "cut", "run.steps=2")) == 0
    assert main(["sft", "--resume", str(tmp_path / "cut"), *sets("run.steps=4")]) == 0
    capsys.readouterr()
    whole, resumed = weights(tmp_path / "whole" / "final"), weights(tmp_path / "cut" / "final")
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    losses = lambda run: [json.loads(x)["loss"] for x in (tmp_path / run / "metrics.jsonl").open()]  # noqa: E731
    assert losses("cut") == losses("whole")
    assert main(["sft", "--resume", str(tmp_path / "cut"), *sets("optim.lr=1.0")]) == 2
    assert "cannot change optim.lr" in capsys.readouterr().err


def test_micro_batches_take_the_same_step_as_the_whole_batch(on_default, tmp_path, capsys):
    """run.micro_batch_size: rows of different completion lengths go two (or one) at a time,
    each piece's mean weighted by its share of the batch's target tokens: the loss and the
    weights after four steps are the whole batch's (within float summation order)."""
    # completions of 1 to 8 terms: a plain mean of the pieces' means would weigh them wrong
    uneven = tmp_path / "uneven.jsonl"
    uneven.write_text("".join(json.dumps({"prompt": f"# sum {i}\ndef f():\n",
                                          "completion": f"    return {'+'.join(['1'] * (i + 1))}\n"})
                              + "\n" for i in range(8)))  # fmt: skip
    data = f"data.train={str(uneven)!r}"
    assert main(sft_args(tmp_path, "whole", data)) == 0
    assert main(sft_args(tmp_path, "pieces", data, "run.micro_batch_size=1")) == 0
    assert main(sft_args(tmp_path, "uneven", data, "run.micro_batch_size=3")) == 0
    capsys.readouterr()
    whole = weights(tmp_path / "whole" / "final")
    losses = lambda run: [json.loads(x)["loss"] for x in (tmp_path / run / "metrics.jsonl").open()]  # noqa: E731
    for run in ("pieces", "uneven"):
        pieces = weights(tmp_path / run / "final")
        assert all(torch.allclose(whole[k], pieces[k], atol=1e-5) for k in whole)
        assert losses(run) == pytest.approx(losses("whole"), rel=1e-5)
    assert main(sft_args(tmp_path, "bad", "run.micro_batch_size=-1")) == 2
    assert "run.micro_batch_size" in capsys.readouterr().err


def test_loss_is_on_completion_tokens_only():
    """Labels are -100 over the prompt: a batch of one pair, prompt 3 tokens, completion 2."""
    from execrl.models.loading.sft import collate_sft

    batch = collate_sft([([5, 6, 7, 8, 9], 3), ([5, 6], 1)], pad_id=0)
    assert batch["labels"].tolist() == [[-100, -100, -100, 8, 9], [-100, 6, -100, -100, -100]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]


def test_prompt_ids_are_the_context_verbatim(default_model, tmp_path):
    """A pair's `prompt_ids` are its context, not an encoding of its text: a conversation built
    turn by turn (`eval --corrections`) encodes differently than its text in one piece."""
    from execrl.models.loading.loading import load_tokenizer
    from execrl.rl.sft.data import read_pairs, tokenize
    from execrl.tasks.errors import TaskDataError

    tokenizer = load_tokenizer(str(default_model))
    prompt = "def f():\n"
    ids = [tokenizer.encode(ch, add_special_tokens=False)[0] for ch in prompt]  # one per char
    assert ids != tokenizer.encode(prompt, add_special_tokens=False)
    data = tmp_path / "ids.jsonl"
    data.write_text(json.dumps({"prompt": prompt, "prompt_ids": ids, "completion": " 1"}) + "\n")
    examples = tokenize(read_pairs(data, tokenizer), tokenizer, 64)
    completion = tokenizer.encode(" 1", add_special_tokens=False)
    assert examples.tokens == [(ids + completion + [tokenizer.eos_token_id], len(ids))]
    for bad in ([], [len(tokenizer)], ["a"]):
        data.write_text(json.dumps({"prompt": "x", "prompt_ids": bad, "completion": "y"}) + "\n")
        with pytest.raises(TaskDataError, match=r"ids.jsonl:1: 'prompt_ids' must be"):
            read_pairs(data, tokenizer)


def test_lora_sft_final_is_a_merged_model(on_default, tmp_path, capsys):
    lora = ["model.lora_r=4", "model.lora_targets=['q_proj', 'v_proj']"]
    assert main(sft_args(tmp_path, "lora", *lora)) == 0
    final = Path(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["final"])
    assert (final / "config.json").is_file() and not (final / "adapter_config.json").exists()
    assert not any("lora" in k for k in weights(final))


def test_chat_messages_and_bad_examples(on_default, tmp_path, capsys):
    data = tmp_path / "bad.jsonl"
    data.write_text(json.dumps({"prompt": "x"}) + "\n")
    args = ["sft", *sets(f"data.train={str(data)!r}", f"run.out_dir={str(tmp_path)!r}")]
    assert main(args) == 2
    assert "bad.jsonl:1: an SFT example needs string 'prompt' and 'completion'" in (
        capsys.readouterr().err
    )
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x = 1"}]
    data.write_text(json.dumps({"messages": msgs}) + "\n")
    assert main(args) == 2  # the tiny default has no chat template
    assert "bad.jsonl:1: chat messages need a tokenizer with a chat template" in (
        capsys.readouterr().err
    )
    assert main(["sft", *sets("data.train='x.jsonl'", "run.steps=0")]) == 2
    assert "run.steps must be positive" in capsys.readouterr().err


def _tiny_default():
    """A tiny model and tokenizer as the default's build makes them, and its SFT pairs."""
    from execrl.models.loading.default import sft_pairs, synthetic_tasks
    from execrl.models.loading.tiny import TinyLlamaShape, new_llama, train_bpe_tokenizer

    pairs = sft_pairs(synthetic_tasks(0, 8, 1, "train"))
    tokenizer = train_bpe_tokenizer((p + c for p, c in pairs), 300, True)
    shape = TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64)
    return new_llama(tokenizer, shape, seed=0), tokenizer, pairs


def test_execrl_sft_and_the_default_build_run_one_sft_loop(on_default, tmp_path, monkeypatch):
    import execrl.models.loading.sft as sft_module

    callers = []
    real = sft_module.train_steps

    def spy(*args, **kwargs):
        callers.append(len(args[4]))  # the steps it ran
        return real(*args, **kwargs)

    monkeypatch.setattr(sft_module, "train_steps", spy)
    assert main(sft_args(tmp_path, "one-loop")) == 0
    model, tokenizer, pairs = _tiny_default()
    sft_module.sft(model, tokenizer, pairs, sft_module.SFTSettings(steps=2, batch_size=4))
    assert callers == [4, 2]


def test_the_default_build_trains_as_before_its_loop_was_shared():
    """The default's SFT through `train_steps` gives, bit for bit, the weights of the loop it
    ran before (kept here as it was): the quickstart's figures rest on the built model."""
    import random

    from execrl.models.loading.sft import SFTSettings, collate_sft, sft, sft_example

    settings = SFTSettings(steps=3, batch_size=4, warmup=2)
    shared, tokenizer, pairs = _tiny_default()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        new_losses = sft(shared, tokenizer, pairs, settings)
    before, _, _ = _tiny_default()
    examples = [sft_example(tokenizer, p, c) for p, c in pairs]
    rng = random.Random(settings.seed)
    optimizer = torch.optim.AdamW(before.parameters(), lr=settings.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / 2) * max(0.05, 1 - s / settings.steps)
    )
    old_losses = []
    with torch.random.fork_rng():
        torch.manual_seed(0)
        before.train()
        for _ in range(settings.steps):
            batch = collate_sft(rng.sample(examples, 4), tokenizer.pad_token_id)
            out = before(**batch)
            optimizer.zero_grad(set_to_none=True)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(before.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            old_losses.append(out.loss.item())
    assert new_losses == old_losses
    old_weights = dict(before.named_parameters())
    assert all(torch.equal(p, old_weights[n]) for n, p in shared.named_parameters())


def test_sft_says_and_saves_the_torch_threads_it_used(on_default, tmp_path, capsys, monkeypatch):
    """`execrl sft` chooses torch's threads as `execrl train` does (nothing runs beside it: every
    free core) and saves the count, which a resume keeps unless --set model.threads says."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert main(sft_args(tmp_path, "t", "run.steps=1")) == 0
    assert "execrl sft: threads: torch uses 1 (OMP_NUM_THREADS=1)" in capsys.readouterr().err
    assert "threads = 1" in (tmp_path / "t" / "config.toml").read_text()
    assert (
        main(["sft", "--resume", str(tmp_path / "t"), *sets("run.steps=2", "model.threads=2")]) == 0
    )
    assert "torch uses 2 (model.threads = 2)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ("run.nosuch=1", "--set: unknown key run.nosuch; known: steps, batch_size"),
        ("run.batch_size=0", "--set: run.batch_size must be positive, got 0"),
        ("run.steps='x'", "--set: run.steps must be int, got 'x'"),
        ("optim.schedule='sometimes'", "--set: optim.schedule = 'sometimes'; choose from"),
    ],
)
def test_a_bad_config_field_is_named_before_any_model_loads(tmp_path, capsys, setting, says):
    """`rl.sft.config.SFTConfig` through the command: the field and what it takes, exit 2, and
    no model loaded (model.path names none) and no run directory made."""
    data = tmp_path / "pairs.jsonl"
    data.write_text(json.dumps(PAIRS[0]) + "\n")
    argv = ["sft", *sets(f"data.train={str(data)!r}", f"model.path={str(tmp_path / 'none')!r}",
                         f"run.out_dir={str(tmp_path / 'runs')!r}", setting)]  # fmt: skip
    assert main(argv) == 2
    assert f"execrl sft: error: {says}" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
