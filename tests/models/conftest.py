import pytest

from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)

CORPUS = ["def add(a, b):\n    return a + b\n", "def neg(x):\n    return -x\n"] * 10
SHAPE = TinyLlamaShape(hidden=32, layers=2, heads=2, kv_heads=1, intermediate=64, max_positions=128)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random Llama and BPE tokenizer saved in Hugging Face format."""
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    model = new_llama(tokenizer, SHAPE, seed=0)
    return save_pretrained(model, tokenizer, tmp_path_factory.mktemp("tiny"))
