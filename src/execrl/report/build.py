"""Build (or rebuild) a run's report from its directory: plots and report.html.

Reads metrics.jsonl (required), examples.jsonl, summary.json and config.toml (each optional);
writes `report/reward.png`, `report/pass_rate.png`, `report/kl.png`, `report/verdicts.png` and
`report.html`. Also used by `execrl report RUN_DIR`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.report import examples as ex
from execrl.report import page, plots


@dataclass(frozen=True, slots=True)
class Report:
    html: Path
    plots: tuple[Path, ...]
    steps: int


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """metrics.jsonl rows in step order; a malformed line is an error naming the line."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file; is {path.parent} an execrl run directory?")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from e
        if not isinstance(row, dict) or not isinstance(row.get("step"), int):
            raise ValueError(f"{path}:{n}: a metrics row needs an integer 'step'")
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no steps logged yet; nothing to report")
    return sorted(rows, key=lambda r: r["step"])


def build_report(run_dir: str | Path, n_examples: int = 3) -> Report:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run directory")
    rows = read_metrics(run_dir / "metrics.jsonl")
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    examples_path = run_dir / "examples.jsonl"
    logged = ex.read(examples_path) if examples_path.is_file() else []
    best, worst = ex.best_and_worst(logged, n_examples)
    config_path = run_dir / "config.toml"
    config_text = config_path.read_text() if config_path.is_file() else ""
    drawn = plots.draw_all(rows, run_dir / "report")
    names = [f"report/{p.name}" for p in drawn]
    out = run_dir / "report.html"
    tmp = out.with_suffix(".html.tmp")
    tmp.write_text(page.render(run_dir.name, summary, rows, names, best, worst, config_text))
    tmp.replace(out)
    return Report(out, tuple(drawn), len(rows))
