"""Repeated blocks after a few different ones (DeepSeek-V3: dense layers, then MoE layers) are
still traced once and multiplied, with the leading blocks traced as they are."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa
from aiadvisor.profiler.blocks import find_repeated_blocks

transformers = pytest.importorskip("transformers")


def _deepseek(layers: int, dense: int):
    cfg = transformers.DeepseekV3Config(
        vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
        n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
        first_k_dense_replace=dense, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8,
        qk_nope_head_dim=16, v_head_dim=16, n_group=2, topk_group=1)
    with torch.device("meta"):
        return transformers.DeepseekV3ForCausalLM(cfg).to(torch.bfloat16)


def test_moe_layers_after_dense_ones_form_the_repeated_blocks():
    model = _deepseek(layers=6, dense=2)
    plan = find_repeated_blocks(model)
    assert (plan.path, plan.start, plan.num_blocks) == ("model.layers", 2, 4)
    # One MoE layer's parameters in bf16, from the model itself.
    layer = model.model.layers[2]
    assert plan.block_param_bytes == 2 * sum(p.numel() for p in layer.parameters())


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_leading_blocks_profile_as_the_full_trace(mode):
    model = _deepseek(layers=6, dense=2)
    ids = {"input_ids": torch.zeros(1, 16, dtype=torch.long)}
    short = aa.profile(model, ids, mode=mode, scaling=False)
    full = aa.profile(model, ids, mode=mode, scaling=False, repeated_blocks=False)
    assert short.num_blocks == 4 and full.num_blocks == 0
    assert short.flops_forward == pytest.approx(full.flops_forward, rel=1e-9)
    assert short.flops_backward == pytest.approx(full.flops_backward, rel=1e-9)
    if mode == "train":
        # Saved activations multiply exactly. (In inference the one-block trace's live peak
        # misses the other blocks' KV cache, with or without leading blocks: a Llama of 6
        # identical layers shows the same, so it is not compared here.)
        assert short.memory.activations_bytes == pytest.approx(full.memory.activations_bytes,
                                                               rel=1e-6)
    assert short.num_params == full.num_params
