"""The report layer from a synthetic run directory: plots, report.html, TensorBoard events,
trackers that are not installed, and `execrl report RUN_DIR`."""

import json
from types import SimpleNamespace

import pytest

from execrl.cli import main
from execrl.report import examples as ex
from execrl.report.build import build_report
from execrl.report.telemetry import Telemetry
from execrl.report.trackers import TrackerUnavailable, scalars, tracker_names

from .conftest import metrics_row

PNG = b"\x89PNG\r\n\x1a\n"


def test_report_writes_plots_and_page(run_dir):
    report = build_report(run_dir)
    names = sorted(p.name for p in report.plots)
    assert names == ["flags.png", "kl.png", "pass_rate.png", "reward.png",
                     "reward_components.png", "verdicts.png"]  # fmt: skip
    for p in report.plots:
        data = p.read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, p  # a drawn figure, not an empty file
    page = report.html.read_text()
    assert report.steps == 12 and "steps logged: 12; updates skipped: 1." in page
    for name in names:
        assert f'src="report/{name}"' in page
    assert "heldout_pass@1_after" in page and "0.6" in page
    # the trainer's memory, first and last step: a creeping run shows it
    assert "<tr><td>mem/rss_gib</td><td>2</td><td>4.75</td>" in page
    # best first: the passing completion; worst: the failing one, escaped, control char shown
    best = page.index("Best completions")
    worst = page.index("Worst completions")
    assert best < page.index("return x + 1") < worst < page.index("&lt;script&gt;\\x06")
    assert "<script>" not in page


def test_report_without_steps_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl: no such file"):
        build_report(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"step": 0}\nnot json\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2: not JSON"):
        build_report(tmp_path)


def test_cli_report_rebuilds_with_tensorboard(run_dir, capsys):
    assert main(["report", str(run_dir), "--tensorboard"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["steps"] == 12 and out["report"].endswith("report.html")
    assert (run_dir / "report.html").is_file() and len(out["plots"]) == 6
    events = list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1
    assert main(["report", str(run_dir.parent / "nope")]) == 2
    err = capsys.readouterr().err  # on stderr, as every command's errors
    assert err.startswith("execrl report: error: ") and "no such run directory" in err


def _event_scalars(directory):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(directory))
    acc.Reload()
    return acc


def test_telemetry_writes_tensorboard_events_and_examples(tmp_path):
    # a step's collected groups as rl.rollout.groups.Gathered holds them (rl.rollout.scored.Scored
    # fields)
    def scored(i, score):
        completion = SimpleNamespace(text=f"c{i}", n_tokens=3, truncated=False)
        reward = SimpleNamespace(masked=False, reason="")
        return SimpleNamespace(task_index=i % 2, score=score, verdict="WRONG_ANSWER",
                               passed=score == 1.0, completion=completion, reward=reward)  # fmt: skip

    tasks = [SimpleNamespace(id="a", prompt="pa"), SimpleNamespace(id="b", prompt="pb")]
    config = {"rl": {"group_size": 3}}
    telemetry = Telemetry(tmp_path, config, tasks, trackers="tensorboard")
    for step in range(3):
        got = SimpleNamespace(local=[[scored(0, 0.0), scored(1, 1.0), scored(2, 0.5)]])
        telemetry.step(metrics_row(step, 3), got)
    (tmp_path / "metrics.jsonl").write_text(
        "".join(json.dumps(metrics_row(s, 3)) + "\n" for s in range(3))
    )
    assert telemetry.end({"steps": 3}) == tmp_path / "report.html"
    acc = _event_scalars(tmp_path / "tensorboard")
    tags = acc.Tags()["scalars"]
    assert {"train/reward_mean", "train/pass_rate", "train/kl", "verdict/PASSED"} <= set(tags)
    assert [e.step for e in acc.Scalars("train/pass_rate")] == [0, 1, 2]
    assert acc.Scalars("train/pass_rate")[-1].value == pytest.approx(0.7)
    logged = ex.read(tmp_path / "examples.jsonl")
    # k=2 best and worst of 3 samples: each sample once, best first
    assert [(e.step, e.score) for e in logged] == [(s, x) for s in range(3) for x in (1, 0.5, 0)]
    assert logged[0].task == "b" and logged[0].completion == "c1"
    # resuming at step 2 keeps the examples of steps 0 and 1 only
    Telemetry(tmp_path, config, tasks, first_step=2, trackers="none")
    assert {e.step for e in ex.read(tmp_path / "examples.jsonl")} == {0, 1}


def test_examples_pick_best_and_worst_distinct():
    def scored(i, score):
        return SimpleNamespace(
            task_index=0, score=score, verdict="PASSED" if score == 1 else "WRONG_ANSWER",
            passed=score == 1, completion=SimpleNamespace(text=f"c{i}", n_tokens=1, truncated=False),
            reward=SimpleNamespace(masked=False, reason=""),
        )  # fmt: skip

    tasks = [SimpleNamespace(id="t", prompt="p")]
    groups = [[scored(i, s) for i, s in enumerate([0.2, 1.0, 0.0, 0.7, float("nan")])]]
    picked = ex.pick(4, groups, tasks, k=2)
    assert [e.completion for e in picked] == ["c1", "c3", "c0", "c2"]  # NaN never picked
    # fewer samples than 2k: each appears once
    assert [e.completion for e in ex.pick(0, [groups[0][:3]], tasks, k=2)] == ["c1", "c0", "c2"]
    best, worst = ex.best_and_worst(picked, n=1)
    assert best[0].completion == "c1" and worst[0].completion == "c2"


def test_tracker_choice_and_missing_packages(monkeypatch, tmp_path):
    monkeypatch.delenv("EXECRL_TRACKERS", raising=False)
    assert tracker_names() == ("tensorboard",)
    assert tracker_names("none") == ()
    with pytest.raises(ValueError, match="unknown tracker 'neptune'"):
        tracker_names("tensorboard,neptune")
    import importlib.util

    for name in ("wandb", "mlflow"):
        if importlib.util.find_spec(name) is not None:
            continue  # installed here: the error path cannot be shown
        with pytest.raises(TrackerUnavailable, match=f"pip install {name}"):
            tracker_names(f"tensorboard,{name}")
        monkeypatch.setenv("EXECRL_TRACKERS", name)
        with pytest.raises(TrackerUnavailable, match="EXECRL_TRACKERS asks for"):
            Telemetry(tmp_path, {}, [])
        monkeypatch.delenv("EXECRL_TRACKERS")


def test_scalars_keep_numbers_and_group_tags():
    row = {"step": 3, "reward_mean": 0.5, "verdict/PASSED": 0.25, "note": "x", "flag/no_code": 2}
    assert scalars(row) == {"train/reward_mean": 0.5, "verdict/PASSED": 0.25, "flag/no_code": 2.0}


def test_the_report_says_how_the_run_ended_and_shows_each_completion_once(tmp_path, capsys):
    """Through `execrl report`: the summary's first row is the run's status (an interrupted
    run's differed from a finished one's only by a row further down), and a completion the
    policy wrote again at a later step is one entry of "Best completions", not two."""
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(metrics_row(s, 2)) + "\n"
                                                    for s in range(2)))  # fmt: skip
    same = dict(task="t/1", verdict="PASSED", passed=True, masked=False, n_tokens=3,
                truncated=False, prompt="p", completion="return 1")  # fmt: skip
    logged = [ex.Example(step=s, score=1.0, **same) for s in (0, 1)]
    logged += [ex.Example(step=1, task="t/2", score=s, verdict="WRONG_ANSWER", passed=False,
                          masked=False, n_tokens=3, truncated=False, prompt="p",
                          completion=f"return {s}") for s in (0.0, 0.5)]  # fmt: skip
    ex.ExampleLog(tmp_path / "examples.jsonl").write(logged)
    for summary, status in (({"steps": 1, "interrupted_at": 1}, "interrupted at step 1 ("),
                            ({"steps": 2}, "finished</td>")):  # fmt: skip
        (tmp_path / "summary.json").write_text(json.dumps(summary))
        assert main(["report", str(tmp_path)]) == 0, capsys.readouterr()
        page = (tmp_path / "report.html").read_text()
        assert f"<tr><td>status</td><td>{status}" in page
    best = page.split("<h2>Best completions</h2>", 1)[1].split("<h2>Worst completions</h2>")[0]
    assert best.count("return 1") == 1 and "step 1 · task <code>t/1" in best, best
