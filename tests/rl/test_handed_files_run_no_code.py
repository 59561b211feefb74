"""A file someone hands you never runs code: each checkpoint file `--resume` reads (state.pt of
`execrl train` and `execrl sft`, an asynchronous run's prefetched batches, an FSDP run's
sharded `.metadata`), planted with a pickle that would create a file as it loads, is refused
with one line naming it (exit 2), and the planted code never runs. Each was seen failing
before `rl.files.safe_load`: the payload ran and the resumed run exited 0 (sft: a traceback)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch

from execrl.cli import main


class Planted:
    """Unpickled, it opens (creates) `marker` for writing: code the file names runs."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204 - what pickle calls
        return (open, (str(self.marker), "w"))


@pytest.fixture
def on_default(tiny_default_dir, monkeypatch):
    monkeypatch.setenv("EXECRL_DEFAULT_MODEL_DIR", str(tiny_default_dir))


def sets(*items: str) -> list[str]:
    return sum((["--set", s] for s in items), [])


def train_one_step(tmp_path: Path, *extra: str) -> Path:
    small = ["data.n_train=4", "data.n_heldout=2", "data.heldout_samples=1", "run.steps=1",
             "rl.group_size=2", "rl.groups_per_step=2", "sampling.max_new_tokens=6",
             "sandbox.workers=1", f"run.out_dir={str(tmp_path)!r}", "run.name='r'", *extra]  # fmt: skip
    assert main(["train", *sets(*small)]) == 0
    return tmp_path / "r"


def plant(path: Path, marker: Path) -> bytes:
    """`path` (a torch.save file) with a `Planted` beside what it held; the original bytes."""
    original = path.read_bytes()
    state = torch.load(path, weights_only=True)
    torch.save({**state, "planted": Planted(marker)}, path)
    return original


def refused_in_one_line(err: str, path: Path, command: str = "train") -> None:
    lines = err.strip().splitlines()
    assert lines[-1].startswith(f"execrl {command}: error: {path}: refused"), lines[-1]
    assert "io.open" in lines[-1] or "pickle" in lines[-1] or "metadata" in lines[-1], lines[-1]


def test_train_resume_refuses_a_state_pt_that_would_run_code(on_default, tmp_path, capsys):
    run, marker = train_one_step(tmp_path), tmp_path / "ran"
    state = run / "checkpoint" / "state.pt"
    original = plant(state, marker)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), *sets("run.steps=2")]) == 2
    assert not marker.exists()
    refused_in_one_line(capsys.readouterr().err, state)
    state.write_bytes(original)  # the run as it was saved resumes as before
    assert main(["train", "--resume", str(run), *sets("run.steps=2")]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["steps"] == 2


def test_train_resume_refuses_prefetched_batches_that_would_run_code(on_default, tmp_path, capsys):
    run, marker = train_one_step(tmp_path, "rl.max_staleness=1"), tmp_path / "ran"
    prefetched = run / "checkpoint" / "prefetched-1.pt"
    plant(prefetched, marker)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), *sets("run.steps=2")]) == 2
    assert not marker.exists()
    refused_in_one_line(capsys.readouterr().err, prefetched)


def test_train_resume_refuses_sharded_metadata_that_would_run_code(on_default, tmp_path, capsys):
    run, marker = train_one_step(tmp_path, "dist.strategy='fsdp'"), tmp_path / "ran"
    (metadata_path,) = (run / "checkpoint").glob("shards-*/.metadata")
    metadata = pickle.loads(metadata_path.read_bytes())  # the file this test wrote: trusted
    metadata.planted = Planted(marker)  # unpickled by torch's reader along with the rest
    metadata_path.write_bytes(pickle.dumps(metadata))
    capsys.readouterr()
    assert main(["train", "--resume", str(run), *sets("run.steps=2")]) == 2
    assert not marker.exists()
    refused_in_one_line(capsys.readouterr().err, metadata_path)


def test_sft_resume_refuses_a_state_pt_that_would_run_code(on_default, tmp_path, capsys):
    data = tmp_path / "pairs.jsonl"
    data.write_text(json.dumps({"prompt": "def f():\n", "completion": "    return 1\n"}) + "\n")
    args = sets(f"data.train={str(data)!r}", "model.path='default'", "run.steps=1",
                "run.batch_size=1", f"run.out_dir={str(tmp_path)!r}", "run.name='s'")  # fmt: skip
    assert main(["sft", *args]) == 0
    run, marker = tmp_path / "s", tmp_path / "ran"
    state = run / "checkpoint" / "state.pt"
    plant(state, marker)
    capsys.readouterr()
    assert main(["sft", "--resume", str(run), *sets("run.steps=2")]) == 2
    assert not marker.exists()
    refused_in_one_line(capsys.readouterr().err, state, "sft")


@pytest.mark.parametrize(
    "names",
    [
        '[rl]\nalgorithm = "{mod}:estimator"\n',
        '[env]\nname = "{mod}:Environment"\n',
        '[reward.tree]\ntype = "callable"\ntarget = "{mod}:reward"\n',
    ],
)
def test_a_handed_config_that_names_code_is_refused_before_importing_it(
    tmp_path, monkeypatch, capsys, names
):
    """A run directory's config.toml naming a module:name is refused on --resume, before the
    module is imported (its import would create the marker), unless --trust-code."""
    marker = tmp_path / "imported"
    code = tmp_path / "code"
    code.mkdir()
    mod = f"execrl_planted_{abs(hash(names))}"  # a module imported once per process: its own
    (code / f"{mod}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(code))
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_text(names.format(mod=mod))
    assert main(["train", "--resume", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "names code that resuming would run" in err[0], err
    assert mod in err[0] and "--trust-code" in err[0]
    assert not marker.exists()
    main(["train", "--resume", str(run), "--trust-code"])  # trusted: read as before
    assert marker.exists()
