"""FP4 (NVFP4 / MXFP4) and MXFP8 as precisions: bits per element, where they run, what they
cost, and the errors where they do not run. Expected numbers are worked out by hand below."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa
from aiadvisor.costmodel.generation import default_kv_precision
from aiadvisor.costmodel.precision import check_precision, weight_bytes_per_element
from aiadvisor.errors import UnsupportedPrecisionError
from aiadvisor.hardware import get, support_matrix
from aiadvisor.hardware.support import fp4_bits, fp4_format, support_level
from aiadvisor.recommend.memory import state_bytes_per_param
from aiadvisor.units import FP4_FORMAT_BITS, WEIGHT_BITS, WEIGHT_BYTES, GiB

# Llama-3-8B: 32 layers, hidden 4096, 8 KV heads of 128, MLP 14336, vocabulary 128256.
# Linear weights per layer: q 4096^2 + k, v 4096 x 1024 each + o 4096^2 + gate, up, down
# 4096 x 14336 each = 2 x 16,777,216 + 2 x 4,194,304 + 3 x 58,720,256 = 218,103,808.
LLAMA8B_LINEAR = 32 * 218_103_808  # 6,979,321,856 (what quantizers convert)
# The rest: embedding and untied head 2 x 128256 x 4096 = 1,050,673,152, and 65 RMSNorm
# weights of 4096 = 266,240: 1,050,939,392, kept in 16 bit.
LLAMA8B_OTHER = 2 * 128_256 * 4096 + 65 * 4096
# KV cache elements per token: K and V x 32 layers x 8 heads x 128 = 65,536.
LLAMA8B_KV_ELEMENTS = 2 * 32 * 8 * 128


def test_bits_per_element_include_the_block_scales():
    # NVFP4: 4-bit E2M1 values + one 8-bit E4M3 scale per 16 (+ one FP32 scale per tensor).
    assert WEIGHT_BITS["fp4"] == FP4_FORMAT_BITS["nvfp4"] == 4 + 8 / 16 == 4.5
    # MXFP4 (OCP MX v1.0): E2M1 + one 8-bit E8M0 scale per 32.
    assert FP4_FORMAT_BITS["mxfp4"] == 4 + 8 / 32 == 4.25
    # MXFP8: E4M3/E5M2 + one E8M0 scale per 32.
    assert WEIGHT_BITS["mxfp8"] == 8 + 8 / 32 == 8.25
    assert WEIGHT_BYTES["fp4"] == 0.5625 and WEIGHT_BYTES["mxfp8"] == 1.03125


def test_each_device_names_its_fp4_format():
    # NVIDIA Blackwell runs NVFP4 (TensorRT-LLM, Transformer Engine, vLLM); AMD CDNA4 and AWS
    # Trainium3 run the OCP MX format; Hopper has no FP4 engine.
    assert fp4_format(get("B200")) == fp4_format(get("B300")) == fp4_format(get("GB300")) \
        == "nvfp4"
    assert fp4_format(get("MI355X")) == fp4_format(get("Trainium3")) == "mxfp4"
    assert fp4_format(get("H100 SXM")) is None
    assert (fp4_bits(get("B200")), fp4_bits(get("MI355X"))) == (4.5, 4.25)
    assert weight_bytes_per_element("fp4", get("MI355X")) == 4.25 / 8


def test_support_follows_the_catalog_figures():
    m = support_matrix()
    # A dense fp4 figure: FP4 native. MXFP8 needs FP8 and the block-scaled engine an FP4 figure
    # marks: Blackwell (datacenter and GeForce), CDNA4; not Hopper.
    for name in ("NVIDIA B200", "NVIDIA B300", "NVIDIA GB300", "NVIDIA GeForce RTX 5090",
                 "AMD Instinct MI355X"):
        assert m.loc[name, "fp4"] == m.loc[name, "mxfp8"] == "full", name
    assert m.loc["NVIDIA H100 SXM", "fp4"] == m.loc["NVIDIA H100 SXM", "mxfp8"] == "emulated"
    # DGX Spark publishes only an FP4 figure: FP4 runs, MXFP8 has no FP8 peak to run at.
    spark = get("DGX Spark")
    assert support_level(spark, "fp4") == "full" and support_level(spark, "mxfp8") != "full"
    # MXFP8 runs at the FP8 peak.
    assert get("B200").peak_tflops("mxfp8") == 4500 and get("H100 SXM").peak_tflops("mxfp8") \
        is None


def test_unsupported_precisions_on_h100_name_the_nearest():
    h100 = get("H100 SXM")
    with pytest.raises(UnsupportedPrecisionError,
                       match=r"precision='fp4' is not supported on 'NVIDIA H100 SXM': it has no "
                             r"FP4 tensor cores.*Use precision='fp8' instead \(or 'int4' for "
                             r"4-bit weights"):
        check_precision(h100, "fp4")
    with pytest.raises(UnsupportedPrecisionError,
                       match=r"precision='mxfp8' .* no block-scaled \(MX\) tensor cores.*Use "
                             r"precision='fp8' instead\.$"):
        check_precision(h100, "mxfp8")
    assert check_precision(get("B200"), "fp4") == "fp4"


@pytest.fixture(scope="module")
def gemm():
    # One 16384^3 GEMM: 2 x 16384^3 = 8.80 TFLOP over 3 x 16384^2 operands.
    lin = torch.nn.Linear(16384, 16384, bias=False, device="meta")
    return aa.profile(lin, torch.empty(16384, 16384, device="meta"), mode="infer",
                      precision="bf16")


def test_a_gemm_in_fp4_takes_the_fp8_time_times_the_peak_ratio(gemm):
    # Compute bound in both: at 4.5 bits the operands are 3 x 16384^2 x 0.5625 = 453 MB,
    # 0.059 ms at 7.7 TB/s, against 8.80 TFLOP / 9000 TFLOPS = 0.98 ms. The B200's dense peaks
    # are FP4 9000 and FP8 4500 TFLOPS: the GEMM's time halves, times the published
    # achievable-matmul fractions each format is scaled by: FP8 3432.5 / 4500 = 76.28 %, and FP4
    # (no FP4 figure published) the BF16 one, 1745 / 2250 = 77.56 %.
    fp8 = aa.predict(gemm, hardware="B200", precision="fp8")
    fp4 = aa.predict(gemm, hardware="B200", precision="fp4")
    assert fp4.bound == fp8.bound == "compute"
    assert fp4.compute_s / fp8.compute_s == pytest.approx(
        4500 / 9000 * (3432.5 / 4500) / (1745 / 2250), rel=0.005)
    assert any("NVFP4 on NVIDIA B200" in n and "4.5 bits" in n for n in fp4.notes)
    # MXFP8 runs at the FP8 peak (its 3 % more operand bytes do not matter when compute bound).
    mx = aa.predict(gemm, hardware="B200", precision="mxfp8")
    assert mx.compute_s == pytest.approx(fp8.compute_s, rel=0.01)


def test_fp4_is_refused_for_training(gemm):
    with pytest.raises(UnsupportedPrecisionError, match="inference and serving only"):
        state_bytes_per_param(mode="train", precision="fp4", optimizer="adamw")
    train = aa.profile(torch.nn.Linear(256, 256), torch.randn(8, 256))
    with pytest.raises(UnsupportedPrecisionError, match="not valid for training"):
        aa.predict(train, hardware="B200", precision="fp4")
    # MXFP8 trains like FP8: 16-bit weights and gradients, fp32 masters + AdamW moments.
    assert state_bytes_per_param(mode="train", precision="mxfp8", optimizer="adamw") \
        == state_bytes_per_param(mode="train", precision="fp8", optimizer="adamw") == (2, 2, 12)
    table = aa.costmodel.predict_table(train, specs=[get("B200")])
    assert "fp4" not in set(table["precision"]) and "mxfp8" in set(table["precision"])


def test_the_training_report_says_why_fp4_is_not_offered():
    report = aa.advise(torch.nn.Linear(1024, 1024), torch.randn(64, 1024), mode="train",
                       hardware="B200")
    row = report.precision.set_index("precision").loc["fp4"]
    assert not row["usable"] and "inference and serving only" in row["notes"]
    assert "fp4: FP4 (NVFP4/MXFP4) is offered for inference and serving only" in str(report)


def test_the_inference_precision_table_names_the_device_format():
    model, x = torch.nn.Linear(1024, 1024), torch.randn(64, 1024)
    b200 = aa.advise(model, x, mode="infer", hardware="B200").precision.set_index("precision")
    mi355 = aa.advise(model, x, mode="infer", hardware="MI355X").precision.set_index(
        "precision")
    assert b200.loc["fp4", "usable"] and b200.loc["fp4", "notes"].startswith("NVFP4 (4.5 bits)")
    assert mi355.loc["fp4", "notes"].startswith("MXFP4 (4.25 bits)")


@pytest.fixture(scope="module")
def llama8b():
    from aiadvisor import examples

    model, x = examples.build("llama-3-8b", batch_size=1, seq_len=512)  # meta device
    return aa.profile_generation(model, x)


def test_llama8b_weights_in_fp4_against_bf16(llama8b):
    assert llama8b.quantizable_params == LLAMA8B_LINEAR
    assert llama8b.prefill.num_params == LLAMA8B_LINEAR + LLAMA8B_OTHER == 8_030_261_248
    bf16 = aa.predict_generation(llama8b, hardware="B200", weight_precision="bf16")
    fp4 = aa.predict_generation(llama8b, hardware="B200", weight_precision="fp4")
    mxfp4 = aa.predict_generation(llama8b, hardware="MI355X", weight_precision="fp4")
    # bf16: 8,030,261,248 x 2 = 16,060,522,496 B (14.96 GiB).
    assert bf16.weights_bytes == 16_060_522_496
    # NVFP4: 6,979,321,856 x 4.5 / 8 = 3,925,868,544 + 1,050,939,392 x 2 = 6,027,747,328 B.
    assert fp4.weights_bytes == 6_027_747_328
    # MXFP4: 6,979,321,856 x 4.25 / 8 = 3,707,764,736 + 2,101,878,784 = 5,809,643,520 B.
    assert mxfp4.weights_bytes == 5_809_643_520
    # The KV cache defaults to FP8 beside FP4 weights where the device has FP8.
    assert fp4.kv_precision == "fp8" == default_kv_precision(get("B200"), "fp4")
    assert fp4.kv_bytes_per_token == LLAMA8B_KV_ELEMENTS * 1 == 65_536


def test_max_batch_with_fp4_weights_on_a_b200_by_hand(llama8b):
    g = aa.predict_generation(llama8b, hardware="B200", weight_precision="fp4",
                              prompt_len=512, output_len=128)
    # The engine takes 90 % of 180 GiB: 173,946,175,488 B. One sequence of 512 + 128 tokens
    # holds 640 x 65,536 B = 41,943,040 B of FP8 cache.
    usable = int(180 * GiB * 0.9)
    per_sequence = (512 + 128) * LLAMA8B_KV_ELEMENTS
    assert g.usable_bytes_per_device == usable == 173_946_175_488
    assert per_sequence == 41_943_040
    # One 512-token prompt's activations are the working space (small beside the weights).
    assert 0 < g.working_bytes < GiB
    expected = (usable - 6_027_747_328 - g.working_bytes) // per_sequence
    assert g.max_batch == expected
    # (173,946,175,488 - 6,027,747,328) / 41,943,040 = 4003.5 before the working space.
    assert 3990 <= g.max_batch <= 4003
    # bf16 weights and a bf16 cache: (usable - 16,060,522,496 - working) / 83,886,080 ~ 1882.
    bf16 = aa.predict_generation(llama8b, hardware="B200", weight_precision="bf16",
                                 prompt_len=512, output_len=128)
    assert bf16.max_batch == (usable - 16_060_522_496 - bf16.working_bytes) // (2 * per_sequence)
    assert g.max_batch / bf16.max_batch == pytest.approx(2.13, abs=0.01)


def test_fp4_is_refused_for_serving_where_there_is_no_fp4_engine(llama8b):
    with pytest.raises(UnsupportedPrecisionError, match="Use precision='fp8' instead"):
        aa.predict_generation(llama8b, hardware="H100 SXM", weight_precision="fp4")
    plan = aa.plan_serving(llama8b, hardware="H100 SXM", prompt_len=512, output_len=128)
    assert "fp4" not in set(plan["weight_precision"])


def test_serving_plan_and_engine_code_for_fp4_on_b200(llama8b):
    from aiadvisor.codegen import CodeNames
    from aiadvisor.recommend.serving import serving_recommendations

    plan = aa.plan_serving(llama8b, hardware="B200", prompt_len=512, output_len=128)
    fp4 = plan[plan["weight_precision"] == "fp4"]
    assert set(fp4["kv_precision"]) == {"fp8", "bf16"}
    assert not plan.duplicated(["weight_precision", "kv_precision", "tp", "batch_size"]).any()
    recs = serving_recommendations(fp4.reset_index(drop=True), names=CodeNames(), model_id="m",
                                   prompt_len=512, output_len=128)
    by_id = {r.id: r for r in recs}
    # TGI has no NVFP4 loader; TensorRT-LLM's QuantAlgo is NVFP4; vLLM reads the method from
    # the NVFP4 checkpoint's config.json (no quantization flag).
    assert "serve_tgi" not in by_id
    assert "quant_algo = 'NVFP4'" in by_id["serve_tensorrt_llm"].code
    assert "quantization=None" in by_id["serve_vllm"].code
    assert "NVFP4 on NVIDIA Blackwell" in by_id["serve_vllm"].rationale


def test_block_format_code_uses_the_documented_apis():
    from aiadvisor.codegen import CodeNames, snippet

    mx = snippet("mxfp8", names=CodeNames(), min_features=1024)
    # Transformer Engine's recipe (transformer_engine.common.recipe.MXFP8BlockScaling) under
    # te.autocast(recipe=...), or fp8_autocast(fp8_recipe=...) in older releases.
    assert "MXFP8BlockScaling()" in mx and "te.autocast(enabled=True, recipe=recipe)" in mx
    assert "te.fp8_autocast(enabled=True, fp8_recipe=recipe)" in mx
    fp4 = snippet("fp4_infer", names=CodeNames())
    assert "NVFP4DynamicActivationNVFP4WeightConfig(use_triton_kernel=False)" in fp4
