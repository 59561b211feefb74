"""Decode time of a LoRA policy through PEFT's own layers (the generic forward) against execrl's
lean decoder with the adapter merged into its weights (`models.engines.lean_llama`), on a random
model of SmolLM2-135M-Instruct's shape (built here; nothing is downloaded).

Both paths run `models.engines.decode.decode` with the same seed and must give the same tokens; the
generic path is what a LoRA policy used before (issue 27). Each path runs `--repeats` times,
alternating, after one warm-up each; the fastest run of each is compared. The last line of stdout
is JSON, with the load average before and after.

    nice -n 5 .venv/bin/python benchmarks/lora_decode.py --rows 16 --tokens 64 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from execrl.models.engines import decode as decode_module

TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=16, help="sequences decoded together")
    p.add_argument("--tokens", type=int, default=64, help="new tokens per sequence")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--targets", default=TARGETS, help="comma-separated LoRA target modules")
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    import peft
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    shape = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                        num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                        tie_word_embeddings=True, max_position_embeddings=2048)  # fmt: skip
    lora = peft.LoraConfig(r=8, lora_alpha=16, target_modules=args.targets.split(","))
    model = peft.get_peft_model(LlamaForCausalLM(shape), lora).eval()
    ids = torch.randint(1, 49000, (args.rows, 48))
    kw = dict(temperature=1.0, top_p=1.0, max_new_tokens=args.tokens, eos_ids=[0], pad_id=0)
    lean_of = decode_module.LeanLlama.of
    generic = classmethod(lambda cls, m: None)

    def run(lean: bool) -> tuple[float, torch.Tensor]:
        decode_module.LeanLlama.of = lean_of if lean else generic
        torch.manual_seed(1)
        start = time.perf_counter()
        tokens = decode_module.decode(model, ids, torch.ones_like(ids), **kw)[0]
        return time.perf_counter() - start, tokens

    load_before = os.getloadavg()
    times: dict[bool, list[float]] = {True: [], False: []}
    outputs = {lean: run(lean)[1] for lean in (True, False)}  # warm-up
    for _ in range(args.repeats):
        for lean in (False, True):
            times[lean].append(run(lean)[0])
    decode_module.LeanLlama.of = lean_of
    result = {
        "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
        "rows": args.rows, "tokens": args.tokens, "threads": args.threads,
        "targets": args.targets, "peft_s": round(min(times[False]), 2),
        "lean_s": round(min(times[True]), 2),
        "ratio": round(min(times[False]) / min(times[True]), 2),
        "same_tokens": bool(torch.equal(outputs[True], outputs[False])),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
