"""Learned or external reward models behind the same interface: a Python callable, or HTTP.

Transport failures of an HTTP model (refused, timed out, 5xx) are not the policy's fault: the
sample is masked and flagged REWARD_MODEL_ERROR. A 4xx or a malformed answer is a configuration
error and raises.
"""

from __future__ import annotations

import importlib
import json
import math
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from execrl.rewards.base import leaf
from execrl.rewards.result import Flag, RewardResult
from execrl.rewards.sample import Sample

_UNBOUNDED = (-math.inf, math.inf)


class RewardModelError(RuntimeError):
    """An external reward model is misconfigured or answered something unusable."""


def payload(sample: Sample) -> dict[str, Any]:
    """What an external model receives for one sample (JSON)."""
    r = sample.result
    return {
        "task_id": sample.task.id,
        "prompt": sample.task.prompt,
        "completion": sample.completion,
        "program": sample.program,
        "verdict": r.verdict.value if r is not None else None,
        "pass_rate": r.pass_rate if r is not None else None,
    }


def load_callable(target: str) -> Callable[..., Any]:
    """`package.module:function` -> the function."""
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ValueError(f"callable target {target!r} must look like 'package.module:function'")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load reward callable {target!r}: {exc}") from exc
    if not callable(fn):
        raise ValueError(f"reward callable {target!r} is not callable")
    return fn


class _External:
    """What an external reward declares rather than the library knowing: the inputs it reads
    (`requires`) and its range (`low`, `high`), fields of the dataclass leaves below."""

    requires: tuple[str, ...]
    low: float
    high: float

    @property
    def needs(self) -> frozenset[str]:
        return frozenset(self.requires)

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.low, self.high)


@dataclass(frozen=True)
class CallableReward(_External):
    """`fn(sample) -> float | RewardResult`, e.g. a learned reward model in-process."""

    fn: Callable[[Sample], float | RewardResult]
    name: str = "reward_model"
    low: float = -math.inf
    high: float = math.inf
    requires: tuple[str, ...] = ()  # what the scorer must supply: "hidden", "visible", "tokens"

    def __call__(self, sample: Sample) -> RewardResult:
        out = self.fn(sample)
        if isinstance(out, RewardResult):
            return RewardResult(
                out.score,
                {**out.components, self.name: out.score},
                out.masked,
                out.token_credit,
                out.flags,
                out.reason,
            )
        score = float(out)
        if not math.isfinite(score):
            raise RewardModelError(
                f"reward callable {self.name!r} returned {out!r} for task "
                f"{sample.task.id}; a reward must be a finite number"
            )
        return leaf(self.name, score)


@dataclass(frozen=True)
class HttpReward(_External):
    """POSTs `payload(sample)` as JSON to `url`; expects `{"score": <number>}` back."""

    url: str
    name: str = "reward_model"
    timeout_s: float = 10.0
    low: float = -math.inf
    high: float = math.inf
    headers: dict[str, str] = field(default_factory=dict)
    requires: tuple[str, ...] = ()

    def __call__(self, sample: Sample) -> RewardResult:
        body = json.dumps(payload(sample)).encode()
        request = urllib.request.Request(
            self.url,
            data=body,
            headers={"Content-Type": "application/json", **self.headers},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code >= 500:
                return self._masked(f"HTTP {exc.code}")
            raise RewardModelError(
                f"reward model {self.url} answered HTTP {exc.code} for task {sample.task.id}: "
                "check the url and the request format (see execrl.rewards.leaves.external.payload)"
            ) from exc
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            return self._masked(str(getattr(exc, "reason", exc)))
        try:
            score = float(json.loads(raw)["score"])
        except (ValueError, KeyError, TypeError) as exc:
            raise RewardModelError(
                f"reward model {self.url} answered {raw[:200]!r} for task {sample.task.id}; "
                'expected a JSON object like {"score": 0.5}'
            ) from exc
        if not math.isfinite(score):
            raise RewardModelError(f"reward model {self.url} returned a non-finite score {score}")
        return leaf(self.name, score)

    def _masked(self, why: str) -> RewardResult:
        return RewardResult(
            0.0,
            {},
            masked=True,
            flags=frozenset({Flag.REWARD_MODEL_ERROR}),
            reason=f"reward model {self.url} failed: {why}",
        )
