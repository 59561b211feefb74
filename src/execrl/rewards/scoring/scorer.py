"""Scoring batches: build programs, run them in the sandbox, reward, flag, penalise, credit.

The one scoring path of execrl: `execrl train`'s rollouts, `execrl eval` and `eval-samples`,
the TRL and verl adapters all score completions through `RewardScorer.score_samples` (or `score`,
which adds the monitor's per-step counts; or `score_programs` for programs the caller built, as
a benchmark's official harness builds them):

    with RewardScorer(RewardConfig.load("run.toml"), sandbox_config=SandboxConfig()) as scorer:
        results = scorer.score(tasks, completions, offsets=offsets, step=step)
        log(scorer.last_metrics)             # reward/flag/<flag> counts, masked, pass rates
    scorer.monitor.summary().write("flagged.json")

Here, and only here: no code in a completion is a SYNTAX_ERROR run flagged `no_code`; a
SANDBOX_ERROR (infrastructure, never the program's fault) masks the sample whatever the tree.
Every program is graded on its task's test groups as the official harness grades it
(`grading.py`: EvalPlus's base and plus as two runs), with the sandbox settings' limits for
every run or, with `task_limits=True`, each task's own. The sandbox settings are the caller's
(`execrl train`'s [sandbox], an eval command's flags, an adapter's arguments), given as they are.

Samples are executed `chunk_size` at a time, two chunks in flight, the next running in the
sandbox while the current one is scored: memory stays bounded and scoring hides behind execution.
The execution-free analyses of the tree (static, style, security) run meanwhile in worker
processes (`analyser.py`), so they neither serialise with scoring nor hold the GIL.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

# the module, not the package (whose __init__ imports this)
import execrl.rewards.scoring.hacks as hacks
from execrl.rewards.base import TOKENS, VISIBLE, Reward
from execrl.rewards.leaves.extract import defines, extract_code
from execrl.rewards.result import Flag, RewardResult, masked_result
from execrl.rewards.sample import Sample
from execrl.rewards.scoring.analyser import Analyser, Pending, analyses_of
from execrl.rewards.scoring.config import RewardConfig, check_names
from execrl.rewards.scoring.grading import graded, graded_alike, grading_jobs
from execrl.rewards.scoring.monitor import RewardMonitor
from execrl.rewards.scoring.noise import FlakinessReport, NoiseInjector, measure_flakiness
from execrl.rewards.scoring.token_credit import token_credit
from execrl.sandbox import ExecutionResult, Job, SandboxConfig, Verdict
from execrl.tasks.schema import Task

Offsets = Sequence[tuple[int, int]]


NO_CODE_MESSAGE = "no code found in the completion"


@dataclass(frozen=True, slots=True)
class ScoredSample:
    """A sample as scored: the program and its execution results, and its reward."""

    sample: Sample
    reward: RewardResult


def build_sample(task: Task, completion: str, program_mode: str = "auto") -> Sample:
    """The program a completion becomes: extracted code, or the prompt continued. "auto"
    continues a prompt that is code (HumanEval style) unless the completion defines the entry
    point itself, and extracts otherwise."""
    if program_mode == "auto":
        from execrl.models.prompting.prompting import is_code_prompt  # lazily: models imports torch

        program_mode = (
            "continue"
            if is_code_prompt(task.prompt)
            and not (task.entry_point and defines(completion, task.entry_point))
            else "extract"
        )
    if program_mode == "continue":
        return Sample(task, completion, task.prompt + completion, task.prompt, (0, len(completion)))
    found = extract_code(completion, task.entry_point, language=task.language)
    if found is None:
        return Sample(task, completion, None)
    return Sample(task, completion, found.code, "", (found.start, found.end))


def no_code_result(task: Task) -> ExecutionResult:
    """No code counts as a program that does not compile (and is flagged NO_CODE)."""
    return ExecutionResult(Verdict.SYNTAX_ERROR, n_tests=len(task.tests), message=NO_CODE_MESSAGE)


class RewardScorer:
    def __init__(
        self,
        config: RewardConfig | None = None,
        sandbox: Any = None,
        reward: Reward | None = None,
        monitor: RewardMonitor | None = None,
        sandbox_config: SandboxConfig | None = None,
        task_limits: bool = False,
    ) -> None:
        """`reward` overrides `config.tree` with a Python object; `sandbox` (a Sandbox) is used
        as is and not closed; without one the scorer opens the one `sandbox_config` names on
        first use. Each run has `sandbox_config.limits` (the defaults' without one);
        `task_limits` grades the hidden tests with each task's own limits instead
        (`grading.task_limits`: what its benchmark's harness gives)."""
        self.config = config or RewardConfig()
        self.reward = reward if reward is not None else self.config.reward()
        check_names(self.reward)
        self.lower_bound = self.reward.bounds[0]
        caps = self.config.hacks.penalties.values()
        if "min" in caps and not math.isfinite(self.lower_bound):
            raise ValueError(
                'reward.hacks: a "min" penalty needs a reward with a finite lower bound; set '
                "low= on external reward models, or give the penalties as numbers"
            )
        self.needs = self.reward.needs
        self.monitor = monitor or RewardMonitor()
        self.last_metrics: dict[str, float] = {}
        self.sandbox_config = sandbox_config or SandboxConfig()
        self.limits = self.sandbox_config.limits
        self.task_limits = task_limits
        self._noise = NoiseInjector(self.config.noise)
        self._sandbox = sandbox
        self._own_sandbox = sandbox is None
        analyses = analyses_of(self.reward)
        self._analyser = Analyser(analyses, self.config.analysis_workers) if analyses else None
        self._steps = 0

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def sandbox(self) -> Any:
        if self._sandbox is None:
            from execrl.sandbox import open_sandbox

            self._sandbox = open_sandbox(self.sandbox_config)
        return self._sandbox

    def close(self) -> None:
        if self._analyser is not None:
            self._analyser.close()  # restarts on the next score(); only its processes end
        if self._own_sandbox and self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

    def __enter__(self) -> RewardScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scoring -----------------------------------------------------------------------------

    def score(
        self,
        tasks: Sequence[Task],
        completions: Sequence[str],
        offsets: Sequence[Offsets] | None = None,
        n_tokens: Sequence[int] | None = None,
        step: int | None = None,
    ) -> list[RewardResult]:
        """One RewardResult per completion; `tasks[i]` is the task of `completions[i]`.

        `offsets[i]` are the (start, end) characters of each token of completion i (a fast
        tokenizer's offset mapping); they enable token credit and give token lengths."""
        scored = self.score_samples(tasks, completions, offsets, n_tokens)
        results = [x.reward for x in scored]
        self._steps += 1
        self.last_metrics = self.monitor.observe(
            [_light(x.sample) for x in scored], results, step if step is not None else self._steps
        )
        return results

    def score_samples(
        self,
        tasks: Sequence[Task],
        completions: Sequence[str],
        offsets: Sequence[Offsets] | None = None,
        n_tokens: Sequence[int] | None = None,
    ) -> list[ScoredSample]:
        """The scoring path: build each program, execute it (the analyses run meanwhile in the
        analysis workers), reward it. Keeps no state: the trainer calls it from a thread."""
        return self.score_programs(self.samples(tasks, completions, offsets, n_tokens))

    def score_programs(
        self, samples: Sequence[Sample], progress: Callable[[int], None] | None = None
    ) -> list[ScoredSample]:
        """`score_samples` from its second stage: samples whose program is built (`samples`, or
        a benchmark's harness: `execrl eval`). `progress(n)` is told of each run that ends."""
        return [
            ScoredSample(_light(sample, keep_offsets=True), self.score_sample(sample))
            for executed in self._executed_chunks(list(samples), progress)
            for sample in executed
        ]

    def samples(
        self,
        tasks: Sequence[Task],
        completions: Sequence[str],
        offsets: Sequence[Offsets] | None = None,
        n_tokens: Sequence[int] | None = None,
    ) -> list[Sample]:
        if len(tasks) != len(completions):
            raise ValueError(f"{len(tasks)} tasks for {len(completions)} completions")
        for name, seq in (("offsets", offsets), ("n_tokens", n_tokens)):
            if seq is not None and len(seq) != len(completions):
                raise ValueError(f"{len(seq)} {name} for {len(completions)} completions")
        out = []
        for i, (task, completion) in enumerate(zip(tasks, completions, strict=True)):
            s = build_sample(task, completion, self.config.program)
            offs = tuple(tuple(o) for o in offsets[i]) if offsets is not None else None
            count = n_tokens[i] if n_tokens is not None else None
            out.append(replace(s, offsets=offs, n_tokens=count))  # type: ignore[arg-type]
        if TOKENS in self.needs and any(s.offsets is None and s.n_tokens is None for s in out):
            raise ValueError(
                "the reward needs token lengths: pass offsets= or n_tokens= to score()"
            )
        return out

    def score_sample(self, sample: Sample) -> RewardResult:
        """Reward an executed sample: the tree, then hack flags and penalties, then credit. A
        SANDBOX_ERROR masks the sample before the tree is asked, whatever its leaves."""
        flags = hacks.detect(sample, self.config.hacks)
        for run in (sample.result, sample.visible_result):
            if run is not None and run.verdict is Verdict.SANDBOX_ERROR:
                cause = getattr(run, "sandbox_error_cause", "")
                why = f"sandbox error{f' ({cause})' if cause else ''}: {run.message}"
                return masked_result(why, Flag.SANDBOX_ERROR, *flags)
        result = self.reward(sample)
        if sample.program is None and not result.reason:
            result = replace(result, reason=NO_CODE_MESSAGE)
        if sample.noise_flipped:
            flags |= {Flag.NOISE_FLIPPED}
        result = hacks.apply(result, flags, self.config.hacks, self.lower_bound)
        if self.config.token_credit.enabled and not result.masked:
            credit = token_credit(sample, result.score, self.config.token_credit)
            result = replace(result, token_credit=credit)
        return result

    # -- execution ---------------------------------------------------------------------------

    def _executed_chunks(
        self, samples: list[Sample], progress: Callable[[int], None] | None = None
    ) -> Iterator[list[Sample]]:
        """Chunks in order, two executing at a time: the sandbox's pool is shared safely, so the
        next chunk fills workers the current one's stragglers leave idle (no barrier). Each
        chunk's analyses start with its execution; once a chunk has executed, the next one
        starts before its analyses are awaited and it is scored, so the sandbox never waits
        for the analyses or the scoring."""
        size = self.config.chunk_size
        chunks = iter([samples[i : i + size] for i in range(0, len(samples), size)])
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="execrl-rewards") as pool:
            pending: deque[tuple[Future[list[Sample]], Pending | None]] = deque()

            def start() -> None:
                chunk = next(chunks, None)
                if chunk is not None:
                    running = pool.submit(self.execute, chunk, progress)  # the long pole
                    ahead = self._analyser.submit(chunk) if self._analyser is not None else None
                    pending.append((running, ahead))

            start()
            start()
            while pending:
                running, ahead = pending.popleft()
                executed = running.result()
                start()
                if ahead is not None and self._analyser is not None:
                    executed = self._analyser.attach(ahead, executed)
                yield executed

    def execute(
        self, samples: Sequence[Sample], progress: Callable[[int], None] | None = None
    ) -> list[Sample]:
        """Run the tests the reward needs; programs that could not be extracted are not run.
        The hidden tests always run, graded as the task's harness grades them (`grading.py`):
        pass rates are reported and hack flags read the run, even when the tree scores the
        text alone."""
        run_visible = VISIBLE in self.needs or self.config.run_visible
        jobs: list[Job] = []
        where: list[tuple[int, str]] = []
        for i, s in enumerate(samples):
            if s.program is None:
                continue
            limits = None if self.task_limits else self.limits
            for job in grading_jobs(s.task, s.program, limits, **self._options):
                jobs.append(job)
                where.append((i, "hidden"))
            if run_visible and s.task.visible_tests is not None and len(s.task.visible_tests):
                jobs.append(self._job(s.task, s.program, s.task.visible_tests))
                where.append((i, "visible"))
        ran = self._run(jobs, progress)
        hidden: dict[int, list[ExecutionResult]] = {}
        visible: dict[int, ExecutionResult] = {}
        for (i, kind), r in zip(where, ran, strict=True):
            if kind == "hidden":
                hidden.setdefault(i, []).append(r)
            else:
                visible[i] = r
        out = []
        for i, s in enumerate(samples):
            if s.program is None:
                runs = graded_alike(s.task, no_code_result(s.task))
                out.append(replace(s, result=runs.result, base_result=runs.base,
                                   plus_result=runs.plus))  # fmt: skip
                continue
            runs = graded(s.task, hidden[i])
            result, flip = self._noise(runs.result)
            out.append(replace(s, result=result, visible_result=visible.get(i),
                               noise_flipped=flip, base_result=runs.base,
                               plus_result=runs.plus))  # fmt: skip
        return out

    def _run(self, jobs: list[Job], progress: Callable[[int], None] | None) -> list[Any]:
        if not jobs:
            return []
        if progress is None:  # sandboxes of other kinds (the server's client) take no progress
            return self.sandbox.run_many(jobs)
        return self.sandbox.run_many(jobs, progress=progress)

    @property
    def _options(self) -> dict[str, Any]:
        return {"stop_at_first_failure": self.config.stop_at_first_failure}

    def _job(self, task: Task, program: str, tests: Any) -> Job:
        return Job.for_task(task, program, self.limits, tests, **self._options)

    def flakiness(
        self,
        tasks: Sequence[Task],
        completions: Sequence[str],
        repeats: int = 3,
        fraction: float = 1.0,
        seed: int = 0,
    ) -> FlakinessReport:
        """Re-execute a sample of these completions' programs to measure flaky verdicts."""
        samples = [s for s in self.samples(tasks, completions) if s.program is not None]
        jobs = [self._job(s.task, s.program, s.task.tests) for s in samples]  # type: ignore[arg-type]
        return measure_flakiness(self.sandbox, jobs, repeats, fraction, seed)


def _light(sample: Sample, keep_offsets: bool = False) -> Sample:
    """What outlives scoring of a sample: no analyses; the monitor keeps no offsets either
    (they can be long)."""
    offsets = sample.offsets if keep_offsets else None
    if sample.offsets is offsets and sample.analyses is None:
        return sample
    return replace(sample, offsets=offsets, analyses=None)
