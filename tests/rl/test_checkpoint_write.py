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
