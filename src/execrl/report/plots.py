"""The run's curves as PNG: reward, pass rate, KL, the verdict mix, the reward tree's components
and the hack flags over steps."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

Row = Mapping[str, Any]


def series(rows: Sequence[Row], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric; steps where it is missing (a skipped update) are NaN,
    which matplotlib draws as a gap rather than a made-up value."""
    steps = [int(r["step"]) for r in rows]
    values = [float(r[key]) if isinstance(r.get(key), int | float) else math.nan for r in rows]
    return steps, values


def _figure(title: str, ylabel: str):
    import matplotlib

    matplotlib.use("Agg")  # files only: never needs a display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.ticklabel_format(axis="y", useOffset=False)  # plain values, not "+5.645" offsets
    return plt, fig, ax


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _marker(n: int) -> str:
    return "o" if n <= 30 else ""


def reward(rows: Sequence[Row], path: Path) -> Path:
    """The mean, and a band of values the reward took: the 10th to 90th percentile of the
    step's samples (mean ± std runs past the reward's bounds: a pass reward of mean 0.9 and std
    0.3 would reach 1.2). Runs logged before the percentiles were draw the mean alone."""
    plt, fig, ax = _figure("Reward over the step's samples", "reward")
    steps, mean = series(rows, "reward_mean")
    ax.plot(steps, mean, marker=_marker(len(steps)), color="tab:blue", label="mean")
    _, lo = series(rows, "reward_p10")
    _, hi = series(rows, "reward_p90")
    if any(not math.isnan(v) for v in lo + hi):
        ax.fill_between(steps, lo, hi, color="tab:blue", alpha=0.2,
                        label="10th-90th percentile of the samples")  # fmt: skip
    ax.legend(loc="best")
    return _save(plt, fig, path)


def pass_rate(rows: Sequence[Row], path: Path) -> Path:
    plt, fig, ax = _figure("Pass rate (all hidden tests pass)", "fraction of samples")
    steps, rate = series(rows, "pass_rate")
    ax.plot(steps, rate, marker=_marker(len(steps)), color="tab:green", label="pass rate")
    _, errors = series(rows, "sandbox_error_rate")
    if any(e > 0 for e in errors if not math.isnan(e)):
        ax.plot(steps, errors, linestyle="--", color="tab:red", label="sandbox error rate")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(loc="best")
    return _save(plt, fig, path)


def kl(rows: Sequence[Row], path: Path) -> Path:
    steps, values = series(rows, "kl")
    zero = all(v == 0 or math.isnan(v) for v in values)
    title = "KL to the reference" + (" (all 0: no reference, rl.kl_coef = 0)" if zero else "")
    plt, fig, ax = _figure(title, "KL per token")
    lines = ax.plot(steps, values, marker=_marker(len(steps)), color="tab:purple", label="KL")
    _, entropy = series(rows, "entropy")
    if any(not math.isnan(e) for e in entropy):
        twin = ax.twinx()  # entropy has its own scale (nats per token), on the right
        lines += twin.plot(
            steps, entropy, linestyle="--", color="tab:orange", label="entropy (right)"
        )
        twin.set_ylabel("entropy per token")
        twin.ticklabel_format(axis="y", useOffset=False)
        ax = twin  # the legend goes on top of both
    ax.legend(lines, [line.get_label() for line in lines], loc="best", framealpha=0.9)
    return _save(plt, fig, path)


def verdicts(rows: Sequence[Row], path: Path) -> Path:
    order = list(_VERDICT_COLORS)  # passed at the bottom, then the failure kinds
    found = {k.split("/", 1)[1] for r in rows for k in r if k.startswith("verdict/")}
    keys = [
        f"verdict/{v}"
        for v in sorted(
            found, key=lambda v: (v not in order, order.index(v) if v in order else 0, v)
        )
    ]
    plt, fig, ax = _figure("Verdict mix (fraction of the step's samples)", "fraction")
    steps = [int(r["step"]) for r in rows]
    if keys:
        stacks = [[float(r.get(k, 0.0)) for r in rows] for k in keys]
        labels = [k.split("/", 1)[1] for k in keys]
        colors = [_VERDICT_COLORS.get(label, f"C{i}") for i, label in enumerate(labels)]
        if len(steps) == 1:  # stackplot needs two x values: draw one stacked bar
            bottom = 0.0
            for values, label, color in zip(stacks, labels, colors, strict=True):
                ax.bar(steps, values, bottom=bottom, label=label, color=color, width=0.6)
                bottom += values[0]
        else:
            ax.stackplot(steps, stacks, labels=labels, colors=colors, alpha=0.85)
        handles, names = ax.get_legend_handles_labels()  # top of the stack first, as drawn
        ax.legend(
            handles[::-1], names[::-1], loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8
        )
    ax.set_ylim(0, 1.0)
    return _save(plt, fig, path)


_VERDICT_COLORS = {
    "PASSED": "#2ca02c",
    "WRONG_ANSWER": "#ff7f0e",
    "RUNTIME_ERROR": "#d62728",
    "TIMEOUT": "#9467bd",
    "MEMORY_LIMIT": "#8c564b",
    "OUTPUT_LIMIT": "#e377c2",
    "SYNTAX_ERROR": "#7f7f7f",
    "SANDBOX_ERROR": "#000000",
    "NO_CODE": "#bcbd22",
}


def components(rows: Sequence[Row], path: Path) -> Path:
    """reward/<node> per step: which parts of the reward tree move (nulls are gaps)."""
    keys = sorted({k for r in rows for k in r if k.startswith("reward/") and k != "reward/masked"})
    plt, fig, ax = _figure("Reward components (mean over the step's valid samples)", "score")
    _named_lines(ax, rows, keys)
    return _save(plt, fig, path)


def flags(rows: Sequence[Row], path: Path) -> Path:
    """flag/<name> counts per step, for the flags that were raised at least once, and the
    masked samples."""
    keys = sorted({k for r in rows for k in r if k.startswith("flag/") and r[k]})
    keys += ["reward/masked"] if any(r.get("reward/masked") for r in rows) else []
    plt, fig, ax = _figure("Flags and masked samples (count per step)", "samples")
    _named_lines(ax, rows, keys)
    if not keys:  # a message, not an empty pair of axes that reads as a plot of zeros
        ax.set_axis_off()
        ax.text(0.5, 0.5, f"no flags raised and no samples masked in {len(rows)} steps",
                ha="center", va="center", transform=ax.transAxes, fontsize=12)  # fmt: skip
    return _save(plt, fig, path)


def _named_lines(ax: Any, rows: Sequence[Row], keys: Sequence[str], legend: bool = True) -> None:
    """One line per `prefix/name` key, labelled by its name, with a legend beside the axes."""
    for i, key in enumerate(keys):
        steps, values = series(rows, key)
        ax.plot(steps, values, label=key.split("/", 1)[1], color=f"C{i % 10}",
                marker=_marker(len(steps)))  # fmt: skip
    if keys and legend:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)


def episodes(rows: Sequence[Row], path: Path) -> Path:
    """Multi-turn runs: pass@1 after each turn (the answer standing then), turns per episode
    and the fraction of trajectory tokens that are the environment's (masked out of the loss)."""
    keys = sorted({k for r in rows for k in r if k.startswith("episode/pass@turn")})
    plt, fig, ax = _figure("Episodes: pass rate after each turn", "fraction of episodes")
    _named_lines(ax, rows, [*keys, "episode/masked_token_frac"], legend=False)
    steps, turns = series(rows, "episode/turns_mean")
    twin = ax.twinx()
    twin.plot(steps, turns, linestyle="--", color="black", label="turns per episode (right)")
    twin.set_ylabel("turns per episode")
    # One legend for both axes, below them: beside them it covered the right axis's scale
    handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    twin.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3,
                fontsize=8)  # fmt: skip
    return _save(plt, fig, path)


PLOTS = {"reward.png": reward, "pass_rate.png": pass_rate, "kl.png": kl, "verdicts.png": verdicts,
         "reward_components.png": components, "flags.png": flags}  # fmt: skip


def draw_all(rows: Sequence[Row], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    drawn = [draw(rows, directory / name) for name, draw in PLOTS.items()]
    if any("episode/turns_mean" in r for r in rows):
        drawn.append(episodes(rows, directory / "episodes.png"))
    return drawn
