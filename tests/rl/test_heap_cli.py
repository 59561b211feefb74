"""`execrl train` sets glibc's heap policy once and gives the freed heap back after every step
(`models.heap`), so a long CPU run's resident memory does not creep up step by step."""

from __future__ import annotations

from execrl.cli import main
from execrl.models import heap


def test_train_sets_the_heap_policy_and_trims_after_each_step(tiny_model_dir, tmp_path,
                                                              monkeypatch):  # fmt: skip
    calls: list[str] = []
    policy, release = heap.keep_heap_small, heap.release
    monkeypatch.setattr(heap, "keep_heap_small", lambda: calls.append("policy") or policy())
    monkeypatch.setattr(heap, "release", lambda: calls.append("release") or release())
    small = [f"model.path={str(tiny_model_dir)!r}", "data.n_train=4", "data.heldout=''",
             "run.steps=3", "rl.group_size=2", "rl.groups_per_step=2", "sandbox.workers=1",
             "sampling.max_new_tokens=4", f"run.out_dir={str(tmp_path)!r}",
             "run.trackers=none"]  # fmt: skip
    assert main(["train", *sum((["--set", s] for s in small), [])]) == 0
    assert calls == ["policy", "release", "release", "release"]
