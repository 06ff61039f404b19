"""Per-device numbers the cost model needs, as arrays over a list of devices.

Shrinkage: the learned curves come from NVIDIA GPUs spanning a range of peaks and bandwidths.
For a device outside that range, or of another vendor or kind, the prediction is blended toward
the class's time-weighted median slow-down: weight ``w = exp(-d / 0.3)`` where ``d`` is how far
(in decades, peak and bandwidth added) the device lies outside the training range; other GPU
vendors get ``w / 2``; TPUs, NPUs, CPUs and edge devices ``w = 0`` unless benchmarked here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..schema import HardwareSpec
from .facts import above_peak_log_ratio, cpu_matrix_log_adjustment, matmul_log_adjustment
from .model import LOW_POWER_TDP_W, EfficiencyModel
from .precision import (
    attention_peak_tflops,
    gemm_bytes_scale,
    gemm_peak_tflops,
    uses_matrix_engine,
    vector_peak_tflops,
)

#: Per-op fixed cost when the spec has no measured figure: eager PyTorch on a GPU keeps about one
#: kernel in flight per few microseconds of host dispatch (PyTorch's own RuntimeEstimator ignores
#: it; NeuSight's kernel timings show a 25-35 us per-call floor with events around each call).
#: A CPU: the attached one not benchmarked takes the per-op cost timed at detection
#: (:func:`aiadvisor.hardware.detection.anchored_cpu_spec`), a catalog CPU this figure.
DEFAULT_LAUNCH_US = {"gpu": 4.0, "tpu": 4.0, "npu": 4.0, "edge": 8.0, "cpu": 5.0}
#: Bandwidth assumed when a spec has no interconnect figure: PCIe 4.0 x16, both directions.
DEFAULT_INTERCONNECT_GBS = 64.0
SHRINK_SCALE_DECADES = 0.3


def launch_s(spec: HardwareSpec) -> float:
    us = spec.launch_overhead_us
    if us is None or not math.isfinite(us) or us <= 0:
        us = DEFAULT_LAUNCH_US.get(spec.kind, 4.0)
    return us * 1e-6


@dataclass(frozen=True)
class SpecColumns:
    """Per-spec figures that do not depend on the precision, computed once per device list."""

    log_bw: np.ndarray
    nvidia: np.ndarray
    trusted: np.ndarray
    """GPUs, or devices benchmarked here: the learned curves may apply."""
    vector_peak_tflops: np.ndarray
    bw_gbs: np.ndarray
    launch_s: np.ndarray
    low_power: np.ndarray
    tensor_low_power: np.ndarray
    """Power-limited GPUs: the compute side of their tensor-core GEMMs is slowed
    (:func:`~aiadvisor.costmodel.predict.power_limited_compute`); edge modules and NPUs under
    the same power are not PCIe boards like those the slow-down was measured on."""
    interconnect_gbs: np.ndarray

    @classmethod
    def of(cls, specs: Sequence[HardwareSpec]) -> SpecColumns:
        bw = np.array([s.memory_bw_gbs or 1.0 for s in specs], float)
        low_power = np.array([s.tdp_w is not None and s.tdp_w <= LOW_POWER_TDP_W for s in specs])
        return cls(
            log_bw=np.log10(bw), nvidia=np.array([s.vendor.upper() == "NVIDIA" for s in specs]),
            trusted=np.array([s.kind == "gpu" or s.measured for s in specs]),
            vector_peak_tflops=np.array([vector_peak_tflops(s) for s in specs], float),
            bw_gbs=bw, launch_s=np.array([launch_s(s) for s in specs], float),
            low_power=low_power,
            tensor_low_power=low_power & np.array([s.kind == "gpu" for s in specs]),
            interconnect_gbs=np.array([s.interconnect_bw_gbs or DEFAULT_INTERCONNECT_GBS
                                       for s in specs], float),
        )


def shrink_weights(cols: SpecColumns, model: EfficiencyModel, key: str,
                   peak_tflops: np.ndarray) -> np.ndarray:
    """How much of the learned curve to trust on each spec (1 = fully, 0 = class median)."""
    table = model.table(key)
    log_peak = np.log10(np.asarray(peak_tflops, float))
    (p_lo, p_hi), (b_lo, b_hi) = table.peak_log10_range, table.bw_log10_range
    d = (np.maximum(np.maximum(p_lo - log_peak, log_peak - p_hi), 0.0)
         + np.maximum(np.maximum(b_lo - cols.log_bw, cols.log_bw - b_hi), 0.0))
    w = np.exp(-d / SHRINK_SCALE_DECADES)
    return np.where(cols.trusted, np.where(cols.nvidia, w, w / 2), 0.0)


@dataclass(frozen=True)
class DeviceArrays:
    """Numbers of ``D`` devices at one precision, each shaped ``(D, 1)`` to broadcast over ops."""

    specs: tuple[HardwareSpec, ...]
    gemm_peak_tflops: np.ndarray
    vector_peak_tflops: np.ndarray
    bw_gbs: np.ndarray
    launch_s: np.ndarray
    matrix_engine: np.ndarray
    low_power: np.ndarray
    """TDP <= 100 W: the power-limited tables apply (where the model has them)."""
    tensor_low_power: np.ndarray
    """Power-limited GPUs, whose tensor-core GEMMs lose clock on their compute side."""
    shrink: dict[str, np.ndarray]
    interconnect_gbs: np.ndarray
    """Vendor per-device interconnect figure (both directions added), GB/s."""
    matmul_adjust: np.ndarray
    compute_floor: np.ndarray = 0.0
    """Lowest log slow-down of a GEMM-like op's compute side on each device: 0 (the rated
    peak), below where a published rate exceeds it (:func:`~aiadvisor.costmodel.facts.
    above_peak_log_ratio`)."""
    attention_peak_tflops: np.ndarray | None = None
    """Peak of the attention core's engine where it differs from ``gemm_peak_tflops`` (None:
    the same): 16 bit under ``fp4`` (:func:`~aiadvisor.costmodel.precision.
    attention_peak_tflops`)."""
    gemm_bytes_scale: np.ndarray | None = None
    """Multiplier of GEMM-like ops' bytes on each device (None: 1): ``fp4`` on an MXFP4 device
    moves 4.25/4.5 of the NVFP4 bytes the work was converted to
    (:func:`~aiadvisor.costmodel.precision.gemm_bytes_scale`)."""


def device_arrays(specs: Sequence[HardwareSpec], precision: str, model: EfficiencyModel,
                  cols: SpecColumns | None = None) -> DeviceArrays:
    """Arrays for ``specs`` at ``precision`` (every spec must support it); ``cols`` may carry
    the precision-independent columns already computed for the same specs."""
    cols = cols or SpecColumns.of(specs)
    gemm = np.array([gemm_peak_tflops(s, precision) for s in specs], float)
    matrix = np.array([uses_matrix_engine(s, precision) for s in specs], bool)
    shrink = {}
    for key in model.tables:
        peaks = gemm if key.startswith(("gemm/", "conv/")) else cols.vector_peak_tflops
        shrink[key] = shrink_weights(cols, model, key, peaks)[:, None]
    return DeviceArrays(
        specs=tuple(specs), gemm_peak_tflops=gemm[:, None],
        vector_peak_tflops=cols.vector_peak_tflops[:, None], bw_gbs=cols.bw_gbs[:, None],
        launch_s=cols.launch_s[:, None], matrix_engine=matrix[:, None],
        low_power=cols.low_power[:, None], tensor_low_power=cols.tensor_low_power[:, None],
        shrink=shrink,
        interconnect_gbs=cols.interconnect_gbs[:, None],
        # Tensor cores: published MAMF fractions at this precision; CPU matrix units (AMX):
        # their measured share.
        matmul_adjust=np.where(
            matrix, [0.0 if s.measured else matmul_log_adjustment(s, precision) for s in specs],
            [cpu_matrix_log_adjustment(s, precision) for s in specs])[:, None],
        compute_floor=np.array([0.0 if s.measured or not m else
                                -above_peak_log_ratio(s)
                                for s, m in zip(specs, matrix)], float)[:, None],
        attention_peak_tflops=(np.array([attention_peak_tflops(s, precision) for s in specs],
                                        float)[:, None] if precision == "fp4" else None),
        gemm_bytes_scale=(np.array([gemm_bytes_scale(s, precision) for s in specs],
                                   float)[:, None] if precision == "fp4" else None),
    )


def familiarity(devs: DeviceArrays, model: EfficiencyModel) -> np.ndarray:
    """Mean shrink weight (D,) of the GEMM and elementwise tables each device actually uses:
    how close it is to the measured devices (1 = inside their range)."""
    out = np.zeros(len(devs.specs))
    for engine in (False, True):
        for low in (False, True):
            rows = (devs.matrix_engine[:, 0] == engine) & (devs.low_power[:, 0] == low)
            if rows.any():
                gemm = model.table_key("gemm/tensor" if engine else "gemm/simt", low_power=low)
                mem = model.table_key("elementwise/any", low_power=low)
                out[rows] = (devs.shrink[gemm][rows, 0] + devs.shrink[mem][rows, 0]) / 2
    return out
