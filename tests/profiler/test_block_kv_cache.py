"""Inference traces of one repeated block must count what every block leaves alive after it
runs (its KV cache, with ``use_cache`` on): the extrapolated profile matches a full trace."""

from __future__ import annotations

import pytest

import aiadvisor as aa

from . import models

LAYERS, HIDDEN, BATCH, SEQ = 6, 64, 2, 16
TOKENS = BATCH * SEQ


def _kv_bytes_per_layer(cfg) -> int:
    # Keys and values: 2 x kv_heads x head_dim x tokens x 4 bytes (FP32 weights and cache).
    heads = getattr(cfg, "num_attention_heads", None) or cfg.n_head
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    hidden = getattr(cfg, "hidden_size", None) or cfg.n_embd
    return 2 * kv_heads * (hidden // heads) * TOKENS * 4


@pytest.mark.parametrize("build, kv_per_layer", [
    # Llama (GQA): 2 KV heads of 64 / 4 = 16 -> 2 x 2 x 16 x 32 tokens x 4 B = 8192 B per layer.
    (models.llama, 8192),
    # GPT-2 (MHA): 4 heads of 16 -> 2 x 4 x 16 x 32 x 4 B = 16384 B per layer.
    (models.gpt2, 16384),
])
def test_one_block_inference_trace_counts_every_layers_kv_cache(build, kv_per_layer):
    model, x = build(layers=LAYERS, hidden=HIDDEN, batch=BATCH, seq=SEQ)
    assert _kv_bytes_per_layer(model.config) == kv_per_layer
    once = aa.profile(model, x, mode="infer", scaling=False)
    full = aa.profile(model, x, mode="infer", scaling=False, repeated_blocks=False)
    assert once.num_blocks == LAYERS and full.num_blocks == 0
    assert once.flops_forward == full.flops_forward
    # What one block leaves alive after the forward is its layer's KV cache, nothing else.
    assert once.block_activation_bytes == kv_per_layer
    assert once.memory.activations_bytes == pytest.approx(full.memory.activations_bytes,
                                                          rel=0.01)
    assert once.memory.peak_bytes == pytest.approx(full.memory.peak_bytes, rel=0.01)


@pytest.mark.parametrize("build", [models.llama, models.gpt2])
def test_kv_cache_adds_two_kv_heads_head_dim_tokens_bytes_per_layer(build):
    model, x = build(layers=LAYERS, hidden=HIDDEN, batch=BATCH, seq=SEQ)
    cached = aa.profile(model, {"input_ids": x, "use_cache": True}, mode="infer",
                        scaling=False)
    uncached = aa.profile(model, {"input_ids": x, "use_cache": False}, mode="infer",
                          scaling=False)
    # The peak is at the logits, after the last layer: every layer's cache is alive there.
    # (GPT-2's peak without a cache holds 512 B more of other tensors, in a full trace of one
    # layer too: hence 1 %, not exact.)
    kv = LAYERS * _kv_bytes_per_layer(model.config)
    assert cached.memory.activations_bytes - uncached.memory.activations_bytes == pytest.approx(
        kv, rel=0.01)
    assert uncached.block_activation_bytes == 0


def test_rescaled_profile_keeps_the_kv_cache_per_layer():
    model, x = models.llama(layers=LAYERS, hidden=HIDDEN, batch=BATCH, seq=SEQ)
    prof = aa.profile(model, x, mode="infer").at(batch_size=3, seq_len=12)
    # 3 x 12 = 36 tokens: 2 x 2 KV heads x 16 x 36 x 4 B = 9216 B per layer, from the fit
    # (whose float round-off the profile truncates to whole bytes: 9215 or 9216).
    assert 9215 <= prof.block_activation_bytes <= 9216
