"""Peak memory of the weight push into a vLLM engine under dist.strategy = "fsdp".

    /path/to/vllm-env/bin/python scripts/push_memory.py [--hidden 768] [--layers 6]
    /path/to/vllm-env/bin/python -m torch.distributed.run --standalone --nproc_per_node 2 \
        scripts/push_memory.py        # each process its own engine, the model sharded in two
    /path/to/vllm-env/bin/python scripts/push_memory.py --engine-device cpu   # engine_devices

Builds a random Llama of the given shape, shards it with FSDP2 in a process group of one, starts
a colocated in-process vLLM engine (under torchrun: sharded over the processes, an engine in each) and pushes the weights into it twice: one FSDP unit at a time
(`rl.parallel.fsdp.unit_weights`, what `execrl train` does) and, for comparison, the whole state
dict gathered at once (`get_model_state_dict(full_state_dict=True)`, what a push without units would
hold on every rank). For each it prints the most bytes of whole tensors alive at once (the units
FSDP holds gathered plus the copies handed to vLLM that are still alive), and the rise in resident
memory over the push (sampled every millisecond; glibc's mmap threshold fixed so freed tensors leave
the resident set), and the push's time. With --engine-device the engine runs in a process of its own
there (`sampling.engine_devices`, `models.engines.remote_engine`): the weights go over the gloo (or
NCCL) weight group, and the figures are the trainer process's alone. docs/engines.md keeps what it
printed.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", "131072")  # read by glibc at start: re-exec
if os.environ.get("_PUSH_MEMORY_EXEC") != "1":
    import sys

    os.environ["_PUSH_MEMORY_EXEC"] = "1"
    os.execv(sys.executable, [sys.executable, *sys.argv])

import torch  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402

MiB = 2**20


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Watch:
    """The most whole-tensor bytes alive at once while a weight source is consumed, and the
    peak resident memory over the push."""

    def __init__(self, model: Any) -> None:
        self.model, self.alive, self.most, self.rss_peak = model, {}, 0, 0
        self.running = False

    def source(self, pairs: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, Any]]:
        for name, tensor in pairs:
            key = id(tensor)
            self.alive[key] = tensor.numel() * tensor.element_size()
            weakref.finalize(tensor, self.alive.pop, key, None)
            gathered = sum(p.numel() * p.element_size() for p in self.model.parameters()
                           if not isinstance(p, DTensor))  # fmt: skip
            self.most = max(self.most, gathered + sum(self.alive.values()))
            yield name, tensor

    def sample(self) -> None:
        while self.running:
            self.rss_peak = max(self.rss_peak, _rss())
            threading.Event().wait(0.001)


def push(engine: Any, model: Any, source: Any) -> tuple[int, int, float]:
    """The most whole-tensor bytes alive at once, the resident memory rise, and the seconds."""
    watch = Watch(model)
    engine.weights = lambda m: watch.source(source(m))
    before = _rss()
    watch.running = True
    sampler = threading.Thread(target=watch.sample)
    sampler.start()
    start = time.perf_counter()
    engine.sync_weights(model)
    seconds = time.perf_counter() - start
    watch.running = False
    sampler.join()
    return watch.most, watch.rss_peak - before, seconds


def whole_state_dict(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    yield from get_model_state_dict(model, options=StateDictOptions(full_state_dict=True)).items()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--engine-device", default="",
                        help="the engine in a process of its own on this device (cpu, cuda:N): "
                        "sampling.engine_devices; the figures are then the trainer's alone")  # fmt: skip
    parser.add_argument("--engine", default="vllm", choices=("vllm", "loop"),
                        help="loop: execrl's decode loop in the engine process (with "
                        "--engine-device; no vLLM needed), so the time is the transfer's")  # fmt: skip
    a = parser.parse_args()
    if a.engine == "loop" and not a.engine_device:
        parser.error("--engine loop needs --engine-device: a colocated loop has no copy to push")
    from execrl.models.engines.vllm_engine import VLLMEngine
    from execrl.models.loading.tiny import (
        TinyLlamaShape,
        new_llama,
        save_pretrained,
        train_bpe_tokenizer,
    )
    from execrl.rl.parallel import dist
    from execrl.rl.parallel.fsdp import unit_weights

    dist.init_from_env()
    with tempfile.TemporaryDirectory() as tmp, dist.group_of_one(True):
        tokenizer = train_bpe_tokenizer(["def add(a, b):\n    return a + b\n"] * 20, 300)
        heads = a.hidden // 64
        shape = TinyLlamaShape(hidden=a.hidden, layers=a.layers, heads=heads, kv_heads=heads,
                               intermediate=a.hidden * 8 // 3, max_positions=256)  # fmt: skip
        # one directory for every process (the run's config names one model.path): rank 0's
        model_dir = Path(dist.all_gather_objects(tmp)[0])
        if dist.rank() == 0:
            save_pretrained(new_llama(tokenizer, shape, seed=0), tokenizer, model_dir)
        dist.barrier()
        from execrl.rl import setup
        from execrl.rl.config.config import load_config
        from execrl.tasks import CallTests, Task

        config = load_config(None, [f"model.path={str(model_dir)!r}", "dist.strategy='fsdp'",
                                    "data.heldout=''", f"run.out_dir={tmp!r}"])  # fmt: skip
        tasks = [Task(id="t0", prompt="x", tests=CallTests(((1,),), (1,)), entry_point="f")]
        model = setup.build(config, tasks, []).policy.model
        whole = sum(p.numel() * p.element_size() for p in model.parameters())
        units = [sum(p.numel() * p.element_size() for p in layer.parameters())
                 for layer in model.model.layers]  # fmt: skip
        if a.engine_device:
            from execrl.models.engines.remote_engine import RemoteEngine

            options = {"max_model_len": 256} if a.engine == "vllm" else {}
            engine = RemoteEngine(a.engine, model, tokenizer, a.engine_device,
                                  weights=unit_weights, **options)  # fmt: skip
        else:
            engine = VLLMEngine(model, tokenizer, max_model_len=256, weights=unit_weights)
        where = (f"{a.engine} engine process on {a.engine_device}" if a.engine_device
                 else "colocated vllm engine")  # fmt: skip
        say = print if dist.rank() == 0 else (lambda *_, **__: None)
        say(f"{dist.world_size()} process(es); model: hidden {a.hidden}, {a.layers} layers, {whole / MiB:.0f} MiB "
              f"(float32); a decoder layer {max(units) / MiB:.1f} MiB, the root (embedding, "
              f"norm, head) {(whole - sum(units)) / MiB:.1f} MiB")  # fmt: skip
        say(f"| push ({where}) | rank | whole tensors alive at once (MiB) | resident memory "
            f"rise (MiB) | seconds | ms per MiB |")  # fmt: skip
        say("| --- | --- | --- | --- | --- | --- |")
        for label, source in (("one unit at a time", unit_weights),
                              ("whole state dict", whole_state_dict)):  # fmt: skip
            push(engine, model, source)  # warm: vLLM's first reload allocates its own buffers
            most, rise, seconds = push(engine, model, source)
            for rank, (m, r, t) in enumerate(dist.all_gather_objects((most, rise, seconds))):
                say(f"| {label} | {rank} | {m / MiB:.1f} | {r / MiB:.1f} | {t:.2f} | "
                    f"{1000 * t / (whole / MiB):.2f} |", flush=True)  # fmt: skip
        engine.close()


if __name__ == "__main__":
    main()
