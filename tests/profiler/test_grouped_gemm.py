"""Mixture-of-experts layers in transformers 5 run their experts as one grouped GEMM
(``aten._grouped_mm``), which torch's FLOP counter does not count: counted by hand here."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa

transformers = pytest.importorskip("transformers")


def test_mixtral_forward_flops_match_the_hand_count():
    cfg = transformers.MixtralConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=2, vocab_size=1000,
        max_position_embeddings=256)
    if getattr(cfg, "_experts_implementation", None) not in (None, "grouped_mm"):
        pytest.skip("this transformers runs Mixtral experts without grouped_mm")
    torch.manual_seed(0)
    model = transformers.MixtralForCausalLM(cfg)
    ids = torch.randint(0, 1000, (1, 16))
    prof = aa.profile(model, ids, mode="infer")
    t, d, head_dim = 16, 64, 16
    per_layer = (
        2 * t * d * (4 * head_dim)          # q_proj: 4 heads x 16
        + 2 * 2 * t * d * (2 * head_dim)    # k_proj, v_proj: 2 KV heads x 16
        + 2 * t * (4 * head_dim) * d        # o_proj
        + 4 * 4 * t * t * head_dim          # scores and weighted sum (full T x T)
        + 2 * t * d * 8                     # router over 8 experts
        + (t * 2) * 3 * 2 * d * 128         # 2 experts per token, 3 GEMMs of 64 x 128 each
    )
    head = 2 * t * d * 1000
    assert per_layer == 2_048_000
    # 2 layers + the vocabulary head = 4,096,000 + 2,048,000 = 6,144,000. Without the grouped
    # GEMMs
    # the count was 2,998,272 (-51 %).
    assert prof.flops_forward == pytest.approx(2 * per_layer + head, rel=1e-6)
    grouped = [o for o in prof.ops if o.op == "aten._grouped_mm"]
    assert grouped and all(o.op_class == "gemm" for o in grouped)


def test_grouped_gemm_formula_for_each_layout():
    from aiadvisor.profiler.opinfo import grouped_mm_flops

    def t(*shape):
        return torch.empty(shape, device="meta")

    # Forward: 40 routed tokens x K=64 against 8 experts' 64 x 128: 2 x 40 x 64 x 128.
    assert grouped_mm_flops((t(40, 64), t(8, 64, 128)), t(40, 128)) == 2 * 40 * 64 * 128
    # Batched: 8 groups of (5, 64) x (64, 128).
    assert grouped_mm_flops((t(8, 5, 64), t(8, 64, 128)), t(8, 5, 128)) == 2 * 8 * 5 * 64 * 128
    # Weight gradient: (64, 40 tokens) x (40, 128), the 40 split over 8 groups -> (8, 64, 128),
    # each group contracting over its own tokens: 2 x 64 x 128 x 40 in all.
    assert grouped_mm_flops((t(64, 40), t(40, 128)), t(8, 64, 128)) == 2 * 64 * 40 * 128
