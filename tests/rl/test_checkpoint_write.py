"""A checkpoint that cannot be written (a full disk) says where and what to do, leaves no half
file behind to keep the disk full, and leaves the previous checkpoint as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from execrl.rl import checkpoint


def _fail_half_way(state: object, path: Path) -> None:
    Path(path).write_bytes(b"half a checkpoint")
    raise RuntimeError(
        "[enforce fail at inline_container.cc:672] . unexpected pos 136128 vs 136016"
    )


def test_a_checkpoint_that_cannot_be_written_names_its_file_and_removes_the_half_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "checkpoint"
    checkpoint._write(directory, {"step": 3})
    monkeypatch.setattr(checkpoint.torch, "save", _fail_half_way)
    with pytest.raises(OSError) as raised:
        checkpoint._write(directory, {"step": 4})
    message = str(raised.value)
    assert str(directory / "state.pt") in message
    assert "MiB free" in message and "run.out_dir" in message
    assert not (directory / "state.pt.tmp").exists()
    monkeypatch.undo()
    assert torch.load(directory / "state.pt")["step"] == 3


def test_every_checkpoint_file_is_written_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`execrl train`'s prefetched rollouts and `execrl sft`'s state go the same way."""
    from execrl.rl.prefetch import save_prefetched
    from execrl.rl.sft.checkpoint import save_checkpoint

    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    monkeypatch.setattr(checkpoint.torch, "save", _fail_half_way)
    for save in (
        lambda: save_prefetched(tmp_path, 2, []),
        lambda: save_checkpoint(tmp_path, 2, model, optimizer, scheduler),
    ):
        with pytest.raises(OSError, match="MiB free"):
            save()
        assert not list((tmp_path / "checkpoint").glob("*.tmp"))


def test_a_model_directory_that_cannot_be_written_leaves_the_one_before(tmp_path: Path) -> None:
    """final/ is written whole or not at all: a failed write (a full disk) removes its half and
    names the directory; a final/ already there stays as it was."""
    final = tmp_path / "final"

    def good(directory: Path) -> None:
        directory.mkdir()
        (directory / "model.safetensors").write_bytes(b"trained")

    def full_disk(directory: Path) -> None:
        directory.mkdir()
        (directory / "model.safetensors").write_bytes(b"half")
        raise OSError(28, "No space left on device")

    checkpoint.save_model_dir(final, good)
    with pytest.raises(checkpoint.Unwritable, match="MiB free") as raised:
        checkpoint.save_model_dir(final, full_disk)
    assert str(final) in str(raised.value)
    assert (final / "model.safetensors").read_bytes() == b"trained"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final"]
    checkpoint.save_model_dir(final, lambda d: d.mkdir())  # a new one replaces it whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final"] and not any(final.iterdir())


@pytest.mark.parametrize("command", ["train", "sft"])
def test_a_full_disk_at_the_last_checkpoint_still_leaves_the_trained_model(
    command: str,
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The last checkpoint (policy and Adam's state: three times the model) is saved before
    final/; when the disk fills there, final/ is still written, and the command then fails
    with the checkpoint's error, not a traceback."""
    import json

    from execrl.cli import main

    common = [f"model.path={str(tiny_model_dir)!r}", f"run.out_dir={str(tmp_path)!r}",
              "run.name='r'", "run.trackers='none'"]  # fmt: skip
    if command == "train":
        extra = ["run.steps=1", "data.n_train=4", "data.n_heldout=0", "rl.group_size=2",
                 "rl.groups_per_step=2", "sampling.max_new_tokens=4", "sandbox.workers=1"]  # fmt: skip
    else:
        pairs = tmp_path / "pairs.jsonl"
        pairs.write_text(json.dumps({"prompt": "def f():\n", "completion": "    return 1\n"}))
        extra = [f"data.train={str(pairs)!r}", "run.steps=1", "run.batch_size=1"]
    monkeypatch.setattr(checkpoint.torch, "save", _fail_half_way)  # the last save, the only one
    argv = [command, *sum((["--set", s] for s in common + extra), [])]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert f"{tmp_path / 'r' / 'checkpoint' / 'state.pt'}: the checkpoint could not" in error
    assert "Traceback" not in error
    final = tmp_path / "r" / "final"
    assert (final / "model.safetensors").is_file() and (final / "tokenizer.json").is_file()
    assert (tmp_path / "r" / "summary.json").is_file()
    assert not list((tmp_path / "r").rglob("*.tmp"))
