"""NF4 as bitsandbytes runs it: a one-row call uses the fused 4-bit GEMV, any other call
dequantises the weight to 16 bit first (bitsandbytes ``matmul_4bit`` -> ``MatMul4Bit``)."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa
from aiadvisor.costmodel.ops import (
    NF4_DEQUANT_BYTES,
    NF4_DEQUANT_OP,
    byte_factors,
    device_work,
    nf4_dequantizes,
    op_arrays,
)
from aiadvisor.schema import ParallelConfig


def _linear_profile(rows: int):
    with torch.device("meta"):
        layer = torch.nn.Linear(4096, 4096)
    return aa.profile(layer, torch.empty(rows, 4096, device="meta"), mode="infer")


def test_the_per_weight_bytes_are_the_4_bit_read_and_the_16_bit_write():
    # 4 bits + one 8-bit absmax per 64 + one fp32 second-level scale per 64 x 256 (double
    # quantisation): 4.12695 bits = 0.51587 bytes read; 2 bytes written.
    assert NF4_DEQUANT_BYTES == pytest.approx(4.126953125 / 8 + 2.0)


@pytest.mark.parametrize("rows, dequantizes", [(1, False), (8, True)])
def test_only_calls_of_more_than_one_row_dequantize(rows, dequantizes):
    prof = _linear_profile(rows)
    assert nf4_dequantizes(prof, "nf4") is dequantizes
    assert not nf4_dequantizes(prof, "int4")  # GPTQ/AWQ kernels read 4-bit weights directly
    ops = op_arrays(prof)
    gemm = ops.gemm_like & (ops.phase == "forward")
    factors = byte_factors(prof, ops, "nf4")
    fp16 = byte_factors(prof, ops, "fp16")
    if dequantizes:  # the GEMM reads the 16-bit copy: the same bytes as an fp16 GEMM
        assert factors[gemm] == pytest.approx(fp16[gemm])
    else:  # the fused GEMV reads the 4-bit weight: fewer bytes than fp16
        assert (factors[gemm] < 0.5 * fp16[gemm]).all()


def test_the_dequantisation_is_one_kernel_per_linear_call_moving_its_weight():
    prof = _linear_profile(8)
    ops = op_arrays(prof)
    work = device_work(prof, ops, byte_factors(prof, ops, "nf4"), 0.0, ParallelConfig(),
                       dequant_bytes_per_weight=NF4_DEQUANT_BYTES)
    (i,) = [k for k, name in enumerate(work.name) if name == NF4_DEQUANT_OP]
    # Linear(4096, 4096): 4096 x 4096 weights + 4096 bias = 16,781,312 elements, one call.
    assert work.count[i] == 1 and work.phase[i] == "forward" and work.op_class[i] == "memory"
    assert work.bytes_per_call[i] == pytest.approx(16_781_312 * (0.515869140625 + 2.0))
    assert work.written_per_call[i] == pytest.approx(16_781_312 * 2.0)
    assert work.flops_per_call[i] == 0


def test_nf4_at_batch_8_costs_more_than_int4_and_at_batch_1_reads_4_bits_too():
    # An 8-layer 4096-wide MLP on an H100: memory-bound at these batches. At batch 8 NF4 moves
    # 4 more bytes a weight than INT4 (write and read the 16-bit copy; its own 4-bit read
    # replaces INT4's), about 134 MB over 33.6 M weights, 40 us at 3.35 TB/s.
    with torch.device("meta"):
        mlp = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(8)])
    preds = {}
    for rows in (1, 8):
        prof = aa.profile(mlp, torch.empty(rows, 4096, device="meta"), mode="infer")
        preds[rows] = {p: aa.predict(prof, hardware="H100 SXM", precision=p)
                       for p in ("nf4", "int4")}
    one, eight = preds[1], preds[8]
    # Batch 1: both read 4-bit weights; NF4's 4.13 bits a weight against INT4's 4.25 (group 128,
    # fp16 scale and zero): slightly less.
    assert 0.95 * one["int4"].memory_s < one["nf4"].memory_s < one["int4"].memory_s
    assert not any("dequantis" in n for n in one["nf4"].notes)
    extra = eight["nf4"].memory_s - eight["int4"].memory_s
    weights = 8 * 4096 * 4097
    assert extra >= weights * 4.0 / 3.35e12  # at most the datasheet bandwidth
    assert extra < weights * 4.0 / (0.4 * 3.35e12)
    assert any("dequantis" in n for n in eight["nf4"].notes)


def test_a_decoder_dequantizes_its_block_linears_and_keeps_the_head_in_16_bit():
    from aiadvisor import examples

    model, _ = examples.build("llama-3-8b")  # meta device
    step = aa.profile_generation(model, prompt_len=512).prefill.at(batch_size=8, seq_len=1)
    ops = op_arrays(step)
    work = device_work(step, ops, byte_factors(step, ops, "nf4"), 0.0, ParallelConfig(),
                       dequant_bytes_per_weight=NF4_DEQUANT_BYTES)
    (i,) = [k for k, name in enumerate(work.name) if name == NF4_DEQUANT_OP]
    # Llama-3-8B: 32 blocks of q, k, v, o, gate, up, down = 224 linears, one dequantisation
    # each; their weights, by hand from the config (hidden 4096, 8 KV heads of 128, MLP 14336):
    # 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336) = 6,979,321,856. The 128256 x
    # 4096 head stays in 16 bit (transformers leaves the output module unconverted).
    assert work.count[i] == 224
    assert work.bytes_per_call[i] * work.count[i] == pytest.approx(
        6_979_321_856 * NF4_DEQUANT_BYTES)
