"""Mixture-of-experts serving: a decode step reads only the experts its tokens are routed to
(expected distinct experts E x (1 - (1 - k/E)^tokens)), all of them stay resident. Mixtral-8x7B
shapes on the meta device, numbers by hand."""

from __future__ import annotations

import pytest

import aiadvisor as aa
from aiadvisor.costmodel.experts import active_expert_profile, expected_experts_touched

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _mixtral_8x7b(layers: int):
    # Mixtral-8x7B config (mistralai/Mixtral-8x7B-v0.1 config.json): hidden 4096, intermediate
    # 14336, 32 layers, 32 heads, 8 KV heads, 8 experts top-2, vocab 32000, untied head.
    cfg = transformers.MixtralConfig(
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers,
        num_attention_heads=32, num_key_value_heads=8, num_local_experts=8,
        num_experts_per_tok=2)
    with torch.device("meta"):
        return transformers.MixtralForCausalLM(cfg).to(torch.bfloat16)


# Per layer by hand: attention q, o 4096^2 + k, v 4096 x 1024 = 41,943,040; router 8 x 4096 =
# 32,768; experts 8 x 3 x 4096 x 14336 = 1,409,286,144; 2 norms 8192 -> 1,451,270,144.
EXPERTS_PER_LAYER = 1_409_286_144


def test_expected_experts_touched_by_hand():
    assert expected_experts_touched(8, 2, 1) == pytest.approx(2.0)
    # 8 tokens: 8 x (1 - 0.75^8) = 8 x 0.899887 = 7.199
    assert expected_experts_touched(8, 2, 8) == pytest.approx(7.19910, rel=1e-5)
    assert expected_experts_touched(8, 2, 256) == pytest.approx(8.0)
    # DeepSeek-V3 (256 experts, top-8), 4 tokens: (31/32)^2 = 0.938477, ^4 = 0.880737;
    # 256 x (1 - 0.880737) = 30.531
    assert expected_experts_touched(256, 8, 4) == pytest.approx(30.531, rel=1e-4)


def test_mixtral_8x7b_total_and_active_parameters():
    from aiadvisor.profiler.moe import find_experts, num_active_params

    model = _mixtral_8x7b(32)
    # 32 x 1,451,270,144 + embed and head 2 x 32000 x 4096 + final norm 4096 = 46,702,792,704
    # (46.7B); active: less 6/8 of the 32 x 1,409,286,144 expert parameters = 12,879,925,248.
    total = sum(p.numel() for p in model.parameters())
    assert total == 46_702_792_704
    experts = find_experts(model)
    assert experts.expert_params == 32 * EXPERTS_PER_LAYER
    assert num_active_params(total, experts) == 12_879_925_248


@pytest.fixture(scope="module")
def mixtral_2_layers():
    return aa.profile_generation(_mixtral_8x7b(2), prompt_len=128)


def test_decode_reads_the_active_experts_at_batch_1_and_all_at_large_batch(mixtral_2_layers):
    decode = mixtral_2_layers.prefill.at(batch_size=1, seq_len=1)
    # bf16 expert weights: 2 layers x 1,409,286,144 x 2 bytes = 5.637e9 bytes, which the trace
    # reads in full whatever the batch.
    full = 2 * EXPERTS_PER_LAYER * 2
    grouped = [op for op in decode.ops if op.op == "aten._grouped_mm" and op.phase == "forward"]
    assert sum(op.bytes_read for op in grouped) == pytest.approx(full, rel=1e-3)
    one, touched = active_expert_profile(decode, tokens=1)
    assert touched == pytest.approx(2.0)
    grouped = [op for op in one.ops if op.op == "aten._grouped_mm" and op.phase == "forward"]
    # One token, top-2 of 8: a quarter of the expert weights.
    assert sum(op.bytes_read for op in grouped) == pytest.approx(full / 4, rel=1e-3)
    big, touched = active_expert_profile(
        mixtral_2_layers.prefill.at(batch_size=64, seq_len=1), tokens=64)
    assert touched == pytest.approx(8.0, rel=1e-6)   # 8 x (1 - 0.75^64)


def test_decode_time_follows_the_bytes_read(mixtral_2_layers):
    gp = mixtral_2_layers
    one = aa.predict_generation(gp, hardware="H100 SXM", batch_size=1, prompt_len=128,
                                output_len=64)
    many = aa.predict_generation(gp, hardware="H100 SXM", batch_size=64, prompt_len=128,
                                 output_len=64)
    assert one.bound == many.bound == "memory"
    # Weights read per decode step, bf16: attention 2 x 41,943,040 + routers 2 x 32,768 + the
    # head 32000 x 4096 = 215,023,616 parameters (the embedding is a lookup) -> 0.430e9 bytes;
    # experts 1.409e9 bytes at batch 1 (2 of 8), 5.637e9 at batch 64 (all 8):
    # (0.430 + 1.409) / (0.430 + 5.637) = 0.303. The KV cache (128+32 tokens) is small.
    ratio = (0.430 + 1.409) / (0.430 + 5.637)
    assert one.tpot_s / many.tpot_s == pytest.approx(ratio, rel=0.15)
    assert any("reads 2 of them" in n for n in one.notes)
    # All experts stay resident: weights_bytes is the whole model in bf16.
    assert one.weights_bytes == many.weights_bytes == pytest.approx(
        2 * gp.prefill.num_params, rel=0.01)


def test_fp32_moe_model_captures_for_generation():
    # PyTorch's grouped GEMM accepts only BF16, even on fake tensors: the cache trace runs the
    # experts in BF16 for their shapes. KV per token: 2 x 2 layers x 2 KV heads x 16 dims = 128.
    cfg = transformers.MixtralConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=8,
        num_experts_per_tok=2)
    with torch.device("meta"):
        model = transformers.MixtralForCausalLM(cfg)
    gp = aa.profile_generation(model, prompt_len=32)
    assert gp.kv.elements_per_token == 128
    assert gp.prefill.moe.num_experts == 8
