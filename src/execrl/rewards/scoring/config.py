"""Reward trees and scorer options from TOML (or any dict), without code.

    [reward]                  # RewardConfig: how samples are built and run
    program = "extract"
    [reward.tree]             # the reward formula: a node with a `type`
    type = "sum"
    terms = [{ weight = 1.0, type = "pass_fraction" }, { weight = 0.1, type = "style" }]

Leaf types and their parameters are the fields of the classes in `LEAVES`; combinators are
"sum" (terms, each with `weight`), "product" (factors), "gate" (condition, reward, threshold,
otherwise) and "hierarchy" (levels, each with `value` and optional `threshold`; base; dense).
A term or level is either a leaf table with its extra keys inline, or has a `reward` sub-table.
See docs/rewards.md.
"""

from __future__ import annotations

import dataclasses
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execrl.rewards.base import VISIBLE, Reward
from execrl.rewards.leaves.execution import PassAll, PassFraction, Runs, VerdictCredit
from execrl.rewards.leaves.external import CallableReward, HttpReward, load_callable
from execrl.rewards.leaves.format import CodeFenced, OneFunction, ReasoningClosed
from execrl.rewards.leaves.length import LengthPenalty, SoftOverlong
from execrl.rewards.leaves.security import Security
from execrl.rewards.leaves.static_analysis import StaticAnalysis
from execrl.rewards.leaves.style import Style
from execrl.rewards.leaves.syntax import SyntaxValid
from execrl.rewards.leaves.verifier import VerifierScore
from execrl.rewards.scoring.compose import Gate, Hierarchy, Level, Product, WeightedSum
from execrl.rewards.scoring.hacks import HackPolicy
from execrl.rewards.scoring.noise import LabelNoise
from execrl.rewards.scoring.token_credit import TokenCredit
from execrl.sandbox import Limits, SandboxConfig, SandboxConfigError, moved_to_limits
from execrl.tasks.limit_caps import capped

LEAVES: dict[str, type] = {
    "pass": PassAll,
    "pass_fraction": PassFraction,
    "runs": Runs,
    "verdict_credit": VerdictCredit,
    "syntax": SyntaxValid,
    "static": StaticAnalysis,
    "style": Style,
    "security": Security,
    "fenced": CodeFenced,
    "reasoning_closed": ReasoningClosed,
    "one_function": OneFunction,
    "length": LengthPenalty,
    "overlong": SoftOverlong,
    "http": HttpReward,
    "callable": CallableReward,  # `target = "package.module:function"` instead of `fn`
    "verifier": VerifierScore,  # a domain verifier's score or component (docs/verifiers.md)
}
COMBINATORS = ("sum", "product", "gate", "hierarchy")
PROGRAM_MODES = ("auto", "extract", "continue")


class RewardConfigError(ValueError):
    """A reward file or table that cannot be built; the message names the key path."""


def build_reward(spec: Mapping[str, Any], path: str = "reward.tree") -> Reward:
    """The reward tree a dict (a TOML table) declares. Names are made unique in tree order."""
    return _build(spec, path, {})


def _build(spec: Mapping[str, Any], path: str, names: dict[str, int]) -> Reward:
    if not isinstance(spec, Mapping):
        raise RewardConfigError(f"{path}: expected a table with a `type`, got {spec!r}")
    kind = spec.get("type")
    if kind is None:
        raise RewardConfigError(
            f"{path}: missing `type`; one of {sorted(LEAVES) + list(COMBINATORS)}"
        )
    params = {k: v for k, v in spec.items() if k != "type"}
    if kind == "sum":
        terms = _list(params.pop("terms", None), f"{path}.terms")
        built = tuple(
            (
                float(_pop_number(t, "weight", f"{path}.terms[{i}]", 1.0)),
                _child(t, f"{path}.terms[{i}]", names),
            )
            for i, t in enumerate(map(dict, terms))
        )
        return _make(WeightedSum, {"terms": built, **params}, path, names)
    if kind == "product":
        factors = _list(params.pop("factors", None), f"{path}.factors")
        built_f = tuple(_build(f, f"{path}.factors[{i}]", names) for i, f in enumerate(factors))
        return _make(Product, {"factors": built_f, **params}, path, names)
    if kind == "gate":
        for key in ("condition", "reward"):
            if key not in params:
                raise RewardConfigError(f"{path}: a gate needs `{key}`")
        params["condition"] = _build(params["condition"], f"{path}.condition", names)
        params["reward"] = _build(params["reward"], f"{path}.reward", names)
        return _make(Gate, params, path, names)
    if kind == "hierarchy":
        levels = []
        for i, lv in enumerate(map(dict, _list(params.pop("levels", None), f"{path}.levels"))):
            where = f"{path}.levels[{i}]"
            if "value" not in lv:
                raise RewardConfigError(f"{where}: a level needs `value`")
            value = _pop_number(lv, "value", where, 0.0)
            threshold = _pop_number(lv, "threshold", where, 1.0)
            levels.append(Level(_child(lv, where, names), float(value), float(threshold)))
        return _make(Hierarchy, {"levels": tuple(levels), **params}, path, names)
    if kind not in LEAVES:
        raise RewardConfigError(
            f"{path}: unknown reward type {kind!r}; known: {sorted(LEAVES) + list(COMBINATORS)}"
        )
    if kind == "callable":
        if "target" not in params:
            raise RewardConfigError(f'{path}: a callable reward needs `target = "module:function"`')
        try:
            params["fn"] = load_callable(str(params.pop("target")))
        except ValueError as exc:
            raise RewardConfigError(f"{path}: {exc}") from exc
    if (
        kind in ("pass", "pass_fraction", "runs", "verdict_credit")
        and params.get("tests") == "visible"
    ):
        params.setdefault("name", f"{kind}_visible")
    return _make(LEAVES[kind], params, path, names)


def _child(table: dict[str, Any], where: str, names: dict[str, int]) -> Reward:
    if "reward" in table:
        extra = sorted(set(table) - {"reward"})
        if extra:
            raise RewardConfigError(f"{where}: with a `reward` sub-table, unexpected keys {extra}")
        return _build(table["reward"], f"{where}.reward", names)
    return _build(table, where, names)


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise RewardConfigError(f"{path}: expected a non-empty array of tables")
    return value


def _pop_number(table: dict[str, Any], key: str, where: str, default: float) -> float:
    value = table.pop(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RewardConfigError(f"{where}.{key}: expected a number, got {value!r}")
    return float(value)


def _make(cls: type, params: dict[str, Any], path: str, names: dict[str, int] | None = None) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - set(fields))
    if unknown:
        raise RewardConfigError(
            f"{path}: unknown key(s) {unknown} for {cls.__name__}; known: {sorted(fields)}"
        )
    if (
        names is not None
    ):  # unique component names: an explicit clash is an error, defaults count up
        if "name" in params:
            if params["name"] in names:
                raise RewardConfigError(f"{path}.name: {params['name']!r} is already used")
            names[params["name"]] = 1
        else:
            base = fields["name"].default
            names[base] = names.get(base, 0) + 1
            params["name"] = base if names[base] == 1 else f"{base}_{names[base]}"
    coerced = {k: _coerce(fields[k], v, f"{path}.{k}") for k, v in params.items()}
    try:
        return cls(**coerced)
    except (TypeError, ValueError) as exc:
        raise RewardConfigError(f"{path}: {exc}") from exc


def _coerce(f: dataclasses.Field[Any], value: Any, path: str) -> Any:
    default = f.default if f.default is not dataclasses.MISSING else None
    if default is None and f.default_factory is not dataclasses.MISSING:
        default = f.default_factory()
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, str):
        ok = isinstance(value, str)
    elif isinstance(default, tuple):
        ok = isinstance(value, list | tuple)
        value = tuple(value) if ok else value
    elif isinstance(default, dict):
        ok = isinstance(value, Mapping)
        value = dict(value) if ok else value
    else:
        ok = True  # children and callables were built above
    if not ok:
        raise RewardConfigError(f"{path}: expected {type(default).__name__}, got {value!r}")
    return value


def children(reward: Any) -> list[Any]:
    if isinstance(reward, WeightedSum):
        return [r for _, r in reward.terms]
    if isinstance(reward, Product):
        return list(reward.factors)
    if isinstance(reward, Gate):
        return [reward.condition, reward.reward]
    if isinstance(reward, Hierarchy):
        return [lv.reward for lv in reward.levels]
    return []


# The package each analyser leaf reads with its default backend; backend "ruff" reads ruff.
_PACKAGES: dict[type, str] = {StaticAnalysis: "pyflakes", Style: "pycodestyle", Security: "bandit"}


def check_packages(reward: Any, path: str = "reward.tree") -> None:
    """Fail now, naming the leaf, when an analyser's package is not installed: at config load,
    not at the first step after the model has loaded."""
    import importlib.util

    stack = [reward]
    while stack:
        node = stack.pop()
        stack.extend(children(node))
        package = _PACKAGES.get(type(node))
        if package is None:
            continue
        if getattr(node, "backend", "") == "ruff":
            from execrl.rewards.analysis.ruff_backend import RuffMissing, ruff_bin

            try:
                ruff_bin()
            except RuffMissing as exc:
                raise RewardConfigError(f"{path}: the {node.name!r} leaf: {exc}") from None
        elif importlib.util.find_spec(package) is None:
            raise RewardConfigError(
                f"{path}: the {node.name!r} leaf needs {package}: pip install 'execrl[rewards]'"
            )


def node_names(reward: Any) -> list[str]:
    """Every node's name, the tree in depth-first order (what `components` can hold)."""
    names, stack = [], [reward]
    while stack:
        node = stack.pop()
        names.append(getattr(node, "name", ""))
        stack.extend(reversed(children(node)))
    return [n for n in names if n]


def check_names(reward: Any) -> None:
    """Raise when two nodes share a name (their components would overwrite each other)."""
    names: list[str] = []
    stack = [reward]
    while stack:
        node = stack.pop()
        names.append(getattr(node, "name", ""))
        stack.extend(children(node))
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(
            f"reward tree: names {dupes} are used twice; give each node a unique name="
        )


def _check_stop_at_first_failure(config: RewardConfig) -> None:
    """The cases after the first failing one are not run: no leaf may read their outcomes, and
    the visible/hidden gap flag, which compares pass fractions, must be off where visible tests
    run."""
    reward = config.reward()
    stack = [reward]
    while stack:
        node = stack.pop()
        if isinstance(node, PassFraction | Runs | HttpReward | CallableReward):
            raise RewardConfigError(
                f"reward.stop_at_first_failure: the {node.name!r} leaf reads every test's "
                "outcome, and the cases after the first failure are not run; use pass or "
                "verdict_credit leaves, or set stop_at_first_failure = false"
            )
        stack.extend(children(node))
    if (VISIBLE in reward.needs or config.run_visible) and config.hacks.gap <= 1:
        raise RewardConfigError(
            "reward.stop_at_first_failure: visible tests run, and the visible/hidden gap flag "
            "compares pass fractions, which need every case; set reward.hacks.gap above 1 (off) "
            "or stop_at_first_failure = false"
        )


@dataclass(frozen=True)
class RewardConfig:
    """The `[reward]` table: what is scored, and how samples are built and run."""

    tree: dict[str, Any] = field(default_factory=lambda: {"type": "pass"})  # the formula
    # "auto": the prompt continued when it is code and the completion does not define the entry
    # point itself, else code extracted from the completion; "extract"; "continue": prompt + it
    program: str = "auto"
    chunk_size: int = 256  # samples executed at once; bounds memory, overlaps execution and scoring
    analysis_workers: int = 1  # processes for static/style/security analyses; 0: in-process
    run_visible: bool = False  # run visible tests even when the tree needs none (gap detection)
    hacks: HackPolicy = field(default_factory=HackPolicy)
    token_credit: TokenCredit = field(default_factory=TokenCredit)
    noise: LabelNoise = field(default_factory=LabelNoise)
    # stdin/stdout tests stop at a sample's first failing case (`Job.stop_at_first_failure`):
    # the same verdict, far fewer runs for wrong samples; only for trees that read pass/fail
    stop_at_first_failure: bool = False

    def __post_init__(self) -> None:
        if self.program not in PROGRAM_MODES:
            raise RewardConfigError(
                f"reward.program: {self.program!r}; choose one of {', '.join(PROGRAM_MODES)}"
            )
        if self.chunk_size < 1:
            raise RewardConfigError("reward.chunk_size must be at least 1")
        if self.analysis_workers < 0:
            raise RewardConfigError(
                f"reward.analysis_workers: {self.analysis_workers} must be 0 (in-process) or more"
            )
        if self.stop_at_first_failure:
            _check_stop_at_first_failure(self)

    def reward(self) -> Reward:
        return build_reward(self.tree)

    @classmethod
    def from_dict(cls, table: Mapping[str, Any], path: str = "reward") -> RewardConfig:
        table = dict(table)
        subs = {"hacks": HackPolicy, "token_credit": TokenCredit, "noise": LabelNoise}
        built: dict[str, Any] = {}
        for key, sub in subs.items():
            if key in table:
                built[key] = _make(sub, dict(table.pop(key)), f"{path}.{key}")
        if "tree" in table:
            built["tree"] = dict(table.pop("tree"))
        moved = sorted({"workers", "wall_s", "memory_mb", "sandbox"} & set(table))
        if moved:
            raise RewardConfigError(
                f"{path}: {', '.join(moved)} belong to the [sandbox] table (one home for sandbox "
                f"settings, the runs' limits in [sandbox.limits]): move them there, e.g. "
                "[sandbox.limits] wall_s = 3.0"
            )
        fields_ = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(table) - set(fields_))
        if unknown:
            raise RewardConfigError(f"{path}: unknown key(s) {unknown}; known: {sorted(fields_)}")
        built.update({k: _coerce(fields_[k], v, f"{path}.{k}") for k, v in table.items()})
        config = cls(**built)
        check_packages(config.reward())  # fail now, naming the key, not at the first step
        return config

    @classmethod
    def load(cls, path: str | Path, table: str = "reward") -> RewardConfig:
        """Read `[table]` of a TOML file (the whole file when it has no such table)."""
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise RewardConfigError(f"{path}: not valid TOML: {exc}") from exc
        # the whole file: its [sandbox] is the sandbox's (`sandbox_config_of`), not the reward's
        section = (
            dict(data[table])
            if table in data
            else {k: v for k, v in data.items() if k != "sandbox"}
        )
        try:
            return cls.from_dict(section, table)
        except RewardConfigError as exc:
            raise RewardConfigError(f"{path}: {exc}") from exc


def sandbox_config_of(path: str | Path, say: Callable[[str], None] | None = None) -> SandboxConfig:
    """The `[sandbox]` table of a reward file (the verl adapter's `reward_config`), read as
    `execrl train` reads its own: the pool's settings, the runs' limits in `[sandbox.limits]`;
    the defaults where the file has none. `say` gets each deprecation message (stderr)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RewardConfigError(f"{path}: not valid TOML: {exc}") from exc
    table = data.get("sandbox", {})
    if not isinstance(table, Mapping):
        raise RewardConfigError(f"{path}: [sandbox] must be a table")
    say = say or (lambda m: print(m, file=sys.stderr))
    try:
        table = moved_to_limits(table, str(path), say)
    except SandboxConfigError as exc:
        raise RewardConfigError(str(exc)) from None
    default = SandboxConfig()
    limits = table.pop("limits", {})
    if not isinstance(limits, Mapping):
        raise RewardConfigError(f"{path}: sandbox.limits must be a table, e.g. [sandbox.limits]")
    given = capped(limits, where=f"{path} [sandbox.limits]", say=say)  # a file's
    limits = _make(
        Limits, {**dataclasses.asdict(default.limits), **given}, f"{path}: sandbox.limits"
    )
    return _make(SandboxConfig, {**table, "limits": limits}, f"{path}: sandbox")
