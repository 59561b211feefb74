"""vLLM's harmless rotary-cache notice at every weight push is dropped, and only it: a layer
that did lose its weights still warns (`models.engines.vllm_engine._RotaryReloadNotice`)."""

import logging

from execrl.models.engines.vllm_engine import _RotaryReloadNotice


def _record(message: str, *args: str) -> logging.LogRecord:
    return logging.LogRecord("vllm", logging.WARNING, __file__, 1, message, args, None)


def test_the_rotary_cache_notice_is_dropped_and_a_real_failure_kept():
    notice = _RotaryReloadNotice()
    assert not notice.filter(_record("%s: Failed to load weights", "RotaryEmbedding"))
    assert not notice.filter(_record("MRotaryEmbedding: Failed to load weights"))
    assert notice.filter(_record("QKVParallelLinear: Failed to load weights"))
    assert notice.filter(_record("RotaryEmbedding: Delayed processing"))
