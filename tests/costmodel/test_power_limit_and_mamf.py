"""Power-limited GPUs and published achievable-matmul fractions move the compute side of
GEMMs only; memory-bound GEMVs keep their bandwidth figure (hand-worked)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from aiadvisor.costmodel import predict
from aiadvisor.costmodel.model import EfficiencyModel

from .conftest import constant_model, make_profile, make_spec, op

N = 4096
GEMM_FLOPS = 2 * N**3          # 1.374e11
W = 16384
GEMV_FLOPS = 2 * W**2          # one row against a 16384 x 16384 weight: 5.4e8


def gemm(**kw):
    return make_profile([op("aten.mm", "gemm", "forward", flops=GEMM_FLOPS,
                            bytes_read=2 * 4 * N**2, bytes_written=4 * N**2)], **kw)


def gemv(**kw):
    # One token against a 16384 x 16384 fp32 weight: 1.07 GB read, 0.5 FLOP a byte.
    return make_profile([op("aten.mm", "gemm", "forward", flops=GEMV_FLOPS,
                            bytes_read=4 * W**2 + 4 * W, bytes_written=4 * W)], **kw)


def power_model(low_power_simt: float) -> EfficiencyModel:
    """Efficiency 1 everywhere except FP32 GEMMs on power-limited boards, slowed
    ``low_power_simt`` times (what NeuSight's T4/L4/P4 timings teach the shipped model)."""
    base = constant_model(0.0)
    tables = dict(base.tables)
    simt = tables["gemm/simt"]
    tables["gemm/simt@lowpower"] = dataclasses.replace(
        simt, key="gemm/simt@lowpower",
        **{q: np.full_like(simt.p50, math.log(low_power_simt)) for q in ("p10", "p50", "p90")},
        median_log_slowdown=math.log(low_power_simt))
    return EfficiencyModel(tables=tables, collectives=base.collectives)


def test_a_power_limit_slows_tensor_core_gemms_as_it_slows_fp32_ones():
    # A 70 W board: its FP32 GEMMs run 2x slower than a big board's at the same features, so
    # its bf16 GEMM's compute side doubles: 1.374e11 / 1e15 = 137.4 us -> 274.9 us.
    model = power_model(2.0)
    board = make_spec(name="Small GPU", tdp_w=70)
    big = make_spec(name="Big GPU", tdp_w=700)
    small_pred = predict(gemm(), hardware=board, precision="bf16", model=model)
    big_pred = predict(gemm(), hardware=big, precision="bf16", model=model)
    assert big_pred.compute_s == pytest.approx(137.44e-6, rel=1e-3)
    assert small_pred.compute_s == pytest.approx(2 * 137.44e-6, rel=1e-3)
    assert any("Power-limited board (70 W)" in n for n in small_pred.notes)
    assert not any("Power-limited" in n for n in big_pred.notes)


def test_a_power_limit_leaves_a_memory_bound_gemv_at_its_bandwidth():
    # bf16 halves the trace's bytes: 537 MB / 3000 GB/s = 179 us; its 0.54 GFLOP take 0.54 us
    # at 1 PFLOP/s, and 1.07 us at half the clock: still memory bound, unchanged.
    model = power_model(2.0)
    small = predict(gemv(), hardware=make_spec(name="Small GPU", tdp_w=70), precision="bf16",
                    model=model)
    assert small.bound == "memory"
    assert small.memory_s == pytest.approx((2 * W**2 + 4 * W) / 3000e9, rel=1e-3)


def test_edge_modules_and_npus_under_the_same_power_keep_their_tables():
    # The transfer rests on PCIe boards (T4, L4, P4); a 15 W Jetson-like module is not one.
    model = power_model(2.0)
    edge = make_spec(name="Edge module", kind="edge", tdp_w=15)
    pred = predict(gemm(), hardware=edge, precision="bf16", model=model)
    assert pred.compute_s == pytest.approx(137.44e-6, rel=1e-3)


def test_fp8_gemms_take_the_published_fp8_fraction_and_gemvs_none():
    # MAMF: an H100 SXM reaches 1402.6 of 1978.9 FP8 TFLOP/s (70.88 %); the GEMM curve's GPUs
    # reach (271.2/312 + 794.5/989.4) / 2 = 83.62 % in BF16: FP8 GEMMs take 0.8362 / 0.7088 =
    # 1.180x the time on an otherwise identical, unlisted device. In BF16 the H100's own
    # fraction is 794.5 / 989.4 = 80.30 %: 1.041x.
    model = constant_model(0.0)
    fields = dict(vendor="NVIDIA", bf16_tflops=989.4, fp16_tflops=989.4, fp8_tflops=1978.9,
                  memory_bw_gbs=3350)
    h100 = make_spec(name="NVIDIA H100 SXM", **fields)
    twin = make_spec(name="Unlisted NVIDIA GPU", **fields)
    reference = (271.2 / 312 + 794.5 / 989.4) / 2
    for precision, fraction in (("fp8", 1402.6 / 1978.9), ("bf16", 794.5 / 989.4)):
        a = predict(gemm(), hardware=h100, precision=precision, model=model)
        b = predict(gemm(), hardware=twin, precision=precision, model=model)
        assert a.compute_s / b.compute_s == pytest.approx(reference / fraction, rel=1e-9)
    note = [n for n in predict(gemm(), hardware=h100, precision="fp8", model=model).notes
            if "achievable-matmul" in n]
    assert note and "71% of its FP8 peak" in note[0]
    # The fraction is about compute-bound GEMMs: a one-row GEMV reads its weight at the same
    # bandwidth on both (268 MB at 1 byte a weight / 3350 GB/s = 80 us).
    a = predict(gemv(), hardware=h100, precision="fp8", model=model)
    b = predict(gemv(), hardware=twin, precision="fp8", model=model)
    assert a.bound == b.bound == "memory"
    assert a.memory_s == pytest.approx(b.memory_s, rel=1e-12)
    assert a.memory_s == pytest.approx((W**2 + 2 * W) / 3350e9, rel=1e-3)


def test_a_geforce_card_takes_its_quick_benchmark_figure_above_the_rated_peak():
    # A public torch.mm table reads 76.58 BF16 TFLOP/s on RTX 3090s, whose datasheet rate (FP32
    # accumulate, rated boost clock) is 71.2: 107.6 %. The same benchmark reads the curve's GPUs
    # at (264.53 / 312 + 786.45 / 989.4) / 2 = 82.14 % of theirs, so the 3090's GEMMs take
    # 0.8214 / 1.0756 = 0.7637 of the time on an otherwise identical, unlisted card. (A model
    # at half the peak: a speed-up needs room above the curve, which never passes the peak.)
    model = constant_model(math.log(2.0))
    fields = dict(vendor="NVIDIA", bf16_tflops=71.2, fp16_tflops=71.2, memory_bw_gbs=936)
    card = make_spec(name="NVIDIA GeForce RTX 3090", **fields)
    twin = make_spec(name="Unlisted GeForce", **fields)
    a = predict(gemm(), hardware=card, precision="bf16", model=model)
    b = predict(gemm(), hardware=twin, precision="bf16", model=model)
    expected = (264.53 / 312 + 786.45 / 989.4) / 2 / (76.58 / 71.2)
    assert a.compute_s / b.compute_s == pytest.approx(expected, rel=1e-9)
    (note,) = [n for n in a.notes if "achievable-matmul" in n]
    assert "108% of its BF16 peak" in note and "torch.mm benchmark" in note


def test_a_card_past_its_rated_clock_may_beat_its_rated_peak_but_not_its_published_rate():
    # RTX 5090: rated 209.5 BF16 TFLOP/s, the torch.mm table reads 239.11. On a model at the
    # roofline, its adjustment (0.8214 / 1.1414) would take the GEMM past even the published
    # rate; the floor stops it there: 1.374e11 / 239.11e12 = 574.7 us.
    model = constant_model(0.0)
    card = make_spec(name="NVIDIA GeForce RTX 5090", vendor="NVIDIA", bf16_tflops=209.5,
                     fp16_tflops=209.5, memory_bw_gbs=1792)
    pred = predict(gemm(), hardware=card, precision="bf16", model=model)
    assert pred.compute_s == pytest.approx(GEMM_FLOPS / 239.11e12, rel=1e-9)


def test_a_burst_is_the_fast_end_of_a_power_limited_boards_interval(monkeypatch):
    # The power limit is sustained: the P10 leaves it out, the P50 and P90 keep it (2x here).
    # The ops' own band, before the step's spread widens it around each P50.
    import importlib

    monkeypatch.setattr(importlib.import_module("aiadvisor.costmodel.predict"), "STEP_SPREAD",
                        0.0)
    model = power_model(2.0)
    small = predict(gemm(), hardware=make_spec(name="Small GPU", tdp_w=70), precision="bf16",
                    model=model)
    big = predict(gemm(), hardware=make_spec(name="Big GPU", tdp_w=700), precision="bf16",
                  model=model)
    assert small.low_s == pytest.approx(big.low_s, rel=1e-9)
    assert small.high_s > 1.9 * big.high_s
