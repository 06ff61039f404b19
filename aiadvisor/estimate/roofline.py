"""The roofline: an op takes at least its FLOPs over the peak and its bytes over the bandwidth."""

from __future__ import annotations

import numpy as np


def roofline_time_s(flops, num_bytes, *, peak_tflops, bw_gbs, launch_s=0.0):
    """Roofline time of an op (or arrays of ops): ``max(flops / peak, bytes / bw) + launch``.

    Parameters
    ----------
    flops, num_bytes : float or array
        FLOPs and bytes moved (read + written) by one op call.
    peak_tflops : float or array
        Dense peak of the engine that runs the op, TFLOP/s (1e12 FLOP/s).
    bw_gbs : float or array
        Memory bandwidth, GB/s (1e9 bytes/s).
    launch_s : float or array, default 0
        Fixed cost per call (kernel launch, dispatch), seconds.

    Returns
    -------
    float or numpy.ndarray
        Seconds; broadcasts like numpy.

    Examples
    --------
    A 4096^3 GEMM (2 * 4096**3 = 1.374e11 FLOPs) on a 1000 TFLOP/s device is 137 us of compute;
    its 3 bf16 matrices (1.0e8 bytes) take 34 us at 3000 GB/s, so it is compute bound:

    >>> round(roofline_time_s(2 * 4096**3, 3 * 2 * 4096**2, peak_tflops=1000, bw_gbs=3000) * 1e6, 1)
    137.4
    """
    compute_s = np.asarray(flops, dtype=float) / (np.asarray(peak_tflops, dtype=float) * 1e12)
    memory_s = np.asarray(num_bytes, dtype=float) / (np.asarray(bw_gbs, dtype=float) * 1e9)
    out = np.maximum(compute_s, memory_s) + launch_s
    return float(out) if np.ndim(out) == 0 else out


def ridge_point(peak_tflops, bw_gbs):
    """Arithmetic intensity (FLOP/byte) where an op turns from memory- to compute-bound.

    >>> ridge_point(1000, 3000)  # 1e15 FLOP/s / 3e12 B/s
    333.3333333333333
    """
    out = np.asarray(peak_tflops, dtype=float) * 1e12 / (np.asarray(bw_gbs, dtype=float) * 1e9)
    return float(out) if np.ndim(out) == 0 else out
