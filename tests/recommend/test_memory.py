"""ZeRO and activation-memory arithmetic, checked against numbers worked out by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import aiadvisor as aa
from aiadvisor.errors import UnsupportedPrecisionError
from aiadvisor.recommend.memory import (
    activation_parts,
    device_memory,
    state_bytes_per_param,
    usable_bytes,
)
from aiadvisor.schema import ModuleRecord, ParallelConfig

from .conftest import make_profile

# Hand profile: 1e9 parameters, 10 blocks of 9e7 (1e8 outside the blocks: embedding + head),
# each block saves 1e8 bytes of activations for the batch of 4 and outputs 1e7 bytes; 5e7 bytes
# of activations outside the blocks. Mixed-precision AdamW: 2 + 2 + 12 bytes per parameter under
# ZeRO; 4 + 4 + 8 plus 2 bytes of autocast weight copies in plans without ZeRO.
HAND = {"num_params": 10**9, "num_blocks": 10, "block_params": 9 * 10**7, "block_act": 10**8,
        "block_out": 10**7, "other_act": 5 * 10**7, "batch_size": 4}
ACT = 10 * 10**8 + 5 * 10**7  # 1.05e9 bytes of activations without checkpointing


def _mem(config, **overrides):
    prof = make_profile(**{**HAND, **overrides})
    precision = overrides.pop("precision", "bf16") if "precision" in overrides else "bf16"
    return device_memory(prof, config, precision=precision)


def test_bytes_per_parameter_follow_the_zero_paper():
    assert state_bytes_per_param(mode="train", precision="bf16", optimizer="adamw") == (2, 2, 12)
    assert state_bytes_per_param(mode="train", precision="fp16", optimizer="adam") == (2, 2, 12)
    assert state_bytes_per_param(mode="train", precision="fp32", optimizer="adamw") == (4, 4, 8)
    # SGD with momentum: fp32 master + momentum = 8 in mixed precision; momentum only in fp32
    assert state_bytes_per_param(mode="train", precision="bf16", optimizer="sgd_momentum") == (
        2, 2, 8)
    assert state_bytes_per_param(mode="train", precision="fp32", optimizer="sgd") == (4, 4, 0)
    # inference: weights only; int4 = 4 bits + a 16-bit scale and zero per 128 = 4.25 bits
    assert state_bytes_per_param(mode="infer", precision="int4", optimizer="adamw") == (
        4.25 / 8, 0, 0)


def test_weight_only_formats_cannot_train():
    with pytest.raises(UnsupportedPrecisionError, match="weight-only.*'bf16'"):
        state_bytes_per_param(mode="train", precision="nf4", optimizer="adamw")


def test_ddp_replicates_every_state():
    # torch.autocast: fp32 weights (the master copy), fp32 gradients, AdamW's two fp32 moments,
    # and a bf16 copy of each weight saved for backward.
    m = _mem(ParallelConfig(dp_degree=8))
    assert (m.weights_bytes, m.grads_bytes, m.optimizer_bytes) == (4e9, 4e9, 8e9)
    assert m.gathered_bytes == 2e9
    assert m.activations_bytes == ACT
    assert m.total_bytes == 4e9 + 4e9 + 8e9 + 2e9 + ACT
    # On a GPU, backward holds 4 + 4 + 8 + 2 GB + the activations (19.05 GB); foreach AdamW's
    # step, after backward has freed them, holds the 16 GB of states and its 4 GB square-root
    # list: 20 GB. (A CPU plan runs the for-loop step: its small temporaries are the profile's.)
    prof = make_profile(**HAND)
    gpu = device_memory(prof, ParallelConfig(dp_degree=8), precision="bf16",
                        parts=activation_parts(prof, precision="bf16", fused_attention=True))
    assert 4e9 + 4e9 + 8e9 + 2e9 + ACT < 20e9
    assert gpu.total_bytes == 4e9 + 4e9 + 8e9 + 4e9


@pytest.mark.parametrize("stage,expected", [
    (1, (2e9, 2e9, 1.5e9)),        # optimizer / 8
    (2, (2e9, 0.25e9, 1.5e9)),     # + gradients / 8
    (3, (0.25e9, 0.25e9, 1.5e9)),  # + weights / 8
])
def test_zero_stages_shard_over_data_parallel(stage, expected):
    m = _mem(ParallelConfig(dp_degree=8, zero_stage=stage))
    assert (m.weights_bytes, m.grads_bytes, m.optimizer_bytes) == pytest.approx(expected)


def test_fsdp_keeps_a_gathered_block_and_its_gradients():
    m = _mem(ParallelConfig(dp_degree=8, zero_stage=3))
    # two blocks of 9e7 bf16 weights (current + prefetched) + one block of bf16 gradients
    assert m.gathered_bytes == pytest.approx(2 * 9e7 * 2 + 9e7 * 2)


def test_tensor_parallel_divides_states_and_activations():
    m = _mem(ParallelConfig(dp_degree=4, tp_degree=2))
    # half of 1e9 parameters: 4 B fp32 weights, 8 B moments, 2 B autocast copies each
    assert (m.weights_bytes, m.optimizer_bytes, m.gathered_bytes) == pytest.approx(
        (2e9, 4e9, 1e9))
    # Each device contributes 4 samples: a replica of 2 devices runs 8, and with sequence
    # parallelism each device stores half of them: the same bytes as DDP's 4 samples.
    assert m.activations_bytes == pytest.approx(ACT)
    # For a fixed replica batch, tensor parallel halves the activations.
    prof = make_profile(**HAND)
    fixed = device_memory(prof, ParallelConfig(dp_degree=4, tp_degree=2), precision="bf16",
                          micro_batch=4)
    assert fixed.activations_bytes == pytest.approx(ACT / 2)


def test_pipeline_first_stage_holds_pp_microbatches():
    m = _mem(ParallelConfig(dp_degree=4, pp_degree=2, num_microbatches=8))
    # stage params: 5 blocks of 9e7 + half of the 1e8 outside the blocks = 5e8 -> 4 bytes each
    # (fp32 under autocast)
    assert m.weights_bytes == pytest.approx(2e9)
    # A replica (2 devices x 4 samples) runs 8 micro-batches of 1 sample (1e8 / 4 per block):
    # 5 layers x 2 micro-batches in flight = as much as 10 layers of one (Korthikanti 4.2),
    # plus one sample's activations outside the blocks (5e7 / 4).
    assert m.activations_bytes == pytest.approx(5 * 2 * 1e8 / 4 + 5e7 / 4)


def test_interleaved_first_stage_holds_more_chunks():
    # 10 blocks, pp=2, v=5: chunks of 1 block. Megatron's interleaved warm-up on the first
    # device runs 2 (pp - 1) + (v - 1) pp = 2 + 8 = 10 chunk forwards before its first
    # backward, plus the one running: 11 blocks of one micro-batch (1e8 / 4 each), against
    # 5 blocks x 2 in flight = 10 without interleaving (Korthikanti et al.: x (1 + (p-1)/(p v))
    # = 1.1).
    m = _mem(ParallelConfig(dp_degree=4, pp_degree=2, num_microbatches=8, virtual_stages=5))
    assert m.activations_bytes == pytest.approx(11 * 1e8 / 4 + 5e7 / 4)
    # Only 2 micro-batches: all 2 x 5 chunks are in flight at most -> 10 blocks.
    m2 = _mem(ParallelConfig(dp_degree=4, pp_degree=2, num_microbatches=2, virtual_stages=5))
    assert m2.activations_bytes == pytest.approx(10 * 1e8 / 4 * 4 + 5e7)


def test_full_checkpointing_keeps_block_inputs_plus_one_block():
    m = _mem(ParallelConfig(dp_degree=8, zero_stage=3, checkpointing="full"))
    assert m.activations_bytes == pytest.approx(10 * 1e7 + 1e8 + 5e7)


def test_gradient_accumulation_shrinks_the_micro_batch():
    m = _mem(ParallelConfig(dp_degree=8, grad_accum_steps=4))  # micro-batch 1 of 4
    assert m.activations_bytes == pytest.approx(ACT / 4)


def test_offload_moves_states_to_the_host():
    m3 = _mem(ParallelConfig(dp_degree=8, zero_stage=3, offload=True))
    assert (m3.weights_bytes, m3.grads_bytes, m3.optimizer_bytes) == (0, 0, 0)
    assert m3.cpu_bytes == pytest.approx((2e9 + 2e9 + 12e9) / 8)
    m2 = _mem(ParallelConfig(dp_degree=8, zero_stage=2, offload=True))
    assert m2.weights_bytes == 2e9  # ZeRO-Offload keeps the 16-bit weights on the device
    assert m2.gathered_bytes == pytest.approx(9e7 * 2)  # one block's gradients in flight
    assert m2.cpu_bytes == pytest.approx(12e9 / 8 + 2e9 / 8)


def test_fp32_training_doubles_activations_of_a_bf16_profile():
    prof = make_profile(**HAND)
    m = device_memory(prof, ParallelConfig(), precision="fp32")
    assert (m.weights_bytes, m.grads_bytes, m.optimizer_bytes) == (4e9, 4e9, 8e9)
    assert m.activations_bytes == pytest.approx(2 * ACT)
    assert "rescaled" in activation_parts(prof, precision="fp32").notes[0]


def test_frozen_parameters_have_no_gradients_or_optimizer_state():
    # autocast: all 1e9 weights fp32 (4e9) with bf16 copies (2e9); the 5e8 trainable ones have
    # fp32 gradients (2e9) and two fp32 moments (4e9).
    m = _mem(ParallelConfig(), trainable=5 * 10**8)
    assert (m.weights_bytes, m.grads_bytes, m.optimizer_bytes) == (4e9, 2e9, 4e9)
    assert m.gathered_bytes == 2e9
    # ZeRO-1 (DeepSpeed bf16): 16-bit weights for all, 16-bit gradients and 12 B of optimizer
    # state (master, momentum, variance) for the trainable half, sharded over 8 devices.
    z = _mem(ParallelConfig(dp_degree=8, zero_stage=1), trainable=5 * 10**8)
    assert (z.weights_bytes, z.grads_bytes, z.optimizer_bytes) == pytest.approx(
        (2e9, 1e9, 6e9 / 8))


def test_inference_holds_quantized_weights_only():
    prof = make_profile(**{**HAND, "mode": "infer"})
    m = device_memory(prof, ParallelConfig(), precision="nf4")
    # 4 bits + an 8-bit absmax per 64 + an fp32 constant per 256 absmax (double quantization)
    assert m.weights_bytes == pytest.approx(1e9 * (4 + 8 / 64 + 32 / (64 * 256)) / 8)
    assert m.grads_bytes == m.optimizer_bytes == 0


def test_quantized_inference_keeps_embedding_tables_in_16_bit():
    # Embedding(1000, 64) + Linear(64, 256) + LayerNorm(256): the quantizers store only the
    # Linear's weight matrix at the format's width; the table, bias and norm stay 2 bytes.
    model = torch.nn.Sequential(torch.nn.Embedding(1000, 64), torch.nn.Linear(64, 256),
                                torch.nn.LayerNorm(256))
    x = torch.randint(0, 1000, (2, 8))
    prof = aa.profile(model, x, mode="infer", precision="int4")
    matrix, rest = 64 * 256, 1000 * 64 + 256 + 2 * 256
    assert prof.num_params == matrix + rest
    assert prof.num_quantizable_params == matrix
    int4 = (4 + 32 / 128) / 8  # 4 bits + a bf16 scale and zero point per group of 128
    assert prof.memory.weights_bytes == int(matrix * int4 + rest * 2)
    # the plans size the same weights from the profile
    plan = device_memory(prof, ParallelConfig(), precision="int4")
    assert plan.weights_bytes == pytest.approx(matrix * int4 + rest * 2)
    # and a 16-bit format stores every weight in 2 bytes
    assert device_memory(prof, ParallelConfig(), precision="bf16").weights_bytes == \
        pytest.approx((matrix + rest) * 2)


def test_nf4_prompts_hold_a_16_bit_copy_of_the_largest_weight():
    # bitsandbytes' NF4 GEMM of more than one token writes the weight in 16 bit first: the
    # largest, Linear(64, 256)'s 64 x 256, is 32,768 bytes at its GEMM; int4 (fused) has none.
    model = torch.nn.Sequential(torch.nn.Embedding(1000, 64), torch.nn.Linear(64, 256),
                                torch.nn.Linear(256, 16))
    x = torch.randint(0, 1000, (2, 8))
    copy = 64 * 256 * 2
    nf4 = aa.profile(model, x, mode="infer", precision="nf4")
    int4 = aa.profile(model, x, mode="infer", precision="int4")
    assert nf4.largest_quantizable_params == 64 * 256
    weights_gap = nf4.memory.weights_bytes - int4.memory.weights_bytes
    assert nf4.memory.peak_bytes - int4.memory.peak_bytes == weights_gap + copy
    config = ParallelConfig()
    gap = device_memory(nf4, config, precision="nf4").other_bytes - device_memory(
        nf4, config, precision="int4").other_bytes
    assert gap == pytest.approx(copy)
    # one token (a batch-1 decode step) runs the fused 4-bit kernel: no copy
    one = aa.profile(model, x[:1, :1], mode="infer", precision="nf4")
    one_int4 = aa.profile(model, x[:1, :1], mode="infer", precision="int4")
    assert one.memory.peak_bytes - one_int4.memory.peak_bytes == \
        one.memory.weights_bytes - one_int4.memory.weights_bytes


def test_headroom_is_ten_percent():
    assert usable_bytes(80e9) == pytest.approx(72e9)


def _gpt2(attn: str):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    import aiadvisor as aa

    torch.manual_seed(0)
    # no attention dropout: PyTorch's CPU flash kernel has none and would fall back to math
    config = GPT2Config(n_layer=3, n_embd=128, n_head=4, vocab_size=1000, n_positions=256,
                        attn_pdrop=0.0, bos_token_id=0, eos_token_id=0, attn_implementation=attn)
    model = GPT2LMHeadModel(config)
    return aa.profile(model, torch.randint(0, 1000, (2, 256)), precision="bf16")


def test_selective_checkpointing_targets_the_attention_scores():
    # Eager attention stores the (s x s) scores per head; Korthikanti et al. count
    # 5 a s^2 b bytes in 16 bit (scores 2 + softmax 2 + dropout mask 1). Here autocast keeps the
    # softmax in fp32, so expect between 5 and 10 bytes per score: a=4, s=256, b=2 ->
    # 4 * 256**2 * 2 = 524288 scores per layer.
    parts = activation_parts(_gpt2("eager"), precision="bf16")
    scores = 4 * 256**2 * 2
    assert 5 * scores <= parts.block_quadratic_bytes <= 10 * scores
    # SDPA never stores the scores: nothing quadratic left for selective recompute to drop.
    fused = activation_parts(_gpt2("sdpa"), precision="bf16")
    assert fused.block_quadratic_bytes < 0.01 * fused.block_per_batch_bytes


def test_llama3_8b_per_layer_activations_match_a_hand_count(llama8b):
    # Hand count of what one Llama decoder layer saves per token under bf16 autocast with an
    # fp32 residual stream (h = 4096, MLP 3.5 h): two RMSNorms (fp32 input + normed output)
    # 2 x 8h; bf16 casts of the norm output for q/k/v and gate/up 6h + 4h; RoPE on q and k
    # (h/4 for 8 KV heads) 5h; attention inputs/output ~5-8h; o_proj input 2h; MLP gate, silu,
    # up and product (3.5 h each, bf16) 28h: about 60h, say 50h-70h bytes per token.
    parts = activation_parts(llama8b, precision="bf16")
    tokens, h = 2048, 4096
    assert 50 * h * tokens <= parts.block_per_batch_bytes <= 70 * h * tokens
    # full checkpointing keeps each layer's fp32 input: s x h x 4 bytes
    assert parts.block_input_bytes == tokens * h * 4
    assert parts.block_quadratic_bytes == 0  # SDPA


def test_pipeline_states_follow_the_fuller_end_stage():
    # The hand profile's 1e8 parameters outside the blocks split as an 8e7 embedding and a
    # 2e7 head + norm. pp=4 over 10 blocks (Megatron: 3, 3, 2, 2 here): first stage 3 x 9e7 +
    # 8e7 = 3.5e8, last 2 x 9e7 + 2e7 = 2e8 -> 3.5e8 parameters, 4 bytes each (fp32 weights
    # under autocast).
    def module(name, kind, params):
        return ModuleRecord(name=name, type=kind, depth=1, num_params=params,
                            param_bytes=4 * params, flops_forward=0.0, flops_backward=0.0,
                            bytes_forward=0.0, bytes_backward=0.0, activation_bytes=0)

    base = make_profile(**HAND)
    config = ParallelConfig(dp_degree=2, pp_degree=4, num_microbatches=8)
    split = replace(base, modules=(module("embed", "Embedding", 8 * 10**7),
                                   module("head", "Linear", 2 * 10**7)))
    assert device_memory(split, config, precision="bf16").weights_bytes == pytest.approx(
        4 * 3.5e8)
    # A tied head (Megatron keeps a copy of the 8e7 embedding on the last stage): the last
    # stage holds 2 x 9e7 + 8e7 + 2e7 (norm) = 2.8e8, still below the first's 3.5e8; with the
    # blocks 2, 2, 2, 2 + 2 (pp=5) it is the fuller: 2 x 9e7 + 1e8 = 2.8e8 vs 2.6e8.
    tied = replace(base, modules=(module("embed", "Embedding", 8 * 10**7),
                                  module("head", "Linear", 8 * 10**7),
                                  module("norm", "LayerNorm", 2 * 10**7)))
    five = ParallelConfig(dp_degree=2, pp_degree=5, num_microbatches=10)
    assert device_memory(tied, five, precision="bf16").weights_bytes == pytest.approx(4 * 2.8e8)
    # Without module records: half of the 1e8 on each end, 3 x 9e7 + 5e7 = 3.2e8.
    assert device_memory(base, config, precision="bf16").weights_bytes == pytest.approx(
        4 * 3.2e8)


def _wide_mlp_profile():
    """Eight 1024 x 1024 linears at batch 1: the activations are tiny beside the parameters."""
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)])
    return aa.profile(model, torch.randn(1, 1024), mode="train", optimizer="adamw")


def test_the_foreach_adamw_step_sets_the_peak_when_activations_are_small():
    from aiadvisor.recommend.memory import device_memory, optimizer_step_bytes
    from aiadvisor.recommend.transforms import fused_optimizer
    from aiadvisor.schema import ParallelConfig

    prof = _wide_mlp_profile()
    n = 8 * (1024 * 1024 + 1024)
    assert prof.num_trainable_params == n
    plan = ParallelConfig()
    gpu = activation_parts(prof, precision="bf16", fused_attention=True)
    # AMP without ZeRO on a GPU: fp32 weights 4 + fp32 grads 4 + two moments 8, and foreach
    # AdamW's square-root list, 4 more bytes a parameter, at the step: 20 bytes a parameter.
    assert optimizer_step_bytes(prof, plan) == 4 * n
    mem = device_memory(prof, plan, precision="bf16", parts=gpu)
    assert mem.total_bytes == pytest.approx(20 * n, rel=1e-6)
    # On a CPU the for-loop step's temporaries (two of the largest parameter's size) are the
    # profile's own; no list is added.
    cpu_parts = activation_parts(prof, precision="bf16")
    cpu = device_memory(prof, plan, precision="bf16", parts=cpu_parts)
    assert cpu.other_bytes == pytest.approx(cpu_parts.inputs_bytes + cpu_parts.temporaries_bytes)
    # A fused optimizer builds no list: backward's peak (16 + autocast's 2-byte weight copies
    # + the small activations and inputs) is the peak.
    fused = device_memory(fused_optimizer(prof), plan, precision="bf16", parts=gpu)
    assert optimizer_step_bytes(fused_optimizer(prof), plan) == 0
    assert (fused.weights_bytes + fused.grads_bytes + fused.optimizer_bytes
            + fused.gathered_bytes) == 18 * n
    assert fused.total_bytes < 0.95 * mem.total_bytes
    # ZeRO-1 over 4 ranks: the step updates a quarter of the parameters.
    assert optimizer_step_bytes(prof, ParallelConfig(dp_degree=4, zero_stage=1)) == n
    # Offloaded to the host: nothing of the step on the device.
    assert optimizer_step_bytes(prof, ParallelConfig(dp_degree=4, zero_stage=2, offload=True)) == 0


def test_a_plan_that_peaks_in_the_optimizer_step_says_so():
    from aiadvisor.recommend.transforms import fused_optimizer

    prof = _wide_mlp_profile()
    rows = aa.plan_parallel(prof, hardware="H100 SXM", num_devices=1, precision="bf16")
    note = "peaks in the optimizer step: adamw's foreach update"
    assert note in rows.iloc[0]["notes"]
    # 4 bytes x 8,396,800 parameters = 33,587,200 B = 32.03 MiB
    assert "holds a 32.03 MiB list per device" in rows.iloc[0]["notes"]
    fused = aa.plan_parallel(fused_optimizer(prof), hardware="H100 SXM", num_devices=1,
                             precision="bf16")
    assert note not in fused.iloc[0]["notes"]
