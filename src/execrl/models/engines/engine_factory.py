"""`make_engine`: the rollout engine `sampling.engine` names, colocated or on a device of its own,
and whether it can run here (`engine_missing`). The engines themselves and their interface are
in `models.engines.engine`; this module sits above them and the engine process
(`models.engines.remote_engine`), which build engines of their own without it.
"""

from __future__ import annotations

from typing import Any

from execrl.models.engines.engine import (
    ENGINES,
    InProcessEngine,
    RolloutEngine,
    SupervisedEngine,
    refuse_options,
)

# the options make_engine gives the supervisor, not the engine
_SUPERVISION = ("timeout_s", "restarts", "poll_s")


def make_engine(name: str, model: Any, tokenizer: Any, *, device: str = "",
                **options: Any) -> RolloutEngine:  # fmt: skip
    """The engine `sampling.engine` names, generating with `model` (a HF causal LM) and
    `tokenizer`. `options` go to engines that take them (vLLM: `models.engines.vllm_engine`, and
    `SupervisedEngine`'s timeout_s, restarts and poll_s). With a `device` (one entry of
    `sampling.engine_devices`) the engine runs in a process of its own on that device
    (`models.engines.remote_engine`), supervised as vLLM is; `weights` is then the source each push
    sends, and the other options go to the engine in that process."""
    if name not in ENGINES:
        raise ValueError(f"sampling.engine = {name!r}; choose one of {', '.join(ENGINES)}")
    watch = {k: options.pop(k) for k in _SUPERVISION if k in options}
    if device:
        from execrl.models.engines.remote_engine import RemoteEngine

        return SupervisedEngine(
            lambda m: RemoteEngine(name, m, tokenizer, device, **options), model, **watch
        )
    if name in ("loop", "hf"):
        refuse_options(name, [*options, *watch])
        return InProcessEngine(name, model, tokenizer)
    from execrl.models.engines.vllm_engine import VLLMEngine  # "vllm", the one left

    return SupervisedEngine(lambda m: VLLMEngine(m, tokenizer, **options), model, **watch)


def engine_missing(name: str) -> str | None:
    """What to install when engine `name` cannot run in this environment (vLLM absent), else
    None: every command asks this before any model loads."""
    import importlib.util

    if name != "vllm" or importlib.util.find_spec("vllm") is not None:
        return None
    from execrl.models.engines.vllm_engine import INSTALL_HINT

    return INSTALL_HINT
