"""Step time of a profile on devices: ops x learned efficiency + optimizer + communication +
pipeline bubble + recompute, vectorised over devices.

Everything here works on arrays shaped ``(Q, D, N)``: Q = 3 quantiles (P10, P50, P90 of the
learned slow-down), D devices, N op records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..estimate.collectives import (
    DDP_BUCKET_BYTES,
    bubble_fraction,
    collective_time_s,
    exposed_time_s,
    hierarchical_time_s,
    stage_imbalance,
)
from ..hardware.calibrate import base_op
from ..hardware.fabrics import Network
from ..schema import HardwareSpec, ModelProfile, ParallelConfig
from ..units import FUSED_SUFFIX, OPTIMIZER_TRAFFIC, UNFUSED_OPTIMIZER_TENSORS, fmt_bytes
from .devices import DeviceArrays
from .host import (
    HostCounts,
    accelerator_host_s,
    cpu_host_extra_s,
    host_counts,
    python_fixed_s,
    without_python,
)
from .layout import LAYOUT_TRANSPOSE_OP
from .local import LocalCalibration, op_family
from .model import LOW_POWER_SUFFIX, MAX_LOG_SLOWDOWN, QUANTILES, EfficiencyModel, op_features
from .ops import (
    AUTOCAST_ISLAND_OP,
    NF4_DEQUANT_BYTES,
    DeviceWork,
    OpArrays,
    amp_cast_bytes,
    autocast_islands,
    autocast_upcasts,
    byte_factors,
    device_work,
    nf4_dequantizes,
    pool_index_bytes,
)
from .precision import DTYPE_BYTES, GEMM_ACT_BYTES, MEMORY_ACT_BYTES

_QUANTILE_SIGN = np.array([-1.0, 0.0, 1.0])  # P10, P50, P90
#: Which quantiles take a power-limited board's sustained slow-down (P10: a burst does not).
_SUSTAINED = np.array([0.0, 1.0, 1.0])
#: Extra spread of the log slow-down when a device is unlike the training devices (w -> 0).
UNFAMILIAR_SPREAD = 0.4
#: Extra spread when the precision has no measured data (TF32, FP8, MXFP8, FP4, INT8, INT4,
#: NF4).
UNMEASURED_PRECISION_SPREAD = 0.25
#: Communication time interval: the alpha-beta fit is within this band of Vidur's NCCL times
#: for messages over 1 MB (bench/costmodel_collectives.py).
COMM_LOW, COMM_HIGH = 0.8, 1.5
#: Spread (log units) added in quadrature to the P10/P90 band of a step that spans nodes: what
#: the layout, network and op efficiencies leave out (a training stack's own host, sync and
#: scheduling costs, configurations their sources state loosely). The smallest value on a
#: 0.01 grid that puts >= 80 % of bench/costmodel_multinode.py's published rows inside their
#: band (that bench prints the leave-one-row-out coverage of choosing it that way). With the
#: bench's 21 rows that value is 0: 19 of them fall inside the band without it.
MULTINODE_SPREAD = 0.0
#: Spread (log units) added in quadrature to the P10/P90 band of every step an accelerator is
#: priced for by the learned model (not a benchmarked device): what summing each op's own
#: P10/P90 leaves out of a whole step (the ops' errors are not all of one sign, the step's
#: structure is not all in its ops). Calibrated on NeuSight's measured FP32 steps, each
#: predicted with its GPU left out of the fit (bench/costmodel_e2e_logo.py, which prints the
#: coverage and this calibration): the smallest value on a 0.01 grid that puts >= 80 % of its
#: NVIDIA rows inside their band.
STEP_SPREAD = 0.14
#: Spread (log units) added in quadrature to the P10/P90 band of every step on a CPU that was
#: not benchmarked (the attached CPU before ``aiadvisor calibrate`` / ``hardware="local"``, or a
#: catalog CPU): its peaks are estimated (ISA flags and clock, or a datasheet) and its ops are
#: priced with efficiency curves learned on NVIDIA GPUs. Without it the band held the measured
#: step in 31 of 44 timings (bench/cpu_estimate_band.py: the eleven models of
#: bench/costmodel_local_cpu.py, tuned and held out, training and inference, two rounds on the
#: 2-core development CPU; the estimate was 19.5 % off on average, LSTM/GRU steps up to 47 %
#: slow, a small CNN's inference 44 % fast). The value is the rule of :data:`STEP_SPREAD` on
#: those timings: the smallest on a 0.01 grid that puts >= 80 % inside their band; picked
#: leaving each configuration out, 35 of the 44 fell inside. Checked on a second CPU (2-core
#: Intel Xeon VM with AMX, 2026-12-07, ``--tag xeon``): estimate 20.9 % off on average (a small
#: CNN up to 58 % fast, a GRU up to 55 % slow), 36 of 44 timings inside with 0.26 (32 without);
#: after :data:`CPU_SLOW_OP_BANDWIDTH`, 17.3 % off (signed +8.2 %) and 41 of 44 inside.
ESTIMATED_CPU_SPREAD = 0.26


def stack_band(step_s, low_s, high_s, *, spans_nodes: bool | np.ndarray,
               learned: bool | np.ndarray = False, estimated_cpu: bool | np.ndarray = False):
    """(low, high) widened in quadrature by :data:`MULTINODE_SPREAD` where ``spans_nodes``,
    by :data:`STEP_SPREAD` where ``learned`` and by :data:`ESTIMATED_CPU_SPREAD` where
    ``estimated_cpu`` (each a bool or an array of them, one per device):
    ``low' = step exp(-sqrt(ln(step / low)^2 + s^2))``, likewise ``high'``.

    >>> lo, hi = stack_band(1.0, 0.9, 1.2, spans_nodes=False)
    >>> (lo, hi)
    (0.9, 1.2)
    """
    spread = np.sqrt(np.where(spans_nodes, MULTINODE_SPREAD, 0.0) ** 2
                     + np.where(learned, STEP_SPREAD, 0.0) ** 2
                     + np.where(estimated_cpu, ESTIMATED_CPU_SPREAD, 0.0) ** 2)
    if not np.any(spread > 0):
        return low_s, high_s
    step = np.asarray(step_s, float)
    down = np.hypot(np.log(step / np.asarray(low_s, float)), spread)
    up = np.hypot(np.log(np.asarray(high_s, float) / step), spread)
    low, high = step * np.exp(-down), step * np.exp(up)
    return (float(low), float(high)) if np.ndim(low) == 0 else (low, high)


#: Overlap of gradient all-reduce with backward (DDP buckets) and of FSDP all-gathers with
#: compute (prefetch): up to 80 % hidden, never the last bucket.
OVERLAP = 0.8
#: Offload: effective host<->device bandwidth of PCIe 4.0 x16 (32 GB/s nominal per direction;
#: ~25 GB/s achieved with pinned memory) and the host memory bandwidth a CPU optimizer step
#: sustains (DeepSpeed CPU-Adam streams ~16-28 bytes per parameter).
PCIE_GBS = 25.0
HOST_OPTIMIZER_GBS = 50.0


@dataclass
class StepParts:
    """Per-device step components, each shaped ``(Q, D)`` (seconds)."""

    compute_s: np.ndarray
    memory_s: np.ndarray
    overhead_s: np.ndarray
    communication_s: np.ndarray
    notes: list[str] = field(default_factory=list)
    host_s: np.ndarray | None = None
    """Host time of the step in eager PyTorch, (Q, D) (see :mod:`aiadvisor.costmodel.host`)."""
    graphs_s: np.ndarray | None = None
    """The step with CUDA graphs (host part removed), (Q, D); NaN where not applicable."""
    amp_cast_s: np.ndarray | None = None
    """Kernel seconds of the casts autocast adds to an FP32-traced training step, (Q, D); part
    of ``memory_s``/``compute_s``."""

    @property
    def total_s(self) -> np.ndarray:
        return self.compute_s + self.memory_s + self.overhead_s + self.communication_s


def table_keys(op_class: np.ndarray, norm: np.ndarray, matrix_engine: bool) -> np.ndarray:
    """The efficiency table of each op: GEMM-like ops by engine; memory-bound ops as
    normalisations/reductions (``norm``: two passes, lower efficiency) or elementwise.

    Attention has no training data of its own: it uses the GEMM curve of its engine. Convolutions
    on tensor cores use the tensor-core GEMM curve (no tensor-core conv data).
    """
    gemm = "gemm/tensor" if matrix_engine else "gemm/simt"
    conv = "gemm/tensor" if matrix_engine else "conv/simt"
    return np.select([np.isin(op_class, ("gemm", "attention")), op_class == "conv",
                      op_class == "embedding", norm],
                     [gemm, conv, "embedding/any", "norm/any"], "elementwise/any")


def _model_keys(model: EfficiencyModel, base_keys: np.ndarray, low_power: bool) -> np.ndarray:
    """Each op's table in ``model`` (the power-limited variant where one applies)."""
    if not low_power:
        return base_keys
    mapping = {k: model.table_key(k, low_power=True) for k in np.unique(base_keys)}
    return np.array([mapping[k] for k in base_keys])


#: Power-limited GPUs (``tdp_w <= 100``: T4, L4) have no tensor-core timings in the training
#: data. What their power limit does to compute-bound work is read off the FP32 GEMMs NeuSight
#: timed on T4, L4 and P4 against big boards at the same device-relative features
#: (``gemm/simt@lowpower`` minus ``gemm/simt``, P50: 1.6-2.2x once compute-bound); it is applied
#: to the compute side of their tensor-core GEMMs only, since the limit takes away SM clock,
#: not memory bandwidth (memory-bound ops keep the power-limited memory tables' figures).
#: Assumed: the tensor cores lose the clock as the FP32 pipes do.
CLOCK_TABLES = ("gemm/simt", "gemm/simt" + LOW_POWER_SUFFIX)


def power_limited_compute(work: DeviceWork, devs: DeviceArrays, model: EfficiencyModel,
                          f1: np.ndarray, f2: np.ndarray, engine_op: np.ndarray) -> np.ndarray:
    """Extra log slow-down (D, N) of the compute side of tensor-core GEMM-like ops on
    power-limited GPUs (:data:`CLOCK_TABLES`); 0 elsewhere and on benchmarked devices."""
    out = np.zeros(f1.shape)
    rows = (devs.tensor_low_power[:, 0] & devs.matrix_engine[:, 0]
            & ~np.array([s.measured for s in devs.specs], bool))
    if not rows.any() or not all(k in model.tables for k in CLOCK_TABLES):
        return out
    big, low = (model.table(k) for k in CLOCK_TABLES)
    delta = np.maximum(low.log_slowdown(f1[rows], f2[rows]) - big.log_slowdown(f1[rows],
                                                                                  f2[rows]), 0.0)
    out[rows] = np.where(engine_op[rows], delta, 0.0)
    return out


def attention_ops(work: DeviceWork) -> np.ndarray:
    """The attention core among the matrix-engine ops: fused attention, and the batched GEMMs
    of eager attention (scores and weighted sum)."""
    return (work.op_class == "attention") | ((work.op_class == "gemm") & work.attention_core)


def device_bytes(work: DeviceWork, devs: DeviceArrays) -> np.ndarray:
    """Bytes per call of each op, (N,), or (D, N) where a device's format moves other bytes
    than the work was converted to (:attr:`DeviceArrays.gemm_bytes_scale`: FP4 on MXFP4, on
    the W4A4 GEMMs, not on the 16-bit attention)."""
    if devs.gemm_bytes_scale is None:
        return work.bytes_per_call
    w4a4 = np.isin(work.op_class, ("gemm", "conv")) & ~attention_ops(work)
    return work.bytes_per_call * np.where(w4a4, devs.gemm_bytes_scale, 1.0)


def log_slowdowns(work: DeviceWork, devs: DeviceArrays, model: EfficiencyModel,
                  *, measured_precision: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Learned ``log(t / t_roofline)`` of every op on every device, shaped (Q, D, N), the
    per-op peak (D, N) and the extra log slow-down (Q, D, N) of the ops' compute side alone
    (published achievable-matmul fractions, :func:`power_limited_compute`)."""
    gemm_like = np.isin(work.op_class, ("gemm", "conv", "attention"))
    # A CPU's attention kernels (PyTorch's flash attention for CPU) do not run on its matrix
    # engine: priced at the vector (FP32) peak in every precision. Development CPU (2-core Xeon
    # VM with AMX, tiny-gpt training at 8 x 512, median of 2 profiled steps): forward 32.2 ms in
    # FP32 and 15.2 ms under bf16 autocast, backward 71.6 and 70.9 ms, where bf16 GEMMs ran
    # 3.7x their FP32 time.
    cpu = np.array([spec.kind == "cpu" for spec in devs.specs])[:, None]
    engine_op = gemm_like[None, :] & ~(cpu & (work.op_class == "attention")[None, :])
    engine_peak = devs.gemm_peak_tflops
    if devs.attention_peak_tflops is not None:
        engine_peak = np.where(attention_ops(work)[None, :], devs.attention_peak_tflops,
                               devs.gemm_peak_tflops)
    peak = np.where(engine_op, engine_peak, devs.vector_peak_tflops)
    f1, f2 = op_features(work.flops_per_call / work.feature_divisor,
                         device_bytes(work, devs) / work.feature_divisor, peak, devs.bw_gbs)
    y = np.zeros((len(QUANTILES),) + f1.shape)
    for engine, low_power in ((False, False), (False, True), (True, False), (True, True)):
        rows = (devs.matrix_engine[:, 0] == engine) & (devs.low_power[:, 0] == low_power)
        if not rows.any():
            continue
        keys = _model_keys(model, table_keys(work.op_class, work.norm, engine), low_power)
        for key in np.unique(keys):
            cols = keys == key
            table = model.table(key)
            w = devs.shrink[key][rows]
            spread = (1 - w) * UNFAMILIAR_SPREAD + (0 if measured_precision else
                                                    UNMEASURED_PRECISION_SPREAD)
            sub = np.ix_(rows, cols)
            learned = table.log_slowdowns(f1[sub], f2[sub])
            value = w * learned + (1 - w) * table.median_log_slowdown
            y[(slice(None),) + sub] = value + spread * _QUANTILE_SIGN[:, None, None]
    # The compute side of GEMM-like ops on matrix engines: published achievable-matmul
    # fractions (facts.py: a device's compute-bound GEMMs against the curve's GPUs; they say
    # nothing of its memory-bound GEMVs) and the clock a power limit takes away.
    # The power limit is a sustained effect: a short burst runs before the clock settles (a
    # quick torch.mm table reads a T4 at 42 and an L4 at 55-71 TFLOP/s, where this prices
    # 22-29 and 41-54), so the P10 leaves it out and the P50/P90 keep it.
    compute = (np.where(engine_op, devs.matmul_adjust, 0.0)[None]
               + power_limited_compute(work, devs, model, f1, f2, engine_op)[None]
               * _SUSTAINED[:, None, None])
    return np.clip(y, 0.0, MAX_LOG_SLOWDOWN), peak, compute


#: Benchmarked devices: spread of the P10/P90 around the curve-based prediction.
#: +-20 %: on the 2-core development machine the calibrated predictions' APE had a P90 of 19-21 %
#: over 12 configurations (bench/costmodel_local_cpu.py), and the same measured step varied by a
#: median of 17-21 % (max - min over 4 rounds of one run): the band is about that noise.
MEASURED_SPREAD = np.log(1.2)
#: Benchmarked CPUs: the ops of a step take this much longer than the calibration's timings of
#: the same ops alone say. Timed op by op inside whole steps on the development CPU (each op's
#: window in place against the same call replayed on cloned arguments), ops ran 1.07-1.21x
#: slower in training steps and 1.02-1.12x in inference (its inputs written long before, the
#: cache and TLB state the ops before it left); neither thread wake-up (the same with
#: ``OMP_WAIT_POLICY=ACTIVE``) nor the timing statistic (mean / median 1.00-1.03) explains it,
#: and a factor timed on reference models at calibration scattered 0.98-1.27 between runs.
#: FITTED: the median measured / predicted step over the 12 tuned configurations of
#: bench/costmodel_local_cpu.py on 2026-12-06 (1.039; the held-out five models, train and
#: infer, are the check), on one 2-core AMD EPYC VM.
CPU_IN_STEP_FACTOR = 1.04


def _curve_slowdowns(curve, work: DeviceWork) -> np.ndarray:
    """log(peak / achieved) of GEMM-like ops from a measured matmul curve ``[(n, tflops)]``:
    achieved TFLOP/s at the op's size (2 n^3 FLOPs), interpolated in log FLOPs and flat beyond
    the measured sizes, over the best measured figure (the spec's peak)."""
    curve = sorted(curve)
    sizes = np.log([2.0 * n**3 for n, _ in curve])
    # A bigger square matmul never runs at a lower rate on an idle device: a dip between sizes
    # is timing noise (a shared machine), so the curve is made non-decreasing.
    frac = np.maximum.accumulate(np.array([t for _, t in curve]) / max(t for _, t in curve))
    flops = np.maximum(work.flops_per_call / work.feature_divisor, 1.0)
    return -np.log(np.maximum(np.interp(np.log(flops), sizes, frac), 1e-3))


def op_times(work: DeviceWork, devs: DeviceArrays, model: EfficiencyModel, *,
             measured_precision: bool, curves=None,
             op_dtypes: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-op seconds split into compute-bound, memory-bound and launch parts, (Q, D, N) each.

    Learned devices: ``max(F/P * exp(y + c), B/W * exp(y)) + launch * exp(y)``, where ``c``
    moves the compute side alone (:func:`log_slowdowns`). Benchmarked devices (``curves``: one
    :class:`~aiadvisor.costmodel.local.LocalCalibration` or None per device):
    GEMM-like ops take ``max(F / (P * eff(F)), B / W) + launch`` with the measured peak,
    bandwidth and per-op overhead and the GEMM efficiency ``eff`` read off the measured matmul
    curve; ops and optimizer steps the device's op grid timed (by name or family, in the dtype
    ``op_dtypes`` says each op runs in) take the measured time at their size; the rest the
    roofline on the measured figures (P10/P90 +-20 %).
    """
    y, peak, compute = log_slowdowns(work, devs, model, measured_precision=measured_precision)
    y_memory = y_launch = y
    # Never faster than the peak, or than the best rate published for the device where that
    # is above its rated peak (GeForce cards boost past their rated clock).
    y_compute = np.clip(y + compute, devs.compute_floor, MAX_LOG_SLOWDOWN)
    cals = list(curves or [])
    if any(c is not None for c in cals):
        y_compute, y_memory, y_launch = y_compute.copy(), y.copy(), y.copy()
        gemm_like = np.isin(work.op_class, ("gemm", "conv", "attention"))
        for d, cal in enumerate(cals):
            if cal is not None:
                curve = cal.matmul
                base = (np.where(gemm_like, _curve_slowdowns(curve, work), 0.0) if curve
                        else y_compute[1, d, :])
                y_compute[:, d, :] = base + MEASURED_SPREAD * _QUANTILE_SIGN[:, None]
                y_memory[:, d, :] = MEASURED_SPREAD * _QUANTILE_SIGN[:, None]
                y_launch[:, d, :] = 0.0
    compute_s = work.flops_per_call / (peak * 1e12) * np.exp(y_compute)
    memory_s = device_bytes(work, devs) / (devs.bw_gbs * 1e9) * np.exp(y_memory)
    _cpu_slow_op_floor(memory_s, work, devs, cals)
    compute_bound = compute_s >= memory_s
    body = np.maximum(compute_s, memory_s) * work.count
    parts = {
        "compute": np.where(compute_bound, body, 0.0),
        "memory": np.where(compute_bound, 0.0, body),
        "overhead": devs.launch_s * np.exp(y_launch) * work.count,
    }
    for d, cal in enumerate(cals):
        if cal is not None and (cal.curves or cal.optimizer):
            _measured_op_times(parts, d, cal, work, float(devs.launch_s[d, 0]), op_dtypes)
    return parts


#: CPUs priced without a benchmark: ops whose CPU kernels run far below the memory bandwidth,
#: as the share of the streaming bandwidth they reach (bytes as the profiler counts them). The
#: learned curves price every memory-bound op as NVIDIA GPUs run it (about 0.9 of the bandwidth
#: for elementwise ops); these two do more than stream their bytes on a CPU: a max pool compares
#: each window and writes an index per output, and a training batch norm passes over its input
#: once for the statistics and again to normalise. The share is the median over the op grid's
#: sizes below the largest (whose first touch of fresh pages dominates), less the per-op
#: overhead, of the development CPU's calibration (data/calibration/amd-epyc-2core-vm.json: max
#: pool 0.094 / 0.068 / 0.058, batch norm 0.153 / 0.197 / 0.185). A second CPU's calibration
#: read 0.09-0.11 and 0.21-0.34 (2-core Xeon VM with AMX, 2026-12-07). There, priced at the
#: learned curves' share, the unbenchmarked step of a small CNN read 48-55 % fast; repriced
#: with these floors against the same timings, 12 % fast (training) and 15 % slow (inference),
#: and the eleven models of bench/cpu_estimate_band.py 17.4 % off on average instead of 21.3 %
#: (signed +2.0 -> +7.2 %; the bench rerun with them: 17.3 %, +8.2 %, 41 of 44 inside the band).
#: That CPU's timings were seen while choosing the ops, so it is not a held-out check. Left
#: out: ``bernoulli_`` (eager dropout on a CPU), which the two calibrations run at 0.025 and
#: 0.045 of the bandwidth: a random number per element is compute, not bandwidth, so a share
#: of the bandwidth does not carry from one CPU to another; floored at 0.025, BERT-style and
#: ``nn.TransformerEncoder`` training went from 7 and 17 % fast to 24 and 30 % slow on the
#: second CPU. The attached CPU now times its own draws instead
#: (:func:`_cpu_random_draws`). A floor: an op the curves already price slower keeps its time.
CPU_SLOW_OP_BANDWIDTH = {"aten.max_pool2d_with_indices": 0.068, "aten.native_batch_norm": 0.185}


def _cpu_slow_op_floor(memory_s: np.ndarray, work: DeviceWork, devs: DeviceArrays,
                       cals: list) -> None:
    """Raise the memory time (Q, D, N) of :data:`CPU_SLOW_OP_BANDWIDTH`'s ops on CPUs without a
    calibration to their bytes at that share of the bandwidth, every quantile by the median's
    ratio (in place)."""
    share = np.array([CPU_SLOW_OP_BANDWIDTH.get(str(n), 0.0) for n in work.name])
    if not share.any():
        return
    slow = share > 0
    nbytes = np.broadcast_to(device_bytes(work, devs), memory_s.shape[1:])
    for d, spec in enumerate(devs.specs):
        if spec.kind != "cpu" or (cals and cals[d] is not None):
            continue
        floor = nbytes[d, slow] / (float(devs.bw_gbs[d, 0]) * 1e9 * share[slow])
        ratio = np.maximum(floor / np.maximum(memory_s[1, d, slow], 1e-30), 1.0)
        memory_s[:, d, slow] *= ratio


def _measured_op_times(parts: dict[str, np.ndarray], d: int, cal: LocalCalibration,
                       work: DeviceWork, launch: float, op_dtypes: np.ndarray | None) -> None:
    """Overwrite device ``d``'s times of the ops its calibration timed (in place)."""
    # Recurrent layers run seq_len small steps a call: looked up at the per-step size (the
    # grid times them per step), times the steps.
    steps = np.maximum(work.feature_divisor, 1.0)
    families = np.array(["recurrent" if div > 1 else op_family(n, c, ph) for n, c, ph, div in
                         zip(work.name, work.op_class, work.phase, work.feature_divisor)],
                        dtype=object)
    written = work.written_per_call
    weight_bytes = math.inf   # the forward GEMMs' weights a step reads (unknown: no record)
    if work.weight_per_call is not None and (work.weight_per_call > 0).any():
        size = np.array([DTYPE_BYTES.get(str(t), 4.0) for t in op_dtypes]) \
            if op_dtypes is not None else 4.0
        weight_bytes = float((work.weight_per_call * work.count * size).sum())
    total = cal.op_seconds(work.name, families, work.bytes_per_call / steps,
                           work.flops_per_call / steps, op_dtypes,
                           weight_elements=work.weight_per_call,
                           written_bytes=None if written is None else written / steps,
                           step_weight_bytes=weight_bytes) * steps * work.count
    for i in np.flatnonzero(work.op_class == "optimizer"):
        t = cal.optimizer_seconds(str(work.name[i]), float(work.count[i]),
                                  float(work.flops_per_call[i] * work.count[i]),
                                  work.optimizer_large_elements)
        if t is not None:
            total[i] = t
    hit = np.isfinite(total)
    if not hit.any():
        return
    overhead = np.minimum(launch * work.count, total)
    body = (total - overhead)[None, :] * np.exp(MEASURED_SPREAD * _QUANTILE_SIGN)[:, None]
    compute = hit & np.isin(work.op_class, ("attention", "gemm", "conv"))
    memory = hit & ~compute
    parts["compute"][:, d, compute] = body[:, compute]
    parts["compute"][:, d, memory] = 0.0
    parts["memory"][:, d, memory] = body[:, memory]
    parts["memory"][:, d, compute] = 0.0
    parts["overhead"][:, d, hit] = overhead[hit]


def _unbenchmarked_cpus(devs: DeviceArrays, curves) -> list[tuple[int, HardwareSpec]]:
    """``(index, spec)`` of the CPUs among ``devs`` priced without a benchmark (no curves)."""
    return [(d, spec) for d, spec in enumerate(devs.specs)
            if spec.kind == "cpu" and not (curves and curves[d] is not None)]


def _cpu_recurrent_anchor(parts: dict[str, np.ndarray], rec: np.ndarray, devs: DeviceArrays,
                          curves, notes: list[str], *, train: bool, batch: float) -> None:
    """On the attached CPU priced without a benchmark, in FP32, scale the compute and memory time
    of the fused recurrent layers (``rec``: :attr:`~.ops.OpArrays.recurrent`, one per op; the
    per-step GEMMs of an unfused GRU are plain GEMMs) by how much longer an LSTM layer took
    here than priced (:func:`~aiadvisor.hardware.detection.recurrent_anchor`, in the profile's
    mode), interpolated in log batch between the batches timed, flat beyond them (in place)."""
    if not rec.any() or batch <= 0:
        return
    from ..hardware.detection import recurrent_anchor

    for d, spec in _unbenchmarked_cpus(devs, curves):
        fit = recurrent_anchor(spec, train=train)
        if fit is None:
            continue
        factor = float(np.exp(np.interp(np.log(batch), *fit)))
        for k in ("compute", "memory"):
            parts[k][:, d, rec] *= factor
        notes.append(f"Recurrent layers: x{factor:.2f} the learned curves' price, as a quick "
                     f"LSTM layer ({', '.join(f'batch {round(math.exp(b))}' for b in fit[0])}) "
                     f"ran here against its price at {spec.name}'s estimated peaks.")


def _cpu_conv_anchor(parts: dict[str, np.ndarray], work: DeviceWork, devs: DeviceArrays,
                     curves, notes: list[str], *, train: bool) -> None:
    """On the attached CPU priced without a benchmark, in FP32, scale the compute and memory time
    of the convolutions (forward and backward) by how much longer a quick convolution took here
    than priced (:func:`~aiadvisor.hardware.detection.conv_anchor`, in the profile's mode),
    interpolated in log FLOPs per byte between the shapes timed, flat beyond them (in place)."""
    rows = work.op_class == "conv"
    if not rows.any():
        return
    from ..hardware.detection import conv_anchor

    intensity = np.log(np.maximum(work.flops_per_call[rows], 1.0)
                       / np.maximum(work.bytes_per_call[rows], 1.0))
    for d, spec in _unbenchmarked_cpus(devs, curves):
        fit = conv_anchor(spec, train=train)
        if fit is None:
            continue
        factors = np.exp(np.interp(intensity, *fit))
        for k in ("compute", "memory"):
            parts[k][:, d, rows] *= factors[None, :]
        lo, hi = np.exp(fit[1][0]), np.exp(fit[1][-1])
        notes.append(f"Convolutions: x{min(lo, hi):.2f}-{max(lo, hi):.2f} the learned curves' "
                     "price, as two quick convolutions (a 3 x 3 layer and a 1 x 1 projection) "
                     f"ran here against their price at {spec.name}'s estimated peaks.")


def _cpu_random_draws(parts: dict[str, np.ndarray], work: DeviceWork, devs: DeviceArrays,
                      curves, notes: list[str]) -> None:
    """On the attached CPU priced without a benchmark, in FP32, eager dropout's ``bernoulli_``
    takes at least its bytes at the rate a quick FP32 ``bernoulli_`` ran here
    (:func:`~aiadvisor.hardware.detection.bernoulli_anchor`), as memory time (in place)."""
    rows = np.array([base_op(str(n)) == "aten.bernoulli_" for n in work.name])
    if not rows.any():
        return
    from ..hardware.detection import bernoulli_anchor

    for d, spec in _unbenchmarked_cpus(devs, curves):
        per_byte = bernoulli_anchor(spec)
        if per_byte is None:
            continue
        drawn = work.bytes_per_call[rows] * work.count[rows] * per_byte
        body = parts["compute"][:, d, rows] + parts["memory"][:, d, rows]
        parts["memory"][:, d, rows] = np.maximum(body, drawn[None, :])
        parts["compute"][:, d, rows] = 0.0
        notes.append(f"Dropout's random draws (bernoulli_): {drawn.sum() * 1e3:.3g} ms a step, "
                     f"at the {per_byte * 8e9:.2g} ns an FP32 element a quick bernoulli_ took "
                     "here.")


def _default_optimizer_steps(parts: dict[str, np.ndarray], work: DeviceWork,
                             devs: DeviceArrays, curves, host_costs) -> None:
    """Price PyTorch's default optimizer step, not the fused one the record's bytes describe (in
    place). On a CPU whose calibration did not time the optimizer: the for-loop step.

    Each update op of the loop streams whole tensors (:data:`~aiadvisor.units.
    UNFUSED_OPTIMIZER_TENSORS`: 20 tensor passes per element for AdamW against the fused
    step's 7), and the loop costs its measured time per parameter tensor
    (:attr:`~aiadvisor.hardware.host.HostCosts.optimizer_tensor_us`) in place of one launch a
    tensor. A ``[fused]`` record (the fused-optimizer tactic) keeps its bytes and one launch.

    On an accelerator PyTorch's default is the for-each implementation: the same update ops
    over lists of tensors (torch 2.13 ``_multi_tensor_adam``: ``_foreach_lerp_``, ``mul_``,
    ``addcmul_``, the decay ``mul_``, ``sqrt``, ``div_``, ``add_``, ``addcdiv_``: 20 tensor
    passes per element for AdamW, as the loop), in a few launches per group of tensors: its
    bytes are the loop's, its launches are the record's."""
    rows = np.flatnonzero(work.op_class == "optimizer")
    for d, spec in enumerate(devs.specs):
        if not len(rows):
            continue
        if spec.kind != "cpu":
            for i in rows:
                opt = str(work.name[i]).removeprefix("optimizer.")
                if opt in UNFUSED_OPTIMIZER_TENSORS:
                    parts["memory"][:, d, i] *= (UNFUSED_OPTIMIZER_TENSORS[opt]
                                                 / OPTIMIZER_TRAFFIC[opt][0])
            continue
        cal = curves[d] if curves else None
        costs = host_costs[d] if host_costs else None
        for i in rows:
            name = str(work.name[i])
            if cal is not None and cal.optimizer_seconds(
                    name, float(work.count[i]),
                    float(work.flops_per_call[i] * work.count[i])) is not None:
                continue  # timed by the calibration (_measured_op_times)
            opt = name.removeprefix("optimizer.").removesuffix(FUSED_SUFFIX)
            if name.endswith(FUSED_SUFFIX) or opt not in UNFUSED_OPTIMIZER_TENSORS:
                continue
            parts["memory"][:, d, i] *= UNFUSED_OPTIMIZER_TENSORS[opt] / OPTIMIZER_TRAFFIC[opt][0]
            per_tensor = costs.optimizer_us(opt) if costs is not None else None
            if per_tensor is not None:
                parts["overhead"][:, d, i] = work.count[i] * per_tensor * 1e-6


def _out_of_place(work: DeviceWork) -> np.ndarray:
    """Per op, whether it writes a new output (an aten name ending in ``_`` writes into its
    input)."""
    return np.array([not str(n).endswith("_") for n in work.name], dtype=bool)


def _cpu_fresh_outputs(parts: dict[str, np.ndarray], work: DeviceWork, devs: DeviceArrays,
                       curves, host_costs, large_param_bytes: tuple[int, ...] = ()) -> None:
    """On a CPU, outputs of at least :data:`~aiadvisor.hardware.host.FRESH_OUTPUT_BYTES` land
    on fresh pages every call (glibc maps them anew): each byte costs the page faults measured
    on this CPU, on top of the op (in place). A benchmarked CPU uses its calibration's
    first-touch timing (:attr:`~aiadvisor.costmodel.local.LocalCalibration.
    first_touch_s_per_byte`; 0 in a calibration from before it was timed), an unbenchmarked
    one :attr:`~aiadvisor.hardware.host.HostCosts.fresh_us_per_mib`.

    Out-of-place ops only: an aten name ending in ``_`` writes into its input. PyTorch's default
    (for-loop) Adam/AdamW step makes two temporaries the size of each parameter tensor
    (:data:`~aiadvisor.units.UNFUSED_OPTIMIZER_TEMPORARIES`): a tensor of at least the
    threshold (``large_param_bytes``, from the profile) pays them too (on the development CPU
    an AdamW step over one 64 MiB tensor took 3.2 ns an element where 1-4 MiB tensors took
    2.2); a fused step updates in place."""
    from ..hardware.host import FRESH_OUTPUT_BYTES
    from ..units import FUSED_SUFFIX, UNFUSED_OPTIMIZER_TEMPORARIES

    written = work.written_per_call
    if written is None:
        return
    out_of_place = _out_of_place(work)
    large = (written >= FRESH_OUTPUT_BYTES) & out_of_place & ~np.isin(
        work.op_class, ("optimizer", "collective"))
    fresh = np.where(large, work.count * written, 0.0)
    big = sum(b for b in large_param_bytes if b >= FRESH_OUTPUT_BYTES)
    for i in np.flatnonzero(work.op_class == "optimizer"):
        name = str(work.name[i])
        temps = UNFUSED_OPTIMIZER_TEMPORARIES.get(name.removeprefix("optimizer."), 0)
        if big and temps and not name.endswith(FUSED_SUFFIX):
            fresh[i] = temps * big
            large[i] = True
    if not large.any():
        return
    for d, spec in enumerate(devs.specs):
        if spec.kind != "cpu":
            continue
        cal = curves[d] if curves else None
        costs = host_costs[d] if host_costs else None
        if cal is not None:
            per_byte = cal.first_touch_s_per_byte
        else:
            per_byte = costs.fresh_us_per_mib * 1e-6 / 2**20 if costs is not None else 0.0
        if per_byte > 0:
            parts["memory"][:, d, large] += (fresh * per_byte)[large]


#: Training steps on a CPU: the forward's outputs are kept for the backward, so each is written
#: to memory the caches no longer hold, where the calibration's ops (and an inference step)
#: write into the buffer just freed, still in the cache. Each byte so written costs about one
#: more pass of the memory bandwidth (``_cpu_kept_outputs``). Measured on the 2-core Xeon VM
#: (2026-12-07, 30 GB/s streaming, 35 us a MiB): a chain of 40 multiplies whose outputs were
#: kept took 25, 33 and 46 us more per MiB written than the same chain freeing them, at 0.25,
#: 4 and 16 MiB an output. There, the forward of eleven models took 0-7 ms longer in training
#: than in inference beyond what the prices said (a Llama-style decoder 6.8 ms over 122 MiB of
#: outputs, a GRU 3.3 over 87, ViT 2.0 over 58), where this prices 4.3, 3.0 and 2.0.
KEPT_OUTPUT_PASSES = 1.0


def _cpu_kept_outputs(parts: dict[str, np.ndarray], work: DeviceWork, devs: DeviceArrays,
                      curves) -> None:
    """On a CPU, in a training step, each out-of-place forward op's output bytes once more at
    the device's (measured, on a benchmarked CPU) bandwidth (:data:`KEPT_OUTPUT_PASSES`), as
    memory time (in place). Outputs of at least
    :data:`~aiadvisor.hardware.host.FRESH_OUTPUT_BYTES` pay their page faults instead
    (:func:`_cpu_fresh_outputs`)."""
    from ..hardware.host import FRESH_OUTPUT_BYTES

    written = work.written_per_call
    if written is None:
        return
    kept = ((work.phase == "forward") & (written < FRESH_OUTPUT_BYTES)
            & ~np.isin(work.op_class, ("optimizer", "collective"))
            & _out_of_place(work))
    if not kept.any():
        return
    for d, spec in enumerate(devs.specs):
        if spec.kind != "cpu":
            continue
        cal = curves[d] if curves else None
        bw = (cal.bw_gbs if cal is not None and cal.bw_gbs else float(devs.bw_gbs[d, 0])) * 1e9
        if bw > 0:
            parts["memory"][:, d, kept] += (KEPT_OUTPUT_PASSES * work.count * written
                                            / bw)[kept]


def _cpu_zero_state(parts: dict[str, np.ndarray], work: DeviceWork, devs: DeviceArrays,
                    curves, zero_fraction: float, notes: list[str]) -> None:
    """On a benchmarked CPU, the square roots an Adam/AdamW step takes of a second moment that
    is still exactly zero: ``zero_fraction`` of the trainable elements
    (``ModelProfile.untouched_table_elements``: embedding rows no lookup has reached), each
    costing :attr:`~aiadvisor.costmodel.local.LocalCalibration.zero_sqrt_s_per_element` more
    than the calibration's optimizer grid (ordinary values) paid (in place). PyTorch's default
    for-loop step only: the fused one was not timed with zeros. FP32 state only (the caller
    checks): on the development CPU the square root of 2^20 BF16 or FP16 zeros took what that
    of ones did (88-91 us), where FP32 zeros took 1.8 ms against 0.21."""
    if zero_fraction <= 0 or not curves:
        return
    for i in np.flatnonzero(work.op_class == "optimizer"):
        name = str(work.name[i])
        opt = name.removeprefix("optimizer.")
        if opt not in ("adam", "adamw"):
            continue
        elements = float(work.flops_per_call[i] * work.count[i]) / OPTIMIZER_TRAFFIC[opt][1]
        zero = zero_fraction * elements
        for d, spec in enumerate(devs.specs):
            cal = curves[d]
            if spec.kind != "cpu" or cal is None or cal.zero_sqrt_s_per_element <= 0:
                continue
            extra = zero * cal.zero_sqrt_s_per_element
            parts["memory"][:, d, i] += extra
            notes.append(
                f"The {opt} step takes the square root of {zero / 1e6:.3g} M second-moment "
                f"elements that are still zero (embedding rows the batch does not look up; "
                f"early in training, or for rows rarely looked up): {extra * 1e3:.3g} ms more "
                f"on {spec.name}, which takes {cal.zero_sqrt_s_per_element * 1e9:.2g} ns more "
                "for the square root of a zero than of another value (measured).")


#: A GEMM streaming at least this many bytes a call is a "streaming" op for the cache refill
#: (:func:`_cpu_refill`): the smallest size :data:`~aiadvisor.hardware.host.REFILL_MIB` timed.
REFILL_MIN_BYTES = 2**20
#: Records :func:`~aiadvisor.costmodel.ops.device_work` appends after the traced ones (no
#: place in the trace order).
APPENDED_OPS = ("amp.cast", "grad.accumulate", AUTOCAST_ISLAND_OP)
#: (P10, P50, P90) multiples of the cache refill (:func:`_cpu_refill`): the least certain
#: host term. A whole decoder block paid 1.3-1.5 x the refill of the timed small-op block
#: after the same stream (86-91 vs 60-66 us at 16-32 MiB, development CPU), and the square
#: root of the host work fits 1-16 distinct ops within about 25 %.
REFILL_BAND = np.array([0.5, 1.0, 1.5])


def _cpu_refill(parts: dict[str, np.ndarray], work: DeviceWork, devs: DeviceArrays,
                host_costs, counts: HostCounts, notes: list[str], *,
                in_block: np.ndarray | None = None, num_blocks: int = 0) -> None:
    """On a CPU with measured host costs: the small ops after GEMMs that streamed their
    weights (and inputs) through the caches run cold, and pay the refill measured on this CPU
    (:meth:`~aiadvisor.hardware.host.HostCosts.refill_seconds`) on top of the hot times the
    calibration timed them at (in place, as overhead of the streaming GEMMs).

    Records are walked in trace order, phase by phase. A run of consecutive streaming GEMM
    records (e.g. the query, key and value projections) is one stream, as many times a step
    as its first record is called. The host work that follows it is the seconds of the
    non-streaming records up to the next run (appended casts left out), plus the step's module
    calls, view ops and Python lines spread evenly over all runs. What those ops lost from the
    caches is what streamed since they last ran: inside repeated blocks (``in_block``,
    ``num_blocks``) one block's streaming GEMMs (the same code ran one block earlier), outside
    them the whole phase's; never less than the run itself. P10 and P90 take :data:`REFILL_BAND` of
    it. A decoder at batch 1 streams every layer's weights between a few small ops and pays
    in full; a step of large ops pays little."""
    stream = (work.op_class == "gemm") & (work.bytes_per_call >= REFILL_MIN_BYTES)
    if not stream.any():
        return
    streamed = work.bytes_per_call * work.count
    for d, spec in enumerate(devs.specs):
        costs = host_costs[d] if host_costs else None
        if spec.kind != "cpu" or costs is None or not costs.refill_us:
            continue
        op_s = sum(parts[k][1, d] for k in parts)
        runs = []   # [row indices, calls, bytes a call, following seconds, bytes since]
        for phase in ("forward", "backward"):
            rows = np.flatnonzero(work.phase == phase)
            phase_bytes = float(streamed[rows][stream[rows]].sum())
            block_bytes = phase_bytes
            if in_block is not None and num_blocks > 1:
                block_bytes = float(streamed[rows][stream[rows] & in_block[rows]].sum()
                                    ) / num_blocks
            current, broken = None, True
            for i in rows:
                if stream[i]:
                    if broken:
                        since = block_bytes if in_block is not None and in_block[i] \
                            and num_blocks > 1 else phase_bytes
                        current, broken = [[], float(work.count[i]), 0.0, 0.0, since], False
                        runs.append(current)
                    current[0].append(i)
                    current[2] += streamed[i] / current[1]
                elif current is not None and work.name[i] not in APPENDED_OPS:
                    current[3] += op_s[i]
                    broken = True
        gaps = sum(r[1] for r in runs)
        fixed = python_fixed_s(counts, costs)
        total = 0.0
        for rows, calls, nbytes, following, since in runs:
            extra = float(costs.refill_seconds(max(nbytes, since),
                                               following / calls + fixed / gaps)) * calls
            # Charged to the run's records in proportion to their calls.
            share = work.count[rows] / work.count[rows].sum()
            parts["overhead"][:, d, rows] += REFILL_BAND[:, None] * (extra * share)
            total += extra
        if total > 0:
            notes.append(f"cache refill after weight-streaming GEMMs ({gaps:.0f} stream(s) a "
                         f"step): +{total * 1e3:.2g} ms, the small ops after each run cold "
                         "(measured on this CPU after GEMVs of 1-32 MiB)")


def _block_comm_size(prof: ModelProfile, ops: OpArrays, precision: str, notes: list[str]):
    """(bytes of one block output at the full batch in ``precision``, number of blocks)."""
    trace = DTYPE_BYTES.get(prof.compute_dtype, 4.0)
    if prof.num_blocks > 0 and prof.block_output_bytes > 0:
        # A block's output is the residual stream, which stays in the parameters' dtype: FP32
        # when the profile was traced under autocast (compute_dtype bf16, params fp32).
        # Tensor/pipeline-parallel stacks run the model in the 16-bit type and send that.
        residual = DTYPE_BYTES.get(prof.param_dtype, trace)
        return (prof.block_output_bytes * MEMORY_ACT_BYTES[precision] / residual,
                prof.num_blocks)
    # No repeated blocks: take one "block" per 4 forward GEMM calls, each all-reducing an
    # output the size of an average forward GEMM output.
    fwd = ops.gemm_like & (ops.phase == "forward")
    calls = float(ops.count[fwd].sum())
    if calls == 0:
        return 0.0, 0
    notes.append("No repeated blocks found: tensor/pipeline messages estimated as one block "
                 "per 4 forward GEMMs.")
    out_bytes = float(ops.bytes_total[fwd].sum()) / calls / 3.0
    return out_bytes * MEMORY_ACT_BYTES[precision] / trace, max(int(calls // 4), 1)


def _bus_bw(devs: DeviceArrays, model: EfficiencyModel, group: int, span: int) -> np.ndarray:
    """The flat network of the fitted model before fabrics were modelled (kept for
    ``bench/costmodel_multinode.py``'s comparison): inside a node (<= devices_per_node) the
    per-direction interconnect figure times the fitted NCCL efficiency, across nodes the
    fitted ~10 GB/s figure (Vidur's NCCL runs) for the whole ring."""
    c = model.collectives
    intra = devs.interconnect_gbs[:, 0] / 2 * c.intra_node_efficiency
    if span <= c.devices_per_node:
        return intra
    return np.minimum(intra, c.inter_node_bus_bw_gbs)


@dataclass(frozen=True)
class NetworkArrays:
    """The network of each of ``D`` devices, each shaped (D,)."""

    scaleup_size: np.ndarray
    nic_gbs: np.ndarray
    latency_s: np.ndarray

    @classmethod
    def of(cls, networks) -> NetworkArrays:
        return cls(scaleup_size=np.array([n.scaleup_size for n in networks], float),
                   nic_gbs=np.array([n.nic_gbs_per_device for n in networks], float),
                   latency_s=np.array([n.latency_us * 1e-6 for n in networks], float))


def _collective(kind, size, group, stride, span, devs, model, nets: NetworkArrays | None):
    """Seconds (D,) of one collective over ``group`` devices ``stride`` apart in the rank
    order (tensor parallel innermost, then data parallel, then pipeline stages, as Megatron
    lays them out): hierarchical over the network, or without one the flat fitted figure
    (inter-node when the old model's ``span`` exceeds a node)."""
    c = model.collectives
    if nets is None:
        return collective_time_s(kind, size, num_devices=group,
                                 bus_bw_gbs=_bus_bw(devs, model, group, span),
                                 alpha_s=c.alpha_s[kind])
    intra = devs.interconnect_gbs[:, 0] / 2 * c.intra_node_efficiency
    # Members of the group inside one NVLink-class domain: the domain holds scaleup / stride
    # consecutive groups' worth of ranks.
    per_domain = np.minimum(group, np.maximum(1.0, np.floor(nets.scaleup_size / stride)))
    return hierarchical_time_s(kind, size, num_devices=group, per_domain=per_domain,
                               intra_bus_bw_gbs=intra, inter_bw_gbs=nets.nic_gbs,
                               alpha_s=c.alpha_s[kind], inter_latency_s=nets.latency_s)


def _data_parallel(prof, parallel, coll, windows, grad_bytes, gather_bytes, num_blocks,
                   nets) -> np.ndarray:
    """Exposed DP/ZeRO/FSDP communication (D,), overlapped as the frameworks do it."""
    dp, tp = parallel.dp_degree, parallel.tp_degree
    train = prof.mode == "train"
    backward, forward = windows["backward"], windows["forward"]
    units = max(num_blocks, 1)
    # Gradients are final only in the last micro-batch's backward (DDP's no_sync, pipeline
    # flush): DDP/ZeRO-1/2 reductions can hide behind that one alone, and behind nothing
    # when the stack reduces after the backward (overlap_grad_reduce=False).
    micro = parallel.num_microbatches * parallel.grad_accum_steps
    last_backward = backward / micro
    grad_overlap = OVERLAP if parallel.overlap_grad_reduce else 0.0
    if not train:
        if parallel.zero_stage != 3:
            return 0.0
        gather = coll("all_gather", gather_bytes, dp, tp)
        return exposed_time_s(gather, forward, overlap=OVERLAP,
                              min_exposed_s=gather / units if nets is not None else None)
    if parallel.zero_stage == 0:
        ar = coll("all_reduce", grad_bytes, dp, tp)
        # DDP: buckets all-reduce while backward runs; the last bucket after it ends.
        last = ar * min(1.0, DDP_BUCKET_BYTES / max(grad_bytes, 1.0)) if nets is not None \
            else None
        return exposed_time_s(ar, last_backward, overlap=grad_overlap, min_exposed_s=last)
    if parallel.zero_stage in (1, 2):
        rs = coll("reduce_scatter", grad_bytes, dp, tp)
        last = rs / units if nets is not None else None
        return (exposed_time_s(rs, last_backward, overlap=grad_overlap, min_exposed_s=last)
                + coll("all_gather", gather_bytes, dp, tp))
    # FSDP / ZeRO-3: each unit (block) is gathered before its forward and again before its
    # backward, prefetched one unit ahead; gradients reduce-scattered per unit, in every
    # accumulation step's backward (FSDP's default and DeepSpeed ZeRO-3's: each keeps only its
    # shard of the gradients). The first gather and the last reduce-scatter have no compute
    # to hide behind. Without resharding after forward the gathered weights stay until
    # backward: one gather per micro-batch.
    gather = coll("all_gather", gather_bytes, dp, tp)
    rs = coll("reduce_scatter", grad_bytes, dp, tp)
    gathers = 2 if parallel.reshard_after_forward else 1
    total = (gathers * gather + rs) * parallel.grad_accum_steps
    first_last = (gather + rs) / units if nets is not None else None
    return exposed_time_s(total, forward + backward, overlap=OVERLAP, min_exposed_s=first_last)


def communication(prof: ModelProfile, ops: OpArrays, precision: str, parallel: ParallelConfig,
                  devs: DeviceArrays, model: EfficiencyModel, windows: dict[str, np.ndarray],
                  notes: list[str], nets: NetworkArrays | None = None) -> np.ndarray:
    """Exposed communication per device (D,): DP/ZeRO/FSDP, TP, PP and offload transfers."""
    dp, tp, pp = parallel.dp_degree, parallel.tp_degree, parallel.pp_degree
    micro = parallel.num_microbatches * parallel.grad_accum_steps
    train = prof.mode == "train"
    num_dev = len(devs.specs)
    total = np.zeros(num_dev)
    param_elem = DTYPE_BYTES.get(prof.param_dtype, 4.0)
    grad_bytes = prof.num_trainable_params * param_elem / (tp * pp)
    # FSDP/ZeRO gather parameters in the compute dtype (mixed-precision param_dtype).
    gather_bytes = prof.num_params * min(GEMM_ACT_BYTES[precision], param_elem) / (tp * pp)

    def coll(kind, size, group, stride, span=None):
        span = dp * tp * pp if span is None else span
        return _collective(kind, size, group, stride, span, devs, model, nets)

    if dp > 1 and (train or parallel.zero_stage == 3):
        total += _data_parallel(prof, parallel, coll, windows, grad_bytes, gather_bytes,
                                max(prof.num_blocks // pp, 1), nets)
    if tp > 1 or pp > 1:
        block_bytes, num_blocks = _block_comm_size(prof, ops, precision, notes)
        msg = block_bytes / (dp * micro)
        directions = 2 if train else 1
        if tp > 1:
            # Megatron: 2 all-reduces per block forward (attention and MLP outputs), 2 backward,
            # and 2 more when full checkpointing reruns the block's forward.
            passes = directions + (1 if train and parallel.checkpointing == "full" else 0)
            calls = 2 * num_blocks / pp * micro * passes
            total += calls * coll("all_reduce", msg, tp, 1, tp)
        if pp > 1:
            # Each micro-batch crosses each stage boundary once per direction. In 1F1B every
            # boundary is on the critical path, so once the pipeline spans more than one
            # domain its slowest (inter-node) boundary sets the pace: stride span / 2 makes
            # the pair one domain apart exactly then. With tensor parallel each of the tp
            # ranks sends 1/tp of the activations over its own link and the next stage
            # all-gathers them over NVLink (Megatron's scatter/gather optimisation, Narayanan
            # et al. 2021, sec. 4.1; with sequence parallelism they are already split).
            # Interleaved (v virtual stages): each micro-batch passes v chunk boundaries per
            # device and direction, so v times the sends of the same size.
            p2p = msg / tp if nets is not None else msg
            sends = micro * directions * parallel.virtual_stages
            total += sends * coll("send_recv", p2p, 2, tp * dp * pp / 2, tp * pp)
    if parallel.offload and train:
        shard = dp if parallel.zero_stage >= 1 else 1
        pcie_bytes = (grad_bytes + prof.num_params * param_elem / (tp * pp)) / shard
        if parallel.zero_stage == 3:
            pcie_bytes += 2 * gather_bytes / dp
        total += pcie_bytes / (PCIE_GBS * 1e9)
        notes.append(f"Offload: {pcie_bytes / 1e9:.2f} GB over PCIe per step per device at "
                     f"{PCIE_GBS:.0f} GB/s, not overlapped; optimizer step on the host at "
                     f"{HOST_OPTIMIZER_GBS:.0f} GB/s (assumed figures).")
    return total


def _op_dtypes(ops: OpArrays, factors: np.ndarray, precision: str, n: int) -> np.ndarray:
    """The dtype each op runs in at ``precision``: its traced element size times its byte
    factor (4 -> float32, 2 -> the precision's 16-bit type; anything else, e.g. FP8 GEMMs or
    integer outputs, "other"). Ops appended after the records (AMP casts) count as float32."""
    # A max pool's factor blends its int64 indices in: its dtype is its other bytes'.
    idx = pool_index_bytes(ops)
    rest = np.maximum(ops.bytes_total - idx, 1.0)
    factors = np.where(idx > 0, (factors[:len(ops)] * ops.bytes_total - idx) / rest,
                       factors[:len(ops)])
    elem = ops.trace_bytes_per_element * factors
    half = "float16" if precision == "fp16" else "bfloat16"
    dtypes = np.where(np.isclose(elem, 4.0), "float32",
                      np.where(np.isclose(elem, 2.0), half, "other")).astype(object)
    return np.concatenate([dtypes, np.full(n - len(dtypes), "float32", dtype=object)])


#: Devices whose PyTorch runs eagerly, one host launch per kernel; TPUs and NPUs run lazy
#: tensors (PyTorch/XLA, Gaudi's lazy mode): the host traces every op, launching none.
EAGER_KINDS = ("gpu", "edge")
LAZY_KINDS = ("tpu", "npu")


#: Share of a CPU step the model's own Python lines must reach for a note to name them.
PYTHON_NOTE_SHARE = 0.05


def _with_tp_collectives(prof: ModelProfile, ops: OpArrays, precision: str,
                         parallel: ParallelConfig, counts: HostCounts) -> HostCounts:
    """``counts`` with the tensor-parallel all-reduces that :func:`communication` prices (two
    per block and pass) as host launches: eager PyTorch calls each one from Python
    (``torch.distributed.all_reduce``), as it launches a kernel. Assumed to cost the host what
    an eager kernel does (no published per-call figure used)."""
    if parallel.tp_degree <= 1:
        return counts
    _, blocks = _block_comm_size(prof, ops, precision, [])
    per_pass = 2 * blocks / parallel.pp_degree * parallel.num_microbatches \
        * parallel.grad_accum_steps
    train = prof.mode == "train"
    forward = 1 + (1 if train and parallel.checkpointing == "full" else 0)
    return replace(counts, forward_ops=counts.forward_ops + per_pass * forward,
                   backward_ops=counts.backward_ops + (per_pass if train else 0.0))


def _python_note(counts: HostCounts, devs: DeviceArrays, host_costs, step_s: np.ndarray,
                 notes: list[str]) -> None:
    """On a CPU with measured host costs, a note where the model's own Python lines (outside
    torch) take at least :data:`PYTHON_NOTE_SHARE` of the step: what they cost, and that a
    compiled step checks its guards instead of running them."""
    for d, spec in enumerate(devs.specs):
        costs = host_costs[d] if host_costs else None
        if spec.kind != "cpu" or costs is None or not counts.python_lines:
            continue
        lines_s = counts.python_lines * costs.python_line_us * 1e-6
        if lines_s >= PYTHON_NOTE_SHARE * float(step_s[1, d]):
            notes.append(
                f"The model's own Python runs {counts.python_lines:,.0f} lines a step outside "
                f"torch (argument checks, masks, cache and output handling): "
                f"{lines_s * 1e3:.2g} ms of the step on this CPU, "
                f"{lines_s / float(step_s[1, d]):.0%} of it (eager PyTorch; torch.compile "
                "captures it once, and a compiled step checks its guards instead).")


def _host(prof: ModelProfile, work, counts: HostCounts, devs: DeviceArrays,
          device_s: np.ndarray, host_costs, runtime: str = "eager"
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(host seconds, overhead to add, step with CUDA graphs), each (Q, D).

    CPU with measured host costs: the host work its measured op times leave out adds to the
    step. Eager accelerators: ``step = max(device, host)``; CUDA graphs keep the device part."""
    train = prof.mode == "train"
    shape = device_s.shape
    host, add, graphs = np.zeros(shape), np.zeros(shape), np.full(shape, np.nan)
    spread = np.exp(MEASURED_SPREAD * _QUANTILE_SIGN)
    for d, spec in enumerate(devs.specs):
        costs = host_costs[d] if host_costs else None
        if spec.kind == "cpu" and costs is not None:
            extra, total = cpu_host_extra_s(counts, costs, train=train)
            add[:, d] = extra * spread
            host[:, d] = total * spread
        elif spec.kind in EAGER_KINDS or spec.kind in LAZY_KINDS:
            host[:, d] = accelerator_host_s(counts, lazy=spec.kind in LAZY_KINDS,
                                            runtime=runtime)
            graphs[:, d] = device_s[:, d]
            if not spec.graph_replay:  # a replayed graph issues no kernels from Python
                add[:, d] = np.maximum(host[:, d] - device_s[:, d], 0.0)
    return host, add, graphs


def _stage_imbalance(prof: ModelProfile, ops: OpArrays, parts: dict, mult: np.ndarray,
                     parallel: ParallelConfig, notes: list[str]) -> np.ndarray | float:
    """Slowest / average pipeline stage from the ops' own times (forward and backward; the
    AMP casts appended after the records count as block work)."""
    if parallel.pp_degree == 1 or not prof.num_blocks:
        return 1.0
    t = sum(parts[k] * mult for k in parts)
    appended = np.full(t.shape[-1] - len(ops), "block", dtype=object)
    where = np.where(ops.phase == "optimizer", "none", ops.stage)
    where = np.concatenate([where, appended])
    block_s, first_s, last_s = (t[..., where == w].sum(axis=-1)
                                for w in ("block", "first", "last"))
    if not (ops.stage == "block").any():
        return 1.0  # no op marked as a block's: the "No repeated blocks" note says so
    imbalance = stage_imbalance(block_s, first_s, last_s, pp_degree=parallel.pp_degree,
                                num_blocks=prof.num_blocks)
    worst = float(np.max(imbalance))
    if worst > 1.005:
        notes.append(f"pipeline paced by its slowest stage, up to {worst:.2f} x the average "
                     "(Megatron-LM's partition: equal blocks per stage, the embedding on the "
                     "first, the LM head and loss on the last)")
    return imbalance


def step_parts(prof: ModelProfile, ops: OpArrays, precision: str, parallel: ParallelConfig,
               devs: DeviceArrays, model: EfficiencyModel, *, measured_precision: bool,
               curves=None, networks: list[Network] | None = None,
               host_costs=None, autocast: bool = True, runtime: str = "eager") -> StepParts:
    """All components of one step on each device (per device, seconds, shape (Q, D)).

    ``networks`` (one per device) gives the cluster for hierarchical collectives; without
    it the flat fitted inter-node figure of the old model applies (benchmarks compare it).
    ``host_costs``: per device, the measured :class:`~aiadvisor.hardware.host.HostCosts` of a
    benchmarked CPU, or None. ``autocast``: an FP32-stored model's 16-bit inference runs under
    ``torch.autocast`` (its FP32 islands on CUDA/ROCm devices, :func:`~.ops.autocast_islands`);
    False prices plain 16-bit weights and activations (``model.to(dtype)``, serving engines).
    ``runtime``: how the host issues the ops (:data:`~aiadvisor.costmodel.host.RUNTIMES`)."""
    notes: list[str] = []
    factors = byte_factors(prof, ops, precision)
    islands = autocast_islands(prof, ops, precision) if autocast else (0.0, 0.0)
    work = device_work(prof, ops, factors, amp_cast_bytes(prof, ops, precision), parallel,
                       dequant_bytes_per_weight=NF4_DEQUANT_BYTES
                       if nf4_dequantizes(prof, precision) else 0.0, islands=islands)
    parts = op_times(work, devs, model, measured_precision=measured_precision, curves=curves,
                     op_dtypes=_op_dtypes(ops, factors, precision, len(work.count))
                     if curves else None)
    island = work.name == AUTOCAST_ISLAND_OP
    if island.any():
        # Only CUDA/ROCm autocast runs the islands: the other devices run none of it.
        skip = ~np.array([autocast_upcasts(s) for s in devs.specs], dtype=bool)
        for k in parts:
            parts[k][:, skip[:, None] & island[None, :]] = 0.0
        if not skip.all():
            notes.append(f"Priced as the recommended code runs it: {precision} weights under "
                         "torch.autocast, which on NVIDIA/AMD GPUs runs softmax, norms and "
                         f"losses in fp32 with a cast kernel on each side ({islands[1]:.0f} "
                         f"more kernels and {fmt_bytes(islands[0])} more traffic a step, whole "
                         f"batch); autocast=False prices plain {precision} (model.to(dtype) "
                         "without autocast).")
    if precision == "fp32":  # the quick timings ran in FP32
        micro = parallel.num_microbatches * parallel.grad_accum_steps
        rec = np.concatenate([ops.recurrent, np.zeros(len(work.count) - len(ops), bool)])
        _cpu_recurrent_anchor(parts, rec, devs, curves, notes, train=prof.mode == "train",
                              batch=(prof.batch_size or 0) / (parallel.dp_degree * micro))
        _cpu_random_draws(parts, work, devs, curves, notes)
        _cpu_conv_anchor(parts, work, devs, curves, notes, train=prof.mode == "train")
    _default_optimizer_steps(parts, work, devs, curves, host_costs)
    _cpu_fresh_outputs(parts, work, devs, curves, host_costs,
                       prof.large_param_bytes if prof.mode == "train" else ())
    if prof.mode == "train":
        _cpu_kept_outputs(parts, work, devs, curves)
    if prof.mode == "train" and prof.num_trainable_params and prof.param_dtype == "float32":
        _cpu_zero_state(parts, work, devs, curves, getattr(prof, "untouched_table_elements", 0)
                        / prof.num_trainable_params, notes)
    counts = host_counts(prof, work)
    if island.any():
        # Autocast launches its casts from C++ inside the dispatcher, not from Python: no
        # eager per-op host cost (their device-side launch gaps are in the op times).
        counts = replace(counts, forward_ops=counts.forward_ops - float(work.count[island].sum()))
    layout = work.name == LAYOUT_TRANSPOSE_OP
    if layout.any():
        # The convolution library launches its layout transposes inside the convolution call:
        # no eager per-op host cost either.
        counts = replace(
            counts,
            forward_ops=counts.forward_ops
            - float(work.count[layout & (work.phase == "forward")].sum()),
            backward_ops=counts.backward_ops
            - float(work.count[layout & (work.phase == "backward")].sum()))
    counts = _with_tp_collectives(prof, ops, precision, parallel, counts)
    if runtime == "torchscript":
        counts = without_python(counts)
    _cpu_refill(parts, work, devs, host_costs, counts, notes,
                in_block=np.concatenate([ops.stage == "block",
                                         np.zeros(len(work.count) - len(ops), bool)]),
                num_blocks=prof.num_blocks)
    for d, spec in enumerate(devs.specs):
        if spec.kind == "cpu" and curves and curves[d] is not None:
            for k in parts:  # every op, its refill and fresh-page costs included
                parts[k][:, d, :] *= CPU_IN_STEP_FACTOR
    mult = np.ones(len(work.count))
    if parallel.checkpointing == "full":
        # The blocks' forward runs twice (checkpoint wrappers go around the repeated blocks;
        # the embedding, final norm, head and loss are not recomputed). Without blocks, all of
        # it is.
        in_block = np.concatenate([ops.stage == "block",
                                   np.ones(len(work.count) - len(ops), bool)])
        recomputed = in_block if (ops.stage == "block").any() else True
        mult = np.where((work.phase == "forward") & recomputed, 2.0, mult)
    elif parallel.checkpointing == "selective":
        mult = np.where((work.phase == "forward") & work.attention_core, 2.0, mult)
    opt = work.phase == "optimizer"
    if parallel.offload and prof.mode == "train":
        mult = np.where(opt, 0.0, mult)                              # moved to the host
    sums = {k: (v * mult).sum(axis=-1) for k, v in parts.items()}
    windows = {ph: sum(parts[k][1][:, work.phase == ph].sum(axis=-1) for k in parts)
               for ph in ("forward", "backward")}
    stage_s = sums["compute"] + sums["memory"] + sums["overhead"]
    if opt.any():
        stage_s = stage_s - sum((parts[k] * mult)[..., opt].sum(axis=-1) for k in parts)
    bubble = bubble_fraction(parallel.pp_degree, parallel.num_microbatches,
                             parallel.virtual_stages)
    imbalance = _stage_imbalance(prof, ops, parts, mult, parallel, notes)
    # 1F1B: every slot, busy or bubble, lasts as long as the slowest stage's.
    overhead = sums["overhead"] + stage_s * (imbalance / (1 - bubble) - 1)
    memory = sums["memory"]
    if parallel.offload and prof.mode == "train" and opt.any():
        shard = parallel.dp_degree if parallel.zero_stage >= 1 else 1
        host_bytes = ops.bytes_total[ops.phase == "optimizer"].sum() / (
            parallel.tp_degree * parallel.pp_degree * shard)
        memory = memory + host_bytes / (HOST_OPTIMIZER_GBS * 1e9)
    nets = NetworkArrays.of(networks) if networks is not None else None
    comm = communication(prof, ops, precision, parallel, devs, model, windows, notes, nets)
    comm_q = np.stack([comm * COMM_LOW, comm, comm * COMM_HIGH])
    device_s = sums["compute"] + memory + overhead + comm_q
    host, add, graphs = _host(prof, work, counts, devs, device_s, host_costs, runtime)
    _python_note(counts, devs, host_costs, device_s + add, notes)
    cast = work.name == "amp.cast"
    amp_cast_s = (parts["compute"][..., cast].sum(axis=-1)
                  + parts["memory"][..., cast].sum(axis=-1))
    return StepParts(compute_s=sums["compute"], memory_s=memory, overhead_s=overhead + add,
                     amp_cast_s=amp_cast_s,
                     communication_s=comm_q, notes=notes, host_s=host, graphs_s=graphs)
