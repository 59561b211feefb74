"""Errors a person can fix, met through the CLI: one line on stderr that says what to do, exit
status 2, no traceback, and (where it can be) before any model loads or program runs."""

from __future__ import annotations

import argparse
import re

import pytest

from execrl.cli import build_parser, main

THREADS_LINE = re.compile(r"^(execrl \w+: )?threads: torch uses \d+ ")


def _one_line_error(capsys, *argv: str) -> str:
    """Run `execrl ARGV`; it must fail as a user error: status 2, one line on stderr (besides
    the run's first line saying which torch threads it chose, models/threads.py)."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if not THREADS_LINE.match(line)]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


def test_bench_of_an_unknown_benchmark_is_one_line(capsys):
    err = _one_line_error(capsys, "sandbox", "bench", "--benchmark", "nosuch")
    assert "unknown benchmark 'nosuch'; known: humaneval" in err


@pytest.mark.data
def test_a_bench_that_would_run_nothing_is_an_error_not_all_passed(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("EXECRL_DATA_DIR", str(data_dir))
    err = _one_line_error(capsys, "sandbox", "bench", "--benchmark", "codejam", "--json")
    assert "codejam: none of its 511 tasks has a reference solution" in err
    assert capsys.readouterr().out == ""  # no "all_passed": true
    err = _one_line_error(capsys, "sandbox", "bench", "--repeat", "0")
    assert "--repeat must be at least 1" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["train", "--set", "sampling.temperature=-1"], "sampling.temperature = -1.0; it must be"),
        (["train", "--set", "sampling.top_p=2"], "sampling.top_p = 2.0; it must be in (0, 1]"),
        (["eval", "--model", "default", "--temperature", "-1"], "--temperature -1.0: it must"),
        (["eval", "--model", "default", "--top-p", "2"], "--top-p 2.0: it must be in (0, 1]"),
    ],
)
def test_sampling_numbers_out_of_range_are_one_line_before_the_model(capsys, argv, says):
    assert says in _one_line_error(capsys, *argv)


def _with_sft_data(argv: list[str], tmp_path) -> list[str]:
    """`execrl sft` needs an examples file before it looks at the model."""
    if argv[0] != "sft":
        return argv
    examples = tmp_path / "examples.jsonl"
    examples.write_text('{"prompt": "a", "completion": "b"}\n')
    return [*argv, "--set", f"data.train={str(examples)!r}"]


@pytest.mark.parametrize(
    "argv",
    [["train", "--set", "model.device='cuda'"], ["sft", "--set", "model.device='cuda'"],
     ["eval", "--model", "default", "--device", "cuda"]],
)  # fmt: skip
def test_a_gpu_device_without_a_gpu_torch_is_one_line(capsys, monkeypatch, argv, tmp_path):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    err = _one_line_error(capsys, *_with_sft_data(argv, tmp_path))
    assert "'cuda', but this torch cannot use a GPU" in err and "'cpu'" in err


@pytest.mark.parametrize("argv", [["train", "--set", "model.path='nosuch-org/nosuch-model'"],
                                  ["sft", "--set", "model.path='nosuch-org/nosuch-model'"],
                                  ["eval", "--model", "nosuch-org/nosuch-model"]])  # fmt: skip
def test_a_hub_id_offline_says_so_at_once(capsys, monkeypatch, tmp_path, argv):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("EXECRL_DATA_DIR", str(tmp_path))
    eval_tasks = ["--limit", "1", "--benchmark", "synthetic"] if argv[0] == "eval" else []
    err = _one_line_error(capsys, *_with_sft_data(argv, tmp_path), *eval_tasks)
    assert "'nosuch-org/nosuch-model' is a Hugging Face hub id, but this machine is offline" in err
    assert "HF_HUB_OFFLINE is set" in err and "local directory" in err


def test_a_hub_id_in_the_cache_loads_from_it_offline(monkeypatch, tmp_path):
    from huggingface_hub import constants

    from execrl.models.loading.hub import hub_source

    snapshot = tmp_path / "models--org--tiny" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (tmp_path / "models--org--tiny" / "refs").mkdir()
    (tmp_path / "models--org--tiny" / "refs" / "main").write_text("abc")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_source("org/tiny") == ("org/tiny", True)  # local files only: no retries
    with pytest.raises(FileNotFoundError, match="'org/other' is a Hugging Face hub id"):
        hub_source("org/other")


def test_an_unreachable_hub_is_offline_without_retries(monkeypatch):
    from execrl.models.loading.hub import offline_reason

    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(proxy, raising=False)
    why = offline_reason(False, "http://127.0.0.1:9")  # the discard port: nobody listens
    assert why is not None and why.startswith("127.0.0.1:9 cannot be reached")


@pytest.mark.parametrize(
    "argv",
    [["tasks", "validate", "verilog"],
     ["train", "--set", "data.train='verilog'", "--set", "data.heldout='verilog'"]],
)  # fmt: skip
def test_a_missing_toolchain_is_one_line_naming_the_install(capsys, monkeypatch, argv):
    from execrl.sandbox.grading import languages

    monkeypatch.setattr(languages, "missing_tools", lambda name: ["iverilog", "vvp"])
    err = _one_line_error(capsys, *argv)
    assert "language 'verilog' needs iverilog, vvp" in err and "apt-get install iverilog" in err


def test_a_wrong_task_id_names_the_id_form_and_the_nearest_ids(capsys):
    err = _one_line_error(capsys, "tasks", "show", "HumanEval/999")
    assert "its 164 ids run HumanEval/0 ... HumanEval/163; nearest: HumanEval/99" in err
    err = _one_line_error(capsys, "tasks", "show", "humaneval/1")
    assert "did you mean 'HumanEval/1'? ids start with HumanEval/, Mbpp/," in err
    err = _one_line_error(capsys, "tasks", "show", "t99", "--benchmark", "synthetic")
    assert "synthetic: no task 't99'; its 100 ids run synthetic/" in err


def _subcommand(*names: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in names:
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[name]
    return parser


def test_every_sandbox_option_is_described_with_its_default():
    for name in ("bench", "serve"):
        actions = _subcommand("sandbox", name)._actions
        assert [a.option_strings for a in actions if not a.help] == [], name
    bench = {a.dest: a.help for a in _subcommand("sandbox", "bench")._actions}
    assert "(default humaneval)" in bench["benchmark"] and "(default 1)" in bench["repeat"]
    serve = {a.dest: a.help for a in _subcommand("sandbox", "serve")._actions}
    assert "(default EXECRL_SANDBOX_TOKEN;" in serve["token_env"]


def test_a_set_error_is_labelled_by_where_the_value_came_from(capsys, tmp_path):
    """A value --set gave was labelled "defaults:"; a file's value is labelled by the file."""
    err = _one_line_error(capsys, "train", "--set", "sampling.temperature=-1")
    assert err.startswith("execrl train: error: --set: sampling.temperature = -1.0")
    config = tmp_path / "c.toml"
    config.write_text("[sampling]\ntemperature = -1\n")
    err = _one_line_error(capsys, "train", "--config", str(config), "--set", "run.steps=2")
    assert err.startswith(f"execrl train: error: {config} with --set: sampling.temperature")
    err = _one_line_error(capsys, "sft", "--set", "optim.nope=1")
    assert err.startswith("execrl sft: error: --set: unknown key optim.nope")


def test_a_json_error_says_where_on_the_line(capsys, tmp_path):
    """json's message alone ended "... starting at": the position was cut off."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "HumanEval/0", "completion": "x\n')
    err = _one_line_error(capsys, "eval-samples", str(bad), "--benchmark", "humaneval")
    assert err.endswith(f"{bad}:1: not valid JSON: Unterminated string starting at: column 42")


def test_train_and_eval_know_the_same_task_sources(capsys, tmp_path):
    runs = ["--set", f"run.out_dir={str(tmp_path)!r}"]
    train = _one_line_error(capsys, "train", "--set", "data.train='nosuch'", *runs)
    evaluated = _one_line_error(capsys, "eval", "--model", "default", "--benchmark", "nosuch")
    known = train.split("; known: ")[1]
    assert evaluated.split("; known: ")[1] == known
    assert "sql[:opts]" in known and "apps:PATH" in known


def test_tasks_errors_say_error_and_its_list_is_aligned(capsys):
    err = _one_line_error(capsys, "tasks", "show", "--benchmark", "nosuch", "x")
    assert err.startswith("execrl tasks: error: unknown benchmark 'nosuch'")
    assert main(["tasks", "list"]) == 0
    rows = capsys.readouterr().out.split("\n\n")[0].splitlines()
    # the count column ends in one place on every row, the longest name's included
    ends = {re.match(r"\S+\s+\S+", row).end() for row in rows}
    assert len(rows) > 20 and len(ends) == 1 and "primeintellect:PATH" in rows[-1], rows


def test_a_near_miss_of_a_known_model_name_is_suggested(capsys):
    err = _one_line_error(capsys, "eval", "--model", "smollm2-135m")
    assert "did you mean 'smollm2-135m-instruct'?" in err
    far = _one_line_error(capsys, "eval", "--model", "no-such-model-name")
    assert "did you mean" not in far
