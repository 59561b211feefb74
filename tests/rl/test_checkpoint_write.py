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
    from execrl.cli.sft_command import _save_checkpoint
    from execrl.rl.prefetch import save_prefetched

    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    monkeypatch.setattr(checkpoint.torch, "save", _fail_half_way)
    for save in (
        lambda: save_prefetched(tmp_path, 2, []),
        lambda: _save_checkpoint(tmp_path, 2, model, optimizer, scheduler),
    ):
        with pytest.raises(OSError, match="MiB free"):
            save()
        assert not list((tmp_path / "checkpoint").glob("*.tmp"))
