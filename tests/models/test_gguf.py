"""`model.path` as a GGUF file: converted once to a Hugging Face directory, cached by hash.

Every GGUF file here is written by the test (`gguf_helpers`) from a tiny random Llama, so the
expected logits are that model's own."""

import pytest
import torch

from execrl.cli import main
from execrl.models import format_prompt, load_policy
from execrl.models import gguf as gguf_module
from execrl.models.gguf import ModelFileError, ensure_converted
from execrl.models.tiny import TinyLlamaShape, new_llama, train_bpe_tokenizer
from gguf_helpers import CHAT_TEMPLATE, write_tiny_gguf

CORPUS = ["def add(a, b):\n    return a + b\n", "def neg(x):\n    return -x\n"] * 10
SHAPE = TinyLlamaShape(hidden=32, layers=2, heads=2, kv_heads=1, intermediate=64, max_positions=128)
TEXT = "def add(a, b):\n    return a + b"


@pytest.fixture(scope="module")
def tiny():
    """(model, tokenizer): the weights every GGUF file below is written from."""
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    return new_llama(tokenizer, SHAPE, seed=0), tokenizer


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _logits(model, tokenizer, text=TEXT):
    with torch.no_grad():
        return model(torch.tensor([tokenizer(text)["input_ids"]])).logits


def test_gguf_loads_with_the_logits_tokens_and_chat_template_it_was_written_from(tiny, tmp_path):
    model, tokenizer = tiny
    path = write_tiny_gguf(model, tokenizer, tmp_path / "tiny.gguf")
    policy = load_policy(str(path))
    assert type(policy.model).__name__ == "LlamaForCausalLM"
    assert policy.tokenizer(TEXT)["input_ids"] == tokenizer(TEXT)["input_ids"]
    assert torch.equal(_logits(policy.model, policy.tokenizer), _logits(model, tokenizer))
    assert policy.model.config.tie_word_embeddings
    embed, head = policy.model.get_input_embeddings(), policy.model.get_output_embeddings()
    assert embed.weight.data_ptr() == head.weight.data_ptr()
    assert policy.tokenizer.chat_template == CHAT_TEMPLATE
    assert (
        format_prompt(policy.tokenizer, "hi") == "<|pad|>user\nhi<|endoftext|>\n<|pad|>assistant\n"
    )
    assert policy.tokenizer.pad_token == "<|pad|>" and policy.tokenizer.eos_token == "<|endoftext|>"


def test_quantised_gguf_is_dequantised_within_its_quantisation_error(tiny, tmp_path):
    model, tokenizer = tiny
    path = write_tiny_gguf(model, tokenizer, tmp_path / "tiny-q8.gguf", quant="Q8_0")
    policy = load_policy(str(path))
    # Q8_0 rounds each weight to 1/127 of its block's largest: a few thousandths of these logits.
    diff = (_logits(policy.model, policy.tokenizer) - _logits(model, tokenizer)).abs().max()
    assert 0 < diff < 0.02


def test_second_load_and_a_renamed_copy_reuse_the_cache(tiny, tmp_path, monkeypatch):
    model, tokenizer = tiny
    path = write_tiny_gguf(model, tokenizer, tmp_path / "tiny.gguf")
    first = ensure_converted(path, log=lambda m: None)
    assert (first / "model.safetensors").is_file() and (first / "tokenizer.json").is_file()

    def no_reconversion(*args):
        raise AssertionError("converted again")

    monkeypatch.setattr(gguf_module, "_convert", no_reconversion)
    assert ensure_converted(path) == first
    copy = tmp_path / "elsewhere" / "renamed.gguf"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    assert load_policy(str(copy)).model.config.num_hidden_layers == SHAPE.layers


def test_an_interrupted_conversion_never_leaves_a_cache_that_looks_complete(
    tiny, tmp_path, monkeypatch, cache
):
    model, tokenizer = tiny
    path = write_tiny_gguf(model, tokenizer, tmp_path / "tiny.gguf")
    real_convert = gguf_module._convert

    def interrupted(source, directory):
        real_convert(source, directory)  # every file written, then the user presses Ctrl-C
        (directory / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(gguf_module, "_convert", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ensure_converted(path, log=lambda m: None)
    assert list((cache / "models").iterdir()) == []  # neither a model nor a leftover
    monkeypatch.setattr(gguf_module, "_convert", real_convert)
    policy = load_policy(str(path))
    assert torch.equal(_logits(policy.model, policy.tokenizer), _logits(model, tokenizer))


def _damaged(tiny, tmp_path, how):
    model, tokenizer = tiny
    data = write_tiny_gguf(model, tokenizer, tmp_path / "whole.gguf").read_bytes()
    bad = tmp_path / f"{how}.gguf"
    bad.write_bytes({"header": data[:100], "tensors": data[:-100], "not gguf": b"{}" * 64}[how])
    return bad


@pytest.mark.parametrize("how", ["header", "tensors", "not gguf"])
def test_a_damaged_gguf_file_is_refused_naming_the_file(tiny, tmp_path, cache, how):
    bad = _damaged(tiny, tmp_path, how)
    with pytest.raises(
        ModelFileError, match=f"model file {bad} .*(download it again|give a .gguf)"
    ):
        load_policy(str(bad))
    assert not (cache / "models").exists() or list((cache / "models").iterdir()) == []


def test_an_unsupported_architecture_is_refused_saying_what_to_do(tiny, tmp_path):
    model, tokenizer = tiny
    path = write_tiny_gguf(model, tokenizer, tmp_path / "odd.gguf", architecture="bert")
    with pytest.raises(ModelFileError, match=r"odd.gguf holds a 'bert' model.*it can: .*llama"):
        load_policy(str(path))


def test_a_damaged_gguf_through_the_cli_is_one_line_and_exit_2(tiny, tmp_path, capsys):
    bad = _damaged(tiny, tmp_path, "tensors")
    assert main(["serve-policy", "--model", str(bad), "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("execrl serve-policy: error: model file") and str(bad) in err
    assert "\n" not in err and "Traceback" not in err


def test_a_gguf_transformers_cannot_convert_is_refused_naming_the_file(tiny, tmp_path, cache):
    model, tokenizer = tiny
    path = write_tiny_gguf(model, tokenizer, tmp_path / "odd-tok.gguf", tokenizer_model="bogus")
    with pytest.raises(
        ModelFileError, match=r"odd-tok.gguf: transformers could not convert it .*'bogus'"
    ):
        load_policy(str(path))
    assert list((cache / "models").iterdir()) == []
