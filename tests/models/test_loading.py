import json

import pytest
import torch

from execrl.models import format_prompt, load_policy, load_tokenizer, reference_from


def test_load_local_path_in_hf_format(tiny_model_dir):
    policy = load_policy(str(tiny_model_dir))
    assert policy.model.config.model_type == "llama"
    assert policy.tokenizer.pad_token == "<|pad|>"
    assert policy.tokenizer.padding_side == "left"
    ids = policy.tokenizer("def add(a, b):")["input_ids"]
    assert policy.tokenizer.decode(ids) == "def add(a, b):"


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_policy(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_policy(str(tmp_path / "empty"))


def test_tokenizer_without_pad_token_is_refused(tiny_model_dir, tmp_path):
    config = json.loads((tiny_model_dir / "tokenizer_config.json").read_text())
    config.pop("pad_token", None)
    for name in ("tokenizer.json", "config.json", "model.safetensors", "generation_config.json"):
        (tmp_path / name).write_bytes((tiny_model_dir / name).read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="no pad token; set model.pad_token"):
        load_tokenizer(str(tmp_path))
    assert load_tokenizer(str(tmp_path), pad_token="<|endoftext|>").pad_token == "<|endoftext|>"


def test_reference_is_a_frozen_copy(tiny_model_dir):
    policy = load_policy(str(tiny_model_dir))
    ref = reference_from(policy)
    with torch.no_grad():
        next(policy.model.parameters()).add_(1.0)
    assert not torch.equal(next(ref.parameters()), next(policy.model.parameters()))
    assert not any(p.requires_grad for p in ref.parameters())


def test_chat_template_used_when_present(tiny_model_dir):
    tok = load_tokenizer(str(tiny_model_dir))
    assert format_prompt(tok, "hi") == "hi"  # no template: raw prompt
    tok.chat_template = (
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>"
    )
    assert format_prompt(tok, "hi") == "<user>hi<assistant>"
    assert format_prompt(tok, "hi", chat=False) == "hi"


def test_lora_adapters_train_only_adapters(tiny_model_dir):
    pytest.importorskip("peft")
    from execrl.models import LoraSpec

    policy = load_policy(str(tiny_model_dir), lora=LoraSpec(r=2, alpha=4))
    trainable = [n for n, p in policy.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora" in n for n in trainable)


def test_an_adapter_whose_base_is_gone_names_its_config(tmp_path):

    from execrl.models.loading.adapter import adapter_base

    (tmp_path / "adapter_config.json").write_text(
        json.dumps({"base_model_name_or_path": str(tmp_path / "gone")})
    )
    with pytest.raises(FileNotFoundError, match="adapter_config.json: the adapter's base model"):
        load_policy(str(tmp_path))
    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": ""}))
    with pytest.raises(ValueError, match="base_model_name_or_path is empty"):
        adapter_base(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")  # a full model directory is not an adapter
    assert adapter_base(str(tmp_path)) is None
