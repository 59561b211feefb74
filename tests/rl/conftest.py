from dataclasses import dataclass

import pytest

from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)
from execrl.rewards.result import RewardResult
from execrl.rl.config.config import load_config
from execrl.tasks import CallTests, Task

CORPUS = ["def add(a, b):\n    return a + b\n", "eee eeee e", "xyz qrs"] * 10


@pytest.fixture(scope="session")
def tiny_default_dir(tmp_path_factory):
    """A tiny embedded default (the model `model.path = "default"` builds), made in a temporary
    cache directory: point EXECRL_DEFAULT_MODEL_DIR at it to train on the no-argument path."""
    from execrl.models.loading.default import DefaultRecipe, build_default_model, synthetic_tasks
    from execrl.models.loading.sft import SFTSettings

    recipe = DefaultRecipe(
        shape=TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64),
        vocab_size=300, sft=SFTSettings(steps=2, batch_size=4, warmup=1),
    )  # fmt: skip
    return build_default_model(tmp_path_factory.mktemp("default"),
                               synthetic_tasks(0, 16, 1, "train"), recipe, log=lambda m: None)  # fmt: skip


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    shape = TinyLlamaShape(
        hidden=32, layers=2, heads=2, kv_heads=1, intermediate=64, max_positions=128
    )
    return save_pretrained(
        new_llama(tokenizer, shape, seed=0), tokenizer, tmp_path_factory.mktemp("m")
    )


def tasks(n: int = 6) -> list[Task]:
    return [
        Task(id=f"t{i}", prompt=f"Write {i}:", tests=CallTests(((1,),), (1,)), entry_point="f")
        for i in range(n)
    ]


@dataclass(frozen=True)
class LetterE:
    """A trivially learnable reward needing no execution: the fraction of 'e' characters."""

    name: str = "letter_e"

    @property
    def needs(self) -> frozenset[str]:
        return frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def __call__(self, sample) -> RewardResult:
        text = sample.completion
        score = text.count("e") / max(1, len(text))
        return RewardResult(score, {self.name: score})


def tiny_config(model_dir, out_dir, *extra: str):
    return load_config(
        None,
        [
            f"model.path={str(model_dir)!r}",
            f"run.out_dir={str(out_dir)!r}",
            "run.name='run'",
            "data.heldout=''",
            "run.steps=4",
            "rl.group_size=4",
            "rl.groups_per_step=4",
            "rl.micro_batch_size=8",
            "sampling.max_new_tokens=8",
            "sampling.groups_per_generate=1",
            "sandbox.workers=1",
            "optim.lr=0.01",
            *extra,
        ],
    )
