"""A larger batch on a CPU amortises only the fixed costs: hand-worked what-ifs."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

import aiadvisor as aa
from aiadvisor.recommend.predictor import throughput_gain
from aiadvisor.recommend.tactics import cpu_batch_floor
from aiadvisor.schema import Prediction


def _pred(batch: int, *, compute_s: float, memory_s: float, fixed_s: float) -> Prediction:
    step = compute_s + memory_s + fixed_s
    return Prediction(hardware="X", precision="fp32", num_devices=1, step_time_s=step,
                      throughput=batch / step, low_s=0.9 * step, high_s=1.1 * step,
                      bound="compute", confidence="medium", compute_s=compute_s,
                      memory_s=memory_s, overhead_s=fixed_s)


CPU = aa.hardware.get("Intel Xeon Platinum 8480+")


def test_cpu_kernel_time_per_sample_does_not_shrink():
    # Batch 16: 8 ms compute + 2 ms memory + 2 ms fixed = 12 ms. The size curves predict batch
    # 32 at 12 + 3 + 2 = 17 ms (1.41x per sample); the floor keeps the kernels at 2 x 10 = 20 ms
    # per step, so 22 ms: 12 / (22 / 2) = 1.0909x, the fixed 2 ms amortised over twice the
    # samples and nothing else.
    base = _pred(16, compute_s=8e-3, memory_s=2e-3, fixed_s=2e-3)
    new = _pred(32, compute_s=12e-3, memory_s=3e-3, fixed_s=2e-3)
    assert throughput_gain(base, new).point == pytest.approx(24 / 17)
    floored = cpu_batch_floor(CPU, base, new)
    assert floored.step_time_s == pytest.approx(22e-3)
    assert floored.throughput == pytest.approx(32 / 22e-3)
    assert floored.low_s == pytest.approx(0.9 * 17e-3 + 5e-3)
    assert throughput_gain(base, floored).point == pytest.approx(12 / 11)


def test_cpu_kernels_slower_per_sample_are_kept():
    # Already slower per sample than the floor (2 x 10 = 20 ms < 25 ms): left as predicted.
    base = _pred(16, compute_s=8e-3, memory_s=2e-3, fixed_s=2e-3)
    new = _pred(32, compute_s=20e-3, memory_s=5e-3, fixed_s=2e-3)
    assert cpu_batch_floor(CPU, base, new) is new


def test_accelerators_keep_the_size_curves():
    base = _pred(16, compute_s=8e-3, memory_s=2e-3, fixed_s=2e-3)
    new = _pred(32, compute_s=12e-3, memory_s=3e-3, fixed_s=2e-3)
    assert cpu_batch_floor(aa.hardware.get("H100 SXM"), base, new) is new


def test_the_optimizer_step_is_kept_once_per_step():
    # As the first test, but 4 ms of the base's 10 ms of kernels is the optimizer step, which
    # updates the same parameters at any batch: floor = (10 - 4) x 2 + 4 = 16 ms of kernels,
    # the size curves' 15 ms is lifted by 1 ms to 18 ms: (32 / 18) / (16 / 12) = 1.3333x
    # (without fixed_s: 22 ms, 1.0909x).
    base = _pred(16, compute_s=8e-3, memory_s=2e-3, fixed_s=2e-3)
    new = _pred(32, compute_s=12e-3, memory_s=3e-3, fixed_s=2e-3)
    floored = cpu_batch_floor(CPU, base, new, fixed_s=4e-3)
    assert floored.step_time_s == pytest.approx(18e-3)
    assert throughput_gain(base, floored).point == pytest.approx(4 / 3)
    # fixed_s is clipped to the base's kernel time: all of it fixed -> the floor is 10 ms,
    # below the curves' 15 ms, so new is kept.
    assert cpu_batch_floor(CPU, base, new, fixed_s=1.0) is new


#: The local CPU as ``aa.hardware.detect()`` builds it without a benchmark on the 2-core
#: development machine (what the default-argument dashboard advises for): estimated FP32 peak,
#: estimated bandwidth (2 cores x ``CPU_BW_PER_CORE_GBS`` = 30 GB/s), 25 GB of RAM.
UNBENCHMARKED_CPU = dataclasses.replace(CPU, name="local CPU (unbenchmarked)",
                                        fp32_tflops=0.3328, memory_bw_gbs=2 * 15.0,
                                        memory_gb=25_276_203_008 / 1024**3)


def test_training_the_dashboard_mlp_on_a_cpu_offers_a_larger_batch():
    # The default-argument dashboard's model: its AdamW step (4 tensors, 0.53 M parameters) does
    # not grow with the batch, so a larger batch amortises it. Measured on the 2-core
    # development CPU: batch 64 ran 1.70x and batch 512 7.2x the samples/s of batch 32; the
    # floored cost model predicts less (a lower bound) but more than the 1.1x the rule needs.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))
    report = aa.advise(model, torch.randn(32, 256), hardware=UNBENCHMARKED_CPU)
    recs = {r.id: r for r in report.recommendations}
    assert "larger_batch" in recs
    assert 1.1 <= recs["larger_batch"].predicted_speedup < 7.2
    # Inference has no optimizer step, but each call's per-op overhead is amortised: measured
    # on the development CPU (2026-12-06, median of 7 x 200 calls), batch 256 ran 1.42x the
    # samples/s of batch 32 (64: 1.19x, 128: 1.34x, 512: 1.46x); on an AVX2 AMD EPYC VM
    # (2026-12-07, same protocol) 1.24x, 1.52x, 1.75x at 256 and 1.21x at 512 (its 2 MiB
    # activations were faulted in afresh every call). The serving-style offer must be 256 per
    # call (512 doubles the latency for at most 3 % more) and its predicted gain stay within
    # 40 % of 1.42.
    infer = aa.advise(model, torch.randn(32, 256), mode="infer", hardware=UNBENCHMARKED_CPU)
    offer = {r.id: r for r in infer.recommendations}["larger_batch"]
    assert "256 requests per call" in offer.title
    assert 1.42 / 1.4 <= offer.predicted_speedup <= 1.42 * 1.4


def test_weight_cast_share_by_hand():
    import torch

    from aiadvisor.costmodel.ops import weight_cast_share

    torch.manual_seed(0)
    # One Linear(64 -> 256) at batch 32: addmm reads x (32 x 64), W (64 x 256) and the bias
    # (256), all FP32; the weights autocast casts are W and the bias.
    prof = aa.profile(torch.nn.Linear(64, 256), torch.randn(32, 64), mode="train")
    assert weight_cast_share(prof) == pytest.approx((64 * 256 + 256) / (32 * 64 + 64 * 256 + 256))


def test_autocast_weight_casts_count_as_fixed_per_step_on_a_cpu():
    from types import SimpleNamespace

    from aiadvisor.recommend.tactics import _fixed_kernel_s

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512))
    prof = aa.profile(net, torch.randn(256, 512), mode="train")
    # Under bf16 autocast an FP32 trace gets its casts priced; in FP32 there are none.
    bf16 = aa.predict(prof, hardware=CPU, precision="bf16")
    assert 0 < bf16.amp_cast_s < bf16.compute_s + bf16.memory_s
    assert aa.predict(prof, hardware=CPU, precision="fp32").amp_cast_s == 0
    # Of 10 ms of casts, the weights' share is fixed per step: the GEMMs read x (256 x 512)
    # and W1, b1 (512 x 2048 + 2048), then h (256 x 2048) and W2, b2 (2048 x 512 + 512), FP32.
    # (No optimizer step counted here: ``train=False``.)
    weights = 512 * 2048 + 2048 + 2048 * 512 + 512
    reads = 256 * 512 + 256 * 2048 + weights
    ctx = SimpleNamespace(base=SimpleNamespace(amp_cast_s=10e-3), prof=prof, train=False)
    assert _fixed_kernel_s(ctx) == pytest.approx(10e-3 * weights / reads)
