"""Building small Llama-architecture models and byte-level BPE tokenizers from scratch.

Used by the embedded default (`models.loading.default`) and by tests, which build tiny random models
themselves instead of downloading any.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PAD, EOS = "<|pad|>", "<|endoftext|>"


@dataclass(frozen=True, slots=True)
class TinyLlamaShape:
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 384
    max_positions: int = 512


def train_bpe_tokenizer(
    texts: Iterable[str], vocab_size: int = 512, individual_digits: bool = False
) -> Any:
    """A byte-level BPE tokenizer (GPT-2 style: any byte sequence encodes) with pad and eos.

    individual_digits: every digit is its own token, so a number is the same tokens wherever
    it appears (`times_54` and `x * 54`), which makes copying it from the prompt learnable
    for a very small model; plain BPE merges digits differently in different contexts."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if individual_digits
        else byte_level
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, eos_token=EOS)
    tokenizer.padding_side = "left"
    return tokenizer


def new_llama(tokenizer: Any, shape: TinyLlamaShape = TinyLlamaShape(), seed: int = 0) -> Any:
    """A randomly initialised LlamaForCausalLM sized for the tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=shape.max_positions,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = None
    return model


def save_pretrained(model: Any, tokenizer: Any, directory: str | Path) -> Path:
    """Save both in Hugging Face format, loadable with `AutoModelForCausalLM.from_pretrained`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
