"""The run report as one self-contained HTML page (plots are PNG files beside it)."""

from __future__ import annotations

import html
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from execrl.report.examples import Example

TABLE_KEYS = (
    "reward_mean", "reward_std", "pass_rate", "sandbox_error_rate", "timeout_rate", "masked_frac",
    "truncated_frac", "hack_flags", "kl", "entropy", "clip_frac", "grad_norm", "len_mean",
    "len_max", "tokens_per_s", "exec_per_s", "exec_latency_p50_s", "exec_latency_p95_s",
    "groups_kept", "groups_drawn", "mem/rss_gib", "mem/peak_rss_gib", "mem/device_peak_gib",
)  # fmt: skip
TIME_KEYS = ("time/generate_s", "time/execute_s", "time/execute_wait_s", "time/update_s")

CSS = """body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}th:first-child,td:first-child{text-align:left}img{max-width:100%}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;white-space:pre-wrap}
.ex{border:1px solid #ddd;margin:1em 0;padding:.5em 1em}
.images{display:flex;gap:1em}figure{margin:0}figcaption{font-size:.8em;color:#555}"""


_CONTROL = {c: f"\\x{c:02x}" for c in range(32) if chr(c) not in "\n\t"} | {127: "\\x7f"}


def _text(value: str) -> str:
    """Escaped for HTML, control characters shown as \\xNN (random models write them)."""
    return html.escape(value.translate(_CONTROL))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return f"{value:.4g}"
    return html.escape(str(value))


def _values(rows: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [
        float(r[key]) for r in rows if isinstance(r.get(key), int | float) and math.isfinite(r[key])
    ]


def metrics_table(rows: Sequence[Mapping[str, Any]]) -> str:
    head = (
        "<tr><th>metric</th><th>first</th><th>last</th><th>mean</th><th>min</th><th>max</th></tr>"
    )
    body = []
    for key in TABLE_KEYS:
        v = _values(rows, key)
        if v:
            cells = (v[0], v[-1], statistics.fmean(v), min(v), max(v))
            body.append(
                f"<tr><td>{key}</td>" + "".join(f"<td>{_fmt(c)}</td>" for c in cells) + "</tr>"
            )
    return f"<table>{head}{''.join(body)}</table>"


def time_table(rows: Sequence[Mapping[str, Any]]) -> str:
    cells = [(k.split("/", 1)[1], sum(_values(rows, k))) for k in TIME_KEYS]
    body = "".join(f"<tr><td>{k}</td><td>{_fmt(v)}</td></tr>" for k, v in cells)
    note = "execute overlaps generate; execute_wait is the part that did not"
    return (
        f"<table><tr><th>time (s, whole run)</th><th>seconds</th></tr>{body}</table><p>{note}</p>"
    )


def verdict_table(rows: Sequence[Mapping[str, Any]]) -> str:
    keys = sorted({k for r in rows for k in r if k.startswith("verdict/")})
    if not keys:
        return "<p>no verdicts logged</p>"
    head = "<tr><th>verdict</th><th>first step</th><th>last step</th><th>mean</th></tr>"
    body = []
    for k in keys:
        v = [float(r.get(k, 0.0)) for r in rows]
        cells = (v[0], v[-1], statistics.fmean(v))
        body.append(
            f"<tr><td>{k.split('/', 1)[1]}</td>"
            + "".join(f"<td>{_fmt(c)}</td>" for c in cells)
            + "</tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def example_block(e: Example) -> str:
    facts = (
        f"step {e.step} · task <code>{html.escape(e.task)}</code> · reward {_fmt(e.score)} · "
        f"{html.escape(e.verdict)} · {e.n_tokens} tokens" + (" · truncated" if e.truncated else "")
    )
    reason = f"<p>{html.escape(e.reason)}</p>" if e.reason else ""
    return (
        f'<div class="ex"><p>{facts}</p>{reason}<details><summary>prompt</summary>'
        f"<pre>{_text(e.prompt)}</pre></details><pre>{_text(e.completion)}</pre>"
        f"{image_row(e.images)}</div>"
    )


# What `examples.keep_images` names a file; any other path in examples.jsonl is not shown.
_IMAGE_PATH = re.compile(r"artifacts/[0-9a-f]{16}-[A-Za-z0-9_.-]{1,40}\.png")


def image_row(paths: Sequence[str]) -> str:
    """The images a verifier kept for an example (a chart and its reference), captioned."""
    figures = [
        f'<figure><img src="{html.escape(p)}" alt="{html.escape(p)}">'
        f"<figcaption>{html.escape(p.split('-', 1)[1])}</figcaption></figure>"
        for p in paths
        if _IMAGE_PATH.fullmatch(p)
    ]
    return f'<div class="images">{"".join(figures)}</div>' if figures else ""


def run_status(summary: Mapping[str, Any]) -> str:
    """The summary's first row: a finished run's said so, and an interrupted one's differed from
    it only by an `interrupted_at` row further down."""
    step = summary.get("interrupted_at")
    if step is None:
        return "finished"
    return f"interrupted at step {step} (no final/ model; continue it with --resume)"


def render(
    run_name: str,
    summary: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    plots: Sequence[str],
    best: Sequence[Example],
    worst: Sequence[Example],
    config_text: str,
) -> str:
    parts = [f"<h1>execrl run {html.escape(run_name)}</h1>"]
    if summary:
        cells = {"status": run_status(summary), **summary}
        body = "".join(
            f"<tr><td>{html.escape(k)}</td><td>{_fmt(v)}</td></tr>" for k, v in cells.items()
        )
        parts.append(f"<h2>Summary</h2><table>{body}</table>")
    else:
        parts.append("<p>no summary.json: the run has not finished (or was stopped)</p>")
    skipped = sum(1 for r in rows if r.get("skipped_update"))
    parts.append(
        f"<h2>Per-step metrics</h2><p>steps logged: {len(rows)}; updates skipped: {skipped}.</p>"
    )
    parts.append(metrics_table(rows))
    parts.append(
        "<h2>Plots</h2>"
        + "".join(f'<p><img src="{html.escape(p)}" alt="{html.escape(p)}"></p>' for p in plots)
    )
    parts.append("<h2>Verdict mix</h2>" + verdict_table(rows))
    parts.append("<h2>Time split</h2>" + time_table(rows))
    for title, chosen in (("Best completions", best), ("Worst completions", worst)):
        blocks = "".join(example_block(e) for e in chosen) or "<p>no example completions logged</p>"
        parts.append(f"<h2>{title}</h2>{blocks}")
    if config_text:
        parts.append(f"<h2>Config</h2><pre>{html.escape(config_text)}</pre>")
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>execrl {html.escape(run_name)}'
        f"</title><style>{CSS}</style></head><body>{''.join(parts)}</body></html>\n"
    )
