"""One size for 8- and 4-bit weights: the profiler, the planner and the cost model agree."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import aiadvisor as aa
from aiadvisor.costmodel.ops import byte_factors, op_arrays
from aiadvisor.recommend.memory import device_memory
from aiadvisor.schema import ParallelConfig

# Two bias-free Linear layers: every parameter is a weight matrix the quantizers convert.
NUM_PARAMS = 256 * 512 + 512 * 128  # 196608
# int4: 4 bits + a 16-bit scale and a 16-bit zero point per group of 128 = 4.25 bits.
# nf4: 4 bits + an 8-bit absmax per block of 64 + an fp32 constant per 256 absmax (double
# quantization, QLoRA section 3) = 4 + 0.125 + 0.001953125 = 4.126953125 bits.
HAND_WEIGHT_BYTES = {
    "int4": NUM_PARAMS * 4.25 / 8,               # 104448
    "nf4": NUM_PARAMS * 4.126953125 / 8,         # 101424
}
# Weight bytes the forward GEMMs read where that differs from the stored size: NF4 at more than
# one row dequantises to 16 bit first (bitsandbytes matmul_4bit), 196608 x 2 = 393216.
GEMM_WEIGHT_BYTES = {"nf4": NUM_PARAMS * 2}
# Forward GEMM activations at batch 256, 16 bit in every 4-bit format: mm1 reads x (256 x 256)
# and writes 256 x 512; mm2 reads 256 x 512 and writes 256 x 128: 360448 elements x 2 bytes.
HAND_GEMM_ACTIVATION_BYTES = (256 * 256 + 256 * 512 + 256 * 512 + 256 * 128) * 2  # 720896


def _model_and_input():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512, bias=False), nn.ReLU(),
                          nn.Linear(512, 128, bias=False))
    return model, torch.randn(256, 256)


def _cost_model_forward_gemm_bytes(prof, precision):
    ops = op_arrays(prof)
    factors = byte_factors(prof, ops, precision)
    fwd_gemm = ops.gemm_like & (ops.phase == "forward")
    return float((ops.bytes_total * factors)[fwd_gemm].sum())


@pytest.mark.parametrize("precision", ["int4", "nf4"])
def test_profiler_planner_and_cost_model_size_4_bit_weights_alike(precision):
    model, x = _model_and_input()
    prof = aa.profile(model, x, mode="infer", precision=precision)
    hand = HAND_WEIGHT_BYTES[precision]
    assert prof.num_params == NUM_PARAMS
    assert prof.memory.weights_bytes == pytest.approx(hand, abs=1)
    planned = device_memory(prof, ParallelConfig(), precision=precision)
    assert planned.weights_bytes == pytest.approx(hand)
    # The cost model reads each weight once per forward, at the same size, plus the 16-bit
    # activations (the weight share, 393216 / 1114112 = 35 %, is under the 90 % cap). NF4 at
    # 256 rows is bitsandbytes' dequantise-then-GEMM path: its GEMMs read the 16-bit copy
    # (196608 x 2 bytes; the dequantisation itself is a separate op, test_nf4_dequant.py).
    expected = HAND_GEMM_ACTIVATION_BYTES + GEMM_WEIGHT_BYTES.get(precision, hand)
    assert _cost_model_forward_gemm_bytes(prof, precision) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("precision", ["int4", "nf4"])
def test_fp32_trace_predicted_in_4_bit_reads_the_same_weight_bytes(precision):
    # An FP32 profile converted by the cost model: activations to 16 bit, weights to the
    # 4-bit size (same totals as a profile traced at that precision).
    model, x = _model_and_input()
    prof = aa.profile(model, x, mode="infer", precision="fp32")
    expected = HAND_GEMM_ACTIVATION_BYTES + GEMM_WEIGHT_BYTES.get(precision,
                                                                  HAND_WEIGHT_BYTES[precision])
    assert _cost_model_forward_gemm_bytes(prof, precision) == pytest.approx(expected, rel=1e-9)


def test_weight_only_int8_reads_one_byte_weights_and_16_bit_activations():
    # int8wo (W8A16): the 196608 weights at one byte each (per-channel scales, under 0.01 bit a
    # weight), the GEMM activations in 16 bit as in the 4-bit formats; int8 (W8A8) feeds its
    # INT8 engine one-byte activations too: 360448 elements x 1 byte.
    model, x = _model_and_input()
    prof = aa.profile(model, x, mode="infer", precision="int8wo")
    assert prof.memory.weights_bytes == NUM_PARAMS
    assert device_memory(prof, ParallelConfig(), precision="int8wo").weights_bytes == NUM_PARAMS
    assert _cost_model_forward_gemm_bytes(prof, "int8wo") == pytest.approx(
        HAND_GEMM_ACTIVATION_BYTES + NUM_PARAMS, rel=1e-9)
    assert _cost_model_forward_gemm_bytes(prof, "int8") == pytest.approx(
        HAND_GEMM_ACTIVATION_BYTES / 2 + NUM_PARAMS, rel=1e-9)


def test_precision_table_offers_weight_only_int8_for_inference_only():
    # The A100 has a BF16 engine (312 TFLOP/s) and an INT8 one (624 TOP/s): int8 (W8A8) runs on
    # the latter, int8wo on the former, and neither trains.
    model, x = _model_and_input()
    infer = aa.advise(model, x, mode="infer", hardware="A100 SXM4 80GB").precision
    train = aa.advise(model, x, mode="train", hardware="A100 SXM4 80GB").precision
    rows = infer.set_index("precision")
    assert rows.loc["int8wo", "usable"] and rows.loc["int8wo", "support"] == "emulated"
    assert rows.loc["int8wo", "notes"] == "weight-only: stored in 8 bits, computed in 16 bit"
    assert rows.loc["int8", "support"] == "full"
    assert rows.loc["int8wo", "memory_per_device_bytes"] < rows.loc["bf16",
                                                                     "memory_per_device_bytes"]
    trained = train.set_index("precision").loc["int8wo"]
    assert not trained["usable"] and "not for training" in trained["notes"]
    # On a CPU the weight-only kernels multiply at the FP32 rate, and the table says so.
    cpu = aa.advise(model, x, mode="infer", hardware="Xeon 8480+").precision
    assert cpu.set_index("precision").loc["int8wo", "notes"] == (
        "weight-only: stored in 8 bits, computed at the FP32 rate (a CPU)")


@pytest.mark.parametrize("precision", ["int8wo", "int4", "nf4"])
def test_a_pinned_weight_only_format_is_what_the_report_prices(precision):
    # The L4 has INT8 and FP8 figures but no INT4 one, and no engine is named for int8wo or
    # nf4: weight-only formats dequantise to its bf16 engine, so the report keeps them rather
    # than falling back to bf16 (int8wo, nf4) or to int8 W8A8 (int4).
    model, x = _model_and_input()
    report = aa.advise(model, x, mode="infer", hardware="L4", precision=precision)
    assert report.prediction.precision == report.options["precision"] == precision
    assert "requested_precision" not in report.options
    assert report.prediction.step_time_s > 0
    # Training still means bf16: these are inference formats.
    train = aa.advise(model, x, mode="train", hardware="L4", precision=precision)
    assert train.prediction.precision == "bf16"
    assert train.options["requested_precision"] == precision


def test_weight_only_gemms_on_a_cpu_run_at_its_fp32_rate():
    # PyTorch's CPU weight-only kernels do not use the BF16 units (measured: int8 0.23 and
    # int4 0.33 TFLOP/s on a CPU whose FP32 matmul ran 0.22 and BF16 0.98): a CPU prices them
    # at its FP32 peak, a GPU at its 16-bit one.
    from aiadvisor.costmodel.precision import compute_precision, gemm_peak_tflops

    xeon, l4 = aa.hardware.get("Xeon 8480+"), aa.hardware.get("L4")
    for fmt in ("int8wo", "int4", "nf4"):
        assert gemm_peak_tflops(xeon, fmt) == xeon.fp32_tflops < xeon.bf16_tflops
        assert gemm_peak_tflops(l4, fmt) == l4.bf16_tflops
        assert compute_precision(xeon, fmt) == "fp32"
        assert compute_precision(l4, fmt) == "bf16"
    assert compute_precision(xeon, "bf16") == "bf16"
    model, x = _model_and_input()
    prof = aa.profile(model, x, mode="infer")
    note = aa.predict(prof, hardware=xeon, precision="int8wo").notes
    assert any("FP32 matmul rate" in n for n in note)
    assert not any("FP32 matmul rate" in n
                   for n in aa.predict(prof, hardware=xeon, precision="bf16").notes)
