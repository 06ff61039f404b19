"""Speedups and their intervals from two cost-model predictions, worked out by hand."""

from __future__ import annotations

import pytest

from aiadvisor.recommend.predictor import MIN_INTERVAL_WIDTH, speedup
from aiadvisor.schema import Prediction


def _pred(step_s: float, low_s: float, high_s: float, *, batch: int = 8) -> Prediction:
    return Prediction(hardware="X", precision="bf16", num_devices=1, step_time_s=step_s,
                      throughput=batch / step_s, low_s=low_s, high_s=high_s, bound="compute",
                      confidence="medium")


def test_bands_that_move_together_give_no_interval():
    # Both steps have the same P10/P90 factors (x0.8, x1.3): 1.6/0.8 = 2.6/1.3 = 2.0/1.0 = 2,
    # the uncertainty is a common factor and cancels in the ratio.
    gain = speedup(_pred(2.0, 1.6, 2.6), _pred(1.0, 0.8, 1.3))
    assert gain.point == pytest.approx(2.0)
    assert gain.low is None and gain.high is None
    # Within 1 %: 1.6/0.799 = 2.0025, 2.6/1.301 = 1.99846: 0.2 % apart, still no interval.
    near = speedup(_pred(2.0, 1.6, 2.6), _pred(1.0, 0.799, 1.301))
    assert near.low is None and MIN_INTERVAL_WIDTH == 0.01


def test_bands_that_differ_give_the_quantile_by_quantile_interval():
    # The new step has a wider band (another precision): P10 1.6/0.7 = 2.2857, P90 2.6/1.5 =
    # 1.7333; the point 2.0 lies between them.
    gain = speedup(_pred(2.0, 1.6, 2.6), _pred(1.0, 0.7, 1.5))
    assert gain.point == pytest.approx(2.0)
    assert gain.low == pytest.approx(2.6 / 1.5) and gain.high == pytest.approx(1.6 / 0.7)


def test_interval_is_widened_to_contain_the_point():
    # P10 ratio 1.6/0.8 = 2.0 (= the point), P90 ratio 2.6/1.2 = 2.1667: one-sided interval.
    gain = speedup(_pred(2.0, 1.6, 2.6), _pred(1.0, 0.8, 1.2))
    assert (gain.low, gain.high) == (pytest.approx(2.0), pytest.approx(2.6 / 1.2))


def test_speedup_is_per_sample():
    # base: 8 samples in 1.0 s; new: 16 samples in 1.5 s. Per sample 0.125 s vs 0.09375 s:
    # 1.3333x, although the step got longer.
    gain = speedup(_pred(1.0, 0.8, 1.3, batch=8), _pred(1.5, 1.2, 1.95, batch=16))
    assert gain.point == pytest.approx(0.125 / 0.09375)
    assert gain.low is None  # same factors x0.8 / x1.3 on both
