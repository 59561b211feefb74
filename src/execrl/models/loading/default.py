"""The embedded default model: a small Llama and a byte-level BPE tokenizer, built by execrl.

Nothing is downloaded. On first use execrl trains the tokenizer on the procedural suite's easy
tasks, initialises a Llama-architecture model of about a million parameters, fine-tunes it (SFT)
on the reference solutions of those tasks with the loop `execrl sft` runs (`models.loading.sft.sft`
through `train_steps`; `execrl sft` itself sits above this layer), and saves both in Hugging
Face format under `$EXECRL_DEFAULT_MODEL_DIR` (default
`~/.cache/execrl/default-model-<recipe hash>`). Later uses load that directory. The recipe hash
changes whenever the recipe does, so a stale cache is never reused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from execrl.models.loading.sft import SFTSettings, sft
from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)
from execrl.models.prompting.prompting import signature_prompt, signature_split
from execrl.tasks.schema import Task

ENV_DIR = "EXECRL_DEFAULT_MODEL_DIR"
RECIPE_FILE = "execrl_recipe.json"  # beside a model built by this recipe (a variant included)


@dataclass(frozen=True, slots=True)
class DefaultRecipe:
    shape: TinyLlamaShape = TinyLlamaShape()
    vocab_size: int = 512
    individual_digits: bool = True  # one token per digit: numbers copy from prompt to body
    n_tasks: int = 800  # SFT tasks drawn from the easy end of the procedural suite
    difficulty: int = 1  # the easy end: RL then trains on harder tasks
    sft: SFTSettings = field(default_factory=SFTSettings)
    seed: int = 0

    def digest(self) -> str:
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:10]


def is_default_model(name: str) -> bool:
    """Whether `name` is the embedded default or a directory built by its recipe: a model that
    continues a `def` line (signature prompts), whatever it was fine-tuned on since."""
    return name == "default" or (Path(name).expanduser() / RECIPE_FILE).is_file()


def default_model_dir(recipe: DefaultRecipe = DefaultRecipe()) -> Path:
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser()
    return cache / "execrl" / f"default-model-{recipe.digest()}"


def ensure_default_model(recipe: DefaultRecipe = DefaultRecipe()) -> Path:
    """The directory of the default model, building it first if it is not there."""
    directory = default_model_dir(recipe)
    if (directory / "config.json").is_file():
        return directory
    tasks = _easy_tasks(recipe)
    return build_default_model(directory, tasks, recipe)


def sft_pairs(tasks: Sequence[Task]) -> list[tuple[str, str]]:
    """(prompt, completion) from each task's reference solution, in the prompt format training
    and evaluation use (`models.prompting.prompting`): a signature prompt and the function body
    where one can be built, else the prompt and the reference minus the prompt when it starts with
    it."""
    pairs = []
    for task in tasks:
        if not task.reference:
            continue
        prompt, split = signature_prompt(task), signature_split(task)
        if prompt is not None and split is not None:
            pairs.append((prompt, split[1]))
            continue
        ref = task.reference
        completion = ref[len(task.prompt) :] if ref.startswith(task.prompt) else ref
        pairs.append((task.prompt, completion))
    return pairs


def build_default_model(
    directory: str | Path,
    tasks: Sequence[Task],
    recipe: DefaultRecipe = DefaultRecipe(),
    log: Callable[[str], None] | None = None,
) -> Path:
    """Train tokenizer and model on the tasks' references and save them, atomically, in directory."""
    import torch

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    directory = Path(directory)
    pairs = sft_pairs(tasks)
    if not pairs:
        raise ValueError("building the default model needs tasks with reference solutions")
    start = time.time()
    log(f"execrl: building the embedded default model in {directory} (first use only)")
    tokenizer = train_bpe_tokenizer(
        (p + c for p, c in pairs), recipe.vocab_size, recipe.individual_digits
    )
    # No chat template: the default is a base code model that continues its (code) prompt.
    model = new_llama(tokenizer, recipe.shape, seed=recipe.seed)
    n_params = sum(p.numel() for p in model.parameters())
    every = max(1, recipe.sft.steps // 10)

    def progress(step: int, loss: float) -> None:
        if step % every == 0 or step == recipe.sft.steps - 1:
            log(
                f"  sft step {step + 1}/{recipe.sft.steps} loss {loss:.3f} ({time.time() - start:.0f}s)"
            )

    with torch.random.fork_rng():
        torch.manual_seed(recipe.seed)
        losses = sft(model, tokenizer, pairs, recipe.sft, progress=progress)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=directory.parent))
    save_pretrained(model, tokenizer, staging)
    (staging / RECIPE_FILE).write_text(
        json.dumps(
            {
                "recipe": dataclasses.asdict(recipe),
                "n_params": n_params,
                "n_sft_pairs": len(pairs),
                "final_sft_loss": losses[-1],
                "seconds": round(time.time() - start, 1),
            },
            indent=2,
        )
    )
    try:
        staging.rename(directory)  # atomic: a half-built model is never visible
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # another process finished first
        if not (directory / "config.json").is_file():
            raise
    log(
        f"execrl: default model ready ({n_params / 1e6:.2f}M parameters, {time.time() - start:.0f}s)"
    )
    return directory


def _easy_tasks(recipe: DefaultRecipe) -> list[Task]:
    return synthetic_tasks(recipe.seed, recipe.n_tasks, recipe.difficulty, "train")


def synthetic_tasks(seed: int, n: int, difficulty: int, split: str) -> list[Task]:
    """n tasks of the procedural suite (`execrl.tasks.synthetic`) at one difficulty."""
    try:
        from execrl.tasks.synthetic import generate
    except ImportError as e:
        raise RuntimeError(
            "the procedural suite (execrl.tasks.synthetic) is not available in this checkout; "
            "give tasks with --set data.train=jsonl:PATH and a model with --set model.path=DIR"
        ) from e
    return list(generate(seed=seed, n=n, difficulty=difficulty, split=split))
