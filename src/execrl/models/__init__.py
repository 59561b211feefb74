"""Models: Hugging Face causal LMs and tokenizers, the embedded default, and sampling."""

from execrl.models.engines.sampling import Completion, SamplingParams, encode_prompts, sample
from execrl.models.loading.loading import (
    LoraSpec,
    Policy,
    load_policy,
    load_tokenizer,
    reference_from,
)
from execrl.models.prompting.chat import format_prompt

__all__ = [
    "Completion",
    "LoraSpec",
    "Policy",
    "SamplingParams",
    "encode_prompts",
    "format_prompt",
    "load_policy",
    "load_tokenizer",
    "reference_from",
    "sample",
]
