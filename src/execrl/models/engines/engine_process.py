"""The engine process of `models.engines.remote_engine`: the rollout engine on a device of its own.

Started by the trainer (spawn context), it loads the policy the trainer wrote in Hugging Face
format, builds the engine `sampling.engine` names on its device, joins the weight group
(`models.engines.weight_group`) and serves the trainer's requests (`models.engines.engine_messages`)
one at a time until told to stop. It exits when its trainer does: a closed pipe ends the loop, and a
watcher thread ends the process once its parent is gone (a trainer killed mid-generate).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import traceback
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

import torch

from execrl.models.engines import engine_messages as messages
from execrl.models.engines.weight_group import ENGINE, WeightGroup, engine_store

PARENT_POLL_S = 1.0


def serve(spec: messages.EngineSpec, conn: Connection) -> None:
    """The engine process's main: build, say Ready, join the group, answer until Stop."""
    _exit_with_parent(os.getppid(), spec.directory)
    torch.set_num_threads(spec.threads)
    device = _local_device(spec.device)
    engine, model = _build(spec, device)
    conn.send(messages.Ready(os.getpid()))
    group = WeightGroup.join(engine_store(spec.port, spec.timeout_s), ENGINE, spec.backend,
                             device, spec.timeout_s)  # fmt: skip
    try:
        while True:
            try:
                request = conn.recv()
            except EOFError:  # the trainer closed its end (or died)
                return
            if isinstance(request, messages.Stop):
                return
            conn.send(_answer(request, engine, model, group, conn, device))
    finally:
        engine.close()
        group.close()
        shutil.rmtree(spec.directory, ignore_errors=True)  # the trainer's, if it could not


def _answer(request: Any, engine: Any, model: Any, group: WeightGroup, conn: Connection,
            device: torch.device) -> Any:  # fmt: skip
    if isinstance(request, messages.Generate):
        try:
            request.rng.restore(device)
            completions = engine.generate(request.prompt_ids, request.params, n=request.n)
            return messages.Generated(completions, messages.RngStates.here(device))
        except Exception:  # noqa: BLE001 -- the request's failure, reported to the trainer
            return messages.Failed(traceback.format_exc(limit=4))
    if isinstance(request, messages.PushStart):
        return _push(engine, model, group, conn)
    return messages.Failed(f"the engine process does not know the request {request!r}")


def _push(
    engine: Any, model: Any, group: WeightGroup, conn: Connection
) -> messages.Pushed | messages.Failed:
    """Receive the tensors the trainer announces and load them as they come. A load that fails
    part-way still receives the rest (the trainer sends them all), then says why it failed."""
    incoming = Incoming(group, conn)
    try:
        if engine.name == "vllm":  # straight into vLLM's reload, tensor by tensor
            engine.weights = lambda _model: incoming
            engine.sync_weights(model)
        else:  # the in-process engines sample `model` itself
            _copy_into(model, incoming)
        error = None
    except Exception:  # noqa: BLE001 -- reported once the push's tensors are all received
        error = traceback.format_exc(limit=4)
    unused = sum(1 for _ in incoming)
    if error is None and unused:
        error = (
            f"the engine loaded {incoming.count - unused} of the {incoming.count} pushed tensors"
        )
    return messages.Pushed(incoming.count) if error is None else messages.Failed(error)


class Incoming:
    """(name, tensor) pairs as the trainer sends them, each received into a fresh tensor, until
    the push's end; `count` is how many came."""

    def __init__(self, group: WeightGroup, conn: Connection) -> None:
        self.group, self.conn, self.count, self.done = group, conn, 0, False

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        return self

    def __next__(self) -> tuple[str, torch.Tensor]:
        if self.done:
            raise StopIteration
        message = self.conn.recv()
        if isinstance(message, messages.PushEnd):
            self.done = True
            if message.tensors != self.count:
                raise RuntimeError(f"the push sent {message.tensors} tensors, {self.count} came")
            raise StopIteration
        if not isinstance(message, messages.TensorSpec):
            self.done = True
            raise RuntimeError(f"the push expected a tensor, got {message!r}")
        self.count += 1
        return message.name, self.group.receive(message.shape, message.dtype)


def _copy_into(model: Any, pairs: Iterator[tuple[str, torch.Tensor]]) -> None:
    """Each pushed tensor into the parameter (or buffer) of that name; a tied weight's second
    name finds the storage already written and is skipped."""
    state = model.state_dict()
    written: set[int] = set()
    with torch.no_grad():
        for name, tensor in pairs:
            if name not in state:
                raise KeyError(f"the pushed weight {name!r} is not in the engine's model")
            target = state[name]
            if target.data_ptr() in written:
                continue
            target.copy_(tensor)
            written.add(target.data_ptr())


def _build(spec: messages.EngineSpec, device: torch.device) -> tuple[Any, Any]:
    """The engine, and the model it samples: none for vLLM, which holds its own copy (the
    module it starts from is loaded on the CPU and dropped, never a second copy on the device)."""
    from execrl.models.engines.engine import InProcessEngine
    from execrl.models.loading.loading import load_policy

    if spec.name == "vllm":
        from execrl.models.engines.vllm_engine import VLLMEngine

        policy = load_policy(spec.directory, device="cpu", dtype=spec.dtype)
        # unsupervised here: the trainer supervises this whole process (`SupervisedEngine`)
        return VLLMEngine(policy.model, policy.tokenizer, **spec.options), None
    policy = load_policy(spec.directory, device=str(device), dtype=spec.dtype)
    return InProcessEngine(spec.name, policy.model, policy.tokenizer), policy.model


def _local_device(device: str) -> torch.device:
    """The engine's device as this process sees it: a GPU is made the only one visible (vLLM
    runs on the first visible GPU), before anything here starts CUDA."""
    if not device.startswith("cuda"):
        return torch.device(device)
    index = torch.device(device).index or 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = visible.split(",")[index] if visible else str(index)
    return torch.device("cuda:0")


def _exit_with_parent(parent: int, directory: str) -> None:
    """End this process once the trainer that started it is gone, even mid-generate, with the
    policy directory the trainer wrote (a killed trainer could not remove it)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        shutil.rmtree(directory, ignore_errors=True)
        os._exit(3)

    threading.Thread(target=watch, name="execrl-engine-parent-watch", daemon=True).start()
