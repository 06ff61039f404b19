"""Op times on a benchmarked device from its own op-grid measurements (costmodel/local.py)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from aiadvisor.costmodel import predict
from aiadvisor.costmodel.local import (
    LocalCalibration,
    SizeCurve,
    fit_optimizers,
    op_family,
)
from aiadvisor.hardware.bench import (
    BandwidthPoint,
    BenchmarkResult,
    MatmulPoint,
    OpPoint,
    OptimizerPoint,
)

from .conftest import make_profile, make_spec, op


@pytest.fixture(autouse=True)
def _ops_as_timed(monkeypatch):
    """Each test here prices one rule of the calibration by hand: the step-level in-step factor
    (``predict.CPU_IN_STEP_FACTOR``) is left at 1 (it is tested in test_predict.py)."""
    import importlib

    monkeypatch.setattr(importlib.import_module("aiadvisor.costmodel.predict"),
                        "CPU_IN_STEP_FACTOR", 1.0)


def _curve(points, floor_s=5e-6):
    return SizeCurve(np.log([w for w, _ in points]), np.log([s for _, s in points]), floor_s)


def test_size_curve_interpolates_log_log_and_scales_outside():
    # Timed: 1 kB in 10 us, 1 MB in 100 us.
    c = _curve([(1e3, 10e-6), (1e6, 100e-6)])
    assert c.seconds(1e3) == pytest.approx(10e-6)
    assert c.seconds(1e6) == pytest.approx(100e-6)
    # Halfway in log size (31.6 kB) is halfway in log time: sqrt(10 * 100) = 31.62 us.
    assert c.seconds(math.sqrt(1e9)) == pytest.approx(math.sqrt(1e-9), rel=1e-9)
    # Beyond the largest size the time grows in proportion: 4 MB -> 400 us.
    assert c.seconds(4e6) == pytest.approx(400e-6)
    # Below the smallest it shrinks in proportion (500 B -> 5 us) but not under the 5 us floor.
    assert c.seconds(500) == pytest.approx(5e-6)
    assert c.seconds(10) == pytest.approx(5e-6)


def test_op_families():
    assert op_family("aten.sigmoid", "memory") == "activation"
    assert op_family("aten.bernoulli_", "memory") == "rng"
    assert op_family("aten.native_group_norm", "memory") == "norm"
    assert op_family("aten.where", "memory") == "elementwise"
    assert op_family("aten.index_select", "embedding") == "embedding"
    assert op_family("aten._scaled_dot_product_flash_attention_for_cpu", "attention") == \
        "attention"
    assert op_family("aten.mm", "gemm", "backward") == "gemm-backward"
    assert op_family("aten.addmm", "gemm") == "gemm-forward"
    assert op_family("aten.convolution", "conv") == "conv-forward"
    assert op_family("aten.convolution_backward", "conv", "backward") == "conv-backward"
    assert op_family("optimizer.adamw", "optimizer", "optimizer") is None


def test_optimizer_fit_recovers_per_tensor_and_per_element_costs():
    # Steps generated from 50 us per tensor + 2 ns per element.
    pts = [OptimizerPoint(optimizer="adamw", num_tensors=k, elements=n,
                          seconds=50e-6 * k + 2e-9 * n)
           for k, n in ((64, 2**18), (8, 2**23), (32, 2**23))]
    a, b = fit_optimizers(pts)["adamw"]
    assert a == pytest.approx(50e-6, rel=1e-6) and b == pytest.approx(2e-9, rel=1e-6)


def test_optimizer_fit_reads_larger_tensors_at_their_own_per_element_cost():
    from aiadvisor.costmodel.local import OPTIMIZER_SMALL_ELEMENTS, fit_optimizer_rates

    assert OPTIMIZER_SMALL_ELEMENTS == 2**18
    # 50 us a tensor; 2 ns an element over tensors of up to 2**18 elements, 3 ns over 2**20-
    # element tensors and 4 ns over 2**22-element ones (what a core's cache serves less of).
    per_element = {2**12: 2e-9, 2**18: 2e-9, 2**20: 3e-9, 2**22: 4e-9}
    pts = [OptimizerPoint(optimizer="adamw", num_tensors=k, elements=k * n,
                          seconds=50e-6 * k + per_element[n] * k * n)
           for k, n in ((64, 2**12), (8, 2**20), (32, 2**18), (2, 2**22))]
    # The per-tensor + per-element fit takes the two small-tensor steps only.
    a, b = fit_optimizers(pts)["adamw"]
    assert a == pytest.approx(50e-6, rel=1e-6) and b == pytest.approx(2e-9, rel=1e-6)
    log_n, rate = fit_optimizer_rates(pts)["adamw"]
    assert np.exp(log_n) == pytest.approx([2**18, 2**20, 2**22])
    assert rate == pytest.approx([2e-9, 3e-9, 4e-9], rel=1e-6)
    cal = LocalCalibration(optimizer=fit_optimizers(pts), optimizer_rates=fit_optimizer_rates(pts))
    flops = 14.0 * (2**22 + 2**21 + 2**16)     # AdamW: 14 FLOPs an element (units.py)
    # Three tensors: 2**22 elements at 4 ns, 2**21 (halfway in log size between 2**20 and
    # 2**22) at 3.5 ns, 2**16 at the small tensors' 2 ns; 50 us each.
    by_hand = 3 * 50e-6 + 4e-9 * 2**22 + 3.5e-9 * 2**21 + 2e-9 * 2**16
    assert cal.optimizer_seconds("optimizer.adamw", 3, flops, (2**22, 2**21)) == \
        pytest.approx(by_hand)
    # Without the sizes, every element at the small tensors' cost.
    assert cal.optimizer_seconds("optimizer.adamw", 3, flops) == pytest.approx(
        3 * 50e-6 + 2e-9 * (2**22 + 2**21 + 2**16))
    # A list larger than the step (a pipeline stage's share: half the elements) is scaled to it.
    half = 14.0 * 2**21
    assert cal.optimizer_seconds("optimizer.adamw", 1, half, (2**22,)) == pytest.approx(
        50e-6 + 2e-9 * 2**21 + 0.5 * (4e-9 - 2e-9) * 2**22)
    # Beyond the largest size timed: its cost (flat).
    assert cal.optimizer_seconds("optimizer.adamw", 1, 14.0 * 2**24, (2**24,)) == \
        pytest.approx(50e-6 + 4e-9 * 2**24)


def test_optimizer_steps_are_timed_on_states_evicted_from_the_caches(monkeypatch):
    from aiadvisor.hardware import calibrate

    # One point of 4 tensors of 4096 FP32 elements: weight, gradient and two moments are
    # 4 x 4 x 4 x 4096 = 256 KiB; a 1 MiB cycle steps 4 copies in turn, and the time of the
    # cycle is divided by 4.
    monkeypatch.setattr(calibrate, "COLD_CYCLE_BYTES", 2**20)

    def time_op(fn, *, sync, min_time_s):   # runs the timed function once, "takes" 1 s
        fn()
        return 1.0

    real_step = torch.optim.AdamW.step
    stepped = []
    monkeypatch.setattr(torch.optim.AdamW, "step",
                        lambda self, *a, **k: (stepped.append(id(self)), real_step(self))[1])
    pts = calibrate.optimizer_points(torch, dev="cpu", sync=lambda: None, time_op=time_op,
                                     min_time_s=0.0, step=lambda m: None, grid=((4, 4096),))
    adamw = [p for p in pts if p.optimizer == "adamw"]
    assert len(adamw) == 1 and adamw[0].seconds == pytest.approx(1.0 / 4)
    assert adamw[0].num_tensors == 4 and adamw[0].elements == 4 * 4096
    assert len(stepped) == 4 and len(set(stepped)) == 4   # four distinct optimizers, once each


def _benchmark():
    """A made-up CPU benchmark: gelu 4 GB/s-ish, silu and tanh for the activation family,
    AdamW 100 us/tensor + 1 ns/element, one matmul point."""
    ops = (
        OpPoint(op="aten.gelu", family="activation", num_bytes=1e6, flops=0, seconds=200e-6),
        OpPoint(op="aten.gelu", family="activation", num_bytes=1e8, flops=0, seconds=20e-3),
        OpPoint(op="aten.silu", family="activation", num_bytes=1e6, flops=0, seconds=100e-6),
        OpPoint(op="aten.silu", family="activation", num_bytes=1e8, flops=0, seconds=10e-3),
        OpPoint(op="aten.tanh", family="activation", num_bytes=1e6, flops=0, seconds=400e-6),
        OpPoint(op="aten.tanh", family="activation", num_bytes=1e8, flops=0, seconds=40e-3),
    )
    opt = tuple(OptimizerPoint(optimizer="adamw", num_tensors=k, elements=n,
                               seconds=100e-6 * k + 1e-9 * n)
                for k, n in ((64, 2**18), (8, 2**23), (32, 2**23)))
    return BenchmarkResult(
        device_name="Test CPU", backend="cpu", torch_version="x", date="2026-12-02T00:00:00",
        library_versions={}, config={},
        matmul=(MatmulPoint(precision="fp32", n=1024, seconds=2 * 1024**3 / 1e11, tflops=0.1),),
        bandwidth=(), launch_overhead_us=5.0, ops=ops, optimizer=opt)


def _local_cpu(**overrides):
    """A benchmarked CPU: 0.1 TFLOP/s fp32, 10 GB/s, 5 us per op."""
    fields = {"name": "Local CPU", "vendor": "AMD", "kind": "cpu", "fp32_tflops": 0.1,
              "bf16_tflops": None, "fp16_tflops": None, "tf32_tflops": None,
              "fp8_tflops": None, "memory_bw_gbs": 10, "launch_overhead_us": 5.0,
              "measured": True}
    return make_spec(**{**fields, **overrides})


@pytest.fixture
def calibrated_cpu(monkeypatch):
    from aiadvisor.costmodel import api

    cal = LocalCalibration.from_benchmark(_benchmark(), "fp32")
    monkeypatch.setattr(api, "_measured_curves", lambda spec, precision: cal)
    return _local_cpu()


def test_timed_op_takes_its_measured_time(calibrated_cpu):
    # aten.gelu over 10 MB, 3 calls: between 1 MB (200 us) and 100 MB (20 ms) the curve is a
    # straight line in log-log with slope 1: 10 MB -> 2 ms a call. The roofline would give
    # 10 MB / 10 GB/s = 1 ms.
    prof = make_profile([op("aten.gelu", "memory", "forward", bytes_read=15e6, bytes_written=15e6,
                            count=3)])
    pred = predict(prof, hardware=calibrated_cpu, precision="fp32")
    assert pred.step_time_s == pytest.approx(3 * 2e-3, rel=1e-9)
    assert pred.overhead_s == pytest.approx(3 * 5e-6) and pred.bound == "memory"
    assert pred.low_s == pytest.approx(3 * 5e-6 + (6e-3 - 15e-6) / 1.2, rel=1e-9)
    assert any("each op's" in n for n in pred.notes)


def test_untimed_op_of_a_timed_family_takes_the_family_median(calibrated_cpu):
    # aten.sigmoid (activation, not timed): median of gelu (2 ms), silu (1 ms), tanh (4 ms) at
    # 10 MB = 2 ms.
    prof = make_profile([op("aten.sigmoid", "memory", "forward", bytes_read=5e6,
                            bytes_written=5e6)])
    assert predict(prof, hardware=calibrated_cpu, precision="fp32").step_time_s == \
        pytest.approx(2e-3, rel=1e-9)


def test_op_of_an_untimed_family_keeps_the_roofline(calibrated_cpu):
    # aten.add (elementwise: no elementwise op in this calibration): 10 MB / 10 GB/s + 5 us.
    prof = make_profile([op("aten.add", "memory", "forward", bytes_read=6e6, bytes_written=4e6)])
    assert predict(prof, hardware=calibrated_cpu, precision="fp32").step_time_s == \
        pytest.approx(1e-3 + 5e-6, rel=1e-9)


def test_optimizer_step_uses_the_fitted_costs(calibrated_cpu):
    # AdamW over 10 tensors, 1e6 elements (the profiler counts 14 FLOPs an element):
    # 10 x 100 us + 1e6 x 1 ns = 2 ms.
    prof = make_profile([op("optimizer.adamw", "optimizer", "optimizer", flops=14e6,
                            bytes_read=16e6, bytes_written=12e6, count=10)], mode="train",
                        optimizer="adamw")
    assert predict(prof, hardware=calibrated_cpu, precision="fp32").step_time_s == \
        pytest.approx(2e-3, rel=1e-6)


def test_gemms_take_the_linear_layer_curve_of_their_phase(monkeypatch):
    # Linear-layer GEMMs timed: forward 0.1 GFLOP in 4 ms and 1 GFLOP in 20 ms (50 GFLOP/s),
    # backward twice as long; the square-matmul curve says 100 GFLOP/s.
    from aiadvisor.costmodel import api

    result = _benchmark()
    import dataclasses
    result = dataclasses.replace(result, ops=(
        OpPoint(op="aten.addmm", family="gemm-forward", num_bytes=1, flops=1e8, seconds=4e-3),
        OpPoint(op="aten.addmm", family="gemm-forward", num_bytes=1, flops=1e9, seconds=20e-3),
        OpPoint(op="aten.mm", family="gemm-backward", num_bytes=1, flops=1e8, seconds=8e-3),
        OpPoint(op="aten.mm", family="gemm-backward", num_bytes=1, flops=1e9, seconds=40e-3),
    ))
    cal = LocalCalibration.from_benchmark(result, "fp32")
    monkeypatch.setattr(api, "_measured_curves", lambda spec, precision: cal)
    cpu = _local_cpu()
    # 1e9 FLOPs forward: 20 ms; backward: 40 ms; sqrt(1e8 * 1e9) forward: sqrt(4 * 20) ms.
    for phase, flops, expected in (("forward", 1e9, 20e-3), ("backward", 1e9, 40e-3),
                                   ("forward", math.sqrt(1e17), math.sqrt(80) * 1e-3)):
        prof = make_profile([op("aten.mm", "gemm", phase, flops=flops, bytes_read=1e6)])
        pred = predict(prof, hardware=cpu, precision="fp32")
        assert pred.step_time_s == pytest.approx(expected, rel=1e-9)
        assert pred.bound == "compute"
    # Convolutions keep the square-matmul curve: 1 GFLOP at 0.1 TFLOP/s = 10 ms + 5 us.
    prof = make_profile([op("aten.convolution", "conv", "forward", flops=1e9, bytes_read=1e6)])
    assert predict(prof, hardware=cpu, precision="fp32").step_time_s == \
        pytest.approx(10e-3 + 5e-6, rel=1e-9)


def test_skinny_gemms_take_the_rate_measured_at_their_row_count(monkeypatch):
    # Skinny grid (K = N = 2048, fp32): M=1 at 20 GFLOP/s, M=8 at 40, M=64 at 80, so between
    # M=1 and 8 the rate is 20 x M^(1/3) (log-log). The square/linear curve says 50 GFLOP/s.
    import dataclasses

    from aiadvisor.costmodel import api

    def skinny(m, rate):
        flops = 2.0 * m * 2048 * 2048
        return OpPoint(op="aten.addmm", family="gemm-skinny", flops=flops,
                       num_bytes=4 * (m * 2048 + 2048 * 2048 + 2048 + m * 2048),
                       seconds=flops / rate)

    result = dataclasses.replace(_benchmark(), ops=(
        OpPoint(op="aten.addmm", family="gemm-forward", num_bytes=1, flops=1e8, seconds=2e-3),
        OpPoint(op="aten.addmm", family="gemm-forward", num_bytes=1, flops=1e10, seconds=0.2),
        skinny(1, 20e9), skinny(8, 40e9), skinny(64, 80e9)),
        bandwidth=(BandwidthPoint(op="copy", num_bytes=10**8, seconds=1e-2, gbs=10.0),))
    cal = LocalCalibration.from_benchmark(result, "fp32")
    monkeypatch.setattr(api, "_measured_curves", lambda spec, precision: cal)
    cpu = _local_cpu()

    def gemm(m, k, n):
        return make_profile([op("aten.mm", "gemm", "forward", flops=2.0 * m * k * n,
                                bytes_read=4 * (m * k + k * n), bytes_written=4 * m * n)])

    # Rows are read off FLOPs and bytes, M K N / (M K + K N + M N), for the grid points too
    # (the bias adds N elements): the M=1, 8, 64 points sit at rows r1, r8, r64 below.
    def rows(m, k, n, bias=0):
        return m * k * n / (m * k + k * n + m * n + bias)

    r1, r8, r64 = (rows(m, 2048, 2048, 2048) for m in (1, 8, 64))
    assert 7.9 < r8 < 8 and 60 < r64 < 61
    # M=4 of 4096 x 4096: rows 3.996, between r1 and r8: rate 20 x 2^(log(m/r1)/log(r8/r1))
    # GFLOP/s (~31.9); 134 MFLOP -> ~4.2 ms. Its 67 MB of weights at 10 GB/s take 6.7 ms: the
    # bandwidth bounds it.
    m = rows(4, 4096, 4096)
    by_rate = 2.0 * 4 * 4096**2 / (20e9 * 2 ** (math.log(m / r1) / math.log(r8 / r1)))
    floor = 4 * (2 * 4 * 4096 + 4096**2) / 10e9
    assert floor > by_rate
    assert predict(gemm(4, 4096, 4096), hardware=cpu, precision="fp32").step_time_s == \
        pytest.approx(floor, rel=1e-9)
    # M=16 of 1024 x 1024 (4 MB, cache-sized): rows 15.5, between r8 and r64 where the rate
    # doubles (40 -> 80 GFLOP/s): ~50 GFLOP/s for 33.6 MFLOP, faster than its bytes at 10 GB/s.
    m = rows(16, 1024, 1024)
    expected = 2.0 * 16 * 1024**2 / (40e9 * 2 ** (math.log(m / r8) / math.log(r64 / r8)))
    assert expected > 4 * (2 * 16 * 1024 + 1024**2) / 10e9
    assert predict(gemm(16, 1024, 1024), hardware=cpu, precision="fp32").step_time_s == \
        pytest.approx(expected, rel=1e-9)
    # M=56 of 2048 x 2048: rows 53.1, above SKINNY_ROWS (48) but inside the timed skinny range
    # (up to r64 = 60.2): the skinny rate between r8 and r64 (~77 GFLOP/s), not the linear
    # curve's 50 GFLOP/s of hot weights; 470 MFLOP take longer than its 17.7 MB at 10 GB/s.
    m = rows(56, 2048, 2048)
    assert 48 < m < r64
    expected = 2.0 * 56 * 2048**2 / (40e9 * 2 ** (math.log(m / r8) / math.log(r64 / r8)))
    assert expected > 4 * (2 * 56 * 2048 + 2048**2) / 10e9
    assert predict(gemm(56, 2048, 2048), hardware=cpu, precision="fp32").step_time_s == \
        pytest.approx(expected, rel=1e-9)
    # A square GEMM keeps the linear-layer curve: 1e10 FLOPs -> 0.2 s.
    n = round((1e10 / 2) ** (1 / 3))
    sq = predict(gemm(n, n, n), hardware=cpu, precision="fp32").step_time_s
    assert sq == pytest.approx(0.2 * (2.0 * n**3 / 1e10), rel=0.02)


def test_convolutions_take_the_rate_timed_at_their_intensity(monkeypatch):
    # Timed forward convolutions: 10 FLOP/B at 20 GFLOP/s (a 3-channel stem) and 100 FLOP/B at
    # 200 GFLOP/s (a 3x3 layer). The square-matmul curve says 100 GFLOP/s whatever the shape.
    import dataclasses

    from aiadvisor.costmodel import api

    def conv_point(intensity, rate, flops=1e8):
        return OpPoint(op="aten.convolution", family="conv-forward", flops=flops,
                       num_bytes=flops / intensity, seconds=flops / rate)

    result = dataclasses.replace(_benchmark(), ops=(conv_point(10, 20e9), conv_point(100, 200e9)),
                                 bandwidth=(BandwidthPoint(op="copy", num_bytes=10**8,
                                                           seconds=1e-2, gbs=10.0),))
    cal = LocalCalibration.from_benchmark(result, "fp32")
    monkeypatch.setattr(api, "_measured_curves", lambda spec, precision: cal)
    cpu = _local_cpu()

    def conv(flops, num_bytes, phase="forward"):
        name = "aten.convolution" if phase == "forward" else "aten.convolution_backward"
        return make_profile([op(name, "conv", phase, flops=flops, bytes_read=num_bytes)])

    # 3.16e8 FLOPs over 1e7 bytes: 31.6 FLOP/B, the log-midpoint -> sqrt(20 x 200) = 63.2
    # GFLOP/s -> 5.0 ms (its bytes at 10 GB/s take 1 ms).
    flops = 10**8.5
    assert predict(conv(flops, 1e7), hardware=cpu, precision="fp32").step_time_s == \
        pytest.approx(flops / math.sqrt(20e9 * 200e9), rel=1e-9)
    # Beyond the timed intensities the rate stays flat: 1000 FLOP/B -> 200 GFLOP/s.
    assert predict(conv(1e9, 1e6), hardware=cpu, precision="fp32").step_time_s == \
        pytest.approx(1e9 / 200e9, rel=1e-9)
    # A backward convolution (not timed) keeps the matmul curve: 1e9 FLOPs at 0.1 TFLOP/s
    # (plus the 5 us launch), not the forward's rate.
    back = predict(conv(1e9, 1e6, "backward"), hardware=cpu, precision="fp32").step_time_s
    assert back == pytest.approx(1e9 / 1e11 * math.exp(0) + 5e-6, rel=0.05)


def test_recurrent_layers_take_the_timed_per_step_rate_times_their_steps(monkeypatch):
    # A timed LSTM layer: 1e6 FLOPs per step in 10 us, 1e8 in 0.5 ms (log-log between). A
    # 64-step layer of 1e7 FLOPs per step (6.4e8 a call): 10 us x 10^(log10(50)/2) = 70.7 us a
    # step, 4.53 ms a call. The square-matmul curve (0.1 TFLOP/s) would say 6.4 ms.
    import dataclasses

    from aiadvisor.costmodel import api

    pts = tuple(OpPoint(op="aten.mkldnn_rnn_layer", family="recurrent", flops=f, num_bytes=f / 50,
                        seconds=s) for f, s in ((1e6, 10e-6), (1e8, 0.5e-3)))
    result = dataclasses.replace(_benchmark(), ops=pts)
    cal = LocalCalibration.from_benchmark(result, "fp32")
    monkeypatch.setattr(api, "_measured_curves", lambda spec, precision: cal)
    prof = make_profile([op("aten.mkldnn_rnn_layer", "gemm", "forward", flops=6.4e8,
                            bytes_read=1e6)], seq_len=64)
    step = 10e-6 * 10 ** (math.log10(50) / 2)
    assert predict(prof, hardware=_local_cpu(), precision="fp32").step_time_s == \
        pytest.approx(64 * step, rel=1e-9)


def test_the_shipped_calibration_is_a_default_grid_measurement():
    # data/calibration holds the project's own `aiadvisor calibrate` output (see its README).
    import json
    from pathlib import Path

    from aiadvisor.hardware.calibrate import CPU_ELEMENTS, LINEAR_SHAPES

    path = Path(__file__).resolve().parents[2] / "data" / "calibration" / "amd-epyc-2core-vm.json"
    result = BenchmarkResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    assert result.backend == "cpu" and result.torch_version.startswith("2.13.0")
    assert result.config["op_elements"] == list(CPU_ELEMENTS)
    assert result.config["op_dtypes"] == ["float32", "bfloat16"]
    ops = {}
    for p in result.ops:
        if p.dtype == "float32":
            ops.setdefault((p.family, p.op), []).append(p)
    assert {p.dtype for p in result.ops} == {"float32", "bfloat16"}
    assert len([k for k in ops if not k[0].startswith("gemm-")]) == 25  # 23 + 2 attention
    assert all(len(v) == len(CPU_ELEMENTS) for (fam, _), v in ops.items()
               if fam not in ("attention", "gemm-forward", "gemm-backward"))
    assert len(ops[("gemm-forward", "aten.addmm")]) == len(LINEAR_SHAPES)
    # add of 2^20 fp32 elements: two reads and one write of 4 MiB = 12 MiB.
    assert 12 * 2**20 in [p.num_bytes for p in ops[("elementwise", "aten.add")]]
    cal = LocalCalibration.from_benchmark(result, "fp32")
    assert {("gemm-forward", "float32"), ("gemm-backward", "float32"),
            ("aten.gelu_backward", "float32")} <= set(cal.curves)
    assert set(cal.optimizer) == {"adamw", "sgd", "sgd_momentum"}


def test_ops_are_looked_up_in_the_dtype_they_run_in(monkeypatch):
    # gelu timed in FP32 (1 MB: 200 us, 100 MB: 20 ms) and in BF16 at the same element counts
    # (0.5 MB: 200 us, 50 MB: 20 ms: no faster per element). An FP32-traced gelu over 10 MB
    # predicted in bf16 moves 5 MB of bf16: the BF16 curve says 2 ms (the FP32 curve would say
    # 1 ms). Forward GEMMs: FP32 1 GFLOP in 20 ms, BF16 in 8 ms; bf16 uses the BF16 curve.
    import dataclasses

    from aiadvisor.costmodel import api

    def gelu_pts(dtype, points):
        return [OpPoint(op="aten.gelu", family="activation", num_bytes=b, flops=0, seconds=t,
                        dtype=dtype) for b, t in points]

    def gemm_pts(dtype, points):
        return [OpPoint(op="aten.addmm", family="gemm-forward", num_bytes=1, flops=f, seconds=t,
                        dtype=dtype) for f, t in points]

    result = dataclasses.replace(_benchmark(), matmul=(
        MatmulPoint(precision="fp32", n=1024, seconds=1.0, tflops=0.1),
        MatmulPoint(precision="bf16", n=1024, seconds=1.0, tflops=0.4)), ops=(
        *gelu_pts("float32", [(1e6, 200e-6), (1e8, 20e-3)]),
        *gelu_pts("bfloat16", [(5e5, 200e-6), (5e7, 20e-3)]),
        *gemm_pts("float32", [(1e8, 2e-3), (1e9, 20e-3)]),
        *gemm_pts("bfloat16", [(1e8, 0.8e-3), (1e9, 8e-3)]),
    ))
    cals = {p: LocalCalibration.from_benchmark(result, p) for p in ("fp32", "bf16")}
    monkeypatch.setattr(api, "_measured_curves", lambda spec, precision: cals[precision])
    cpu = _local_cpu(bf16_tflops=0.4)
    gelu = make_profile([op("aten.gelu", "memory", "forward", bytes_read=5e6,
                            bytes_written=5e6)])
    assert predict(gelu, hardware=cpu, precision="fp32").step_time_s == \
        pytest.approx(2e-3, rel=1e-9)
    assert predict(gelu, hardware=cpu, precision="bf16").step_time_s == \
        pytest.approx(2e-3, rel=1e-9)
    gemm = make_profile([op("aten.addmm", "gemm", "forward", flops=1e9, bytes_read=1e6)])
    assert predict(gemm, hardware=cpu, precision="fp32").step_time_s == \
        pytest.approx(20e-3, rel=1e-9)
    assert predict(gemm, hardware=cpu, precision="bf16").step_time_s == \
        pytest.approx(8e-3, rel=1e-9)
    # Without BF16 GEMM points, a bf16 GEMM keeps the bf16 matmul curve (0.4 TFLOP/s:
    # 2.5 ms + 5 us), never the FP32 linear curve.
    fp32_only = dataclasses.replace(result, ops=tuple(p for p in result.ops
                                                      if p.dtype == "float32"))
    cals["bf16"] = LocalCalibration.from_benchmark(fp32_only, "bf16")
    assert predict(gemm, hardware=cpu, precision="bf16").step_time_s == \
        pytest.approx(2.5e-3 + 5e-6, rel=1e-9)
    # ... and a bf16 gelu falls back to the FP32 curve at its bf16 bytes (5 MB: 1 ms).
    assert predict(gelu, hardware=cpu, precision="bf16").step_time_s == \
        pytest.approx(1e-3, rel=1e-9)


def test_16_bit_steps_on_a_calibrated_cpu_are_low_confidence(calibrated_cpu):
    import dataclasses

    cpu = dataclasses.replace(calibrated_cpu, bf16_tflops=0.4)
    prof = make_profile([op("aten.gelu", "memory", "forward", bytes_read=5e6, bytes_written=5e6)])
    assert predict(prof, hardware=cpu, precision="fp32").confidence == "medium"
    bf16 = predict(prof, hardware=cpu, precision="bf16")
    assert bf16.confidence == "low" and any("up to 36 % fast" in n for n in bf16.notes)



def test_memory_bound_ops_take_the_cold_input_slowdown():
    # Hot: add 1 MB in 100 us, 100 MB in 10 ms; gelu 1 MB in 200 us, 100 MB in 20 ms. Cold:
    # add 1 MB in 200 us (2x), 100 MB in 15 ms (1.5x); gelu 1 MB in 300 us (1.5x), 100 MB in
    # 40 ms (2x).
    pts = (
        OpPoint(op="aten.add", family="elementwise", num_bytes=1e6, flops=0, seconds=100e-6),
        OpPoint(op="aten.add", family="elementwise", num_bytes=1e8, flops=0, seconds=10e-3),
        OpPoint(op="aten.gelu", family="activation", num_bytes=1e6, flops=0, seconds=200e-6),
        OpPoint(op="aten.gelu", family="activation", num_bytes=1e8, flops=0, seconds=20e-3),
        OpPoint(op="aten.add[cold]", family="elementwise", num_bytes=1e6, flops=0,
                seconds=200e-6),
        OpPoint(op="aten.add[cold]", family="elementwise", num_bytes=1e8, flops=0,
                seconds=15e-3),
        OpPoint(op="aten.gelu[cold]", family="activation", num_bytes=1e6, flops=0,
                seconds=300e-6),
        OpPoint(op="aten.gelu[cold]", family="activation", num_bytes=1e8, flops=0,
                seconds=40e-3),
    )
    cal = LocalCalibration.from_benchmark(dataclasses.replace(_benchmark(), ops=pts), "fp32")
    # The median of two ratios is their geometric mean in log space: 1 MB sqrt(2 * 1.5) =
    # 1.732; 100 MB sqrt(1.5 * 2) = 1.732; 10 MB (halfway in log bytes): add 2^0.5 * 1.5^0.5,
    # gelu the same = 1.732; beyond 100 MB flat; under 1 MB none (1).
    assert cal.cold_factor(np.array([1e6, 1e7, 1e9, 5e5])) == pytest.approx(
        [math.sqrt(3), math.sqrt(3), math.sqrt(3), 1.0], rel=1e-9)
    # Cold timings are not family members: aten.relu (elementwise, untimed) is add's curve.
    assert cal.families[("elementwise", "float32")] == ("aten.add",)
    names = np.array(["aten.relu", "aten.gelu", "aten.bernoulli_", "aten.cat[cache]"],
                     dtype=object)
    fams = np.array(["elementwise", "activation", "rng", "copy"], dtype=object)
    out = cal.op_seconds(names, fams, np.array([1e7, 1e7, 1e7, 1e7]), np.zeros(4))
    # relu: add's 1 ms at 10 MB x 1.732; gelu 2 ms x 1.732; rng and decode-cache ops are not
    # scaled (nothing timed: NaN).
    assert out[:2] == pytest.approx([1e-3 * math.sqrt(3), 2e-3 * math.sqrt(3)], rel=1e-9)
    assert np.isnan(out[2:]).all()


def test_a_slowdown_under_one_is_not_a_speedup():
    pts = (
        OpPoint(op="aten.add", family="elementwise", num_bytes=1e6, flops=0, seconds=100e-6),
        OpPoint(op="aten.add[cold]", family="elementwise", num_bytes=1e6, flops=0,
                seconds=80e-6),
    )
    cal = LocalCalibration.from_benchmark(dataclasses.replace(_benchmark(), ops=pts), "fp32")
    assert cal.cold_factor(np.array([1e6, 1e8])) == pytest.approx([1.0, 1.0])
    # Without cold timings (an older calibration) nothing changes.
    plain = LocalCalibration.from_benchmark(_benchmark(), "fp32")
    assert plain.cold == {} and plain.cold_factor(np.array([1e7]))[0] == 1.0


def test_calibration_reads_the_square_root_of_zeros():
    # 0.7 ms more for 2^20 zeros (4 MiB in FP32) than for ones: 0.7e-3 / 2^20 = 0.668 ns each.
    point = OpPoint(op="aten.sqrt[zeros]", family="sqrt-zero", num_bytes=4 * 2**20, flops=0,
                    seconds=0.7e-3)
    cal = LocalCalibration.from_benchmark(
        dataclasses.replace(_benchmark(), ops=_benchmark().ops + (point,)), "fp32")
    assert cal.zero_sqrt_s_per_element == pytest.approx(0.7e-3 / 2**20)
    # Not an op curve of its own.
    assert not any("sqrt[zeros]" in str(k) for k in cal.curves)
    assert LocalCalibration.from_benchmark(_benchmark(), "fp32").zero_sqrt_s_per_element == 0.0


def test_untouched_embedding_rows_slow_the_adam_step_on_a_calibrated_cpu(monkeypatch):
    # A training profile whose AdamW state has 3 M zero elements, on a CPU that takes 0.7 ns
    # more for each of their square roots: 2.1 ms more a step, and a note says why.
    from aiadvisor.costmodel import api

    from .conftest import make_profile

    point = OpPoint(op="aten.sqrt[zeros]", family="sqrt-zero", num_bytes=4 * 2**20, flops=0,
                    seconds=0.7e-9 * 2**20)
    cal = LocalCalibration.from_benchmark(
        dataclasses.replace(_benchmark(), ops=_benchmark().ops + (point,)), "fp32")
    monkeypatch.setattr(api, "_measured_curves", lambda spec, precision: cal)
    elements = 10_000_000
    base = make_profile([op("aten.mm", "gemm", "forward", flops=1e9, bytes_read=4e6,
                            bytes_written=4e6),
                         op("optimizer.adamw", "optimizer", "optimizer", flops=14 * elements,
                            bytes_read=0, bytes_written=0)], mode="train", optimizer="adamw",
                        num_params=elements)
    zero = dataclasses.replace(base, untouched_table_elements=3_000_000)
    plain = predict(base, hardware=_local_cpu(), precision="fp32")
    slow = predict(zero, hardware=_local_cpu(), precision="fp32")
    assert slow.step_time_s - plain.step_time_s == pytest.approx(2.1e-3, rel=1e-6)
    assert any("still zero" in n for n in slow.notes)
    assert not any("still zero" in n for n in plain.notes)
    # A BF16 model's state is BF16, whose zeros are not slow: nothing added.
    bf16 = dataclasses.replace(zero, param_dtype="bfloat16")
    assert predict(bf16, hardware=_local_cpu(), precision="fp32").step_time_s == pytest.approx(
        predict(dataclasses.replace(base, param_dtype="bfloat16"), hardware=_local_cpu(),
                precision="fp32").step_time_s)


def test_outputs_beyond_the_mmap_threshold_pay_their_page_faults(monkeypatch):
    # The calibration found a fresh 64 MiB buffer 16 ms slower to write than a reused one:
    # 16e-3 / 2^26 = 0.238 ns a byte (4.2 GB/s of page faults). Outputs of 32 MiB or more
    # (glibc's largest mmap threshold) pay it.
    from aiadvisor.costmodel import api
    from aiadvisor.hardware.host import FRESH_OUTPUT_BYTES

    touch = OpPoint(op="alloc.first_touch", family="first-touch", num_bytes=2**26, flops=0,
                    seconds=16e-3)
    plain = LocalCalibration.from_benchmark(_benchmark(), "fp32")
    faults = LocalCalibration.from_benchmark(
        dataclasses.replace(_benchmark(), ops=_benchmark().ops + (touch,)), "fp32")
    assert faults.first_touch_s_per_byte == pytest.approx(16e-3 / 2**26)
    assert FRESH_OUTPUT_BYTES == 32 * 2**20

    def step_s(cal, written_mib, calls=2):
        monkeypatch.setattr(api, "_measured_curves", lambda spec, precision: cal)
        w = written_mib * 2**20
        prof = make_profile([op("aten.gelu", "memory", "forward", bytes_read=calls * w,
                                bytes_written=calls * w, count=calls)])
        return predict(prof, hardware=_local_cpu(), precision="fp32").step_time_s

    # Two gelu calls writing 96 MiB each: above the threshold, 2 x 96 MiB x 0.238 ns
    # = 2 x 24 ms = 48 ms more than the same calls on reused memory; exactly 32 MiB: 16 ms.
    assert step_s(faults, 96) - step_s(plain, 96) == pytest.approx(48e-3, rel=1e-9)
    assert step_s(faults, 32) - step_s(plain, 32) == pytest.approx(16e-3, rel=1e-9)
    # Writing 31 MiB a call is served from freed heap memory: no faults.
    assert step_s(faults, 31) == pytest.approx(step_s(plain, 31), rel=1e-12)


def test_grid_points_that_faulted_pages_in_have_those_faults_taken_off():
    # The gelu point at 1e8 bytes took 20 ms; say one call of it faulted in 32 MiB of new pages
    # and the first touch costs 16 ms per 64 MiB (0.25 ms a MiB): 8 ms of the 20 were faults,
    # which a step's fresh outputs pay apart, so the curve holds 12 ms there.
    touch = OpPoint(op="alloc.first_touch", family="first-touch", num_bytes=2**26, flops=0,
                    seconds=16e-3)
    ops = tuple(dataclasses.replace(p, faulted_bytes=32 * 2**20)
                if p.op == "aten.gelu" and p.num_bytes == 1e8 else p for p in _benchmark().ops)
    cal = LocalCalibration.from_benchmark(
        dataclasses.replace(_benchmark(), ops=ops + (touch,)), "fp32")
    plain = LocalCalibration.from_benchmark(
        dataclasses.replace(_benchmark(), ops=_benchmark().ops + (touch,)), "fp32")
    names, fams = np.array(["aten.gelu"], dtype=object), np.array(["activation"], dtype=object)
    at = lambda c, b: c.op_seconds(names, fams, np.array([b]), np.array([0.0]))[0]  # noqa: E731
    assert at(plain, 1e8) == pytest.approx(20e-3, rel=1e-9)
    assert at(cal, 1e8) == pytest.approx(12e-3, rel=1e-9)
    assert at(cal, 1e6) == pytest.approx(at(plain, 1e6), rel=1e-12)   # no faults there
    # Faults at or above the point's whole time leave a quarter of it (a bad count never makes
    # an op free).
    ops = tuple(dataclasses.replace(p, faulted_bytes=2**30)
                if p.op == "aten.gelu" and p.num_bytes == 1e8 else p for p in _benchmark().ops)
    capped = LocalCalibration.from_benchmark(
        dataclasses.replace(_benchmark(), ops=ops + (touch,)), "fp32")
    assert at(capped, 1e8) == pytest.approx(5e-3, rel=1e-9)


def test_channels_last_convolutions_take_their_own_timed_rate():
    import numpy as np

    from aiadvisor.costmodel.local import LocalCalibration, op_family

    assert op_family("aten.convolution[channels_last]", "conv", "forward") == "conv-forward-cl"
    assert op_family("aten.convolution", "conv", "forward") == "conv-forward"
    # NCHW timed at 0.2 TFLOP/s, NHWC at 0.5 TFLOP/s, flat over intensity.
    flat = lambda rate: (np.log([1.0, 1000.0]), np.log([rate, rate]))  # noqa: E731
    cal = LocalCalibration(conv={("conv-forward", "float32"): flat(0.2e12),
                                 ("conv-forward-cl", "float32"): flat(0.5e12)})
    names = np.array(["aten.convolution", "aten.convolution[channels_last]"], dtype=object)
    fams = np.array(["conv-forward", "conv-forward-cl"], dtype=object)
    flops, nbytes = np.array([1e9, 1e9]), np.array([1e7, 1e7])     # 100 FLOP a byte
    assert cal.op_seconds(names, fams, nbytes, flops).tolist() == pytest.approx([5e-3, 2e-3])
    assert cal.times_channels_last("float32") and not cal.times_channels_last("bfloat16")
    # A calibration without channels_last timings prices them as NCHW: no invented gain.
    old = LocalCalibration(conv={("conv-forward", "float32"): flat(0.2e12)})
    assert old.op_seconds(names, fams, nbytes, flops).tolist() == pytest.approx([5e-3, 5e-3])


def test_convolutions_pay_the_timed_per_call_cost_on_top_of_the_rate():
    from types import SimpleNamespace

    from aiadvisor.costmodel.local import LocalCalibration

    # Grid: two BF16 convolutions, 1e9 FLOPs in 1.05 ms at 100 FLOP/byte and 2e9 in 2.05 ms
    # at 200; the per-call time (a 1,024-MAC convolution) 50 us. The rates are of the work
    # beyond the call: 1e9 / 1.0 ms = 1 TFLOP/s at both intensities.
    def conv(flops, nbytes, seconds, family="conv-forward"):
        return OpPoint(op="aten.convolution", family=family, num_bytes=nbytes, flops=flops,
                       seconds=seconds, dtype="bfloat16")

    result = SimpleNamespace(
        curve=lambda precision: [], launch_overhead_us=2.0, optimizer=[], memory_bw_gbs=None,
        date="", ops=[conv(1e9, 1e7, 1.05e-3), conv(2e9, 1e7, 2.05e-3),
                      conv(2048.0, 640.0, 50e-6, family="conv-forward-call")])
    cal = LocalCalibration.from_benchmark(result, "bf16")
    assert cal.conv_call == {("conv-forward", "bfloat16"): pytest.approx(50e-6)}
    # A small convolution (1e7 FLOPs at 100 FLOP/byte): 10 us of work + 50 us a call.
    got = cal.op_seconds(np.array(["aten.convolution"], dtype=object),
                         np.array(["conv-forward"], dtype=object), np.array([1e5]),
                         np.array([1e7]), np.array(["bfloat16"], dtype=object))
    assert float(got[0]) == pytest.approx(60e-6)


def test_large_weight_forward_gemms_pay_the_fitted_per_element_cost(monkeypatch):
    # Linear grid (fp32): 1e9 FLOPs in 20 ms, 2e9 in 40 ms (50 GFLOP/s); its largest weight 1 M
    # elements. Large-weight points: 5 M elements at 1e9 FLOPs in 20.4 ms (0.4 ms over the
    # curve, 4 M elements beyond 1 M) and 9 M at 2e9 in 40.8 ms (0.8 ms, 8 M beyond): least
    # squares through the origin, (4e6 * 0.4e-3 + 8e6 * 0.8e-3) / (4e6**2 + 8e6**2) = 100 ps
    # an element.
    from aiadvisor.costmodel import api
    from aiadvisor.schema import ModuleRecord

    def point(family, flops, seconds, weight):
        return OpPoint(op="aten.addmm", family=family, num_bytes=1, flops=flops,
                       seconds=seconds, weight_elements=weight)

    result = dataclasses.replace(_benchmark(), ops=(
        point("gemm-forward", 1e9, 20e-3, 0.25e6), point("gemm-forward", 2e9, 40e-3, 1e6),
        point("gemm-forward-wide", 1e9, 20.4e-3, 5e6),
        point("gemm-forward-wide", 2e9, 40.8e-3, 9e6)))
    cal = LocalCalibration.from_benchmark(result, "fp32")
    base, per_element = cal.gemm_weight["float32"]
    assert base == 1e6 and per_element == pytest.approx(1e-10, rel=1e-9)
    monkeypatch.setattr(api, "_measured_curves", lambda spec, precision: cal)
    cpu = _local_cpu()

    def linear(params, phase="forward"):
        # One call of 1e9 FLOPs in module "m" with `params` parameters of its own, reading
        # 68 MB (17 M fp32 elements: the weight and some input).
        prof = make_profile([op("aten.addmm", "gemm", phase, flops=1e9, bytes_read=68e6,
                                bytes_written=4e6)])
        mod = ModuleRecord(name="m", type="Linear", depth=1, num_params=params,
                           param_bytes=4 * params, flops_forward=1e9, flops_backward=0.0,
                           bytes_forward=72e6, bytes_backward=0.0, activation_bytes=0)
        return predict(dataclasses.replace(prof, modules=(mod,)), hardware=cpu,
                       precision="fp32").step_time_s

    # A 16 M-element weight: 20 ms on the curve + 100 ps x (16 M - 1 M) = 21.5 ms.
    assert linear(16_000_000) == pytest.approx(21.5e-3, rel=1e-9)
    # No more than the grid's largest weight, or no weight of its own: the curve alone.
    assert linear(1_000_000) == pytest.approx(20e-3, rel=1e-9)
    assert linear(0) == pytest.approx(20e-3, rel=1e-9)
    # The weight is capped by what a call reads: 17 M elements -> 20 ms + 1.6 ms.
    assert linear(40_000_000) == pytest.approx(21.6e-3, rel=1e-9)
    # Backward GEMMs keep their own curve (no large-weight timing of them).
    prof_bwd = make_profile([op("aten.mm", "gemm", "backward", flops=1e9, bytes_read=68e6)])
    assert predict(prof_bwd, hardware=cpu, precision="fp32").step_time_s == pytest.approx(
        predict(make_profile([op("aten.mm", "gemm", "backward", flops=1e9, bytes_read=1e6)]),
                hardware=cpu, precision="fp32").step_time_s, rel=1e-9)


def test_large_weight_fit_is_never_a_speedup_and_needs_weights_beyond_the_grid():
    from aiadvisor.costmodel.local import fit_gemm_weight

    curve = _curve([(1e9, 20e-3), (2e9, 40e-3)])

    def wide(flops, seconds, weight):
        return OpPoint(op="aten.addmm", family="gemm-forward-wide", num_bytes=1, flops=flops,
                       seconds=seconds, weight_elements=weight)

    # Faster than the curve (FP16 on the development CPU ran within 3 % of it): 0, not < 0.
    assert fit_gemm_weight(curve, [wide(2e9, 39e-3, 9e6)], 1e6) == (1e6, 0.0)
    # No point beyond the grid's largest weight: nothing to fit.
    assert fit_gemm_weight(curve, [wide(2e9, 41e-3, 1e6)], 1e6) == (1e6, 0.0)
    # One point: 2 ms over the curve, 10 M elements beyond 1 M -> 200 ps an element.
    _, c = fit_gemm_weight(curve, [wide(2e9, 42e-3, 11e6)], 1e6)
    assert c == pytest.approx(2e-10, rel=1e-9)
    # A calibration without large-weight points prices no extra.
    cal = LocalCalibration.from_benchmark(_benchmark(), "fp32")
    assert cal.gemm_weight == {} and cal.gemm_weight_seconds(np.array([1e8]), "float32") == 0


def test_gemm_weight_elements_come_from_the_module_s_own_parameters():
    from aiadvisor.costmodel.ops import device_work, op_arrays
    from aiadvisor.schema import ModuleRecord, OpRecord, ParallelConfig

    def rec(module, name="aten.addmm", phase="forward", count=1, repeat=1):
        return OpRecord(op=name, op_class="gemm", phase=phase, module=module,
                        dtype="float32", count=count, flops=1e9, bytes_read=4e8 * count,
                        bytes_written=0.0, repeat=repeat)

    def mod(name, params):
        return ModuleRecord(name=name, type="Linear", depth=1, num_params=params,
                            param_bytes=4 * params, flops_forward=0.0, flops_backward=0.0,
                            bytes_forward=0.0, bytes_backward=0.0, activation_bytes=0)

    prof = dataclasses.replace(make_profile([
        rec("fc"),                                   # 4096 x 4096 + bias: 16 781 312
        rec("blocks.*.fc", count=4, repeat=4),       # one call per block: its own weight
        rec("two", count=2),                         # two own matrices, two calls: half each
        rec("fc", phase="backward"),                 # backward: not priced by weight
        rec("attn", name="aten.bmm"),                # a batched GEMM of activations
        rec("big"),                                  # more params than a call reads: capped
    ]), modules=(mod("fc", 4096 * 4096 + 4096), mod("blocks.*.fc", 1024 * 1024),
                 mod("two", 2 * 2048 * 2048), mod("attn", 1000), mod("big", 10**9)))
    ops = op_arrays(prof)
    assert list(ops.weight_elements) == [4096 * 4096 + 4096, 1024 * 1024, 2048 * 2048, 0, 0,
                                         1e8]
    # Tensor parallel splits each GEMM's weight over its ranks.
    work = device_work(prof, ops, np.ones(len(ops)), 0.0,
                       ParallelConfig(tp_degree=2))
    assert work.weight_per_call[0] == (4096 * 4096 + 4096) / 2


# -- max pools: window and layout ----------------------------------------------------------------

def _pool_curve(seconds_at_1mb: float):
    """A curve linear in bytes: ``seconds_at_1mb`` per 1e6 bytes (two timed sizes)."""
    from aiadvisor.costmodel.local import SizeCurve

    return SizeCurve(log_work=np.log([1e6, 1e7]),
                     log_seconds=np.log([seconds_at_1mb, 10 * seconds_at_1mb]), floor_s=1e-6)


def test_profile_names_a_max_pool_window_other_than_two_by_two():
    import aiadvisor as aa

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.MaxPool2d(3, 2, 1),
                              torch.nn.MaxPool2d(2), torch.nn.MaxPool2d((1, 3)))
    prof = aa.profile(net, torch.randn(2, 3, 32, 32), mode="infer", scaling=False)
    pools = sorted(o.op for o in prof.ops if "max_pool" in o.op)
    assert pools == ["aten.max_pool2d_with_indices", "aten.max_pool2d_with_indices[1x3]",
                     "aten.max_pool2d_with_indices[3x3]"]
    assert {o.op_class for o in prof.ops if "max_pool" in o.op} == {"memory"}
    from aiadvisor.costmodel.local import op_family

    assert op_family("aten.max_pool2d_with_indices[3x3][channels_last]", "memory") == "pool"


def test_max_pool_seconds_by_window_and_layout_by_hand():
    from aiadvisor.costmodel.local import LocalCalibration

    base = "aten.max_pool2d_with_indices"
    cal = LocalCalibration(curves={
        (base, "float32"): _pool_curve(1e-3),             # 2 x 2: 1 ms per MB
        (base + "[3x3]", "float32"): _pool_curve(1.5e-3),  # 3 x 3: 1.5 ms per MB
        (base + "[channels_last]", "float32"): _pool_curve(0.1e-3),
        (base + "[3x3][channels_last]", "float32"): _pool_curve(0.2e-3),
    })
    mb = np.array([2e6])

    def t(name, dtype="float32"):
        return float(cal._max_pool_seconds(name, dtype, mb)[0])

    assert t(base) == pytest.approx(2e-3)
    assert t(base + "[3x3]") == pytest.approx(3e-3)
    # 5 x 5: 2 ms + (3 - 2) ms x (25 - 4) / 5 = 6.2 ms; 1 x 2 (2 elements): 2 - 1 x 2/5 =
    # 1.6 ms; 1 x 1: 2 - 3/5 = 1.4 ms, above the floor of half the smaller (1 ms).
    assert t(base + "[5x5]") == pytest.approx(6.2e-3)
    assert t(base + "[1x2]") == pytest.approx(1.6e-3)
    assert t(base + "[1x1]") == pytest.approx(1.4e-3)
    # channels_last: its own curves; BF16 without a curve of its own takes FP32's.
    assert t(base + "[3x3][channels_last]", "bfloat16") == pytest.approx(0.4e-3)
    assert t(base + "[5x5][channels_last]") == pytest.approx(0.2e-3 + 0.2e-3 * 21 / 5)
    assert cal._max_pool_seconds("aten.max_pool2d_with_indices_backward", "float32", mb) is None
    # An older calibration: no channels_last pool (NCHW's time, no layout gain) and no 3 x 3
    # (the 2 x 2 time whatever the window).
    old = LocalCalibration(curves={(base, "float32"): _pool_curve(1e-3)})
    assert float(old._max_pool_seconds(base + "[3x3][channels_last]", "float32", mb)[0]) \
        == pytest.approx(2e-3)
    # Through op_seconds, as the cost model calls it (family "pool").
    got = cal.op_seconds(np.array([base + "[5x5]"], dtype=object),
                         np.array(["pool"], dtype=object), mb, np.zeros(1))
    assert float(got[0]) == pytest.approx(6.2e-3)


def test_max_pool_indices_keep_their_size_in_16_bit():
    import aiadvisor as aa
    from aiadvisor.costmodel.ops import byte_factors, op_arrays, pool_index_bytes
    from aiadvisor.costmodel.predict import _op_dtypes

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.MaxPool2d(2))
    prof = aa.profile(net, torch.randn(4, 3, 32, 32), mode="infer", scaling=False)
    ops = op_arrays(prof)
    i = list(ops.name).index("aten.max_pool2d_with_indices")
    # FP32 trace, 2 x 2 / 2 pool on 4 x 8 x 32 x 32: per output element 16 B read, a 4 B
    # output and an 8 B int64 index: indices are 8 / 12 of the bytes written.
    out_elements = 4 * 8 * 16 * 16
    assert ops.bytes_read[i] == pytest.approx(16 * out_elements)
    assert pool_index_bytes(ops)[i] == pytest.approx(8 * out_elements)
    # In BF16: 8 + 2 + 8 = 18 of the FP32 28 bytes; the op still runs in bfloat16.
    factors = byte_factors(prof, ops, "bf16")
    assert factors[i] == pytest.approx(18 / 28)
    assert _op_dtypes(ops, factors, "bf16", len(ops))[i] == "bfloat16"
    assert factors[list(ops.name).index("aten.convolution")] == pytest.approx(0.5)


def test_channels_last_transform_renames_convolutions_and_forward_max_pools():
    import aiadvisor as aa
    from aiadvisor.recommend import transforms

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.MaxPool2d(3, 2, 1))
    prof = aa.profile(net, torch.randn(2, 3, 16, 16), mode="train", scaling=False)
    names = {o.op for o in transforms.channels_last_convs(prof).ops}
    assert {"aten.convolution[channels_last]",
            "aten.max_pool2d_with_indices[3x3][channels_last]",
            "aten.max_pool2d_with_indices_backward"} <= names


def test_channels_last_transform_renames_batch_norms_too_and_keeps_eval_mode():
    import aiadvisor as aa
    from aiadvisor.recommend import transforms

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8))
    train = aa.profile(net, torch.randn(2, 3, 16, 16), mode="train", scaling=False)
    assert {"aten.native_batch_norm[channels_last]",
            "aten.native_batch_norm_backward[channels_last]"} <= {
        o.op for o in transforms.channels_last_convs(train).ops}
    infer = aa.profile(net, torch.randn(2, 3, 16, 16), mode="infer", scaling=False)
    assert "aten.native_batch_norm[eval][channels_last]" in {
        o.op for o in transforms.channels_last_convs(infer).ops}


def test_profile_names_the_layout_and_batch_norm_mode_the_model_runs_in():
    import aiadvisor as aa

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                              torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 1))
    x = torch.randn(2, 3, 16, 16)

    def names(model, inp, mode):
        return {(o.op, o.phase) for o in aa.profile(model, inp, mode=mode, scaling=False).ops
                if o.op_class == "conv" or "norm" in o.op or "pool" in o.op}

    # NCHW: bare names; batch norm in eval mode (running statistics) says so.
    assert names(net, x, "infer") == {
        ("aten.convolution", "forward"), ("aten.native_batch_norm[eval]", "forward"),
        ("aten.max_pool2d_with_indices", "forward")}
    # A channels_last model fed NCHW images: PyTorch runs the convolutions channels_last
    # (the weight's layout decides), and everything after them is channels_last too.
    cl = net.to(memory_format=torch.channels_last)
    assert names(cl, x, "train") == {
        ("aten.convolution[channels_last]", "forward"),
        ("aten.convolution_backward[channels_last]", "backward"),
        ("aten.native_batch_norm[channels_last]", "forward"),
        ("aten.native_batch_norm_backward[channels_last]", "backward"),
        ("aten.max_pool2d_with_indices[channels_last]", "forward"),
        ("aten.max_pool2d_with_indices_backward", "backward")}


def test_convolutions_pay_their_weights_per_call_by_hand():
    from types import SimpleNamespace

    from aiadvisor.costmodel.local import LocalCalibration, fit_conv_weight

    # The docstring's pair: 1.2 GFLOP in 1.0 ms and 0.3 GFLOP in 0.4 ms on the same 0.5 M
    # weights, 50 us a call: R = 0.9e9 / 0.6e-3 = 1.5 TFLOP/s, and
    # (0.4 - 0.05 - 0.3e9 / 1.5e12) ms / 0.5e6 = (0.4 - 0.05 - 0.2) ms / 0.5e6 = 0.3 ns.
    def conv(flops, seconds, weights, nbytes=1e7, family="conv-forward"):
        return OpPoint(op="aten.convolution", family=family, num_bytes=nbytes, flops=flops,
                       seconds=seconds, dtype="bfloat16", weight_elements=weights)

    big, small = conv(1.2e9, 1.0e-3, 0.5e6), conv(0.3e9, 0.4e-3, 0.5e6)
    other = conv(0.6e9, 0.5e-3, 0.1e6)  # a lone weight size: no pair, ignored by the fit
    key = ("conv-forward", "bfloat16")
    points = [(key[0], key[1], p) for p in (big, small, other)]
    assert fit_conv_weight(points, {key: 50e-6}) == {key: pytest.approx(0.3e-9)}
    # A pair that ran no faster with less work gives no per-weight cost; negative extras
    # clamp to 0.
    assert fit_conv_weight([(*key, conv(1e9, 1e-3, 1e6)), (*key, conv(0.5e9, 1e-3, 1e6))],
                           {}) == {}
    assert fit_conv_weight([(*key, conv(1e9, 1e-3, 1e6)), (*key, conv(0.5e9, 0.4e-3, 1e6))],
                           {}) == {key: 0.0}
    # From a benchmark: the rates are of the work beyond call and weights. The big point's
    # work took 1.0 - 0.05 - 0.15 = 0.8 ms (1.5 TFLOP/s at its intensity, 120 FLOP/B).
    result = SimpleNamespace(
        curve=lambda precision: [], launch_overhead_us=2.0, optimizer=[], memory_bw_gbs=None,
        date="", ops=[big, small, conv(2048.0, 50e-6, 64.0, nbytes=640.0,
                                       family="conv-forward-call")])
    cal = LocalCalibration.from_benchmark(result, "bf16")
    assert cal.conv_weight == {key: pytest.approx(0.3e-9)}
    # A 1.2 GFLOP call at the big point's intensity with 2 M weights: 50 us + 0.6 ms of
    # weights + 0.8 ms of work; without weights (None) the call and the work only.
    args = (np.array(["aten.convolution"], dtype=object),
            np.array(["conv-forward"], dtype=object), np.array([1e7]), np.array([1.2e9]),
            np.array(["bfloat16"], dtype=object))
    assert float(cal.op_seconds(*args, weight_elements=np.array([2e6]))[0]) == \
        pytest.approx(50e-6 + 0.6e-3 + 0.8e-3)
    assert float(cal.op_seconds(*args)[0]) == pytest.approx(50e-6 + 0.8e-3)


def test_convolution_records_carry_their_modules_weights_in_both_phases():
    import aiadvisor as aa
    from aiadvisor.costmodel.ops import op_arrays

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, bias=False), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 16, 1))
    prof = aa.profile(net, torch.randn(2, 3, 16, 16), mode="train", scaling=False)
    ops = op_arrays(prof)
    got = sorted((str(n), str(ph), float(w)) for n, ph, w in
                 zip(ops.name, ops.phase, ops.weight_elements) if "convolution" in str(n))
    # 8 x 3 x 3 x 3 = 216 weights; 16 x 8 x 1 x 1 + 16 bias = 144 (the module's own).
    assert got == [("aten.convolution", "forward", 144.0), ("aten.convolution", "forward", 216.0),
                   ("aten.convolution_backward", "backward", 144.0),
                   ("aten.convolution_backward", "backward", 216.0)]


def test_an_untimed_variant_takes_the_bare_ops_timings():
    from aiadvisor.costmodel.local import LocalCalibration

    bn = "aten.native_batch_norm"
    cal = LocalCalibration(curves={(bn, "float32"): _pool_curve(1e-3),
                                   (bn + "[eval]", "float32"): _pool_curve(0.2e-3)})
    got = cal.op_seconds(np.array([bn + "[eval]", bn + "[channels_last]"], dtype=object),
                         np.array(["norm", "norm"], dtype=object), np.array([2e6, 2e6]),
                         np.zeros(2))
    # Its own curve where timed (0.4 ms at 2 MB); else the bare op's (2 ms), not the family's.
    assert got == pytest.approx([0.4e-3, 2e-3])


def test_one_row_gemms_take_the_rate_of_their_dot_product_length():
    from aiadvisor.costmodel.local import LocalCalibration

    # Timed at one row (log-log in rows): K = 2048 at 20 GFLOP/s, K = 512 at 10 GFLOP/s.
    cal = LocalCalibration(
        skinny={"float32": (np.log([1.0, 64.0]), np.log([20e9, 40e9]))},
        skinny_narrow={"float32": (math.log(512), np.log([1.0, 64.0]), np.log([10e9, 40e9]))},
        curves={("gemm-forward", "float32"): _curve([(1e6, 1e-3), (1e9, 1e-2)])})

    def seconds(k, n, *, known=True):
        flops = 2.0 * k * n
        num_bytes = 4.0 * (k + k * n + n)  # one row: the row, the weight, the output
        return cal.op_seconds(np.array(["aten.mm"]), np.array(["gemm-forward"]),
                              np.array([num_bytes]), np.array([flops]),
                              weight_elements=np.array([k * n if known else 0.0]),
                              written_bytes=np.array([4.0 * n]))[0]

    # K = 1024 lies halfway between 512 and 2048 in log K: sqrt(10 x 20) GFLOP/s.
    assert seconds(1024, 4096) == pytest.approx(2 * 1024 * 4096 / math.sqrt(10e9 * 20e9),
                                                rel=1e-6)
    # K = 2048 and K = 512 take their own grid's rate; an unknown weight the K = 2048 grid's.
    assert seconds(2048, 2048) == pytest.approx(2 * 2048 * 2048 / 20e9, rel=1e-6)
    assert seconds(512, 8192) == pytest.approx(2 * 512 * 8192 / 10e9, rel=1e-6)
    assert seconds(512, 8192, known=False) == pytest.approx(2 * 512 * 8192 / 20e9, rel=1e-6)
    # The rate goes as K^0.5 between the two (20/10 over 2048/512); two octaves below 512 at
    # most: K = 64 is priced as K = 128, 10 x (128/512)^0.5 = 5 GFLOP/s.
    assert seconds(64, 8192) == pytest.approx(2 * 64 * 8192 / 5e9, rel=1e-6)


def test_cpu_attention_time_grows_with_the_blocks_at_one_sequence_length():
    # The grid times the kernel at 16 (batch, head) blocks: seq 64 as 1e6 bytes and 4e7 FLOPs
    # (40 FLOPs a byte) in 1.4 ms, seq 256 as 4e6 bytes and 6.4e8 FLOPs (160 a byte) in 4.2 ms.
    import dataclasses

    name = "aten._scaled_dot_product_flash_attention_for_cpu_backward"
    pts = (OpPoint(op=name, family="attention", num_bytes=1e6, flops=4e7, seconds=1.4e-3),
           OpPoint(op=name, family="attention", num_bytes=4e6, flops=6.4e8, seconds=4.2e-3))
    cal = LocalCalibration.from_benchmark(dataclasses.replace(_benchmark(), ops=pts), "fp32")

    def seconds(num_bytes, flops):
        return cal.op_seconds(np.array([name], dtype=object), np.array(["attention"], dtype=object),
                              np.array([num_bytes]), np.array([flops]))[0]

    # 48 blocks at seq 64: three times the bytes and FLOPs, the same 40 FLOPs a byte: 3 x 1.4 ms
    # (keyed on FLOPs, the curve toward seq 256 said 1.4 x 3^(ln 3 / ln 16) = 2.2 ms).
    assert seconds(3e6, 1.2e8) == pytest.approx(4.2e-3)
    # Half-way in log intensity (80 FLOPs a byte): per byte sqrt(1.4e-9 x 1.05e-9) s.
    assert seconds(2e6, 1.6e8) == pytest.approx(2e6 * math.sqrt(1.4e-9 * 1.05e-9))
    # Beyond the longest sequence the per-byte time grows with the intensity: 320 a byte, 2x.
    assert seconds(4e6, 1.28e9) == pytest.approx(2 * 4.2e-3)
    # Below the shortest: the shortest's per-byte time (16 blocks at seq 32: 0.5e6 bytes).
    assert seconds(0.5e6, 1e7) == pytest.approx(0.7e-3)


def test_a_recurrent_step_gemm_takes_the_skinny_rate_of_a_weight_in_cache():
    import dataclasses

    def point(family, m, k, n, gflops):
        # Bytes of the weight alone, so that the rows the model reads back (M K N / bytes in
        # elements) are exactly m.
        flops = 2.0 * m * k * n
        return OpPoint(op="aten.addmm", family=family, num_bytes=4.0 * k * n, flops=flops,
                       seconds=flops / (gflops * 1e9))

    pts = (point("gemm-skinny-hot", 1, 256, 1024, 20), point("gemm-skinny-hot", 16, 256, 1024, 80),
           point("gemm-skinny", 1, 2048, 2048, 10), point("gemm-skinny", 64, 2048, 2048, 40),
           point("gemm-forward", 256, 256, 256, 100), point("gemm-forward", 1024, 1024, 1024, 150))
    cal = LocalCalibration.from_benchmark(dataclasses.replace(_benchmark(), ops=pts), "fp32")
    flops, num_bytes = 2.0 * 4 * 256 * 768, 4.0 * 256 * 768   # 4 rows of a GRU's 256 -> 768

    def seconds(name, f=flops, b=num_bytes):
        return cal.op_seconds(np.array([name], dtype=object),
                              np.array(["gemm-forward"], dtype=object), np.array([b]),
                              np.array([f]))[0]

    # The step GEMM: 4 rows, half-way between 1 and 16 in log rows: sqrt(20 x 80) = 40 GFLOP/s.
    assert seconds("aten.addmm[step]") == pytest.approx(flops / 40e9, rel=1e-6)
    # In backward, the hidden state's gradient through the same weight: the same rate.
    assert cal.op_seconds(np.array(["aten.mm[step]"], dtype=object),
                          np.array(["gemm-backward"], dtype=object), np.array([num_bytes]),
                          np.array([flops]))[0] == pytest.approx(flops / 40e9, rel=1e-6)
    # The same GEMM outside a recurrence streams its weight: the cold grid, 1/3 of the way from
    # 1 to 64 rows in log rows: 10 x 4^(1/3) = 15.87 GFLOP/s.
    assert seconds("aten.addmm") == pytest.approx(flops / (10e9 * 4 ** (1 / 3)), rel=1e-6)
    # Beyond the hot grid's 16 rows (32 here) a step GEMM keeps the cold grid's price.
    assert seconds("aten.addmm[step]", 8 * flops, num_bytes) == pytest.approx(
        seconds("aten.addmm", 8 * flops, num_bytes))
    # A calibration without the hot grid (older than it) prices the step GEMM as before.
    old = dataclasses.replace(cal, skinny_hot={})
    assert old.op_seconds(np.array(["aten.addmm[step]"], dtype=object),
                          np.array(["gemm-forward"], dtype=object), np.array([num_bytes]),
                          np.array([flops]))[0] == pytest.approx(seconds("aten.addmm"))


def test_convolutions_take_the_quick_conv_factor_at_their_intensity(monkeypatch):
    import importlib
    from types import SimpleNamespace

    from aiadvisor.hardware import detection

    anchor = importlib.import_module("aiadvisor.costmodel.predict")._cpu_conv_anchor
    # Factor 1.25 at 25 FLOPs a byte, 2 at 100 (log-linear in intensity, flat beyond).
    fit = ((math.log(25.0), math.log(100.0)), (math.log(1.25), math.log(2.0)))
    monkeypatch.setattr(detection, "conv_anchor", lambda spec, train: fit)
    work = SimpleNamespace(op_class=np.array(["conv", "conv", "memory", "conv"], dtype=object),
                           flops_per_call=np.array([50e6, 1e9, 1e6, 10e6]),
                           bytes_per_call=np.array([1e6, 1e6, 1e6, 1e6]))
    cpu, calibrated = SimpleNamespace(kind="cpu", name="cpu"), SimpleNamespace(kind="cpu",
                                                                               name="cal")
    parts = {k: np.ones((3, 2, 4)) for k in ("compute", "memory", "overhead")}
    notes: list[str] = []
    anchor(parts, work, SimpleNamespace(specs=[cpu, calibrated]), [None, object()], notes,
           train=True)
    # 50 FLOPs a byte is half-way from 25 to 100 in log: 1.25 x (2 / 1.25)^0.5 = 1.581;
    # 1000 is beyond 100: 2; 10 below 25: 1.25; the memory op untouched.
    mid = 1.25 * (2 / 1.25) ** 0.5
    for k in ("compute", "memory"):
        assert parts[k][1, 0].tolist() == pytest.approx([mid, 2.0, 1.0, 1.25])
        assert parts[k][1, 1].tolist() == [1.0] * 4          # the benchmarked CPU: its curves
    assert parts["overhead"][1, 0].tolist() == [1.0] * 4       # per-op costs unchanged
    assert "x1.25-2.00" in notes[0]


def test_fused_recurrent_layers_take_the_quick_lstm_factor_at_their_batch(monkeypatch):
    import importlib
    from types import SimpleNamespace

    from aiadvisor.hardware import detection

    anchor = importlib.import_module("aiadvisor.costmodel.predict")._cpu_recurrent_anchor
    # Factors 2 at batch 8 and 1 at batch 64 (log-linear in batch between them, flat beyond).
    fit = ((math.log(8), math.log(64)), (math.log(2.0), 0.0))
    seen = []
    monkeypatch.setattr(detection, "recurrent_anchor",
                        lambda spec, train: (seen.append((spec.name, train)), fit)[1])
    # The flag step_parts passes (OpArrays.recurrent) marks oneDNN's fused layer, forward and
    # backward, and nothing else of an LSTM's training step.
    import aiadvisor as aa
    from aiadvisor.costmodel.api import _ops

    with torch.random.fork_rng(devices=[]):
        lstm = torch.nn.LSTM(16, 16, batch_first=True, device="meta")
    ops = _ops(aa.profile(lstm, torch.empty(2, 8, 16, device="meta"), mode="train",
                          optimizer="none"))
    assert {str(n) for n, r in zip(ops.name, ops.recurrent) if r} == {
        "aten.mkldnn_rnn_layer", "aten.mkldnn_rnn_layer_backward"}
    cpu, calibrated = SimpleNamespace(kind="cpu", name="cpu"), SimpleNamespace(kind="cpu",
                                                                               name="cal")
    devs = SimpleNamespace(specs=[cpu, calibrated])
    parts = {k: np.ones((3, 2, 3)) for k in ("compute", "memory", "overhead")}
    notes: list[str] = []
    recurrent = np.array([True, False, True])   # the two fused-layer records, not the addmm
    anchor(parts, recurrent, devs, [None, object()], notes, train=True,
                                  batch=16)
    # Batch 16 is a third of the way from 8 to 64 in log batch: 2 ** (2/3) = 1.587.
    factor = 2 ** (2 / 3)
    for k in ("compute", "memory"):
        assert parts[k][1, 0].tolist() == pytest.approx([factor, 1.0, factor])
        assert parts[k][1, 1].tolist() == [1.0, 1.0, 1.0]     # the benchmarked CPU: its curves
    assert parts["overhead"][1, 0].tolist() == [1.0, 1.0, 1.0]  # launches unchanged
    assert seen == [("cpu", True)] and "x1.59" in notes[0] and "batch 8, batch 64" in notes[0]
    # Beyond the batches timed: flat (batch 256 takes batch 64's factor, 1).
    parts = {k: np.ones((3, 1, 3)) for k in ("compute", "memory", "overhead")}
    anchor(parts, recurrent, SimpleNamespace(specs=[cpu]), None, [],
                                  train=False, batch=256)
    assert parts["compute"][1, 0].tolist() == pytest.approx([1.0, 1.0, 1.0])


def test_dropout_draws_take_the_quick_bernoulli_rate_on_the_attached_cpu(monkeypatch):
    import importlib
    from types import SimpleNamespace

    from aiadvisor.hardware import detection

    draws = importlib.import_module("aiadvisor.costmodel.predict")._cpu_random_draws
    # 5 ns an FP32 element drawn = 5e-9 / 8 s a counted byte.
    monkeypatch.setattr(detection, "bernoulli_anchor", lambda spec: 5e-9 / 8)
    work = SimpleNamespace(name=np.array(["aten.bernoulli_", "aten.add"], dtype=object),
                           bytes_per_call=np.array([8e6, 8e6]), count=np.array([3.0, 3.0]))
    cpu = SimpleNamespace(kind="cpu", name="cpu")
    parts = {k: np.full((3, 1, 2), 1e-3) for k in ("compute", "memory", "overhead")}
    notes: list[str] = []
    draws(parts, work, SimpleNamespace(specs=[cpu]), None, notes)
    # 3 calls of 1 M elements at 5 ns: 15 ms, above the curves' 2 ms (compute + memory).
    assert parts["memory"][1, 0].tolist() == pytest.approx([15e-3, 1e-3])
    assert parts["compute"][1, 0].tolist() == pytest.approx([0.0, 1e-3])
    assert parts["overhead"][1, 0].tolist() == pytest.approx([1e-3, 1e-3])
    assert "15 ms a step, at the 5 ns an FP32 element" in notes[0]
    # A floor: where the curves price the draws slower, their time stays.
    parts = {k: np.full((3, 1, 2), 10e-3) for k in ("compute", "memory", "overhead")}
    draws(parts, work, SimpleNamespace(specs=[cpu]), None, [])
    assert parts["memory"][1, 0, 0] == pytest.approx(20e-3)
    # A benchmarked CPU keeps its calibration's timing.
    parts = {k: np.full((3, 1, 2), 1e-3) for k in ("compute", "memory", "overhead")}
    draws(parts, work, SimpleNamespace(specs=[cpu]), [object()], [])
    assert parts["memory"][1, 0, 0] == pytest.approx(1e-3)


def test_a_step_whose_weights_a_cache_holds_takes_the_warm_skinny_rates():
    import dataclasses

    from aiadvisor.hardware.calibrate import SKINNY_WARM_CYCLE_BYTES

    def point(family, m, gflops):
        flops = 2.0 * m * 2048 * 2048
        return OpPoint(op="aten.addmm", family=family, num_bytes=4.0 * 2048 * 2048,
                       flops=flops, seconds=flops / (gflops * 1e9))

    # DRAM (skinny) rates 10 and 40 GFLOP/s at 1 and 64 rows; warm (cycling 32 MiB) 20 and 40.
    pts = (point("gemm-skinny", 1, 10), point("gemm-skinny", 64, 40),
           point("gemm-skinny-warm", 1, 20), point("gemm-skinny-warm", 64, 40),
           OpPoint(op="aten.addmm", family="gemm-forward", num_bytes=4.0 * 3 * 256**2,
                   flops=2.0 * 256**3, seconds=2.0 * 256**3 / 100e9))
    cal = LocalCalibration.from_benchmark(dataclasses.replace(_benchmark(), ops=pts), "fp32")
    assert SKINNY_WARM_CYCLE_BYTES == 32 * 2**20
    flops, num_bytes = 2.0 * 2048 * 2048, 4.0 * 2048 * 2048   # one row of a 2048 x 2048 weight

    def seconds(step_weight_bytes=math.inf, f=flops):
        return cal.op_seconds(np.array(["aten.addmm"], dtype=object),
                              np.array(["gemm-forward"], dtype=object), np.array([num_bytes]),
                              np.array([f]), step_weight_bytes=step_weight_bytes)[0]

    # Weights unknown or beyond 64 MiB: the DRAM rate, 10 GFLOP/s at one row.
    assert seconds() == pytest.approx(flops / 10e9, rel=1e-6)
    assert seconds(100 * 2**20) == pytest.approx(flops / 10e9, rel=1e-6)
    # 20 MiB of weights in the whole step: the warm rate, 20 GFLOP/s.
    assert seconds(20 * 2**20) == pytest.approx(flops / 20e9, rel=1e-6)
    # 45.25 MiB (32 x 2^0.5): half-way in log bytes to 64 MiB, half the shift in log rate:
    # 10 x 2^0.5 = 14.1 GFLOP/s.
    assert seconds(32 * 2**20 * 2**0.5) == pytest.approx(flops / (10e9 * 2**0.5), rel=1e-6)
    # At 64 rows both grids read 40: nothing changes.
    assert seconds(20 * 2**20, 64 * flops) == pytest.approx(64 * flops / 40e9, rel=1e-6)
    # A warm grid slower than the DRAM one (a cache that does not hold the cycle, noise) is
    # not used to slow the step down.
    slow = dataclasses.replace(cal, skinny_warm={"float32": (np.log([1.0, 64.0]),
                                                             np.log([5e9, 40e9]))})
    assert slow.op_seconds(np.array(["aten.addmm"], dtype=object),
                           np.array(["gemm-forward"], dtype=object), np.array([num_bytes]),
                           np.array([flops]), step_weight_bytes=20 * 2**20)[0] == \
        pytest.approx(flops / 10e9, rel=1e-6)
