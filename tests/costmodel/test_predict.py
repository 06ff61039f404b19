"""predict(): roofline arithmetic, precision conversion, composition and bad input, by hand.

Most tests use ``exact_model`` (efficiency 1 everywhere, conftest.py) so every expected number is
a roofline worked out in the comments; a few use the shipped model for bounds and intervals.
"""

from __future__ import annotations

import dataclasses
import importlib
import math

import numpy as np
import pytest

from aiadvisor.costmodel import load_model, predict, predict_table, step_time
from aiadvisor.errors import (
    AIAdvisorError,
    InvalidArgumentError,
    UnknownHardwareError,
    UnsupportedPrecisionError,
)
from aiadvisor.schema import OpRecord, ParallelConfig

from .conftest import constant_model, make_profile, make_spec, op

N = 4096
GEMM_FLOPS = 2 * N**3                      # 1.374e11
GEMM_BYTES_FP32 = 3 * 4 * N**2             # A, B and C in fp32: 2.013e8


def gemm_profile(**kw):
    return make_profile([op("aten.mm", "gemm", "forward", flops=GEMM_FLOPS,
                            bytes_read=2 * 4 * N**2, bytes_written=4 * N**2)], **kw)


def test_bf16_gemm_roofline_by_hand(spec, exact_model):
    # bf16 halves the fp32 trace's bytes: 1.007e8 B / 3e12 = 33.6 us < 1.374e11 / 1e15 =
    # 137.4 us: compute bound; + 4 us launch = 141.4 us.
    pred = predict(gemm_profile(), hardware=spec, precision="bf16", model=exact_model)
    assert pred.step_time_s == pytest.approx(137.44e-6 + 4e-6, rel=1e-3)
    assert pred.compute_s == pytest.approx(137.44e-6, rel=1e-3)
    assert pred.overhead_s == pytest.approx(4e-6)
    assert pred.bound == "compute"
    # MFU = 1.374e11 / (141.4 us * 1e15) = 0.972
    assert pred.mfu == pytest.approx(0.972, abs=1e-3)
    assert pred.throughput == pytest.approx(8 / pred.step_time_s)


def test_fp32_runs_at_simt_peak_not_tensor_cores(spec, exact_model):
    # fp32: 1.374e11 / 60e12 = 2.2907 ms (the 1000 TF tensor peak does not apply) + 4 us.
    fp32 = predict(gemm_profile(), hardware=spec, precision="fp32", model=exact_model)
    assert fp32.step_time_s == pytest.approx(2.2907e-3 + 4e-6, rel=1e-3)
    # tf32 uses the 500 TF tensor-core peak: 274.9 us + 4 us.
    tf32 = predict(gemm_profile(), hardware=spec, precision="tf32", model=exact_model)
    assert tf32.step_time_s == pytest.approx(274.88e-6 + 4e-6, rel=1e-3)
    # fp8: 1.374e11 / 2e15 = 68.7 us; its 1-byte operands take 16.8 us; + 4 us.
    fp8 = predict(gemm_profile(), hardware=spec, precision="fp8", model=exact_model)
    assert fp8.step_time_s == pytest.approx(68.72e-6 + 4e-6, rel=1e-3)


def add_profile(op_name="aten.add", **kw):
    # An fp32 elementwise op reading 2 GB and writing 1 GB.
    return make_profile([op(op_name, "memory", "forward", flops=2.5e8, bytes_read=2e9,
                            bytes_written=1e9)], **kw)


def test_precision_converts_memory_bound_bytes(spec, exact_model):
    # fp32: 3e9 B / 3e12 B/s = 1 ms; bf16 activations halve it: 0.5 ms; + 4 us launch each.
    fp32 = predict(add_profile(), hardware=spec, precision="fp32", model=exact_model)
    bf16 = predict(add_profile(), hardware=spec, precision="bf16", model=exact_model)
    assert fp32.step_time_s == pytest.approx(1e-3 + 4e-6, rel=1e-6)
    assert bf16.step_time_s == pytest.approx(0.5e-3 + 4e-6, rel=1e-6)
    assert bf16.bound == "memory"
    # Training under autocast keeps LayerNorm in fp32: reads bf16, writes fp32 -> 3/4 of the
    # fp32 bytes (no GEMM, so no casts are added).
    ln = predict(add_profile("aten.native_layer_norm", mode="train"), hardware=spec,
                 precision="bf16", model=exact_model)
    assert ln.step_time_s == pytest.approx(0.75e-3 + 4e-6, rel=1e-6)


def test_autocast_training_adds_casts_of_gemm_operands(spec, exact_model):
    # fp32 trace, one forward GEMM reading 1e9 bytes (compute 1e12 / 1e15 = 1 ms at bf16, its
    # bf16 bytes 0.75e9 / 3e12 = 0.25 ms: compute bound). Autocast casts its operands and the
    # gradients back: 3 x 1e9 bytes of extra traffic = 1 ms at 3000 GB/s, one launch.
    prof = make_profile([op("aten.mm", "gemm", "forward", flops=1e12, bytes_read=1e9,
                            bytes_written=5e8)], mode="train", num_params=0, weights_bytes=0)
    pred = predict(prof, hardware=spec, precision="bf16", model=exact_model)
    assert pred.compute_s == pytest.approx(1e-3, rel=1e-9)
    assert pred.memory_s == pytest.approx(3e9 / 3e12, rel=1e-9)
    assert pred.step_time_s == pytest.approx(2e-3 + 8e-6, rel=1e-9)
    # No casts when predicting fp32 or inference (inference in bf16 stores bf16 weights).
    assert predict(prof, hardware=spec, precision="fp32", model=exact_model).memory_s == 0


def test_profile_traced_in_bf16_keeps_its_bytes(spec, exact_model):
    # Traced under autocast: a bf16 add (1.5 GB), an fp32 LayerNorm (3 GB) and a cast
    # (0.6 GB). Predicting bf16 keeps every byte: 5.1e9 / 3e12 = 1.7 ms + 3 launches.
    ops = [op("aten.add", "memory", "forward", bytes_read=1e9, bytes_written=5e8,
              dtype="bfloat16"),
           op("aten.native_layer_norm", "memory", "forward", bytes_read=2e9, bytes_written=1e9),
           op("aten._to_copy", "memory", "forward", bytes_read=4e8, bytes_written=2e8,
              dtype="bfloat16")]
    prof = make_profile(ops, mode="train", compute_dtype="bfloat16", precision="bf16")
    bf16 = predict(prof, hardware=spec, precision="bf16", model=exact_model)
    assert bf16.step_time_s == pytest.approx(5.1e9 / 3e12 + 12e-6, rel=1e-9)
    # fp32: the add doubles to 3 GB, the LayerNorm stays 3 GB, the cast disappears (its launch
    # stays): 6e9 / 3e12 = 2 ms.
    fp32 = predict(prof, hardware=spec, precision="fp32", model=exact_model)
    assert fp32.step_time_s == pytest.approx(6e9 / 3e12 + 12e-6, rel=1e-9)


def test_learned_efficiency_slows_the_roofline_and_brackets_it(spec):
    pred = predict(gemm_profile(), hardware=spec, precision="bf16")
    roofline_s = 137.44e-6 + 4e-6
    assert roofline_s < pred.step_time_s <= roofline_s * 20   # efficiency in (0.05, 1)
    assert pred.low_s <= pred.step_time_s <= pred.high_s
    assert pred.low_s >= roofline_s * 0.999
    assert pred.confidence == "high"


def test_interval_contains_step_for_many_configs(spec):
    prof = make_profile([
        op("aten.mm", "gemm", "forward", flops=1e12, bytes_read=4e8, bytes_written=2e8),
        op("aten.mm", "gemm", "backward", flops=2e12, bytes_read=8e8, bytes_written=4e8),
        op("aten.gelu", "memory", "forward", flops=1e8, bytes_read=2e8, bytes_written=2e8),
        op("aten.embedding", "embedding", "forward", bytes_read=1e7, bytes_written=1e7),
        op("optimizer.adamw", "optimizer", "optimizer", flops=1.4e10, bytes_read=2e10,
           bytes_written=1.2e10),
    ], mode="train", num_params=int(1e9), weights_bytes=int(4e9), num_blocks=24,
        block_output_bytes=int(3e7), optimizer="adamw")
    for precision in ("fp32", "bf16", "fp8"):
        for parallel in (ParallelConfig(), ParallelConfig(dp_degree=8),
                         ParallelConfig(dp_degree=2, tp_degree=2, pp_degree=2, num_microbatches=4,
                                        zero_stage=3, checkpointing="full")):
            pred = predict(prof, hardware=spec, precision=precision,
                           num_devices=parallel.num_devices, parallel=parallel)
            assert 0 < pred.low_s <= pred.step_time_s <= pred.high_s
            parts = pred.compute_s + pred.memory_s + pred.communication_s + pred.overhead_s
            assert parts == pytest.approx(pred.step_time_s)


def test_ddp_all_reduce_by_hand(spec, exact_model):
    # 1e9 fp32 parameters: 4 GB of gradients all-reduced over 8 devices on 900 GB/s NVLink
    # (450 GB/s each way) at the fitted NCCL efficiency: alpha + 2 * 7/8 * 4e9 / (450e9 * eff).
    c = load_model().collectives
    t_ar = c.alpha_s["all_reduce"] + 1.75 * 4e9 / (450e9 * c.intra_node_efficiency)
    # Backward: 8e9 fp32 bytes split over 8 ranks = 1e9 B / 3e12 = 333.3 us + 4 us launch.
    backward_s = 1e9 / 3e12 + 4e-6
    prof = make_profile([op("aten.add", "memory", "backward", bytes_read=6e9, bytes_written=2e9)],
                        mode="train", num_params=int(1e9), weights_bytes=int(4e9))
    pred = predict(prof, hardware=spec, precision="fp32", num_devices=8, model=exact_model)
    # 80 % of the backward hides communication: exposed = t_ar - 0.8 * backward.
    assert pred.communication_s == pytest.approx(t_ar - 0.8 * backward_s, rel=1e-6)
    assert pred.step_time_s == pytest.approx(backward_s + t_ar - 0.8 * backward_s, rel=1e-6)
    assert pred.bound == "communication"


def test_tensor_parallel_all_reduces_by_hand(spec, exact_model):
    # 4 blocks, each output 8 MB in fp32 -> 4 MB in bf16; inference: 2 all-reduces per block
    # forward = 8 all-reduces over tp=2, each alpha + 2 * 1/2 * 4e6 / (450e9 * eff).
    c = load_model().collectives
    one = c.alpha_s["all_reduce"] + 1.0 * 4e6 / (450e9 * c.intra_node_efficiency)
    prof = add_profile(num_blocks=4, block_output_bytes=8_000_000)
    pred = predict(prof, hardware=spec, precision="bf16", num_devices=2,
                   parallel=ParallelConfig(tp_degree=2), model=exact_model)
    assert pred.communication_s == pytest.approx(8 * one, rel=1e-6)


def test_pipeline_bubble_by_hand(spec, exact_model):
    # One memory-bound forward op, 4 calls of 0.75 GB (fp32) each: 3 GB -> 1 ms + 4 x 4 us.
    prof = make_profile([op("aten.add", "memory", "forward", bytes_read=2e9, bytes_written=1e9,
                            count=4)], num_blocks=4, block_output_bytes=1_000_000)
    single = predict(prof, hardware=spec, precision="fp32", model=exact_model).step_time_s
    assert single == pytest.approx(1e-3 + 16e-6, rel=1e-9)
    p2p = load_model().collectives.alpha_s["send_recv"] + 1e6 / (450e9 * load_model()
                                                                 .collectives.intra_node_efficiency)
    # pp=4, one micro-batch: each stage runs 1 of the 4 calls (0.25 ms + 4 us) and waits for
    # the other three: (m + pp - 1) / m = 4 x the stage = the single-device time, plus the
    # message crossing a stage boundary once.
    pp1 = predict(prof, hardware=spec, precision="fp32", num_devices=4,
                  parallel=ParallelConfig(pp_degree=4), model=exact_model)
    assert pp1.step_time_s == pytest.approx(single + p2p, rel=1e-6)
    assert pp1.overhead_s - 4e-6 == pytest.approx(3 * (0.25e-3 + 4e-6), rel=1e-6)
    # pp=4, m=8: a stage runs 8 calls of 1/8 the size: 8 x (0.25/8 ms + 4 us) = 0.282 ms;
    # bubble (pp-1)/(m+pp-1) = 3/11 -> step = 0.282 ms * 11/8, plus 8 messages of 1/8 MB.
    stage = 8 * (0.25e-3 / 8 + 4e-6)
    p2p8 = load_model().collectives.alpha_s["send_recv"] + 1.25e5 / (
        450e9 * load_model().collectives.intra_node_efficiency)
    pp8 = predict(prof, hardware=spec, precision="fp32", num_devices=4,
                  parallel=ParallelConfig(pp_degree=4, num_microbatches=8), model=exact_model)
    assert pp8.step_time_s == pytest.approx(stage * 11 / 8 + 8 * p2p8, rel=1e-6)


def test_interleaved_pipeline_by_hand(spec, exact_model):
    # As above with 8 blocks, pp=4, m=8: each stage runs 8 calls of 1/8 the work, 0.282 ms.
    # Plain 1F1B: bubble 3/8 of the ideal, 8 sends of 1/8 MB. Interleaved with v=2 chunks of
    # 1 block per device: bubble (pp-1)/(v m) = 3/16 of it and each micro-batch crosses
    # 2 chunk boundaries per device: 16 sends of the same size.
    prof = make_profile([op("aten.add", "memory", "forward", bytes_read=2e9, bytes_written=1e9,
                            count=4)], num_blocks=8, block_output_bytes=1_000_000)
    c = load_model().collectives
    stage = 8 * (0.25e-3 / 8 + 4e-6)
    p2p8 = c.alpha_s["send_recv"] + 1.25e5 / (450e9 * c.intra_node_efficiency)
    kw = {"hardware": spec, "precision": "fp32", "num_devices": 4, "model": exact_model}
    plain = predict(prof, parallel=ParallelConfig(pp_degree=4, num_microbatches=8), **kw)
    inter = predict(prof, parallel=ParallelConfig(pp_degree=4, num_microbatches=8,
                                                  virtual_stages=2), **kw)
    assert plain.step_time_s == pytest.approx(stage * (1 + 3 / 8) + 8 * p2p8, rel=1e-6)
    assert inter.step_time_s == pytest.approx(stage * (1 + 3 / 16) + 16 * p2p8, rel=1e-6)
    assert inter.communication_s == pytest.approx(2 * plain.communication_s, rel=1e-9)


def test_interleaved_config_checks():
    assert ParallelConfig(dp_degree=2, pp_degree=4, num_microbatches=8,
                          virtual_stages=2).label == "ddp2+pp4v2"
    with pytest.raises(InvalidArgumentError, match="needs a pipeline"):
        ParallelConfig(virtual_stages=2)
    # Megatron's interleaved schedule runs micro-batches in groups of pp.
    with pytest.raises(InvalidArgumentError, match="multiple of pp_degree=4"):
        ParallelConfig(pp_degree=4, num_microbatches=6, virtual_stages=2)
    with pytest.raises(InvalidArgumentError, match="virtual_stages=0"):
        ParallelConfig(pp_degree=4, virtual_stages=0)


def test_activation_checkpointing_recompute(spec, exact_model):
    fwd = op("aten.add", "memory", "forward", bytes_read=2e9, bytes_written=1e9)     # 1 ms + 4 us
    attn = op("aten._scaled_dot_product_flash_attention", "attention", "forward",
              flops=1e9, bytes_read=4e8, bytes_written=2e8)                         # 0.2 ms + 4 us
    bwd = op("aten.add", "memory", "backward", bytes_read=4e9, bytes_written=2e9)    # 2 ms + 4 us
    prof = make_profile([fwd, attn, bwd], mode="train", num_params=0, weights_bytes=0)
    kw = {"hardware": spec, "precision": "fp32", "model": exact_model}
    base = predict(prof, **kw).step_time_s
    assert base == pytest.approx(3.2e-3 + 12e-6, rel=1e-6)
    full = predict(prof, parallel=ParallelConfig(checkpointing="full"), **kw).step_time_s
    assert full - base == pytest.approx(1.2e-3 + 8e-6, rel=1e-6)      # the whole forward again
    sel = predict(prof, parallel=ParallelConfig(checkpointing="selective"), **kw).step_time_s
    assert sel - base == pytest.approx(0.2e-3 + 4e-6, rel=1e-6)       # attention only


def test_offload_adds_pcie_transfers_by_hand(spec, exact_model):
    # 1e9 fp32 params: 4 GB of grads to the host + 4 GB of params back at 25 GB/s = 0.32 s;
    # the 28 GB (fused) AdamW step runs on the host at 50 GB/s = 0.56 s instead of 9.3 ms on
    # the GPU.
    prof = make_profile([op("optimizer.adamw[fused]", "optimizer", "optimizer", flops=1.4e10,
                            bytes_read=1.6e10, bytes_written=1.2e10)],
                        mode="train", num_params=int(1e9), weights_bytes=int(4e9))
    kw = {"hardware": spec, "precision": "fp32", "model": exact_model}
    base = predict(prof, **kw)
    assert base.step_time_s == pytest.approx(2.8e10 / 3e12 + 4e-6, rel=1e-6)
    off = predict(prof, parallel=ParallelConfig(offload=True), **kw)
    assert off.communication_s == pytest.approx(0.32, rel=1e-6)
    assert off.step_time_s == pytest.approx(0.32 + 0.56, rel=1e-6)


def test_mfu_band_is_flagged_outside_25_65_percent(spec):
    # 1e15 FLOPs of bf16 GEMM on 1000 TF: 1 s at efficiency 1 -> MFU ~100 %: flagged. At a
    # constant efficiency 0.4 (slow-down 2.5) MFU is 40 %: inside the band, no note.
    big = make_profile([op("aten.mm", "gemm", "forward", flops=1e15, bytes_read=1e9,
                           bytes_written=1e9)], mode="train", num_params=int(3e8),
                       weights_bytes=int(1.2e9), num_blocks=24)
    flagged = predict(big, hardware=spec, precision="bf16", model=constant_model(0.0))
    assert flagged.mfu > 0.65 and any("outside the 25%-65% band" in n for n in flagged.notes)
    ok = predict(big, hardware=spec, precision="bf16", model=constant_model(math.log(2.5)))
    assert ok.mfu == pytest.approx(0.4, abs=0.01)
    assert not any("band" in n for n in ok.notes)


def test_confidence_labels(spec):
    prof = gemm_profile()
    assert predict(prof, hardware=spec, precision="fp16").confidence == "high"
    assert predict(prof, hardware=spec, precision="fp8").confidence == "low"
    amd = make_spec(name="Some AMD GPU", vendor="AMD")
    pred = predict(prof, hardware=amd, precision="bf16")
    assert pred.confidence == "low" and any("AMD" in n for n in pred.notes)
    tpu = make_spec(name="Some TPU", vendor="Google", kind="tpu", fp32_tflops=None)
    assert predict(prof, hardware=tpu, precision="bf16").confidence == "low"


def test_an_attached_cpu_not_benchmarked_says_how_to_measure_it():
    # The default hardware on a CPU-only machine is the detected CPU, not benchmarked: the note
    # must say so and name hardware='local', not speak of "AMD cpus" in general.
    import aiadvisor as aa

    local = aa.hardware.detect()
    if local.kind != "cpu":
        pytest.skip("an accelerator is attached: the default device is not the CPU")
    assert not local.measured
    pred = predict(gemm_profile(), hardware=local, precision="fp32")
    assert pred.confidence == "low"
    (note,) = [n for n in pred.notes if "not benchmarked" in n]
    assert "hardware='local'" in note
    assert not any("No measured op data" in n for n in pred.notes)
    # A catalog CPU is not the attached one: it keeps the vendor note.
    epyc = make_spec(name="Some catalog CPU", vendor="AMD", kind="cpu")
    assert any("No measured op data for AMD cpus" in n
               for n in predict(gemm_profile(), hardware=epyc, precision="fp32").notes)


def test_fp8_on_v100_raises_and_suggests_fp16():
    with pytest.raises(UnsupportedPrecisionError, match=r"fp8.*V100.*precision='fp16'"):
        predict(gemm_profile(), hardware="V100", precision="fp8")


def test_bf16_on_v100_suggests_fp16_and_lists_supported():
    with pytest.raises(UnsupportedPrecisionError) as err:
        predict(gemm_profile(), hardware="V100", precision="bf16")
    assert "Supported here: fp32, fp16" in str(err.value) and "'fp16'" in str(err.value)


def test_a_device_without_any_published_rate_says_so_rather_than_lacking_an_engine():
    # The A10G (AWS G5) runs fp16 on tensor cores, but no primary source publishes its rates:
    # the catalog row is blank, and the error must not claim the GPU has no fp16 engine.
    with pytest.raises(UnsupportedPrecisionError) as err:
        predict(gemm_profile(), hardware="A10G", precision="fp16")
    text = str(err.value)
    assert "no dense compute figure in any precision" in text and "fp16 engine" not in text
    assert "hardware='local'" in text and "HardwareSpec" in text


def test_bad_input_errors_name_the_choices(spec):
    prof = gemm_profile()
    with pytest.raises(UnknownHardwareError):
        predict(prof, hardware="H1000 Ultra", precision="bf16")
    with pytest.raises(InvalidArgumentError, match="'fp32', 'tf32', 'bf16'"):
        predict(prof, hardware=spec, precision="fp12")
    with pytest.raises(InvalidArgumentError, match="integer >= 1"):
        predict(prof, hardware=spec, num_devices=0)
    with pytest.raises(InvalidArgumentError, match="dp x tp x pp = 4"):
        predict(prof, hardware=spec, num_devices=8, parallel=ParallelConfig(tp_degree=4))
    with pytest.raises(AIAdvisorError, match="ModelProfile"):
        predict({"flops": 1}, hardware=spec)


def test_catalog_name_resolves():
    pred = predict(gemm_profile(), hardware="H100", precision="bf16")
    assert pred.hardware == "NVIDIA H100 SXM" and pred.step_time_s > 0


def test_step_time_matches_predict(spec):
    prof = add_profile(mode="train", num_blocks=2, block_output_bytes=10**6)
    cfg = ParallelConfig(dp_degree=2, tp_degree=2)
    a = step_time(prof, spec, "bf16", cfg)
    b = predict(prof, hardware=spec, precision="bf16", num_devices=4, parallel=cfg)
    assert a == b


def test_predict_table_matches_predict_and_skips_unsupported(spec):
    prof = gemm_profile()
    v100 = make_spec(name="No FP8 GPU", bf16_tflops=None, fp8_tflops=None, tf32_tflops=None)
    table = predict_table(prof, specs=[spec, v100], precisions=["fp32", "bf16", "fp8"])
    assert set(zip(table.hardware, table.precision)) == {
        ("Test GPU", "fp32"), ("Test GPU", "bf16"), ("Test GPU", "fp8"), ("No FP8 GPU", "fp32")}
    for row in table.itertuples():
        hw = spec if row.hardware == "Test GPU" else v100
        pred = predict(prof, hardware=hw, precision=row.precision)
        assert row.step_time_s == pytest.approx(pred.step_time_s, rel=1e-9)
        assert row.low_s == pytest.approx(pred.low_s, rel=1e-9)
        assert row.confidence == pred.confidence and row.bound == pred.bound
    assert np.all(table.low_s <= table.step_time_s) and np.all(table.step_time_s <= table.high_s)


def test_predict_table_over_catalog_has_every_supported_pair():
    from aiadvisor.costmodel import gemm_peak_tflops
    from aiadvisor.hardware import all_specs

    table = predict_table(gemm_profile(), precisions=["bf16", "fp8"])
    expected = sum(bool(gemm_peak_tflops(s, p)) for s in all_specs() for p in ("bf16", "fp8"))
    assert len(table) == expected and table.step_time_s.gt(0).all()


def _benchmarked_cpu(monkeypatch, factor: float | None):
    """A benchmarked CPU: best matmul 0.1 TFLOP/s (at n=1024), 0.02 at n=128; 10 GB/s; 5 us/op
    (its calibration served to measured specs only), the in-step factor set to ``factor``
    (None: the shipped one); and a 2.147 GFLOP matmul step. Returns (predict module, spec,
    step)."""
    import importlib

    from aiadvisor.costmodel import api
    from aiadvisor.costmodel.local import LocalCalibration

    predict_module = importlib.import_module("aiadvisor.costmodel.predict")
    if factor is not None:
        monkeypatch.setattr(predict_module, "CPU_IN_STEP_FACTOR", factor)
    cal = LocalCalibration(matmul=[(128, 0.02), (1024, 0.1)])
    monkeypatch.setattr(api, "_measured_curves",
                        lambda spec, precision: cal if spec.measured else None)
    cpu = make_spec(name="Local CPU", vendor="AMD", kind="cpu", fp32_tflops=0.1,
                    bf16_tflops=None, fp16_tflops=None, tf32_tflops=None, fp8_tflops=None,
                    memory_bw_gbs=10, launch_overhead_us=5.0, measured=True)
    big = make_profile([op("aten.mm", "gemm", "forward", flops=2 * 1024**3,
                           bytes_read=8 * 1024**2, bytes_written=4 * 1024**2)])
    return predict_module, cpu, big


def test_benchmarked_device_uses_its_matmul_curve(monkeypatch):
    # The op times as timed (the in-step factor, 1.04, is tested below).
    _, cpu, big = _benchmarked_cpu(monkeypatch, 1.0)
    # 2.147e9 FLOPs at the full 0.1 TFLOP/s = 21.47 ms (> 12.6 MB / 10 GB/s = 1.26 ms), + 5 us.
    pred = predict(big, hardware=cpu, precision="fp32")
    assert pred.step_time_s == pytest.approx(2 * 1024**3 / 1e11 + 5e-6, rel=1e-9)
    assert pred.confidence == "medium" and pred.low_s < pred.step_time_s < pred.high_s
    # A 128^3 matmul runs at 0.02 of 0.1: efficiency 0.2 -> 4.194e6 / 2e10 = 209.7 us; its
    # 196.6 kB take 19.7 us; + 5 us launch (not slowed).
    small = make_profile([op("aten.mm", "gemm", "forward", flops=2 * 128**3,
                             bytes_read=8 * 128**2, bytes_written=4 * 128**2)])
    pred = predict(small, hardware=cpu, precision="fp32")
    assert pred.step_time_s == pytest.approx(2 * 128**3 / 2e10 + 5e-6, rel=1e-9)
    # Memory-bound ops run at the measured bandwidth: 3 GB / 10 GB/s = 0.3 s + 5 us.
    pred = predict(add_profile(), hardware=cpu, precision="fp32")
    assert pred.step_time_s == pytest.approx(0.3 + 5e-6, rel=1e-9)


def test_benchmarked_cpu_ops_take_the_in_step_factor(monkeypatch):
    # The same CPU: the matmul step (21.47 ms + 5 us launch) and a 3 GB add at 10 GB/s (0.3 s)
    # + 5 us: every op time x1.04 = 22.339 ms and 312.0 ms. The estimated CPU
    # (measured=False) and a GPU are not touched.
    predict_module, cpu, big = _benchmarked_cpu(monkeypatch, None)
    assert predict_module.CPU_IN_STEP_FACTOR == 1.04
    pred = predict(big, hardware=cpu, precision="fp32")
    assert pred.step_time_s == pytest.approx(0.022339030, rel=1e-6)
    assert any("raised x1.04" in n for n in pred.notes)
    assert predict(add_profile(), hardware=cpu, precision="fp32").step_time_s == \
        pytest.approx((0.3 + 5e-6) * 1.04, rel=1e-9)
    for other in (dataclasses.replace(cpu, measured=False), make_spec()):
        bare = {}
        for factor in (1.0, 1.04):
            monkeypatch.setattr(predict_module, "CPU_IN_STEP_FACTOR", factor)
            bare[factor] = predict(big, hardware=other, precision="fp32").step_time_s
        assert bare[1.0] == bare[1.04]


def test_published_matmul_fraction_slows_gemms_on_mi300x(exact_model):
    # MAMF: MI300X reaches 668.4 of 1307.4 BF16 TFLOP/s (51.1 %); the GEMM curve's GPUs reach
    # (271.2/312 + 794.5/989.4) / 2 = 83.6 %: its GEMMs take 0.836 / 0.511 = 1.636x longer than
    # on an otherwise identical device without a published figure. The fraction is about the
    # GEMM's arithmetic: its launch cost stays as it is.
    mi300x = make_spec(name="AMD Instinct MI300X", vendor="AMD", bf16_tflops=1307.4)
    twin = make_spec(name="Unlisted AMD GPU", vendor="AMD", bf16_tflops=1307.4)
    a = predict(gemm_profile(), hardware=mi300x, precision="bf16", model=exact_model)
    b = predict(gemm_profile(), hardware=twin, precision="bf16", model=exact_model)
    expected = (271.2 / 312 + 794.5 / 989.4) / 2 / (668.4 / 1307.4)
    assert a.compute_s / b.compute_s == pytest.approx(expected, rel=1e-9)
    assert a.overhead_s == pytest.approx(b.overhead_s, rel=1e-9)
    assert any("achievable-matmul" in n for n in a.notes)
    # Memory-bound ops are unaffected.
    assert predict(add_profile(), hardware=mi300x, precision="bf16", model=exact_model) \
        .step_time_s == pytest.approx(0.5e-3 + 4e-6, rel=1e-9)


def test_predict_table_takes_a_parallel_layout(spec):
    # One layout for every row (dp 2 x tp 2 = 4 devices): each row is predict() with the same
    # layout. tp > 1 adds per-block all-reduces (communication > 0) and caps the confidence at
    # medium, as predict() does. Before, predict_table had no `parallel` and any layout but
    # plain DDP went one predict() per device.
    prof = add_profile(mode="train", num_blocks=2, block_output_bytes=10**6)
    cfg = ParallelConfig(dp_degree=2, tp_degree=2)
    table = predict_table(prof, specs=[spec], precisions=["fp32", "bf16"], parallel=cfg)
    assert list(table.precision) == ["fp32", "bf16"] and set(table.num_devices) == {4}
    for row in table.itertuples():
        pred = predict(prof, hardware=spec, precision=row.precision, num_devices=4, parallel=cfg)
        assert row.step_time_s == pytest.approx(pred.step_time_s, rel=1e-9)
        assert row.communication_s == pytest.approx(pred.communication_s, rel=1e-9)
        assert row.communication_s > 0
        assert row.confidence == pred.confidence == "medium"


def test_predict_table_rejects_a_layout_of_another_device_count(spec):
    with pytest.raises(InvalidArgumentError, match=r"num_devices=8 does not match .*pass "
                                                    r"num_devices=4"):
        predict_table(gemm_profile(), specs=[spec], num_devices=8,
                      parallel=ParallelConfig(dp_degree=2, tp_degree=2))


def test_unmeasured_precision_note_names_the_precision():
    # fp8 is not in MEASURED_PRECISIONS (only fp32/bf16/fp16 op data were measured); the H100
    # SXM has an fp8 peak (1978.9 TF dense in the catalog), so the prediction runs and carries
    # the low-confidence note, which must name fp8 in both places and leave no placeholder.
    from aiadvisor.costmodel.precision import MEASURED_PRECISIONS

    assert "fp8" not in MEASURED_PRECISIONS
    pred = predict(gemm_profile(), hardware="H100 SXM", precision="fp8")
    note = next(n for n in pred.notes if n.startswith("No measured fp8 op data"))
    assert "at the fp8 peak" in note and "{" not in note and "}" not in note
    assert pred.confidence == "low"


def test_pipeline_paced_by_the_slowest_stage_by_hand(spec, exact_model):
    # 4 blocks of one memory-bound op (0.75 GB each, fp32) and an LM head op outside them as
    # big as one block. pp=4, m=8: Megatron's partition puts one block per stage and the head
    # on the last, so the last stage runs 8 x (0.75 GB / 8 / 3 TB/s + 4 us) = 0.282 ms of
    # block and as much of head: 0.564 ms per 8 micro-batches; every 1F1B slot lasts as long
    # as it: step = 0.564 ms x 11/8 (bubble 3/11) plus 8 messages of 1/8 MB.
    def rec(module, count, repeat):
        return OpRecord(op="aten.add", op_class="memory", phase="forward", module=module,
                        dtype="float32", count=count, flops=0.0, bytes_read=0.5e9 * count,
                        bytes_written=0.25e9 * count, repeat=repeat)

    prof = make_profile([rec("layers.*", 4, 4), rec("head", 1, 1)], num_blocks=4,
                        block_output_bytes=1_000_000)
    c = load_model().collectives
    p2p8 = c.alpha_s["send_recv"] + 1.25e5 / (450e9 * c.intra_node_efficiency)
    slowest = 2 * 8 * (0.75e9 / 8 / 3000e9 + 4e-6)
    pred = predict(prof, hardware=spec, precision="fp32", num_devices=4, model=exact_model,
                   parallel=ParallelConfig(pp_degree=4, num_microbatches=8))
    assert pred.step_time_s == pytest.approx(slowest * 11 / 8 + 8 * p2p8, rel=1e-6)
    # average stage: (4 blocks + head) / 4 = 1.25 blocks -> slowest / average = 2 / 1.25
    assert any("1.60 x the average" in n for n in pred.notes)
    # one device runs it all: no stages, no imbalance
    single = predict(prof, hardware=spec, precision="fp32", model=exact_model)
    assert single.step_time_s == pytest.approx(5 * (0.75e9 / 3000e9 + 4e-6), rel=1e-9)


@pytest.mark.slow
def test_ops_placed_on_pipeline_stages_as_megatron_does():
    # A 4-block GPT-2-style decoder (hidden 64, vocab 1000), batch 2 x 32 tokens: the token
    # and position embeddings go on the first stage, the final norm, LM head and loss on
    # the last, everything in layers.* is block work.
    import torch

    from aiadvisor import profile
    from aiadvisor.costmodel.ops import op_arrays
    from aiadvisor.examples import DecoderConfig, _build_decoder

    cfg = DecoderConfig(vocab_size=1000, hidden_size=64, num_layers=4, num_heads=4,
                        style="gpt2", max_positions=32)
    with torch.device("meta"):
        model = _build_decoder(cfg)
    prof = profile(model, torch.randint(0, 1000, (2, 32), device="meta"), mode="train",
                   optimizer="adamw")
    ops = op_arrays(prof)
    modules = [op.module for op in prof.ops if op.count > 0]
    placed = {m: s for m, s in zip(modules, ops.stage)}
    assert placed["embed"] == placed["pos"] == "first"
    assert placed["head"] == placed["norm"] == "last"
    assert {s for m, s in placed.items() if m.startswith("layers.*")} == {"block"}
    # last-stage GEMM FLOPs: the head, 2 x 64 tokens x 64 x 1000 forward, twice that backward
    last_gemm = ops.flops[(ops.stage == "last") & ops.gemm_like & (ops.phase != "optimizer")]
    assert last_gemm.sum() == pytest.approx(3 * 2 * 64 * 64 * 1000)


def test_an_unbenchmarked_amx_cpu_runs_bf16_gemms_at_its_measured_share_of_peak(exact_model):
    # The estimated spec of the 2-core AMX VM: fp32 2 x 2.6 GHz x 64 = 0.3328 TFLOP/s, bf16
    # 2 x 2.6 x 1024 = 5.3248 (16x). Roofline: 1.374e11 / 0.3328e12 = 413.0 ms in fp32;
    # bf16 1.374e11 / 5.3248e12 = 25.81 ms at peak, / 0.4 (CPU_MATRIX_UNIT_FRACTION) = 64.53 ms.
    cpu = make_spec(name="AMX CPU", vendor="Intel", kind="cpu", memory_bw_gbs=30.0,
                    fp32_tflops=0.3328, tf32_tflops=None, bf16_tflops=5.3248, fp16_tflops=None,
                    fp8_tflops=None, launch_overhead_us=5.0)
    fp32 = predict(gemm_profile(), hardware=cpu, precision="fp32", model=exact_model)
    bf16 = predict(gemm_profile(), hardware=cpu, precision="bf16", model=exact_model)
    assert fp32.compute_s == pytest.approx(GEMM_FLOPS / 0.3328e12, rel=1e-3)
    assert bf16.compute_s == pytest.approx(GEMM_FLOPS / 5.3248e12 / 0.4, rel=1e-3)
    assert any("matrix unit (AMX)" in n for n in bf16.notes)
    # AVX512-BF16 only (2x the fp32 peak, a dot product on the FMA pipes): no such share.
    avx = make_spec(name="AVX CPU", vendor="Intel", kind="cpu", memory_bw_gbs=30.0,
                    fp32_tflops=0.3328, tf32_tflops=None, bf16_tflops=0.6656, fp16_tflops=None,
                    fp8_tflops=None, launch_overhead_us=5.0)
    plain = predict(gemm_profile(), hardware=avx, precision="bf16", model=exact_model)
    assert plain.compute_s == pytest.approx(GEMM_FLOPS / 0.6656e12, rel=1e-3)


def test_the_amx_share_applies_until_a_benchmark_times_bf16():
    import dataclasses

    from aiadvisor.costmodel.facts import cpu_matrix_log_adjustment
    from aiadvisor.hardware.detection import BF16_ESTIMATE_MARK

    amx = make_spec(name="AMX CPU", vendor="Intel", kind="cpu", fp32_tflops=0.3328,
                    bf16_tflops=5.3248)
    assert math.exp(cpu_matrix_log_adjustment(amx, "bf16")) == pytest.approx(2.5)  # 1 / 0.4
    assert cpu_matrix_log_adjustment(amx, "fp32") == 0.0
    timed = dataclasses.replace(amx, measured=True, notes="MEASURED on this device: bf16 matmul")
    assert cpu_matrix_log_adjustment(timed, "bf16") == 0.0
    # Benchmarked in fp32 only: the bf16 figure is still the estimate, and so is its share.
    fp32_only = dataclasses.replace(timed, notes=f"MEASURED: fp32 matmul. {BF16_ESTIMATE_MARK}")
    assert math.exp(cpu_matrix_log_adjustment(fp32_only, "bf16")) == pytest.approx(2.5)


def test_cpu_attention_kernels_run_at_the_vector_peak_in_bf16():
    from types import SimpleNamespace

    import aiadvisor as aa
    from aiadvisor.costmodel.devices import device_arrays
    from aiadvisor.costmodel.predict import log_slowdowns

    cpu = aa.hardware.get("Intel Xeon Platinum 8480+")       # AMX: bf16 peak >> fp32 peak
    gpu = aa.hardware.get("H100 SXM")
    devs = device_arrays([cpu, gpu], "bf16", load_model())
    work = SimpleNamespace(
        op_class=np.array(["gemm", "attention"], dtype=object), norm=np.array([False, False]),
        flops_per_call=np.array([1e9, 1e9]), bytes_per_call=np.array([1e6, 1e6]),
        feature_divisor=np.array([1.0, 1.0]))
    _, peak, _ = log_slowdowns(work, devs, load_model(), measured_precision=True)
    # The CPU's GEMM runs at its bf16 (AMX) peak, its flash-attention kernel at the FP32 one
    # (measured: bf16 attention backward no faster than FP32 on an AMX CPU); a GPU's attention
    # keeps its tensor-core peak.
    assert peak[0, 0] == pytest.approx(devs.gemm_peak_tflops[0, 0])
    assert peak[0, 1] == pytest.approx(devs.vector_peak_tflops[0, 0])
    assert peak[0, 1] < peak[0, 0] / 4
    assert peak[1, 1] == pytest.approx(devs.gemm_peak_tflops[1, 0])


def test_unbenchmarked_cpu_prices_max_pool_and_batch_norm_at_their_measured_bandwidth_share(
        monkeypatch):
    from types import SimpleNamespace

    import aiadvisor as aa
    from aiadvisor.costmodel.devices import device_arrays
    from aiadvisor.costmodel.predict import CPU_SLOW_OP_BANDWIDTH, op_times

    predict_module = importlib.import_module("aiadvisor.costmodel.predict")
    cpu = aa.hardware.get("Intel Xeon Platinum 8480+")    # a catalog CPU: no benchmark
    gpu = aa.hardware.get("H100 SXM")
    devs = device_arrays([cpu, gpu], "fp32", load_model())
    names = ["aten.max_pool2d_with_indices", "aten.native_batch_norm", "aten.relu"]
    nbytes = 8e6
    work = SimpleNamespace(
        name=np.array(names, dtype=object), op_class=np.array(["elementwise"] * 3, dtype=object),
        norm=np.array([False, True, False]), flops_per_call=np.zeros(3),
        bytes_per_call=np.full(3, nbytes), feature_divisor=np.ones(3), count=np.ones(3),
        written_per_call=None, phase=np.array(["forward"] * 3, dtype=object))
    floored = op_times(work, devs, load_model(), measured_precision=True)
    monkeypatch.setattr(predict_module, "CPU_SLOW_OP_BANDWIDTH", {})
    learned = op_times(work, devs, load_model(), measured_precision=True)
    bw = cpu.memory_bw_gbs * 1e9
    # 8 MB at 0.068 and 0.185 of the CPU's bandwidth, at the median.
    assert CPU_SLOW_OP_BANDWIDTH == {"aten.max_pool2d_with_indices": 0.068,
                                     "aten.native_batch_norm": 0.185}
    assert floored["memory"][1, 0, 0] == pytest.approx(nbytes / (bw * 0.068))
    assert floored["memory"][1, 0, 1] == pytest.approx(nbytes / (bw * 0.185))
    # The learned curves priced them faster than that (GPU-like shares of the bandwidth)...
    assert learned["memory"][1, 0, 0] < floored["memory"][1, 0, 0] / 5
    # ... every quantile moves by the median's ratio; the relu, the GPU and the launch part stay.
    ratio = floored["memory"][1, 0, 0] / learned["memory"][1, 0, 0]
    assert floored["memory"][:, 0, 0] == pytest.approx(learned["memory"][:, 0, 0] * ratio)
    assert floored["memory"][:, 0, 2] == pytest.approx(learned["memory"][:, 0, 2])
    assert floored["memory"][:, 1, :] == pytest.approx(learned["memory"][:, 1, :])
    assert floored["overhead"] == pytest.approx(learned["overhead"])
