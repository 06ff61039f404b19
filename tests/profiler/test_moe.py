"""Mixture-of-experts models from transformers: expert GEMMs counted, any dtype on meta."""

import pytest
import torch

import aiadvisor as aa

transformers = pytest.importorskip("transformers")

SEQ = 16


def _mixtral():
    cfg = transformers.MixtralConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=8,
        num_experts_per_tok=2)
    with torch.device("meta"):
        return transformers.MixtralForCausalLM(cfg)


def _qwen2_moe():
    cfg = transformers.Qwen2MoeConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
        shared_expert_intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_experts=8, num_experts_per_tok=2, decoder_sparse_step=1)
    with torch.device("meta"):
        return transformers.Qwen2MoeForCausalLM(cfg)


def _deepseek_v3():
    cfg = transformers.DeepseekV3Config(
        vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8,
        num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, q_lora_rank=32,
        kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, n_group=2,
        topk_group=1)
    with torch.device("meta"):
        return transformers.DeepseekV3ForCausalLM(cfg)


# Hand counts, T = 16 tokens, 2 FLOPs per multiply-add, top-2 routing -> 32 expert rows.
# Mixtral (hidden 64, 4 heads of 16, 2 KV heads, 8 experts of intermediate 128), per layer:
#   q 2*16*64*64 = 131072, k and v 2*16*64*32 = 65536 each, o 131072       -> 393216
#   attention QK^T and AV 2 * (2*4*16*16*16)                               ->  65536
#   router 2*16*64*8                                                       ->  16384
#   experts: 3 GEMMs 64x128 on 32 rows, 3 * 2*32*64*128                    -> 1572864
#   layer 2048000; 2 layers 4096000 + head 2*16*64*256 = 524288            -> 4620288
MIXTRAL_FLOPS = 4_620_288
# Qwen2-MoE (experts of 32, shared expert of 64 with a sigmoid gate), per layer:
#   attention 393216 + 65536, router 16384,
#   experts gate_up (8, 64, 64) 2*32*64*64 = 262144 + down 2*32*32*64 = 131072 = 393216,
#   shared expert 3 * 2*16*64*64 = 393216, shared gate 2*16*64*1 = 2048
#   layer 1263616; 2 layers 2527232 + head 524288                          -> 3051520
QWEN2_MOE_FLOPS = 3_051_520
# DeepSeek-V3 (MLA, layer 0 dense, layer 1 8 routed experts of 32 + 1 shared), per layer:
#   MLA projections 2*16*(64*32 q_a + 32*4*24 q_b + 64*24 kv_a + 16*4*32 kv_b + 64*64 o)
#     = 32 * 12800 = 409600
#   attention QK^T over 24-dim heads 2*4*16*16*24 = 49152 + AV 2*4*16*16*16 = 32768 = 81920
#   layer 0 dense MLP 3 * 2*16*64*128 = 786432
#   layer 1 router 16384 + experts 393216 (as Qwen2-MoE) + shared 3 * 2*16*64*32 = 196608
#   total 2*(409600+81920) + 786432 + 606208 + head 524288                 -> 2899968
DEEPSEEK_V3_FLOPS = 2_899_968

MODELS = {"mixtral": (_mixtral, MIXTRAL_FLOPS), "qwen2_moe": (_qwen2_moe, QWEN2_MOE_FLOPS),
          "deepseek_v3": (_deepseek_v3, DEEPSEEK_V3_FLOPS)}


def _ids():
    return {"input_ids": torch.zeros(1, SEQ, dtype=torch.long)}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("mode", ["infer", "train"])
def test_moe_forward_flops_match_the_hand_count(name, mode):
    build, expected = MODELS[name]
    prof = aa.profile(build().to(torch.bfloat16), _ids(), mode=mode, scaling=False)
    assert prof.flops_forward == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize("name", ["mixtral", "qwen2_moe"])
def test_moe_profiles_in_fp32_on_meta_and_says_how(name):
    build, expected = MODELS[name]
    prof = aa.profile(build(), _ids(), mode="train", scaling=False)
    assert prof.flops_forward == pytest.approx(expected, rel=0.02)
    assert any("traced in bfloat16" in n and "float32" in n for n in prof.notes)


def test_fp32_expert_bytes_are_those_of_fp32_weights():
    # Mixtral's experts read gate_up (8, 256, 64) = 131072 and down (8, 64, 128) = 65536
    # elements per layer, 2 layers -> 393216 weights; 4 bytes each in fp32, 2 in bf16.
    per_dtype = {}
    for dtype in (torch.float32, torch.bfloat16):
        prof = aa.profile(_mixtral().to(dtype), _ids(), mode="infer", scaling=False,
                          repeated_blocks=False)
        per_dtype[dtype] = sum(o.bytes_read for o in prof.ops if "grouped_mm" in o.op)
    weights = 393_216
    # Activations read: 32 rows x 64 into gate_up and 32 x 128 into down, per layer; plus the
    # offsets (8 int32) of each of the 4 grouped GEMMs.
    acts = 2 * (32 * 64 + 32 * 128)
    offsets = 4 * 8 * 4
    assert per_dtype[torch.float32] == 4 * (weights + acts) + offsets
    assert per_dtype[torch.bfloat16] == 2 * (weights + acts) + offsets


def test_active_params_count_only_the_routed_top_k_experts():
    # Mixtral: embeddings and head 2 * 256*64 = 32768, final norm 64; per layer q 4096, k 2048,
    # v 2048, o 4096, norms 128, router 8*64 = 512, experts gate_up 8*256*64 = 131072 + down
    # 8*64*128 = 65536 = 196608 -> layer 209536; total 32832 + 2*209536 = 451904.
    # A token goes through 2 of 8 experts: active = 451904 - 2 * 196608 * 6/8 = 156992.
    prof = aa.profile(_mixtral(), _ids(), mode="infer", scaling=False)
    assert (prof.num_params, prof.num_active_params) == (451_904, 156_992)
    assert (prof.moe.num_experts, prof.moe.top_k, prof.moe.num_moe_layers) == (8, 2, 2)


@pytest.mark.parametrize(("name", "num_moe_layers", "unused"), [
    # Qwen2-MoE: experts per layer gate_up 8*64*64 + down 8*64*32 = 49152, 2 MoE layers; the
    # shared expert is always active: unused 2 * 49152 * 6/8 = 73728.
    ("qwen2_moe", 2, 73_728),
    # DeepSeek-V3: layer 0 dense, layer 1 routed experts 49152 (as Qwen2-MoE): 49152 * 6/8.
    ("deepseek_v3", 1, 36_864),
])
def test_active_params_of_shared_and_fine_grained_experts(name, num_moe_layers, unused):
    prof = aa.profile(MODELS[name][0](), _ids(), mode="infer", scaling=False)
    assert prof.num_params - prof.num_active_params == unused
    assert prof.moe.num_moe_layers == num_moe_layers


def test_dense_model_has_all_params_active_and_no_routing():
    prof = aa.profile(torch.nn.Linear(64, 32), torch.randn(4, 64), mode="infer", scaling=False)
    # 64*32 weights + 32 biases
    assert prof.num_active_params == prof.num_params == 2080
    assert prof.moe is None


def test_routing_is_balanced_by_default_and_follows_the_batch():
    prof = aa.profile(_mixtral(), {"input_ids": torch.zeros(2, SEQ, dtype=torch.long)},
                      mode="infer")
    # 2 x 16 tokens, top-2 of 8 experts: 32 * 2 / 8 = 8 tokens per expert per layer.
    assert prof.moe.tokens_per_expert == 8.0
    assert prof.moe.max_tokens_per_expert == 8.0
    assert any("balanced routing" in n for n in prof.notes)
    # At batch 8: 128 tokens * 2 / 8 = 32.
    assert prof.at(batch_size=8).moe.tokens_per_expert == 32.0


def test_measured_imbalance_sets_the_most_loaded_expert():
    prof = aa.profile(_mixtral(), _ids(), mode="infer", scaling=False, moe_imbalance=1.5)
    # 16 tokens * 2 / 8 = 4 per expert on average; the busiest gets 1.5x: 6.
    assert prof.moe.imbalance == 1.5
    assert prof.moe.max_tokens_per_expert == 6.0
    assert any("1.5x the mean" in n for n in prof.notes)


@pytest.mark.parametrize("bad", [0.5, 9, "high", True])
def test_imbalance_outside_one_to_num_experts_is_rejected(bad):
    with pytest.raises(aa.errors.InvalidArgumentError, match=r"moe_imbalance=.*\[1, 8\]"):
        aa.profile(_mixtral(), _ids(), mode="infer", scaling=False, moe_imbalance=bad)


def test_imbalance_for_a_dense_model_is_rejected():
    with pytest.raises(aa.errors.InvalidArgumentError, match="no mixture-of-experts layers"):
        aa.profile(torch.nn.Linear(8, 8), torch.randn(2, 8), moe_imbalance=1.2)
