"""Models: Hugging Face causal LMs and tokenizers, the embedded default, and sampling."""

from execrl.models.chat import format_prompt
from execrl.models.loading import LoraSpec, Policy, load_policy, load_tokenizer, reference_from
from execrl.models.sampling import Completion, SamplingParams, encode_prompts, sample

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
