"""Typed configs from TOML and back: reading the file, `--set section.field=value` overrides,
checking a table's values against its dataclass's type hints, and writing the resolved config
(what a run directory keeps). Shared by `execrl train` (`rl/config/config.py`) and `execrl sft`
(`rl/sft/config.py`); what each config holds and how it is cross-checked lives there."""

from __future__ import annotations

import dataclasses
import json
import tomllib
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A config that cannot run; the message names the file, the key and what to do."""


def read_toml(path: str | Path | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError as e:
        raise ConfigError(f"config file {path} not found") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e


def source_name(path: str | Path | None, overrides: list[str] | tuple[str, ...]) -> str:
    """Where a config's values came from, as its errors begin: a value --set gave was labelled
    "defaults", which sent a reader to a file they never wrote."""
    if path and overrides:
        return f"{path} with --set"
    return str(path) if path else "--set" if overrides else "defaults"


def _example(name: str) -> str:
    return ", e.g. optim.lr=1e-5"


NESTED = ("reward", "sandbox")  # the sections with tables of their own


def with_overrides(
    data: dict[str, Any],
    overrides: list[str] | tuple[str, ...],
    suggest: Callable[[str], str] = _example,
) -> dict[str, Any]:
    """`data` with each `section.field=value` set (the value parsed as TOML, else a plain
    string); [reward] and [sandbox] take dotted paths into their tables (`reward.noise.rate=0.2`,
    `reward.tree.type='pass'`, `sandbox.limits.wall_s=5`). `suggest(name)` ends the error for a
    key with no section."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or "." not in key:
            raise ConfigError(f"--set {item!r}: expected section.field=value{suggest(key)}")
        section, *inner, name = key.split(".")
        if inner and section not in NESTED:
            raise ConfigError(f"--set {item!r}: [{section}] has no nested tables")
        table = data.setdefault(section, {})
        for part in inner:
            if not isinstance(table, dict):
                raise ConfigError(f"--set {item!r}: {part} is not a table")
            table = table.setdefault(part, {})
        table[name] = _parse_value(raw.strip())
    return data


def checked_table(
    target: Any,
    section: str,
    values: dict[str, Any],
    where: str,
    suggest: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """`values` of [section] checked against the fields of `target` (a dataclass instance):
    unknown keys and wrong types are errors naming the key; an unknown key's ends with
    `suggest(key)` where that has a suggestion ("did you mean")."""
    hints = typing.get_type_hints(type(target))
    checked = {}
    for name, value in values.items():
        if name not in hints:
            known = ", ".join(f.name for f in dataclasses.fields(target))
            hint = suggest(name) if suggest else ""
            hint = hint if "did you mean" in hint else ""
            raise ConfigError(f"{where}: unknown key {section}.{name}; known: {known}{hint}")
        inner = getattr(target, name)
        if dataclasses.is_dataclass(inner) and not isinstance(inner, type):
            # a table of its own ([sandbox.limits]): its keys over the target's own values
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: {section}.{name} must be a table, e.g. "
                                  f"[{section}.{name}]")  # fmt: skip
            table = checked_table(inner, f"{section}.{name}", value, where)
            checked[name] = dataclasses.replace(inner, **table)
            continue
        checked[name] = check_type(f"{section}.{name}", value, hints[name], where)
    return checked


def check_type(key: str, value: Any, hint: Any, where: str) -> Any:
    """`value` as the type `hint` asks (an int where a float is asked is taken), or an error."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint):
        (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]  # TOML has no None
        origin = typing.get_origin(hint)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return tuple(check_type(key, value, list[item], where))  # type: ignore[valid-type]
    if origin is list:
        (item,) = typing.get_args(hint)
        if isinstance(value, str) and item is str:
            value = [value]
        if not isinstance(value, list):
            raise ConfigError(f"{where}: {key} must be a list, got {value!r}")
        return [check_type(f"{key}[]", v, item, where) for v in value]
    if origin in (typing.Union, types.UnionType):
        raise ConfigError(f"{where}: {key}: union types are not supported in the config")
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if (
        hint is bool
        and not isinstance(value, bool)
        or not isinstance(value, hint)
        or (hint is int and isinstance(value, bool))
    ):
        raise ConfigError(f"{where}: {key} must be {hint.__name__}, got {value!r}")
    return value


def to_toml(sections: dict[str, dict[str, Any]]) -> str:
    """Each section as a TOML table; None values (unset optional fields) are left out."""
    lines = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines.extend(f"{k} = {_toml_value(v)}" for k, v in values.items() if v is not None)
        lines.append("")
    return "\n".join(lines)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):  # an inline table: the reward tree and its options nest
        items = (f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items() if x is not None)
        return "{ " + ", ".join(items) + " }"
    return json.dumps(str(v))  # JSON string escapes are valid TOML basic strings


def _parse_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw
