"""Roofline, alpha-beta collectives, overlap and pipeline bubble, checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from aiadvisor.errors import AIAdvisorError
from aiadvisor.estimate import (
    bubble_fraction,
    collective_time_s,
    exposed_time_s,
    ridge_point,
    roofline_time_s,
    stage_imbalance,
)


def test_roofline_gemm_4096_cubed_bf16_is_compute_bound():
    # 2 * 4096^3 = 1.374e11 FLOPs / 1e15 FLOP/s = 137.4 us; three 4096^2 bf16 matrices are
    # 3 * 2 * 16.78e6 = 1.007e8 bytes / 3e12 B/s = 33.6 us < 137.4 us.
    t = roofline_time_s(2 * 4096**3, 3 * 2 * 4096**2, peak_tflops=1000, bw_gbs=3000)
    assert t == pytest.approx(137.44e-6, rel=1e-3)


def test_roofline_memory_bound_elementwise_add_with_launch():
    # Adding two 1 GiB fp32 tensors: read 2 GiB, write 1 GiB = 3.221e9 bytes / 3e12 = 1.074 ms;
    # 2.68e8 FLOPs / 1e15 = 0.27 us. Plus 4 us launch.
    n = 1024**3 // 4
    t = roofline_time_s(n, 12 * n, peak_tflops=1000, bw_gbs=3000, launch_s=4e-6)
    assert t == pytest.approx(12 * n / 3e12 + 4e-6, rel=1e-9)
    assert t == pytest.approx(1.0778e-3, rel=1e-3)


def test_ridge_point():
    # 312 TFLOP/s over 2039 GB/s (A100 80GB SXM): 153 FLOP per byte.
    assert ridge_point(312, 2039) == pytest.approx(153.0, rel=1e-3)


def test_all_reduce_alpha_beta_by_hand():
    # Ring all-reduce moves 2 (n-1)/n of the buffer through each link:
    # 4 devices, 256 MB at 100 GB/s: 1.5 * 2.56e8 / 1e11 = 3.84 ms, + 30 us.
    t = collective_time_s("all_reduce", 256e6, num_devices=4, bus_bw_gbs=100, alpha_s=30e-6)
    assert t == pytest.approx(3.84e-3 + 30e-6, rel=1e-9)


def test_all_gather_reduce_scatter_half_of_all_reduce():
    kw = {"num_devices": 8, "bus_bw_gbs": 200, "alpha_s": 0.0}
    ar = collective_time_s("all_reduce", 1e9, **kw)
    assert collective_time_s("all_gather", 1e9, **kw) == pytest.approx(ar / 2)
    assert collective_time_s("reduce_scatter", 1e9, **kw) == pytest.approx(7 / 8 * 1e9 / 200e9)


def test_send_recv_and_single_device():
    assert collective_time_s("send_recv", 1e9, num_devices=2, bus_bw_gbs=50,
                             alpha_s=1e-5) == pytest.approx(0.02001)
    assert collective_time_s("all_reduce", 1e9, num_devices=1, bus_bw_gbs=50, alpha_s=1) == 0.0


def test_unknown_collective_names_the_choices():
    with pytest.raises(AIAdvisorError, match="all_reduce, all_gather"):
        collective_time_s("broadcast", 1.0, num_devices=2, bus_bw_gbs=1, alpha_s=0)


def test_exposed_communication_overlap():
    # 30 ms of all-reduce under 100 ms of backward: all but the last 20 % hides -> 6 ms.
    assert exposed_time_s(0.030, 0.100) == pytest.approx(0.006)
    # 100 ms under 50 ms: 100 - 0.8 * 50 = 60 ms exposed.
    assert exposed_time_s(0.100, 0.050) == pytest.approx(0.060)


def test_bubble_fraction_by_hand():
    assert bubble_fraction(1, 1) == 0.0
    assert bubble_fraction(4, 1) == pytest.approx(3 / 4)
    assert bubble_fraction(4, 8) == pytest.approx(3 / 11)
    assert bubble_fraction(8, 32) == pytest.approx(7 / 39)
    with pytest.raises(AIAdvisorError):
        bubble_fraction(0, 4)


def test_interleaved_bubble_by_hand():
    # Megatron-LM (Narayanan et al. 2021, sec. 2.2.2): bubble time (pp - 1) / (v m) of the
    # ideal step. pp 16, m 32, v 4: 15 / 128 of the ideal -> fraction 15 / (128 + 15).
    assert bubble_fraction(16, 32, 4) == pytest.approx(15 / 143)
    f = bubble_fraction(4, 8, 2)
    assert f / (1 - f) == pytest.approx(3 / 16)     # half of plain 1F1B's 3 / 8
    assert bubble_fraction(4, 8, 1) == bubble_fraction(4, 8)
    with pytest.raises(AIAdvisorError, match="virtual_stages=0"):
        bubble_fraction(4, 8, 0)


def test_stage_imbalance_megatron_partition_by_hand():
    # 5 blocks of 1 s on 2 stages: 3 + embedding 0.5 s on the first, 2 + head and loss 2 s
    # on the last: stages 3.5 and 4 s, average (5 + 0.5 + 2) / 2 = 3.75 s.
    assert stage_imbalance(5.0, 0.5, 2.0, pp_degree=2, num_blocks=5) == pytest.approx(4 / 3.75)
    # 10 blocks on 4 stages: 3, 3, 2, 2 blocks; nothing outside the blocks: a middle stage
    # with 3 blocks is as slow as the first, 3 / 2.5.
    assert stage_imbalance(10.0, 0.0, 0.0, pp_degree=4, num_blocks=10) == pytest.approx(1.2)
    # balanced: 8 blocks on 4 stages, nothing else
    assert stage_imbalance(8.0, 0.0, 0.0, pp_degree=4, num_blocks=8) == pytest.approx(1.0)
    # vectorised over (quantile, device) arrays
    out = stage_imbalance(np.array([8.0, 4.0]), np.zeros(2), np.array([2.0, 4.0]),
                          pp_degree=4, num_blocks=8)
    assert out == pytest.approx([4 / 2.5, 5 / 2.0])
    with pytest.raises(AIAdvisorError, match="pp_degree=0"):
        stage_imbalance(1.0, 0.0, 0.0, pp_degree=0, num_blocks=4)
