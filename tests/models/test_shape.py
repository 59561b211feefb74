"""A model's shape from its config.json, a known name or a stated size: the parameter counts
the planner starts from (`execrl.models.loading.shape`)."""

from __future__ import annotations

import json

import pytest

from execrl.models.loading.shape import KNOWN_SHAPES, ModelShape, ShapeError, shape_of

# hidden 8, 2 heads of 4, one kv head, MLP 16, 2 layers, vocabulary 10, untied
SMALL = ModelShape("small", vocab=10, hidden=8, layers=2, heads=2, kv_heads=1, intermediate=16)


def test_parameters_are_counted_by_hand():
    # a layer: q 8x8 + k 8x4 + v 8x4 + o 8x8 + gate, up, down 8x16 each + two norms of 8
    assert SMALL.layer_params == 64 + 32 + 32 + 64 + 3 * 128 + 16 == 592
    # the root: embedding 10x8, the untied LM head 10x8, the final norm
    assert SMALL.root_params == 80 + 80 + 8
    assert SMALL.params == 2 * 592 + 168 == 1352


@pytest.mark.parametrize(("name", "card"), [("qwen2.5-coder-0.5b", 0.49), ("qwen2.5-coder-1.5b", 1.54),
                                            ("qwen2.5-coder-7b", 7.61)])  # fmt: skip
def test_known_shapes_reproduce_their_model_cards_counts(name, card):
    # the cards cut the count to two decimals (7,615,616,512 is "7.61B")
    assert KNOWN_SHAPES[name].params // 10**7 == round(card * 100)


def test_a_stated_size_keeps_its_count_and_borrows_the_nearest_shape():
    shape = shape_of("7b")
    assert shape.params == 7 * 10**9 and shape.hidden == KNOWN_SHAPES["qwen2.5-coder-7b"].hidden
    assert shape_of("500m").params == 5 * 10**8


def test_a_config_json_and_a_hub_id_name_their_shape(tmp_path):
    config = {"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 2,
              "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 16}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert shape_of(str(tmp_path)).params == SMALL.params
    assert shape_of("Qwen/Qwen2.5-Coder-7B-Instruct") == KNOWN_SHAPES["qwen2.5-coder-7b"]


def test_a_config_the_planner_cannot_read_is_an_error_naming_the_fields(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"n_embd": 768, "n_layer": 12}))
    with pytest.raises(ShapeError, match="vocab_size, hidden_size"):
        shape_of(str(tmp_path / "config.json"))
    with pytest.raises(ShapeError, match="give a size like 7b"):
        shape_of("no-such-model")


def test_a_hub_id_in_the_hugging_face_cache_is_read_from_there(tmp_path, monkeypatch):
    import huggingface_hub

    config = {"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 2,
              "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 16}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    asked = []
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache",
                        lambda repo, name: asked.append((repo, name)) or str(tmp_path / name))  # fmt: skip
    assert shape_of("someone/small-llama").params == SMALL.params
    assert asked == [("someone/small-llama", "config.json")]
