"""A rollout engine in a process of its own, on a device of its own (`sampling.engine_devices`).

The trainer writes its policy once, in Hugging Face format (`models.engines.weights.save_policy`),
and starts the engine process (`models.engines.engine_process`, spawn context: the trainer holds
threads and a process group, which a fork would copy half-made). That process builds the engine
`sampling.engine` names ("loop", "hf", "vllm") on its device and serves requests over a pipe:
prompt ids and `SamplingParams` in, `Completion`s out. To the trainer it is one more
`RolloutEngine`.

Weights: `sync_weights` iterates the trainer's `WeightSource` (the whole state dict, or under FSDP
one decoder layer gathered at a time) and sends each tensor over a two-process group of its own
(`models.engines.weight_group`: gloo, or NCCL between GPUs), announced first on the pipe by name,
shape and dtype; the engine process receives each into a fresh tensor and loads it as it comes. The
trainer holds at most one tensor beyond what the source holds (its copy on the group's device,
when it is elsewhere). A spec message goes per tensor, not per unit: a `WeightSource` is an
iterator whose units its consumer cannot see, and a small message costs microseconds beside
the tensor.

Seeding: a request carries torch's generator states and its result brings them back, so a seeded
remote engine draws what the same engine in the trainer's process would, and leaves the
trainer's generators where that engine would have.

Life: `close` stops the process (waits, then kills); the engine process exits when the trainer
does; a dead engine process makes the waiting call raise `EngineFailure`, naming the engine, the
device and the exit code, seen within `POLL_S` (never a hang). `alive`, `pids` and `kill` let
`models.engines.engine.SupervisedEngine` restart it from the current weights, as it does vLLM.
"""

from __future__ import annotations

import multiprocessing
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from execrl.models.engines.engine import EngineFailure, refuse_options
from execrl.models.engines.engine_messages import (
    EngineSpec,
    Failed,
    Generate,
    Generated,
    Pushed,
    PushEnd,
    PushStart,
    Ready,
    RngStates,
    Stop,
    TensorSpec,
)
from execrl.models.engines.engine_process import serve
from execrl.models.engines.sampling import Completion, SamplingParams
from execrl.models.engines.weight_group import TRAINER, WeightGroup, backend_for, trainer_store
from execrl.models.engines.weights import WeightSource, base_model, plain_weights, save_policy

POLL_S = 0.2  # how soon a dead engine process is seen
CLOSE_S = 30.0  # how long `close` waits for the process to stop before killing it


class RemoteEngine:
    """The trainer's side of an engine process: a `RolloutEngine` (and supervisable)."""

    def __init__(self, name: str, model: Any, tokenizer: Any, device: str, *,
                 weights: WeightSource = plain_weights, start_timeout_s: float = 600.0,
                 group_timeout_s: float = 600.0, **options: Any) -> None:  # fmt: skip
        refuse_options(name, options)
        self.name, self.device, self.weights = name, device, weights
        plain = base_model(model)
        self.trainer_device = next(plain.parameters()).device
        self.directory = Path(tempfile.mkdtemp(prefix="execrl-engine-"))
        save_policy(self.directory, model, tokenizer, weights)
        backend = backend_for(self.trainer_device, torch.device(device))
        self.store = trainer_store(group_timeout_s)
        spec = EngineSpec(name, device, str(self.directory),
                          str(plain.dtype).removeprefix("torch."), torch.get_num_threads(),
                          self.store.port, backend, group_timeout_s, options)  # fmt: skip
        context = multiprocessing.get_context("spawn")
        self.conn, theirs = context.Pipe()
        self.process = context.Process(target=serve, args=(spec, theirs),
                                       name=f"execrl-engine-{name}-{device}")  # fmt: skip
        self.process.start()
        self.lock = threading.Lock()  # one request on the pipe at a time, whichever thread asks
        theirs.close()  # only the engine process holds its end: its death closes the pipe
        self.closed = False
        try:
            self._answer(Ready, "start", start_timeout_s)
            self.group = WeightGroup.join(self.store, TRAINER, backend, self.trainer_device,
                                          group_timeout_s)  # fmt: skip
        except BaseException:
            self.kill()
            raise

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams, *, n: int
    ) -> list[Completion]:
        if n < 1:
            raise ValueError(f"n (completions per prompt) must be >= 1, got {n}")
        rows = [list(map(int, ids)) for ids in prompt_ids]
        with self.lock:
            self._send(Generate(rows, params, n, RngStates.here(self.trainer_device)), "generate")
            generated = self._answer(Generated, "generate")
            generated.rng.restore(self.trainer_device)
        return generated.completions

    def sync_weights(self, model: Any) -> None:
        """Every tensor the source yields, over the weight group, one at a time."""
        with self.lock:
            self._push(model)

    def _push(self, model: Any) -> None:
        self._send(PushStart(), "sync_weights")
        count = 0
        for name, tensor in self.weights(model):
            self._send(TensorSpec(name, tuple(tensor.shape), tensor.dtype), "sync_weights")
            try:
                self.group.send(tensor)
            except RuntimeError as error:  # gloo/NCCL: the other side went away
                raise self._failure("sync_weights", error) from error
            count += 1
        self._send(PushEnd(count), "sync_weights")
        self._answer(Pushed, "sync_weights")

    def alive(self) -> bool:
        return not self.closed and self.process.is_alive()

    def pids(self) -> list[int]:
        return [self.process.pid] if self.alive() and self.process.pid else []

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(CLOSE_S)
        self._release()

    def close(self) -> None:
        if self.closed:
            return
        if self.process.is_alive():
            try:
                self.conn.send(Stop())
            except OSError:  # it died meanwhile
                pass
            self.process.join(CLOSE_S)
        self.kill()

    def _release(self) -> None:
        if not self.closed:
            self.closed = True
            group = getattr(self, "group", None)
            if group is not None:
                group.close()
            self.conn.close()
            shutil.rmtree(self.directory, ignore_errors=True)

    def _send(self, message: Any, what: str) -> None:
        if self.closed:
            raise RuntimeError(f"the {self.name!r} rollout engine on {self.device} was closed")
        try:
            self.conn.send(message)
        except OSError as error:  # a broken pipe: the process is gone
            raise self._failure(what, error) from error

    def _answer(self, expected: type, what: str, timeout_s: float | None = None) -> Any:
        """The engine process's answer to `what`, polled so that its death is seen."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                message = self.conn.recv() if self.conn.poll(POLL_S) else None
            except (EOFError, OSError) as error:
                raise self._failure(what, error) from error
            if isinstance(message, Failed):
                raise RuntimeError(
                    f"the {self.name!r} rollout engine on {self.device} failed its {what}:\n"
                    f"{message.error}"
                )
            if isinstance(message, expected):
                return message
            if message is not None:
                raise RuntimeError(f"the {self.name!r} engine process answered {what} with "
                                   f"{type(message).__name__}, not {expected.__name__}")  # fmt: skip
            if not self.process.is_alive():
                raise self._failure(what, None)
            if deadline is not None and time.monotonic() > deadline:
                raise EngineFailure(f"the {self.name!r} rollout engine on {self.device} did not "
                                    f"{what} in {timeout_s:g} s")  # fmt: skip

    def _failure(self, what: str, error: BaseException | None) -> EngineFailure:
        self.process.join(POLL_S * 5)  # its exit code, once the pipe has shown it gone
        code = self.process.exitcode
        how = ("still running" if code is None else f"exit code {code}"
               + (f" (killed by signal {-code})" if code < 0 else ""))  # fmt: skip
        return EngineFailure(
            f"the {self.name!r} rollout engine process on {self.device} (pid {self.process.pid}) "
            f"ended during {what}: {how}"
            + (f" ({error!r})" if error is not None else "")
            + "; its own log is above (out of memory? a crash in the engine?)"
        )
