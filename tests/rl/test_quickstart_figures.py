"""The quickstart's figures, pinned: `execrl train` with the default config (the embedded default,
GRPO on the procedural suite, seed 0), cut to 4 steps, gives the metrics and held-out pass@1
recorded from the code before issue 45's one episode record (one-turn rollouts then had a source
of their own, `OneTurn`, and a record without turns), bit for bit. A restructure of the rollout
path or the update that must change nothing numerically is held to it.

The figures depend on torch's CPU kernels (docs/results/quickstart.md: AVX2 and AVX-512 draw
differently) and version, and on one thread (`model.threads = 1`, as a loaded machine would
choose): elsewhere the test is skipped, saying what it was recorded with. To record them anew,
run the command below on the code before a change and paste the rows:

    execrl train --set model.threads=1 --set run.steps=4 --set run.out_dir="'/tmp/q'"
"""

from __future__ import annotations

import json

import pytest
import torch

from execrl.cli import main

RECORDED_WITH = ("AVX2", "2.13.0+cpu")  # torch's CPU capability and version

KEYS = ("reward_mean", "pass_rate", "len_mean", "groups_drawn", "groups_kept", "loss", "entropy",
        "grad_norm")  # fmt: skip
ROWS = [
    (0.6270833333333333, 0.4444444444444444, 10.902777777777779, 9, 8, 0.0007859371835365891,
     0.15799766086654016, 0.6183931231498718),
    (0.6252480158730159, 0.3472222222222222, 12.75, 9, 8, 0.019383853301405907,
     0.1784881591796875, 1.2313679456710815),
    (0.495703125, 0.3125, 11.6875, 8, 8, 0.011514152400195599, 0.17519231786064923,
     0.7288297414779663),
    (0.5184375, 0.325, 10.8875, 10, 8, 0.020407628268003464, 0.19521426204936432,
     1.484275221824646),
]  # fmt: skip
HELDOUT = {"heldout_pass@1_before": 0.32421875, "heldout_pass@1_after": 0.375}


def _where() -> tuple[str, str]:
    return torch.backends.cpu.get_cpu_capability(), torch.__version__


@pytest.mark.slow
@pytest.mark.skipif(
    _where() != RECORDED_WITH or torch.cuda.is_available(),
    reason=f"the figures were recorded on a CPU with torch's {RECORDED_WITH}; here {_where()}",
)
def test_the_quickstart_gives_its_recorded_figures(tmp_path, monkeypatch):
    monkeypatch.delenv("EXECRL_DEFAULT_MODEL_DIR", raising=False)  # the embedded default itself
    settings = ["model.threads=1", "run.steps=4", f"run.out_dir={str(tmp_path)!r}",
                "run.name='q'"]  # fmt: skip
    assert main(["train", *sum((["--set", s] for s in settings), [])]) == 0
    run = tmp_path / "q"
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [tuple(r[k] for k in KEYS) for r in rows] == ROWS
    assert not any(k.startswith("episode/") for r in rows for k in r)  # one turn: nothing by turn
    summary = json.loads((run / "summary.json").read_text())
    assert {k: summary[k] for k in HELDOUT} == HELDOUT
    assert "heldout_pass@1_by_turn_after" not in summary
