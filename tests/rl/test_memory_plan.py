"""The memory planner's arithmetic, derived by hand (`execrl.rl.parallel.memory_plan`)."""

from __future__ import annotations

import dataclasses

import pytest

from execrl.models.loading.shape import ModelShape, shape_of
from execrl.rl.parallel.memory_plan import GB, GIB, PlanSettings, alternatives, plan, step_compute

# hidden 8, 2 heads of 4, one kv head, MLP 16, 2 layers, vocabulary 10: 1352 parameters
# (tests/models/test_shape.py), 592 a layer, 168 in the root
SMALL = ModelShape("small", vocab=10, hidden=8, layers=2, heads=2, kv_heads=1, intermediate=16)
STATES = ("params", "grads", "optimizer (AdamW moments)")


def _bytes(result, name: str) -> int:
    return next(c.device_bytes for c in result.components if c.name == name)


def test_a_7b_fp32_full_fine_tune_holds_112_gb_before_activations():
    result = plan(shape_of("7b"), PlanSettings())
    # 4 bytes of weight, 4 of gradient, 8 of AdamW moments per parameter (the figure)
    assert [_bytes(result, n) for n in STATES] == [28 * GB, 28 * GB, 56 * GB]


def test_fsdp_divides_the_states_by_the_devices():
    result = plan(shape_of("7b"), PlanSettings(strategy="fsdp", devices=8, dtype="bfloat16"))
    assert [_bytes(result, n) for n in STATES] == [1.75 * GB, 1.75 * GB, 3.5 * GB]
    offloaded = plan(SMALL, PlanSettings(strategy="fsdp", devices=2, cpu_offload=True))
    assert [_bytes(offloaded, n) for n in STATES] == [0, 0, 0]
    assert offloaded.host_bytes == (1352 + 1352 + 2 * 1352) * 4 // 2


def test_fsdp_gathers_the_root_and_two_layers_in_the_compute_dtype():
    s = PlanSettings(strategy="fsdp", devices=2, compute_dtype="bfloat16")
    # (root 168 + 2 layers of 592) in bf16, plus the larger unit's fp32 gradient (a layer)
    assert _bytes(plan(SMALL, s), "fsdp gathered units") == (168 + 2 * 592) * 2 + 592 * 4


def test_lora_counts_only_adapter_states():
    result = plan(SMALL, PlanSettings(lora_r=2, lora_targets=("q_proj", "v_proj")))
    # q 8->8: 2 * (8 + 8) = 32, v 8->4: 2 * (8 + 4) = 24, in each of 2 layers: 112 adapters
    assert [_bytes(result, n) for n in STATES] == [(1352 + 112) * 4, 112 * 4, 2 * 112 * 4]


def test_activations_count_a_llama_layer_by_hand():
    s = PlanSettings(seq_len=3, completion_len=2, micro_batch=2, generation_rows=0)
    # a token of a layer: 6 h + 2 kv_heads head_dim + 4 i = 48 + 8 + 64 = 120 elements
    assert _bytes(plan(SMALL, s), "activations") == 2 * 120 * 6 * 4
    checkpointed = dataclasses.replace(s, activation_checkpointing=True)
    # each layer's input (h a token) and one layer recomputed
    assert _bytes(plan(SMALL, checkpointed), "activations") == 2 * 8 * 6 * 4 + 120 * 6 * 4
    # two rows of one group: the prompt (1 token) once, each row's completion (2 tokens), and
    # each row's copy of the prompt's keys and values (2 x 1 kv head x 4)
    shared = dataclasses.replace(s, group_size=2)
    assert _bytes(plan(SMALL, shared), "activations") == 2 * (120 * (1 + 2 * 2) + 2 * 8) * 4
    # rl.logprob_head "full": fp32 log-probs over the vocabulary and their gradient, for the
    # completion tokens (2 rows x 2 tokens x 10 entries)
    full = dataclasses.replace(s, logprob_head="full")
    assert _bytes(plan(SMALL, full), "logits (fp32 log-probs + grad)") == 8 * 2 * 2 * 10


def test_the_fused_head_holds_one_chunk_of_logits():
    from execrl.rl.objective.fused_head import CHUNK_ELEMENTS

    s = PlanSettings(seq_len=3, completion_len=2, micro_batch=2, generation_rows=0)
    # fused (the default): a chunk, here the whole 2 x 2 x 10 logits, its matmul output in
    # fp32 (4 bytes) and three fp32 temporaries (12): 16 bytes an entry
    assert _bytes(plan(SMALL, s), "fused LM head (one chunk)") == 16 * 40
    # chunked: the model's logits kept and their gradient (2 x 4 bytes), and one chunk's
    # temporaries (12 bytes)
    chunked = dataclasses.replace(s, logprob_head="chunked")
    assert _bytes(plan(SMALL, chunked), "logits (kept + grad, chunked log-softmax)") == 20 * 40
    # FSDP runs the head in the model's own forward: "fused" is chunked there
    sharded = dataclasses.replace(s, strategy="fsdp", devices=2)
    assert _bytes(plan(SMALL, sharded), "logits (kept + grad, chunked log-softmax)") == 20 * 40
    # Qwen2.5-Coder-0.5B's 151,936 entries, 4 rows of 384 tokens: the full path's 4.67 GB
    # against a chunk's 0.54 GB (bfloat16 matmul output: 14 bytes an entry, 0.47 GB)
    qwen = dataclasses.replace(shape_of("0.5b"), vocab=151_936)
    big = dataclasses.replace(s, seq_len=534, completion_len=384, micro_batch=4)
    assert _bytes(plan(qwen, dataclasses.replace(big, logprob_head="full")),
                  "logits (fp32 log-probs + grad)") == 8 * 4 * 384 * 151_936  # fmt: skip
    assert _bytes(plan(qwen, big), "fused LM head (one chunk)") == 16 * CHUNK_ELEMENTS
    with pytest.raises(ValueError, match="logprob_head 'fast'"):
        PlanSettings(logprob_head="fast")


def test_lora_adapters_stay_float32_over_a_bfloat16_base():
    result = plan(SMALL, PlanSettings(lora_r=2, lora_targets=("q_proj", "v_proj"),
                                      dtype="bfloat16"))  # fmt: skip
    assert [_bytes(result, n) for n in STATES] == [1352 * 2 + 112 * 4, 112 * 4, 2 * 112 * 4]


def test_the_reference_is_a_copy_except_under_lora():
    names = lambda s: [c.name for c in plan(SMALL, s).components]  # noqa: E731
    assert _bytes(plan(SMALL, PlanSettings(reference=True)), "reference") == 1352 * 4
    assert "reference" not in names(PlanSettings(reference=True, lora_r=2))
    sharded = plan(SMALL, PlanSettings(reference=True, strategy="fsdp", devices=4))
    assert _bytes(sharded, "reference") == 1352 * 4 // 4


def test_ddp_holds_a_flat_copy_of_the_gradients_for_its_all_reduce():
    result = plan(SMALL, PlanSettings(strategy="ddp", devices=2))
    assert _bytes(result, "all-reduce buffer") == 1352 * 4
    assert _bytes(result, "params") == 1352 * 4  # every rank holds the whole model


def test_the_peak_takes_the_larger_of_generation_and_update():
    s = PlanSettings(seq_len=4, completion_len=2, micro_batch=1, generation_rows=1000)
    result = plan(SMALL, s)
    kv = 2 * 2 * 1 * 4 * 4 * 1000 * 4  # k and v, 2 layers, 1 kv head of 4, 4 tokens, fp32
    assert result.peak_phase == "generation"
    assert result.peak_bytes == (1352 * 16) + kv


def test_the_fused_decoder_copies_the_projections_it_concatenates_or_merges():
    s = PlanSettings(generation_rows=1, lean_decoder=True)
    # q 8x8, k and v 8x4, gate and up 8x16, in each of 2 layers, fp32
    assert _bytes(plan(SMALL, s), "decoder's weight copies") == 2 * (64 + 32 + 32 + 256) * 4
    lora = dataclasses.replace(s, lora_r=2, lora_targets=("q_proj", "o_proj"))
    assert _bytes(plan(SMALL, lora), "decoder's weight copies") == 2 * (64 + 32 + 32 + 256 + 64) * 4


def test_a_colocated_engine_takes_its_share_of_the_device():
    s = PlanSettings(engine_share=0.5, device_memory=80 * GIB, generation_rows=0)
    assert _bytes(plan(SMALL, s), "vLLM engine") == 40 * GIB


def test_a_plan_that_does_not_fit_names_the_changes_that_would():
    s = PlanSettings(micro_batch=4, device_memory=80 * GIB)
    assert plan(shape_of("7b"), s).fits is False
    found = {a.change: a.plan for a in alternatives(shape_of("7b"), s)}
    assert "fsdp on 4 devices" in found and found["fsdp on 4 devices"].fits
    assert "fsdp on 2 devices" not in found  # 52 GiB of states and activations besides


@pytest.mark.parametrize(
    ("settings", "says"),
    [({"strategy": "ddp", "cpu_offload": True, "devices": 2}, "cpu offload is FSDP's"),
     ({"compute_dtype": "bfloat16"}, "FSDP's mixed precision"),
     ({"devices": 2}, "single is one device")],
)  # fmt: skip
def test_settings_of_no_run_are_refused(settings, says):
    with pytest.raises(ValueError, match=says):
        PlanSettings(**settings)


def test_a_step_computes_6n_a_token_for_full_fine_tuning():
    s = PlanSettings(seq_len=10, completion_len=4)
    compute = step_compute(SMALL, s, sequences=3, chunks=2)
    assert compute.update == 3 * 10 * 6 * 1352
    assert compute.generation == 3 * 4 * 2 * 1352
    # two chunks of 4 tokens decode one after another, each step reading the fp32 weights
    assert (compute.decode_steps, compute.decode_bytes) == (8, 1352 * 4)
    # at 1 FLOP/s and 1 byte/s decoding's reads (8 x 5408 bytes) outlast its FLOPs (32448)
    assert compute.seconds(1.0, 1.0) == 3 * 10 * 6 * 1352 + 8 * 1352 * 4
    assert compute.seconds(1.0, None) == 3 * 10 * 6 * 1352 + 3 * 4 * 2 * 1352


def test_a_vllm_engine_on_a_cpu_holds_its_own_weights_and_its_kv_cache():
    # 1352 parameters in float32 (5408 bytes) beside a 1 KiB KV cache; no share of a device
    s = PlanSettings(generation_rows=0, cpu_engine_kv_bytes=1024)
    assert _bytes(plan(SMALL, s), "vLLM engine (weights, KV cache)") == 1352 * 4 + 1024
    half = PlanSettings(generation_rows=0, cpu_engine_kv_bytes=1024, dtype="bfloat16", lora_r=2)
    assert _bytes(plan(SMALL, half), "vLLM engine (weights, KV cache)") == 1352 * 2 + 1024
