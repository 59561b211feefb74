"""`model.path` as a GGUF file: converted once to a Hugging Face directory, cached by hash.

Every GGUF file here is written by the test (`gguf_helpers`) from a tiny random Llama, so the
expected logits are that model's own."""

import pytest
import torch

from execrl.cli import main
from execrl.models import format_prompt, load_policy
from execrl.models.loading import gguf as gguf_module
from execrl.models.loading.gguf import ModelFileError, ensure_converted
from execrl.models.loading.tiny import TinyLlamaShape, new_llama, train_bpe_tokenizer
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

    def interrupted(source, directory, *rest):
        real_convert(source, directory, *rest)  # every file written, then the user presses Ctrl-C
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


# Issue 41, class 3: a model file is what it claims, or it is refused.


@pytest.fixture
def no_model_built(monkeypatch):
    """Fail the test if a model is built from the file (the meta device's shapes excepted)."""
    from transformers import AutoModelForCausalLM

    def built(*args, **kwargs):
        raise AssertionError("a model was built from a file that should have been refused")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", built)


@pytest.mark.parametrize(
    "claims, refusal",
    [  # a 69B-parameter Llama's shape; then as wide, in the 2 blocks the file has; then narrower
        ({"block_count": 80, "embedding_length": 8192, "feed_forward_length": 28672,
          "head_count": 64, "head_count_kv": 8}, "declares 80 blocks but holds tensors for 2"),
        ({"embedding_length": 8192, "feed_forward_length": 28672, "head_count": 64,
          "head_count_kv": 8}, "token_embd.weight holds 8,928 values, but parameter model.embed_tokens.weight"),
        ({"feed_forward_length": 32}, "blk.0.ffn_gate.weight holds 2,048 values, but parameter"),
    ],
)  # fmt: skip
def test_a_gguf_is_refused_before_building_when_its_tensors_are_not_the_declared_model(
    tiny, tmp_path, cache, no_model_built, claims, refusal
):
    model, tokenizer = tiny
    path = write_tiny_gguf(model, tokenizer, tmp_path / "claims.gguf", claims=claims)
    assert path.stat().st_size < 200_000  # a small file, whatever it declares
    with pytest.raises(ModelFileError, match=f"model file {path} .*{refusal}"):
        ensure_converted(path, log=lambda m: None)
    assert list((cache / "models").iterdir()) == []


@pytest.mark.parametrize("n_tensors, refusal", [
    (1, "declares 2 blocks but holds tensors for 0"),
    (19, "has no tensor blk.1.ffn_down.weight .parameter model.layers.1.mlp.down_proj.weight"),
])  # fmt: skip
def test_a_gguf_missing_tensors_is_refused_not_converted_into_a_random_model(
    tiny, tmp_path, cache, no_model_built, n_tensors, refusal
):
    model, tokenizer = tiny
    path = write_tiny_gguf(model, tokenizer, tmp_path / "part.gguf", n_tensors=n_tensors)
    with pytest.raises(ModelFileError, match=f"model file {path} .*{refusal}"):
        ensure_converted(path, log=lambda m: None)
    assert list((cache / "models").iterdir()) == []


def test_no_weight_is_left_unfilled_after_loading_even_past_the_file_checks(
    tiny, tmp_path, cache, monkeypatch
):
    """The check after loading stands on its own: with the checks before building skipped, a
    file lacking a tensor is still refused, not cached as a partly random model."""
    model, tokenizer = tiny
    path = write_tiny_gguf(model, tokenizer, tmp_path / "part.gguf", n_tensors=19)
    monkeypatch.setattr(gguf_module, "check_claims", lambda *a: None, raising=False)
    with pytest.raises(ModelFileError, match=r"left 1 weights unfilled .*mlp.down_proj.weight"):
        ensure_converted(path, log=lambda m: None)
    assert list((cache / "models").iterdir()) == []


def test_reading_a_gguf_header_takes_memory_bounded_by_caps_not_by_its_arrays(tiny, tmp_path):
    """The gguf package's reader keeps ~200 bytes per array element before any check: 1.5M
    elements were ~300 MB. Now a header is walked without per-element objects and a metadata
    array past its cap is refused before anything else reads the file."""
    import tracemalloc

    from gguf_helpers import with_metadata_array

    model, tokenizer = tiny
    path = write_tiny_gguf(model, tokenizer, tmp_path / "tiny.gguf")
    padded = with_metadata_array(path, tmp_path / "padded.gguf", "execrl.padding", 1_500_000)
    vocab = with_metadata_array(path, tmp_path / "vocab.gguf", "tokenizer.ggml.extra", 1_000_000)
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError, match=f"{padded} .*execrl.padding declares 1500"):
            ensure_converted(padded, log=lambda m: None)
        refused_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        from execrl.models.loading.gguf_header import read_header_of

        assert read_header_of(vocab).arrays["tokenizer.ggml.extra"] >= 1_000_000  # under its cap
        read_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused_peak < 8 << 20 and read_peak < 4 << 20, (refused_peak, read_peak)


def _embedding(directory):
    from safetensors.torch import load_file

    return load_file(str(directory / "model.safetensors"))["model.embed_tokens.weight"]


def test_the_cache_holds_the_conversion_of_exactly_the_bytes_hashed(
    tiny, tmp_path, cache, monkeypatch
):
    """A file renamed over the original between hashing and converting (same size, same mtime)
    must not be cached under the original's hash: that hash may be a known model's pin."""
    import os

    from execrl.models.loading.gguf import converted_dir, file_sha256

    model, tokenizer = tiny
    path = write_tiny_gguf(model, tokenizer, tmp_path / "model.gguf")
    pinned = file_sha256(path)
    other = new_llama(tokenizer, SHAPE, seed=1)
    swap = write_tiny_gguf(other, tokenizer, tmp_path / "swap.gguf")
    assert swap.stat().st_size == path.stat().st_size
    real_check = gguf_module.check_gguf

    def swapped_after_hashing(*args, **kwargs):
        if swap.exists():
            os.utime(swap, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
            os.replace(swap, path)
        return real_check(*args, **kwargs)

    monkeypatch.setattr(gguf_module, "check_gguf", swapped_after_hashing)
    ensure_converted(path, log=lambda m: None)
    directory = converted_dir(pinned)
    assert not swap.exists()
    assert not directory.exists() or torch.equal(
        _embedding(directory), model.model.embed_tokens.weight.detach()
    )
