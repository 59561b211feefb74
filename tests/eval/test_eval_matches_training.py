"""`execrl eval --model RUN/final` evaluates a trained checkpoint exactly as its run did."""

import json

import pytest

from execrl.cli import main
from execrl.models.loading.default import DefaultRecipe, build_default_model
from execrl.models.loading.sft import SFTSettings
from execrl.models.loading.tiny import TinyLlamaShape
from execrl.rl.eval_spec import SPEC_FILE, HeldoutSpec
from execrl.tasks import CallTests, Task
from execrl.tasks.jsonl import write_tasks

# Prose requests whose answer is one line. A model fine-tuned on their signature prompts writes
# the body; evaluated with the prose prompt, the body alone is not a program (what a user hit:
# every sample RUNTIME_ERROR or SYNTAX_ERROR, pass@1 0.0 against the run's 0.56).
TASKS = [
    Task(
        id=f"t{k}",
        prompt=f"Write a function times_{k}(x) that returns x times {k}.",
        tests=CallTests(((2,), (5,)), (2 * k, 5 * k)),
        entry_point=f"times_{k}",
        reference=f"def times_{k}(x):\n    return x * {k}\n",
    )
    for k in (2, 3, 4, 5)
]


@pytest.fixture(scope="module")
def sft_model(tmp_path_factory):
    """A tiny model taught (SFT on signature prompts) to answer the four tasks."""
    recipe = DefaultRecipe(
        shape=TinyLlamaShape(hidden=48, layers=2, heads=2, kv_heads=1, intermediate=96),
        vocab_size=300, sft=SFTSettings(steps=120, batch_size=4, lr=1e-2, warmup=5),
    )  # fmt: skip
    return build_default_model(
        tmp_path_factory.mktemp("m") / "model", TASKS * 4, recipe, log=lambda m: None
    )


def test_eval_of_a_trained_checkpoint_gives_the_runs_heldout_pass_at_1(sft_model, tmp_path, capsys):
    tasks_file = tmp_path / "tasks.jsonl"
    write_tasks(tasks_file, TASKS)
    run = ["--set", f"model.path={str(sft_model)!r}", "--set", f"data.train='jsonl:{tasks_file}'",
           "--set", f"data.heldout='jsonl:{tasks_file}'", "--set", "data.heldout_samples=3",
           "--set", "run.steps=1", "--set", "rl.group_size=2", "--set", "rl.groups_per_step=2",
           "--set", "optim.lr=1e-6", "--set", "sampling.max_new_tokens=12",
           "--set", "sampling.groups_per_generate=3", "--set", "sandbox.workers=1",
           "--set", f"run.out_dir={str(tmp_path)!r}", "--set", "run.name='r'",
           "--set", "sampling.engine='hf'"]  # fmt: skip
    assert main(["train", *run]) == 0
    trained = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    final = tmp_path / "r" / "final"
    spec = HeldoutSpec.load(final)
    assert spec is not None and spec.prompt_format == "signature"
    assert spec.samples_per_task == 3 and spec.benchmark == f"jsonl:{tasks_file}"
    assert spec.engine == "hf"  # HF generate draws differently from the loop: eval must use it
    # the model learnt the tasks: a pass@1 of 0 on both sides would prove nothing
    assert trained["heldout_pass@1_after"] > 0

    out = tmp_path / "eval"
    assert main(["eval", "--model", str(final), "--out-dir", str(out), "--workers", "1",
                 "--json"]) == 0  # fmt: skip
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["pass@1"] == pytest.approx(trained["heldout_pass@1_after"], abs=1e-12)
    assert summary["n_tasks"] == 4 and summary["samples_per_task"] == 3
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert all(r["prompt"].startswith("# Write a function") for r in records)
    assert all(r["solution"].startswith(r["prompt"]) for r in records)

    # what the command line gives explicitly replaces the saved value
    assert main(["eval", "--model", str(final), "--out-dir", str(tmp_path / "e2"),
                 "--workers", "1", "-n", "1", "--temperature", "0", "--json"]) == 0  # fmt: skip
    greedy = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert greedy["samples_per_task"] == 1 and greedy["as_trained"]["temperature"] == 0

    # a published protocol asked for by name: the trained model is asked as any model is,
    # before and after training the same way
    assert main(["eval", "--model", str(final), "--out-dir", str(tmp_path / "e3"),
                 "--workers", "1", "--prompt", "evalplus", "--benchmark", f"jsonl:{tasks_file}",
                 "--json"]) == 0  # fmt: skip
    published = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "as_trained" not in published and published["n_tasks"] == 4
    meta = json.loads((tmp_path / "e3" / "samples.meta.json").read_text())
    assert meta["prompt"] == "evalplus" and meta["temperature"] == 0.0


def test_a_damaged_spec_is_an_error_naming_the_file(tmp_path, capsys):
    # read before any model loads: the directory needs nothing else
    model = tmp_path / "m"
    model.mkdir()
    (model / SPEC_FILE).write_text("{not json")
    assert main(["eval", "--model", str(model), "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert SPEC_FILE in err and "delete it" in err


def test_a_run_without_heldout_tasks_asks_for_a_benchmark(tmp_path, capsys):
    from execrl.rl.config.config import load_config
    from execrl.rl.eval_spec import heldout_spec

    model = tmp_path / "final"
    model.mkdir()
    heldout_spec(load_config(None, ["data.heldout=''"])).save(model)
    assert main(["eval", "--model", str(model), "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no held-out tasks" in err and "--benchmark" in err
