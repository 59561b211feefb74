"""Episodes run by an agent harness execrl did not write: any program that speaks the OpenAI API.

The harness is a command (`env.harness`, e.g. "python my_agent.py"), run once per episode with:

    OPENAI_BASE_URL     http://127.0.0.1:PORT/e/<episode id>/v1   (the policy)
    OPENAI_API_KEY      the episode's key: calls that carry it (as OpenAI clients do, in
                        `Authorization: Bearer`) record into this episode, and no other call
    EXECRL_EPISODE_ID   the episode id (a name, not a secret: it grants nothing)
    EXECRL_MODEL        the model name to send ("policy"; any name is accepted)
    EXECRL_TASK_FILE    a JSON file: {"id", "prompt", "entry_point", "language"} (never tests)
    EXECRL_ANSWER_FILE  where to write the final answer

It runs confined (`confine.py`): in namespaces of its own where every benchmark-data location
the sandbox hides is hidden too, its episode's folder is the only one it can see, and /proc
shows only its own processes, so no harness reads the hidden tests or another episode's answer.

Its final answer is what it wrote to EXECRL_ANSWER_FILE, or, when it wrote nothing there, its
standard output; the answer is graded by the hidden tests in the sandbox through the one scoring
path (`RewardScorer.score_samples`), like a one-turn completion. Every call it made is recorded
token-exactly (`recorder.py`); the episode's `Trajectory` is those calls, its reward on the last
call. A harness that fails (non-zero exit, past `harness_timeout_s`, no call made) gives a
masked episode (left out of the advantage, never scored 0), said in the log; a run where every
episode's harness failed stops with the harness's own error output.

An episode whose calls do not all extend one conversation (the harness rewrote its history)
has several segments, each its own token-exact sequence. The segment holding the last call
stands for the episode; the others go beside it (`Episode.segments`), and the trainer learns
every segment with the episode's advantage, or the last alone (`credit.segments`); with held turns
the episode is masked with a note saying how many segments it had (docs/harness.md).
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from execrl.models.engines.sampling import SamplingParams
from execrl.models.prompting.chat import uses_chat_template
from execrl.rewards.scoring.scorer import RewardScorer
from execrl.rl.episodes.env import HarnessConfig, StepInfo, StepResult
from execrl.rl.episodes.policy_server import PolicyServer, ServeSettings
from execrl.rl.episodes.recorder import EpisodeRecording, Recorder
from execrl.rl.episodes.trajectory import Trajectory
from execrl.rl.episodes.turn_loop import Episode
from execrl.sandbox import (
    Confinement,
    default_kept_paths,
    hidden_benchmark_data,
    launcher_argv,
    path_inside,
)
from execrl.tasks.catalog.registry import files_read
from execrl.tasks.schema import Task

_STDERR_TAIL = 800  # characters of a failed harness's error output kept in the note
REWROTE = "the harness rewrote its history"  # how the note of such a masked episode starts


class HarnessError(RuntimeError):
    """The harness failed on every episode of a batch, or cannot run here: nothing could be
    learned."""


def scratch_outside(hide: Sequence[str]) -> None:
    """The episodes' folders go in the temporary directory, which must not lie in a place a
    harness sees hidden (a data directory of /tmp, or TMPDIR inside one): covered, read-only
    and empty, it would hold no folder to bind an episode's back at, and every launch failed
    with a bare mount error."""
    scratch = os.path.realpath(tempfile.gettempdir())
    for place in hide:
        if path_inside(scratch, os.path.realpath(place)):
            raise HarnessError(
                f"the temporary directory {scratch} lies inside {place}, which a harness sees "
                "hidden (benchmark data: $EXECRL_DATA_DIR or --data-dir, the caches); keep the "
                "data elsewhere, or set TMPDIR to a folder outside it"
            )


@dataclass(frozen=True, slots=True)
class HarnessRun:
    """What one harness process did."""

    episode_id: str
    answer: str  # the answer file's text, else its standard output
    failure: str  # "" when it exited 0 in time; else why it failed (the whole story once
    # `_with_refusals` added the calls the server refused and the tail of its stderr)
    stderr: str = ""  # the tail of a failed run's standard error


class HarnessRunner:
    """A policy server for harness episodes and the directory of their files; `run` as many
    batches as wanted, then `close` it (`run_harness_episodes` does both for one batch)."""

    def __init__(self, engine: Any, tokenizer: Any, params: SamplingParams,
                 scorer: RewardScorer, config: Any, *, chat: bool | None = None,
                 log: Callable[[str], None] | None = None,
                 segments: bool = False) -> None:  # fmt: skip
        self.config = config if isinstance(config, HarnessConfig) else config.harness_config()
        # a rewritten history's other segments are kept for the trainer, else it is masked
        self.segments = segments
        self.scorer, self.log = scorer, log or (lambda message: None)
        self.recorder = Recorder(tokenizer, strict=True)
        # env.max_tokens caps each call's prompt + completion as a context would: the
        # trajectory the trainer sees is the conversation of one call
        limits = [n for n in (context_length(engine), getattr(config, "max_tokens", 0)) if n]
        settings = ServeSettings(chat=uses_chat_template(tokenizer, chat), sampling=params,
                                 fixed_sampling=True, max_positions=min(limits, default=0))  # fmt: skip
        # benchmark data as the sandbox hides it, and the task files this run named by path
        self.hide = tuple(hidden_benchmark_data()) + tuple(files_read())
        scratch_outside(self.hide)
        self.server = PolicyServer(engine, tokenizer, settings, self.recorder)
        self.url = self.server.start()
        self.workdir = Path(tempfile.mkdtemp(prefix="execrl-harness-"))
        # run in its own folder: the command's files named relative to ours are named absolute
        self.argv, files = _command(self.config.harness)
        # what it reads where its folders are covered (/tmp; homes, where it has a uid of its own)
        here = os.path.realpath(os.getcwd())
        self.keep = tuple(sorted({*default_kept_paths(), here, *files} - {"/", "/tmp"}))

    def close(self) -> None:
        self.server.close()
        # a process a harness left behind may still write there: no error for what it adds
        shutil.rmtree(self.workdir, ignore_errors=True)

    def run(self, tasks: Sequence[Task]) -> list[Episode]:
        """One episode per task (repeat a task for a group), `harness_parallel` at a time."""
        ids = [f"ep-{uuid.uuid4().hex}" for _ in tasks]
        keys = [self.recorder.open(episode_id) for episode_id in ids]  # each its harness's alone
        with ThreadPoolExecutor(self.config.harness_parallel) as pool:
            runs = list(pool.map(self._run_one, tasks, ids, keys))
        # a killed harness may leave a call generating: the weights must not change under it
        if not self.server.batcher.wait_idle(timeout_s=600):
            self.log("harness: a call is still generating 600 s after its harness ended")
        recordings = [self.recorder.close(episode_id) for episode_id in ids]
        runs = [_with_refusals(run, rec) for run, rec in zip(runs, recordings, strict=True)]
        ok = [i for i, r in enumerate(runs) if not r.failure]
        if tasks and not ok:
            raise HarnessError(
                f"env.harness {self.config.harness!r} failed on all {len(tasks)} episodes; "
                f"the first (task {tasks[0].id}): {runs[0].failure}"
            )
        scored = self.scorer.score_samples([tasks[i] for i in ok], [runs[i].answer for i in ok])
        grades = dict(zip(ok, scored, strict=True))
        episodes = [
            _episode(task, run, recording, grades.get(i), self._prompt_only(task), self.segments)
            for i, (task, run, recording) in enumerate(zip(tasks, runs, recordings, strict=True))
        ]
        self._report(episodes)
        return episodes

    def _run_one(self, task: Task, episode_id: str, key: str) -> HarnessRun:
        # named by a secret: the confined harness sees its own folder alone (`confine.py`)
        folder = self.workdir / secrets.token_urlsafe(16)
        folder.mkdir(mode=0o700)
        task_file, answer_file = folder / "task.json", folder / "answer.txt"
        task_file.write_text(json.dumps(
            {"id": task.id, "prompt": task.prompt, "entry_point": task.entry_point,
             "language": task.language}))  # fmt: skip
        # the harness gets the caller's environment less execrl's own (the data directory, where
        # hidden tests live, above all), plus where to find the policy and the task
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXECRL_")}
        env.update(
            OPENAI_BASE_URL=f"{self.url}/e/{episode_id}/v1",
            OPENAI_API_KEY=key,
            EXECRL_EPISODE_ID=episode_id,
            EXECRL_MODEL=self.server.settings.model_name,
            EXECRL_TASK_FILE=str(task_file),
            EXECRL_ANSWER_FILE=str(answer_file),
        )
        spec = Confinement(self.hide, str(self.workdir), str(folder), self.argv, self.keep,
                           self.config.harness_memory_mb, self.config.harness_processes)  # fmt: skip
        return _run_process(launcher_argv(spec), env, self.config.harness_timeout_s, episode_id,
                            folder)  # fmt: skip

    def _prompt_only(self, task: Task) -> Trajectory:
        """What an episode without a call holds: the task's prompt, no policy token (its
        episode is masked; the trainer still needs a sequence to lay it out)."""
        ids = self.recorder.encode(task.prompt, raw=True)
        return Trajectory(ids, (0,) * len(ids), (0.0,) * len(ids), ((len(ids), len(ids)),),
                          (0.0,), len(ids))  # fmt: skip

    def _report(self, episodes: list[Episode]) -> None:
        failed = [e for e in episodes if e.masked]
        if failed:
            notes = sorted({e.steps[-1].info.note for e in failed})
            # Not an error: an agent may rewrite only some histories (the long ones), and a
            # chunk of those alone must not stop a run that learns from the others
            advice = ""
            if any(note.startswith(REWROTE) for note in notes):
                advice = " (with credit.from_turn = 1 they train: credit.segments)"
            self.log(f"harness: {len(failed)} of {len(episodes)} episodes masked: "
                     + "; ".join(notes[:3]) + advice)  # fmt: skip


def run_harness_episodes(tasks: Sequence[Task], engine: Any, tokenizer: Any,
                         params: SamplingParams, scorer: RewardScorer, config: Any, *,
                         chat: bool | None = None, log: Callable[[str], None] | None = None,
                         segments: bool = False) -> list[Episode]:  # fmt: skip
    """One harness episode per task, served by `engine` with the run's `params`; `config` has
    `harness`, `harness_timeout_s` and `harness_parallel` (a `HarnessConfig` or the run's
    [env]). The server starts in milliseconds: `execrl train` starts one per rollout chunk.
    `segments`: an episode whose harness rewrote its history is kept, its other segments beside
    it (`TrainConfig.segment_training`); without it such an episode is masked."""
    runner = HarnessRunner(engine, tokenizer, params, scorer, config, chat=chat, log=log,
                           segments=segments)  # fmt: skip
    try:
        return runner.run(tasks)
    finally:
        runner.close()


def _command(harness: str) -> tuple[tuple[str, ...], list[str]]:
    """`env.harness` split, each word that names a file or folder here (the trainer's working
    directory) made absolute, since the harness starts in its own folder; and the folders of
    those files and of the program, which its confinement binds back where it covers."""
    argv, files = [], []
    for n, word in enumerate(shlex.split(harness)):
        path = shutil.which(word) if n == 0 and "/" not in word else word
        if path and os.path.exists(path):
            real = os.path.realpath(path)
            files.append(real if os.path.isdir(real) else os.path.dirname(real))
            if (n or "/" in word) and not os.path.isabs(word):  # the program itself: PATH's
                word = os.path.abspath(word)
        argv.append(word)
    return tuple(argv), files


def _run_process(argv: list[str], env: dict[str, str], timeout_s: float, episode_id: str,
                 folder: Path) -> HarnessRun:  # fmt: skip
    """Run the harness in its own session. Its output goes to files, not pipes: a process it
    leaves behind holding them cannot keep the episode open past the harness's exit."""
    out_file, err_file = folder / "stdout.txt", folder / "stderr.txt"
    with out_file.open("wb") as out, err_file.open("wb") as err:
        try:
            process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=err, start_new_session=True)  # fmt: skip
        except OSError as exc:
            return HarnessRun(episode_id, "", f"cannot start {argv[0]!r}: {exc}", "(none)")
    try:
        process.wait(timeout=timeout_s)
        failure = f"exit status {process.returncode}" if process.returncode else ""
    except subprocess.TimeoutExpired:
        # the harness and everything it started in its session go together (it is not reaped
        # yet, so its group is still its own)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        failure = f"timed out after {timeout_s:g} s (env.harness_timeout_s)"
    if failure:
        tail = err_file.read_text(errors="replace").strip()[-_STDERR_TAIL:]
        return HarnessRun(episode_id, "", failure, tail or "(empty)")
    answer_file = folder / "answer.txt"
    answer = answer_file.read_text(errors="replace") if answer_file.is_file() else ""
    return HarnessRun(
        episode_id, answer if answer.strip() else out_file.read_text(errors="replace"), ""
    )


def _with_refusals(run: HarnessRun, recording: EpisodeRecording) -> HarnessRun:
    """A failed run's reason with the first call the server refused, which its harness may
    not have printed."""
    if not run.failure:
        return run
    refused = ""
    if recording.refusals:
        first = recording.refusals[0]
        refused = f"; the server refused {len(recording.refusals)} call(s), the first: {first}"
    return replace(run, failure=f"{run.failure}{refused}; its stderr: {run.stderr}")


def _episode(task: Task, run: HarnessRun, recording: EpisodeRecording, scored: Any,
             prompt_only: Trajectory, segments: bool) -> Episode:  # fmt: skip
    """The episode the trainer sees: one model turn per call, the grade on the last. Several
    segments: the one with the last call stands for the episode, the others beside it
    (`segments`: the trainer learns them) or the episode masked."""
    calls = sorted(recording.calls, key=lambda c: c.call)
    reward, passed, masked = 0.0, None, True
    note = f"harness failed: {run.failure}" if run.failure else ""
    if scored is not None:
        reward, masked = scored.reward.score, scored.reward.masked
        passed = bool(scored.sample.result and scored.sample.result.passed)
        if masked:
            note = f"sandbox failure grading the answer: {scored.reward.reason}"
    if not calls and not note:
        masked, note = True, "the harness made no call to the policy"
    trajectories = recording.trajectories(reward)
    if len(trajectories) > 1 and not note and not segments:
        masked = True
        note = (f"{REWROTE}: {len(trajectories)} segments (not trained: with credit."
                "from_turn > 1 turns are numbered per segment; docs/harness.md)")  # fmt: skip
    turns = max(1, len(calls))
    steps = [StepResult(None, 0.0, False, StepInfo(t + 1)) for t in range(turns - 1)]
    steps.append(StepResult(None, reward if not masked else 0.0, True,
                            StepInfo(turns, hidden_passed=passed, note=note, masked=masked,
                                     graded=scored)))  # fmt: skip
    last = max((c.call for c in calls), default=-1)
    holds_last = [last in s.calls for s in _called(recording)]
    trajectory = next((t for t, h in zip(trajectories, holds_last, strict=True) if h), prompt_only)
    others = tuple(t for t, h in zip(trajectories, holds_last, strict=True) if not h)
    # what the harness said between the model's turns: the text each later call added
    said = tuple(c.added for c in calls[1:])
    return Episode(task.id, tuple(c.text for c in calls), said, tuple(steps), trajectory,
                   finishes=tuple(c.finish for c in calls),
                   segments=others if segments and not masked else ())  # fmt: skip


def _called(recording: EpisodeRecording) -> list[Any]:
    """The segments that hold a call, in the order `trajectories` gives theirs."""
    return [s for s in recording.segments if s.calls]


def context_length(engine: Any) -> int:
    """The context of the engine's model (0 when it does not say): calls are cut to fit."""
    config = getattr(getattr(engine, "model", None), "config", None)
    return int(getattr(config, "max_position_embeddings", 0) or 0)
