"""On a GPU machine: the 0.5B LoRA recipe for a few steps, checked against what it promises.

Runs `execrl train --config configs/qwen2.5-coder-0.5b-lora-mbpp.toml` for `--steps` steps in
this process (the CLI's own entry point), then checks that
- held-out pass@1 moved (after != before, on the first `--heldout` MBPP test tasks), and
- the peak GPU memory torch allocated (`torch.cuda.max_memory_allocated`, which leaves out the
  CUDA context and the allocator's cache) is within `--tolerance` of `execrl plan`'s peak for the
  same config (`--reserve 0B`, for the same reason).
Exit status 0 when both hold, 1 when one fails, 2 without a GPU (it refuses; CI never runs it).
Needs the model (downloaded on first use, or `--set model.path=DIR`), PEFT and the MBPP data.

    python benchmarks/gpu_recipe_check.py --steps 10 --heldout 50

The last line of stdout is JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[1] / "configs" / "qwen2.5-coder-0.5b-lora-mbpp.toml"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(RECIPE))
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--heldout", type=int, default=50, help="held-out tasks (4 samples each)")
    p.add_argument("--tolerance", type=float, default=0.25,
                   help="the measured peak may exceed the plan's by this fraction")  # fmt: skip
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE")
    p.add_argument("--out", help="where the run goes (default: a temporary directory)")
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_recipe_check: needs a CUDA GPU, and torch sees none here "
              "(torch.cuda.is_available() is False); run it on a GPU machine", file=sys.stderr)  # fmt: skip
        return 2
    from execrl.cli import main as execrl

    with tempfile.TemporaryDirectory(prefix="execrl-gpu-check-") as tmp:
        out = Path(args.out or tmp)
        overrides = [f"run.steps={args.steps}", f"data.n_heldout={args.heldout}",
                     f"run.out_dir={str(out)!r}", "run.name='gpu-check'", "run.checkpoint_every=0",
                     *args.set]  # fmt: skip
        sets = [arg for o in overrides for arg in ("--set", o)]
        device_bytes = torch.cuda.get_device_properties(0).total_memory
        planned = _plan(execrl, args.config, sets, device_bytes)
        torch.cuda.reset_peak_memory_stats()
        if execrl(["train", "--config", args.config, *sets]) != 0:
            print("gpu_recipe_check: execrl train failed (above)", file=sys.stderr)
            return 1
        peak = torch.cuda.max_memory_allocated()
        summary = json.loads((out / "gpu-check" / "summary.json").read_text())
    before, after = summary["heldout_pass@1_before"], summary["heldout_pass@1_after"]
    moved = after != before
    within = peak <= planned * (1 + args.tolerance)
    gib = 2**30
    print(f"held-out pass@1 {before:.3f} -> {after:.3f}: {'moved' if moved else 'DID NOT MOVE'}")
    print(f"peak GPU memory {peak / gib:.2f} GiB, planned {planned / gib:.2f} GiB: "
          f"{'within' if within else 'OVER'} +{args.tolerance:.0%}")  # fmt: skip
    print(json.dumps({"device": torch.cuda.get_device_name(0), "steps": args.steps,
                      "heldout_before": before, "heldout_after": after, "moved": moved,
                      "peak_bytes": peak, "planned_bytes": planned, "within": within}))  # fmt: skip
    return 0 if moved and within else 1


def _plan(execrl, config: str, sets: list[str], device_bytes: int) -> int:  # noqa: ANN001
    """`execrl plan`'s peak for the run, without the CUDA context torch does not count."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        status = execrl(["plan", "--config", config, *sets, "--reserve", "0B",
                         "--device-memory", f"{device_bytes}B", "--json"])  # fmt: skip
    if status != 0:
        raise SystemExit(f"gpu_recipe_check: execrl plan failed ({status})")
    return json.loads(text.getvalue())["peak_bytes"]


if __name__ == "__main__":
    sys.exit(main())
