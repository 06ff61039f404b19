"""A larger batch on a CPU amortises only the fixed costs: hand-worked what-ifs."""

from __future__ import annotations

import pytest

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
