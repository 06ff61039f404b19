"""Op times on a benchmarked device, read off its own measurements instead of learned curves.

A benchmark (:func:`aiadvisor.hardware.benchmark`) carries the matmul throughput per size and,
with ``ops=True``, the time of a grid of other ops at several sizes and of optimizer steps
(:mod:`aiadvisor.hardware.calibrate`). Here they become per-call time functions:

* **GEMMs** (``mm``, ``addmm``, ``bmm``...): on a CPU, the timed linear-layer GEMMs of the same
  phase (forward, or the backward pair of input and weight gradients) and dtype at the same
  FLOPs per call; elsewhere, and for convolutions and recurrent layers a calibration did not
  time, the measured matmul curve (see ``predict._curve_slowdowns``). A skinny forward GEMM
  (few rows, as in one decode step: ``M`` read off its FLOPs and bytes,
  ``M K N / (M K + K N + M N)``, under :data:`SKINNY_ROWS` or the skinny grid's largest timed
  ``M``) runs at the rate the skinny grid measured at that ``M`` (log-log interpolation, flat
  beyond the ends), moved along ``log K`` toward the rate timed at a shorter ``K`` where its
  ``K`` is known (one-row GEMMs with short dot products run slower: 15 GB/s at K = 512 where
  K = 2048 ran 21 on the 2026-12-06 development CPU), and never faster than its bytes over
  the measured bandwidth. A step whose forward GEMMs read at most 32 MiB of weights in all
  takes, at each ``M``, the rates timed cycling that much instead (``gemm-skinny-warm``: its
  weights are still in the cache at the next step; :meth:`LocalCalibration._skinny_seconds`).
  A forward GEMM
  whose weight (``weight_elements``: its module's own parameters per call) is larger than
  the linear grid's largest pays :meth:`LocalCalibration.gemm_weight_seconds` on top: the
  extra seconds per weight element fitted from the grid's large-weight GEMMs (family
  ``gemm-forward-wide``, timed cycling their weights) over the linear curve at their FLOPs
  (on the development CPU, bf16: about 120 ps per element, 2 ms a call of a 4096 x 4096
  weight, whatever its rows: as if the library repacked the weight every call; FP32 about
  170 ps). Backward GEMMs are
  not priced so (the grid times none with large weights).
* **Ops on a decode step's cache** (named ``<op>[cache]`` by the generation cost model: the
  cache's concatenation, the attention over it) take the calibration's timings of the same op
  on a cache (:func:`aiadvisor.hardware.calibrate.cache_points`: cold in DRAM, a fresh output
  every step), else those of the family's other cache ops, else the op's own curve.
* **Convolutions** (``convolution`` and ``convolution_backward``): the rate the grid's
  convolutions of the same phase and dtype reached at the same arithmetic intensity (FLOPs per
  byte moved; log-log interpolation, flat beyond the ends). On a CPU the rate follows intensity
  far more than size: a 3-channel stem and a 1x1 projection run at a fraction of a 3x3 layer's
  rate at equal FLOPs. Each call also pays the per-call time the grid measured (a 1,024-MAC
  convolution) and, per element of its weight (its module's own parameters per call), the
  cost :func:`fit_conv_weight` separates from the work with a pair of grid convolutions on
  the same weights (oneDNN's weight reorder on every eager call: a deep layer with 590 k
  weights on a 4 x 4 output ran 2.7x its intensity rate in BF16 channels_last). Never faster
  than the bytes over the measured bandwidth.
* **Recurrent layers** (an LSTM's ``mkldnn_rnn_layer`` and its backward): the timed one-layer
  LSTMs per step (FLOPs and seconds over the sequence), at the op's per-step FLOPs, times its
  steps; a recurrent op not timed by name takes the family's median.
* **An op that was timed** (same aten name): log-log interpolation of seconds against its work
  (bytes; FLOPs for attention kernels) between the measured sizes; beyond the largest size the
  time grows in proportion to the work; below the smallest it shrinks in proportion down to the
  measured per-op overhead.
* **An op of a timed family** (e.g. ``aten.sigmoid``: activation; ``aten.native_group_norm``:
  norm): the median over that family's timed ops at the same work.
* **Cold inputs**: ops of :data:`COLD_FAMILIES` (elementwise, activation, norm, copy; not a
  decode cache's ops, timed cold already) are slowed by :meth:`LocalCalibration.cold_factor`,
  the median cold/hot ratio of the few ops the calibration timed on cold inputs
  (:func:`aiadvisor.hardware.calibrate.cold_points`) at the same bytes. In a real step an op
  reads tensors written long before into a fresh output; the hot grid reuses one buffer in a
  loop. On the development CPU the ratio was about 1.5 from 2 to 8 MiB, falling to 1 by 16 MiB
  (where the hot grid's own fresh outputs already pay the page faults); the bench's training
  and inference steps rose 0-4 % (``bench/costmodel_local_cpu.py``).
* **Fresh large outputs**: an out-of-place op writing at least
  :data:`aiadvisor.hardware.host.FRESH_OUTPUT_BYTES` per call gets new pages from the kernel
  for its output every call (glibc serves such allocations with ``mmap`` and returns them on
  free), and pays their page faults: its output bytes times the calibration's first-touch
  cost per byte (:func:`aiadvisor.hardware.calibrate.first_touch_points`), added by
  ``aiadvisor.costmodel.predict._cpu_fresh_outputs``. E.g. the prompt logits of a
  50 K-vocabulary model. The grid's own points whose calls faulted pages in (the largest FP32
  outputs, 32 MiB: :attr:`~aiadvisor.hardware.calibrate.OpPoint.faulted_bytes`) have those
  faults, at the same rate, taken off their time, so they are not paid twice: on the 2-core
  Xeon VM a 32 MiB ``clone`` took 8.2 ms a call, 1.4 ms of it copying; extrapolated to the
  demo's 128 MiB gradient copies with its faults inside and again on top, they were priced
  80 ms where they took 46-58.
* **Optimizer steps**: ``a * tensors + b * elements``, fitted on the timed steps of the same
  optimizer over tensors of at most :data:`OPTIMIZER_SMALL_ELEMENTS` elements (Adam uses
  AdamW's), plus, for each parameter tensor of at least 1 MiB (the profile's
  ``large_param_bytes``), its elements at the per-element cost the grid timed at its size
  (:attr:`LocalCalibration.optimizer_rates`) in place of ``b``. The default (for-loop) step
  makes about 20 passes over each tensor and its state; the passes over a tensor small enough
  for the core's cache (2 MiB of L2 a core on the 2-core Xeon VM) find it there, a larger one's
  go to memory. On that VM the grid's AdamW steps (on states evicted from the caches, as after
  a backward: :func:`aiadvisor.hardware.calibrate.optimizer_points`) took 1.48-1.51 ns an
  element over tensors of up to 1 MiB, 1.70-1.76 over 4 MiB tensors and, over 16 MiB ones,
  1.9 in one calibration and 3.2 in another (the least steady point of the grid); a small
  Llama-style model's AdamW step (two 8 MiB tables, 37 smaller tensors) took 16.0-16.5 ms
  inside its training step, priced 11.5 ms without the sizes and 12.8 or 15.3 ms with them.
* Anything else keeps the roofline on the measured bandwidth plus the per-op overhead.

Each op is looked up in the dtype it runs in at the predicted precision (FP32, or the 16-bit
type where the grid timed it: 16-bit elementwise kernels on a CPU are no faster per element than
FP32 ones, so halving the bytes would halve the time wrongly).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..hardware.calibrate import (
    CACHE_SUFFIX,
    CHANNELS_LAST_SUFFIX,
    COLD_SUFFIX,
    CONV_CALL_SUFFIX,
    MAX_POOL_OP,
    SKINNY_SHAPES,
    SKINNY_WARM_CYCLE_BYTES,
    STEP_SUFFIX,
    base_op,
)
from ..units import FUSED_SUFFIX, OPTIMIZER_TRAFFIC, UNFUSED_OPTIMIZER_TENSORS

#: Family of ops by aten name (for ops the calibration grid did not time itself). Ops of class
#: "memory" not listed are "elementwise"; class "embedding" is "embedding".
FAMILIES: dict[str, tuple[str, ...]] = {
    "activation": ("gelu", "gelu_backward", "silu", "silu_backward", "tanh", "tanh_backward",
                   "sigmoid", "sigmoid_backward", "exp", "log", "erf", "softplus",
                   "softplus_backward", "elu", "elu_backward", "mish", "mish_backward",
                   "hardswish", "hardswish_backward", "pow", "sqrt", "rsqrt", "sin", "cos",
                   "log_sigmoid_forward", "log_sigmoid_backward"),
    "rng": ("bernoulli_", "bernoulli", "native_dropout", "rand", "randn", "rand_like",
            "randn_like", "uniform_", "normal_", "randint", "randperm"),
    "norm": ("native_layer_norm", "native_layer_norm_backward", "native_batch_norm",
             "native_batch_norm_backward", "_native_batch_norm_legit",
             "_native_batch_norm_legit_functional", "_native_batch_norm_legit_no_training",
             "native_group_norm", "native_group_norm_backward", "_softmax",
             "_softmax_backward_data", "_log_softmax", "_log_softmax_backward_data",
             "_safe_softmax", "_fused_rms_norm", "_fused_rms_norm_backward"),
    "reduce": ("sum", "mean", "amax", "amin", "max", "min", "var", "var_mean", "std",
               "std_mean", "argmax", "argmin", "logsumexp", "cumsum", "linalg_vector_norm",
               "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward",
               "nll_loss2d_backward"),
    "pool": ("max_pool2d_with_indices", "max_pool2d_with_indices_backward", "avg_pool2d",
             "avg_pool2d_backward", "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward",
             "max_pool3d_with_indices", "max_pool3d_with_indices_backward", "avg_pool3d",
             "avg_pool3d_backward", "adaptive_max_pool2d", "adaptive_max_pool2d_backward"),
    "copy": ("clone", "copy_", "_to_copy", "cat", "stack", "contiguous", "constant_pad_nd",
             "index", "index_put_", "repeat", "flip", "roll"),
    "embedding": ("embedding", "embedding_dense_backward", "index_select", "gather",
                  "index_add_", "scatter_add_"),
}
#: Weight bytes a call below which a skinny GEMM keeps the K = :data:`SKINNY_K` rate.
SKINNY_K_MIN_WEIGHT_BYTES = 2**20
#: K of the skinny grid's GEMMs (:data:`~aiadvisor.hardware.calibrate.SKINNY_SHAPES`).
SKINNY_K = float(SKINNY_SHAPES[0][1])
#: Forward GEMMs with fewer rows than this (estimated from FLOPs and bytes), or than the skinny
#: grid's largest timed M where that is more, use the skinny grid: its largest M (64,
#: K = N = 2048) estimates as 60; the square linear grid's smallest as 85. Within the skinny
#: range the skinny timings (weights cold in DRAM) are the right ones: the linear grid times
#: one matrix in a loop, its weights hot in cache (measured on the development CPU: GPT-2's
#: 64-token prefill GEMMs, about 57 rows, ran at 86 GFLOP/s; the skinny grid's M = 64 at 93,
#: the linear grid at 140-155).
SKINNY_ROWS = 48.0
#: Families priced at the cold-input slowdown (:meth:`LocalCalibration.cold_factor`) over their
#: hot-loop times: streaming ops whose inputs a real step wrote long before.
COLD_FAMILIES = ("elementwise", "activation", "norm", "copy")
_DTYPE_BYTES = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0}
_FAMILY_OF = {f"aten.{name}": fam for fam, names in FAMILIES.items() for name in names}
_OPTIMIZER_FIT_OF = {"adamw": "adamw", "adam": "adamw", "sgd_momentum": "sgd_momentum",
                     "sgd": "sgd"}


def op_family(name: str, op_class: str, phase: str = "forward") -> str | None:
    """Calibration family of an op record: ``gemm-forward``/``gemm-backward`` for GEMMs, None
    for convolutions and optimizer records."""
    if op_class == "gemm":
        return f"gemm-{phase}" if phase in ("forward", "backward") else None
    if op_class == "conv":
        layout = "-cl" if name.endswith(CHANNELS_LAST_SUFFIX) else ""
        return f"conv-{phase}{layout}" if phase in ("forward", "backward") else None
    if op_class == "optimizer":
        return None
    if op_class == "attention":
        return "attention-cache" if name.endswith(CACHE_SUFFIX) else "attention"
    if op_class == "embedding":
        return "embedding"
    # Record suffixes ("[cache]", a max pool's "[3x3]", "[channels_last]") name variants of
    # the op: the family is the bare op's.
    return _FAMILY_OF.get(base_op(name), "elementwise")


#: A forward max pool record: aten name, its window where not 2 x 2 (``[KxK]``, see
#: :func:`aiadvisor.profiler.opinfo.record_suffix`), its layout where channels_last.
_MAX_POOL = re.compile(rf"^({re.escape(MAX_POOL_OP)})(?:\[(\d+)x(\d+)\])?"
                       rf"({re.escape(CHANNELS_LAST_SUFFIX)})?$")


@dataclass(frozen=True)
class SizeCurve:
    """Seconds per call against work (bytes or FLOPs) of one op, from timed sizes."""

    log_work: np.ndarray
    log_seconds: np.ndarray
    floor_s: float
    """Below the smallest size the time shrinks in proportion, never under this (the per-op
    overhead)."""

    def seconds(self, work: np.ndarray) -> np.ndarray:
        w = np.maximum(np.asarray(work, float), 1.0)
        lw = np.log(w)
        inside = np.exp(np.interp(lw, self.log_work, self.log_seconds))
        above = np.exp(self.log_seconds[-1] + lw - self.log_work[-1])
        below = np.maximum(np.exp(self.log_seconds[0] + lw - self.log_work[0]),
                           min(self.floor_s, np.exp(self.log_seconds[0])))
        return np.where(lw > self.log_work[-1], above,
                        np.where(lw < self.log_work[0], below, inside))


@dataclass(frozen=True)
class LocalCalibration:
    """What a benchmark of the attached device says about op times (see the module doc)."""

    matmul: list = field(default_factory=list)
    """``[(n, tflops)]`` of square matmuls at the predicted precision."""
    curves: dict[tuple[str, str], SizeCurve] = field(default_factory=dict)
    """By (aten name, dtype), e.g. ``("aten.gelu", "float32")``; GEMMs by (family, dtype),
    e.g. ``("gemm-forward", "bfloat16")``."""
    families: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    """(family, dtype) -> timed op names of that family."""
    optimizer: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Optimizer -> (seconds per tensor, seconds per element of the tensors of at most
    :data:`OPTIMIZER_SMALL_ELEMENTS` elements)."""
    optimizer_rates: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """Optimizer -> (log elements per tensor, seconds per element) of the grid's steps over
    larger tensors, by increasing size, from :data:`OPTIMIZER_SMALL_ELEMENTS` (at the small
    tensors' cost) up (:func:`fit_optimizer_rates`). Empty in a calibration from before they
    were timed."""
    date: str = ""
    skinny: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """dtype -> (log rows, log FLOP/s) of the skinny forward GEMMs, by increasing rows."""
    skinny_narrow: dict[str, tuple[float, np.ndarray, np.ndarray]] = field(default_factory=dict)
    """dtype -> (log K, log rows, log FLOP/s) of the skinny GEMMs timed at a shorter K
    (:data:`~aiadvisor.hardware.calibrate.SKINNY_NARROW_SHAPES`); the skinny grid's own K is
    :data:`SKINNY_K`."""
    skinny_hot: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """dtype -> (log rows, log FLOP/s) of the skinny GEMMs timed on one weight matrix in cache
    (:data:`~aiadvisor.hardware.calibrate.SKINNY_HOT_SHAPES`), by increasing rows: the price
    of a recurrent layer's per-step GEMMs (:data:`~aiadvisor.hardware.calibrate.STEP_SUFFIX`).
    Empty in a calibration from before they were timed."""
    skinny_warm: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """dtype -> (log rows, log FLOP/s) of the skinny grid's shapes timed cycling only
    :data:`~aiadvisor.hardware.calibrate.SKINNY_WARM_CYCLE_BYTES` of weights, by increasing
    rows: the rate of a step whose weights all fit in that much (:meth:`_skinny_seconds`).
    Empty in a calibration from before they were timed."""
    bw_gbs: float | None = None
    """Measured streaming bandwidth (GB/s)."""
    conv: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """(``conv-forward``/``conv-backward``, dtype) -> (log FLOPs per byte, log FLOP/s) of the
    timed convolutions, by increasing intensity."""
    cold: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """Cold-input slowdowns: op -> (log bytes, log of cold over hot seconds at those bytes) of
    each op timed on cold inputs (FP32), by increasing bytes."""
    first_touch_s_per_byte: float = 0.0
    """Page faults of a freshly allocated large buffer, seconds per byte written (0 unknown)."""
    zero_sqrt_s_per_element: float = 0.0
    """What ``torch.sqrt`` of a zero costs beyond that of an ordinary value, seconds per element
    (:func:`~aiadvisor.hardware.calibrate.zero_sqrt_points`; 0 unknown)."""
    conv_call: dict[tuple[str, str], float] = field(default_factory=dict)
    """(conv family, dtype) -> seconds one call costs whatever its size (a 1,024-MAC
    convolution timed; the rates in :attr:`conv` are of the work beyond it). Empty in a
    calibration from before it was timed."""
    conv_weight: dict[tuple[str, str], float] = field(default_factory=dict)
    """(conv family, dtype) -> seconds per weight element of a call (:func:`fit_conv_weight`;
    the rates in :attr:`conv` are of the work beyond it). Empty in a calibration from before
    it was timed."""
    gemm_weight: dict[str, tuple[float, float]] = field(default_factory=dict)
    """dtype -> (weight elements of the linear grid's largest forward GEMM, extra seconds per
    weight element beyond it), from :func:`fit_gemm_weight`."""
    attention: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """(aten name, dtype) -> (log FLOPs per byte, log seconds per byte) of the timed CPU
    attention kernels, by increasing intensity (see :meth:`_attention_seconds`)."""

    def gemm_weight_seconds(self, weight_elements: np.ndarray, dtype: str) -> np.ndarray:
        """Extra seconds a forward GEMM call with ``weight_elements`` of weight takes over the
        linear grid's curve: ``c * max(W - W0, 0)`` with ``(W0, c)`` fitted at ``dtype``
        (0 where not fitted)."""
        w = np.asarray(weight_elements, float)
        base, per_element = self.gemm_weight.get(dtype, (0.0, 0.0))
        return per_element * np.maximum(w - base, 0.0)

    def times_channels_last(self, dtype: str) -> bool:
        """Whether the grid timed convolutions in channels_last at ``dtype``."""
        return ("conv-forward-cl", dtype) in self.conv

    def cold_factor(self, num_bytes: np.ndarray) -> np.ndarray:
        """How much slower a memory-bound op runs on cold inputs than the hot grid says: the
        median over the cold-timed ops of each one's cold/hot ratio at these bytes (log-log
        interpolation, flat beyond the largest size), never under 1; 1 below the smallest
        bytes any op was timed cold at (small tensors a step just wrote stay in a core's
        cache)."""
        b = np.maximum(np.asarray(num_bytes, float), 1.0)
        if not self.cold:
            return np.ones_like(b)
        lb = np.log(b)
        ratios = np.exp(np.median([np.interp(lb, x, y) for x, y in self.cold.values()], axis=0))
        smallest = min(float(x[0]) for x, _ in self.cold.values())
        return np.where(lb < smallest, 1.0, np.maximum(ratios, 1.0))

    @classmethod
    def from_benchmark(cls, result, precision: str) -> LocalCalibration:
        """From a :class:`~aiadvisor.hardware.bench.BenchmarkResult`. Curves are kept per dtype
        of the timed tensors (FP32, and the 16-bit types the device runs natively); an op is
        looked up in the dtype it runs in at the predicted precision."""
        matmul = result.curve("fp32" if precision == "tf32" else precision) or []
        floor = max(float(result.launch_overhead_us), 0.0) * 1e-6
        by_key: dict[tuple[str, str], list[tuple[float, float]]] = {}
        family_ops: dict[tuple[str, str], list[str]] = {}
        skinny: dict[str, list[tuple[float, float]]] = {}
        hot: dict[str, list[tuple[float, float]]] = {}
        warm: dict[str, list[tuple[float, float]]] = {}
        narrow: dict[float, dict[str, list[tuple[float, float]]]] = {}
        conv: dict[tuple[str, str], list[tuple[float, float]]] = {}
        conv_points: list = []
        conv_call: dict[tuple[str, str], float] = {}
        wide: dict[str, list] = {}
        attention: dict[tuple[str, str], list[tuple[float, float]]] = {}
        zero_sqrt = 0.0
        first_touch = next((max(p.seconds, 0.0) / max(p.num_bytes, 1.0) for p in result.ops
                            if p.family == "first-touch"), 0.0)
        for p in result.ops:
            if p.family == "first-touch":
                continue
            if p.family == "sqrt-zero":
                zero_sqrt = max(p.seconds, 0.0) / max(p.num_bytes / 4.0, 1.0)
                continue
            if p.family == "gemm-forward-wide":
                wide.setdefault(getattr(p, "dtype", "float32"), []).append(p)
                continue
            work = p.flops if _flop_curve(p.family) else p.num_bytes
            if work <= 0 or p.seconds <= 0:
                continue
            dtype = getattr(p, "dtype", "float32")
            if p.family in ("gemm-skinny-hot", "gemm-skinny-warm"):
                rows = gemm_rows(p.flops, p.num_bytes, dtype)
                (hot if p.family == "gemm-skinny-hot" else warm).setdefault(dtype, []).append(
                    (np.log(rows), np.log(p.flops / p.seconds)))
                continue
            if p.family == "gemm-skinny":
                rows = gemm_rows(p.flops, p.num_bytes, dtype)
                inner = getattr(p, "inner", 0.0) or SKINNY_K
                grid = skinny if inner == SKINNY_K else narrow.setdefault(inner, {})
                grid.setdefault(dtype, []).append((np.log(rows), np.log(p.flops / p.seconds)))
                continue
            if p.family.startswith("gemm-"):
                by_key.setdefault((p.family, dtype), []).append((work, p.seconds))
                continue
            if p.family.startswith("conv-"):
                if p.family.endswith(CONV_CALL_SUFFIX):
                    conv_call[(p.family.removesuffix(CONV_CALL_SUFFIX), dtype)] = p.seconds
                else:
                    conv_points.append((p.family, dtype, p))
                continue
            # Less the page faults of the call's fresh output (the grid's largest outputs are
            # above glibc's mmap threshold): a step's fresh outputs pay them apart
            # (``predict._cpu_fresh_outputs``), so the curve holds the op's own work.
            faults = getattr(p, "faulted_bytes", 0.0) * first_touch
            by_key.setdefault((p.op, dtype), []).append(
                (work, max(p.seconds - faults, 0.25 * p.seconds)))
            if p.family == "attention" and p.num_bytes > 0:
                attention.setdefault((p.op, dtype), []).append(
                    (np.log(p.flops / p.num_bytes), np.log(p.seconds / p.num_bytes)))
            if p.op.endswith(COLD_SUFFIX):  # a slowdown over the hot curves, not a family member
                continue
            ops = family_ops.setdefault((p.family, dtype), [])
            if p.op not in ops:
                ops.append(p.op)
        conv_weight = fit_conv_weight(conv_points, conv_call)
        for fam, dtype, p in conv_points:
            # The rate of the work beyond the per-call and per-weight times (at least a
            # quarter of the call).
            fixed = (conv_call.get((fam, dtype), 0.0)
                     + conv_weight.get((fam, dtype), 0.0) * p.weight_elements)
            seconds = max(p.seconds - fixed, 0.25 * p.seconds)
            conv.setdefault((fam, dtype), []).append(
                (np.log(p.flops / max(p.num_bytes, 1.0)), np.log(p.flops / seconds)))
        curves = {key: _size_curve(pts, floor) for key, pts in by_key.items()}
        weight = {}
        for dtype, pts in wide.items():
            curve = curves.get(("gemm-forward", dtype))
            if curve is not None:
                base = max((p.weight_elements for p in result.ops
                            if p.family == "gemm-forward" and p.dtype == dtype), default=0.0)
                weight[dtype] = fit_gemm_weight(curve, pts, base)
        cold = {key: pts for key, pts in by_key.items() if key[0].endswith(COLD_SUFFIX)}
        rates = {dt: tuple(np.array(v) for v in zip(*sorted(pts))) for dt, pts in skinny.items()}
        hot_rates = {dt: tuple(np.array(v) for v in zip(*sorted(pts))) for dt, pts in hot.items()}
        warm_rates = {dt: tuple(np.array(v) for v in zip(*sorted(pts)))
                      for dt, pts in warm.items()}
        narrow_rates = {dt: (float(np.log(k)), *(np.array(v) for v in zip(*sorted(pts))))
                        for k, by_dtype in narrow.items() for dt, pts in by_dtype.items()}
        return cls(matmul=list(matmul), curves=curves,
                   families={k: tuple(v) for k, v in family_ops.items()},
                   optimizer=fit_optimizers(result.optimizer),
                   optimizer_rates=fit_optimizer_rates(result.optimizer), date=result.date,
                   skinny=rates, skinny_narrow=narrow_rates, skinny_hot=hot_rates,
                   skinny_warm=warm_rates,
                   bw_gbs=result.memory_bw_gbs,
                   conv={k: _intensity_rates(v) for k, v in conv.items()},
                   conv_call=conv_call, conv_weight=conv_weight,
                   cold=_cold_slowdowns(cold, curves), first_touch_s_per_byte=first_touch,
                   zero_sqrt_s_per_element=zero_sqrt,
                   gemm_weight=weight,
                   attention={k: _intensity_rates(v) for k, v in attention.items()})

    def op_seconds(self, names: np.ndarray, families: np.ndarray, bytes_per_call: np.ndarray,
                   flops_per_call: np.ndarray, dtypes: np.ndarray | None = None,
                   weight_elements: np.ndarray | None = None,
                   written_bytes: np.ndarray | None = None,
                   step_weight_bytes: float = math.inf) -> np.ndarray:
        """Seconds per call of each op from its own curve, else its family's median, in the
        op's dtype (``dtypes``, default FP32); NaN where nothing was measured. A memory-bound op
        with no curve in its 16-bit dtype falls back to the FP32 curve at its bytes; a GEMM
        does not (the matmul curve of the precision serves it). A forward GEMM with
        ``weight_elements`` (per call; 0 or None: unknown) adds
        :meth:`gemm_weight_seconds`, unless priced as skinny; a recurrent layer's per-step
        GEMM (``[step]``, forward or the hidden state's gradient in backward) takes the skinny
        rate on a weight in cache (:attr:`skinny_hot`). ``step_weight_bytes``: the forward
        GEMMs' weights a step reads in all (skinny GEMMs of a step whose weights a cache may
        hold take the :attr:`skinny_warm` rates, see :meth:`_skinny_seconds`)."""
        out = np.full(len(names), np.nan)
        steps = np.array([str(n).endswith(STEP_SUFFIX) for n in names], dtype=bool)
        if dtypes is None:
            dtypes = np.full(len(names), "float32", dtype=object)
        groups: dict[tuple[str, str, str], list[int]] = {}
        for i, (name, fam, dtype) in enumerate(zip(names, families, dtypes)):
            if fam is not None:
                key = fam if fam.startswith("gemm-") else name
                groups.setdefault((key, fam, dtype), []).append(i)
        for (key, fam, dtype), rows in groups.items():
            if fam.startswith("conv-"):
                # channels_last convolutions without their own timings (a calibration from
                # before they were timed) take the NCHW ones: no layout gain, never a guess.
                for f in dict.fromkeys((fam, fam.removesuffix("-cl"))):
                    if (f, dtype) in self.conv:
                        weights = (weight_elements[rows] if weight_elements is not None
                                   else np.zeros(len(rows)))
                        out[rows] = self._conv_seconds(f, dtype, flops_per_call[rows],
                                                       bytes_per_call[rows], weights)
                        break
                continue
            if fam == "attention":
                timed = self._attention_seconds(key, dtype, flops_per_call[rows],
                                                bytes_per_call[rows])
                if timed is not None:
                    out[rows] = timed
                    continue
            if fam == "pool":
                pooled = self._max_pool_seconds(key, dtype, bytes_per_call[rows])
                if pooled is not None:
                    out[rows] = pooled
                    continue
            work = (flops_per_call if _flop_curve(fam) else bytes_per_call)[rows]
            tries = [dtype] if fam.startswith("gemm-") else list(dict.fromkeys((dtype,
                                                                                "float32")))
            # A variant the grid did not time (a layout or mode suffix, not a cache op) takes
            # the bare op's own timings before its family's.
            bare = base_op(key)
            names = (key,) if bare == key or key.endswith(CACHE_SUFFIX) else (key, bare)
            for dt in tries:
                timed = next((k for k in names if (k, dt) in self.curves), None)
                if timed is not None:
                    out[rows] = self.curves[(timed, dt)].seconds(work)
                    break
                members = self.families.get((fam, dt), ())
                # An op on a decode cache goes by the family's ops timed on a cache (if any);
                # any other op by the family's ops timed on hot buffers.
                on_cache = [o for o in members if o.endswith(CACHE_SUFFIX)]
                if not (key.endswith(CACHE_SUFFIX) and on_cache):
                    members = [o for o in members if not o.endswith(CACHE_SUFFIX)]
                else:
                    members = on_cache
                if members:
                    out[rows] = np.median([self.curves[(o, dt)].seconds(work)
                                           for o in members], axis=0)
                    break
            if fam in COLD_FAMILIES and not key.endswith(CACHE_SUFFIX):
                out[rows] = out[rows] * self.cold_factor(bytes_per_call[rows])
            if fam == "gemm-forward" and weight_elements is not None:
                out[rows] = out[rows] + self.gemm_weight_seconds(weight_elements[rows], dtype)
            if fam == "gemm-forward" and dtype in self.skinny:
                self._skinny_seconds(out, np.asarray(rows), flops_per_call, bytes_per_call,
                                     dtype, weight_elements=weight_elements,
                                     written_bytes=written_bytes,
                                     step_weight_bytes=step_weight_bytes)
            if fam in ("gemm-forward", "gemm-backward") and dtype in self.skinny_hot:
                hot_rows = np.asarray(rows)[steps[rows]]
                if len(hot_rows):
                    self._hot_skinny_seconds(out, hot_rows, flops_per_call, bytes_per_call,
                                             dtype)
        return out

    def _hot_skinny_seconds(self, out: np.ndarray, rows: np.ndarray, flops: np.ndarray,
                            num_bytes: np.ndarray, dtype: str) -> None:
        """Overwrite the time of a recurrent layer's per-step GEMMs among ``rows`` (in place)
        with the rate of the skinny GEMMs timed on one weight in cache at their row count
        (log-log between the timed rows; beyond the largest, the square linear grid's price,
        left as it is)."""
        f, b = flops[rows], num_bytes[rows]
        m = gemm_rows(f, b, dtype)
        log_m, log_rate = self.skinny_hot[dtype]
        thin = (m <= float(np.exp(log_m[-1])) * (1 + 1e-9)) & (f > 0)
        if thin.any():
            rate = np.exp(np.interp(np.log(np.maximum(m[thin], 1.0)), log_m, log_rate))
            out[rows[thin]] = f[thin] / rate

    def _attention_seconds(self, name: str, dtype: str, flops: np.ndarray,
                           num_bytes: np.ndarray) -> np.ndarray | None:
        """Seconds per call of a CPU attention kernel (None: not timed in ``dtype`` or FP32):
        its bytes times the grid's seconds per byte at its intensity. A call's FLOPs per byte
        is its sequence length over the element size, whatever its batch and heads, and the
        kernel runs each (batch, head) block apart, so at one sequence length the time grows
        with the blocks, as the bytes do: keyed on FLOPs, a call with more blocks than the
        grid's 16 took the curve toward a longer sequence. Measured on the 2-core Xeon VM
        (bf16 backward, head dim 64, seq 64): 1.4 ms for 16 blocks, 4.0 ms for 48, where the
        FLOP curve said 2.2 ms (FP32: 0.28 and 1.03 ms). Log-log between the timed
        intensities; below the shortest sequence the per-byte time of the shortest, above the
        longest it grows with the intensity (the FLOPs per byte)."""
        for dt in dict.fromkeys((dtype, "float32")):
            if (name, dt) in self.attention:
                log_i, log_rate = self.attention[(name, dt)]
                b = np.maximum(np.asarray(num_bytes, float), 1.0)
                li = np.log(np.maximum(np.asarray(flops, float), 1.0) / b)
                rate = np.where(li > log_i[-1], log_rate[-1] + li - log_i[-1],
                                np.interp(li, log_i, log_rate))
                return b * np.exp(rate)
        return None

    def _max_pool_seconds(self, name: str, dtype: str,
                          num_bytes: np.ndarray) -> np.ndarray | None:
        """Seconds per call of a forward max pool (None: not one, or nothing timed): the
        grid's curve of its layout (channels_last, else NCHW) in its dtype (else FP32), at
        its bytes, for its window. The grid times 2 x 2 and 3 x 3 windows; another window
        ``kh x kw`` takes ``t2 + (t3 - t2) x (kh kw - 4) / 5`` (time grows with the elements
        each output compares; floored at half the smaller), a calibration without a 3 x 3
        timing the 2 x 2 one."""
        m = _MAX_POOL.match(name)
        if m is None:
            return None
        base, layout = m.group(1), m.group(4) or ""
        window = int(m.group(2) or 2) * int(m.group(3) or 2)
        for lay in dict.fromkeys((layout, "")):
            for dt in dict.fromkeys((dtype, "float32")):
                two = self.curves.get((base + lay, dt))
                if two is None:
                    continue
                t2 = two.seconds(num_bytes)
                three = self.curves.get((base + "[3x3]" + lay, dt))
                if three is None or window == 4:
                    return t2
                t3 = three.seconds(num_bytes)
                return np.maximum(t2 + (t3 - t2) * (window - 4) / 5.0,
                                  0.5 * np.minimum(t2, t3))
        return None

    def _conv_seconds(self, fam: str, dtype: str, flops: np.ndarray, num_bytes: np.ndarray,
                      weight_elements: np.ndarray | None = None) -> np.ndarray:
        """Seconds per call of convolutions: the per-call time timed for the family and
        dtype, the per-weight-element time times their weights (per call; 0 or None:
        unknown) and the work at the rate timed at their intensity."""
        log_i, log_rate = self.conv[(fam, dtype)]
        f = np.maximum(np.asarray(flops, float), 1.0)
        b = np.maximum(np.asarray(num_bytes, float), 1.0)
        w = (np.zeros_like(f) if weight_elements is None
             else np.maximum(np.asarray(weight_elements, float), 0.0))
        seconds = (f / np.exp(np.interp(np.log(f / b), log_i, log_rate))
                   + self.conv_call.get((fam, dtype), 0.0)
                   + self.conv_weight.get((fam, dtype), 0.0) * w)
        if self.bw_gbs:
            seconds = np.maximum(seconds, b / (self.bw_gbs * 1e9))
        return seconds

    def _skinny_seconds(self, out: np.ndarray, rows: np.ndarray, flops: np.ndarray,
                        num_bytes: np.ndarray, dtype: str, *,
                        weight_elements: np.ndarray | None = None,
                        written_bytes: np.ndarray | None = None,
                        step_weight_bytes: float = math.inf) -> None:
        """Overwrite the time of the skinny GEMMs among ``rows`` (in place): the skinny grid's
        rate at their rows, moved along ``log K`` toward the rate timed at the shorter K where
        their K is known (``K = weight elements / N``, ``N`` = written elements / rows) and the
        calibration timed one (within two octaves below it and one above the grid's K).

        A step whose forward GEMMs read at most
        :data:`~aiadvisor.hardware.calibrate.SKINNY_WARM_CYCLE_BYTES` of weights in all
        (``step_weight_bytes``) takes, at each row count, the warm grid's rate over the skinny
        grid's (:attr:`skinny_warm`, the same shapes cycling that much): its weights are still
        in the cache at the next step. From that size to twice it the shift fades in log
        bytes; beyond, none (a 140 MB decoder ran at the DRAM rates on a CPU reporting 480 MB
        of shared L3)."""
        f, b = flops[rows], num_bytes[rows]
        m = gemm_rows(f, b, dtype)
        log_m, log_rate = self.skinny[dtype]
        limit = max(SKINNY_ROWS, float(np.exp(log_m[-1])) * (1 + 1e-9))
        thin = (m < limit) & (f > 0)
        if not thin.any():
            return
        at_m = np.log(np.maximum(m[thin], 1.0))
        log_r = np.interp(at_m, log_m, log_rate)
        narrow = self.skinny_narrow.get(dtype)
        if narrow is not None and weight_elements is not None and written_bytes is not None:
            log_k_narrow, nm, nrate = narrow
            w = np.asarray(weight_elements, float)[rows][thin]
            size = _DTYPE_BYTES.get(dtype, 4.0)
            n_out = np.asarray(written_bytes, float)[rows][thin] / size / np.maximum(m[thin], 1.0)
            # Weights under SKINNY_K_MIN_WEIGHT_BYTES a call are left at the grid's K: the
            # per-step GEMMs of a recurrent layer reuse one small matrix (their weight per
            # call is the module's parameters over many calls), not a layer streamed once.
            known = (w > 0) & (n_out >= 1) & (w * size >= SKINNY_K_MIN_WEIGHT_BYTES)
            log_k = np.log(np.where(known, w / np.maximum(n_out, 1.0), SKINNY_K))
            ref = np.log(SKINNY_K)
            log_k = np.clip(log_k, log_k_narrow - 2 * np.log(2), ref + np.log(2))
            slope = (log_r - np.interp(at_m, nm, nrate)) / (ref - log_k_narrow)
            log_r = np.where(known, log_r + slope * (log_k - ref), log_r)
        warm = self.skinny_warm.get(dtype)
        share = float(np.clip(np.log(2 * SKINNY_WARM_CYCLE_BYTES / max(step_weight_bytes, 1.0))
                              / np.log(2), 0.0, 1.0)) if np.isfinite(step_weight_bytes) else 0.0
        if warm is not None and share > 0:
            # Never slower than the DRAM rates: a cache that does not hold the cycle times
            # the warm grid as the skinny one, up to noise.
            log_r = log_r + share * np.maximum(
                np.interp(at_m, *warm) - np.interp(at_m, log_m, log_rate), 0.0)
        seconds = f[thin] / np.exp(log_r)
        if self.bw_gbs:
            seconds = np.maximum(seconds, b[thin] / (self.bw_gbs * 1e9))
        out[rows[thin]] = seconds

    def optimizer_seconds(self, name: str, tensors: float, flops: float,
                          large_elements=()) -> float | None:
        """Seconds of one optimizer step over ``tensors`` tensors (``flops`` as profiled), of
        which ``large_elements`` lists the element counts of the large ones (at least 1 MiB):
        those take the per-element cost timed at their size (:attr:`optimizer_rates`), the
        rest the small tensors' (a list summing to more than the step's elements, e.g. a
        pipeline stage's share, is scaled down to it)."""
        fused = name.endswith(FUSED_SUFFIX)
        opt = name.removeprefix("optimizer.").removesuffix(FUSED_SUFFIX)
        fit_name = _OPTIMIZER_FIT_OF.get(opt, "")
        fit = self.optimizer.get(fit_name)
        if fit is None or opt not in OPTIMIZER_TRAFFIC:
            return None
        elements = flops / OPTIMIZER_TRAFFIC[opt][1]
        element_s = fit[1] * elements
        rates = self.optimizer_rates.get(fit_name)
        sizes = np.asarray(large_elements, float)
        if rates is not None and sizes.size and sizes.sum() > 0:
            log_size, per_element = rates
            rate = np.interp(np.log(np.maximum(sizes, 1.0)), log_size, per_element)
            share = min(1.0, elements / float(sizes.sum()))
            element_s += share * float(((rate - fit[1]) * sizes).sum())
        if fused:
            # The grid timed the default (for-loop) step; a fused one streams each tensor once:
            # the per-element time scaled by the tensor passes (estimated, not timed).
            element_s *= OPTIMIZER_TRAFFIC[opt][0] / UNFUSED_OPTIMIZER_TENSORS[opt]
        return fit[0] * tensors + max(element_s, 0.0)


def _cold_slowdowns(cold: dict[tuple[str, str], list[tuple[float, float]]],
                    curves: dict[tuple[str, str], SizeCurve]
                    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per cold-timed op with a hot curve of the same name and dtype: (log bytes, log of cold
    over hot seconds), by increasing bytes."""
    out = {}
    for (name, dtype), pts in cold.items():
        hot = curves.get((name.removesuffix(COLD_SUFFIX), dtype))
        if hot is None:
            continue
        pts = sorted(pts)
        b = np.array([w for w, _ in pts], float)
        ratio = np.array([s for _, s in pts], float) / hot.seconds(b)
        out[name] = (np.log(b), np.log(ratio))
    return out


def fit_conv_weight(points, call: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """Seconds per weight element of a convolution call, per (family, dtype), from the grid:
    ``points`` are ``(family, dtype, OpPoint)``; ``call`` the per-call times. Of the timed
    convolutions of a family and dtype, the two with the largest equal weights (the grid's
    256-channel 3x3 layer on 8x8 and on 4x4 outputs) and different FLOPs give the work rate
    ``R = (F1 - F2) / (t1 - t2)``, and what the smaller one took beyond its call and its work,
    ``t2 - call - F2 / R``, over its weights is the cost of an element (never negative; none
    where no such pair was timed or the pair ran no faster with less work).

    E.g. 1.2 GFLOP in 1.0 ms and 0.3 GFLOP in 0.4 ms, 50 us a call, 0.5 M weights:
    ``R = 0.9e9 / 0.6e-3 = 1.5 TFLOP/s``; ``(0.4 - 0.05 - 0.2) ms / 0.5e6 = 0.3 ns`` an
    element."""
    groups: dict[tuple[str, str], list] = {}
    for fam, dtype, p in points:
        if p.weight_elements > 0:
            groups.setdefault((fam, dtype), []).append(p)
    out = {}
    for key, pts in groups.items():
        by_weight: dict[float, list] = {}
        for p in pts:
            by_weight.setdefault(p.weight_elements, []).append(p)
        pairs = [(w, sorted(ps, key=lambda p: p.flops)) for w, ps in by_weight.items()
                 if len({p.flops for p in ps}) >= 2]
        if not pairs:
            continue
        weights, same = max(pairs, key=lambda item: item[0])
        small, big = same[0], same[-1]
        if big.seconds <= small.seconds:
            continue
        rate = (big.flops - small.flops) / (big.seconds - small.seconds)
        extra = small.seconds - call.get(key, 0.0) - small.flops / rate
        out[key] = max(extra, 0.0) / weights
    return out


def fit_gemm_weight(curve: SizeCurve, points, base_elements: float) -> tuple[float, float]:
    """``(W0, c)``: the extra seconds per weight element, ``c``, of large-weight forward GEMMs
    over the linear grid's ``curve`` at their FLOPs, least squares through the origin in
    ``W - W0`` (``W0 = base_elements``, the grid's largest weight, whose cost the curve holds
    already); ``c >= 0`` (0 where they ran no slower than the curve).

    E.g. points of 8 M and 16 M elements, 0.7 ms and 1.5 ms over the curve, ``W0`` = 1 M:
    ``c = (7e6 * 0.7e-3 + 15e6 * 1.5e-3) / (7e6**2 + 15e6**2) = 100 ps`` per element."""
    w = np.array([p.weight_elements for p in points], float) - base_elements
    extra = np.array([p.seconds for p in points], float) - curve.seconds(
        np.array([p.flops for p in points], float))
    keep = w > 0
    if not keep.any():
        return float(base_elements), 0.0
    per_element = float(w[keep] @ extra[keep] / (w[keep] @ w[keep]))
    return float(base_elements), max(per_element, 0.0)


def gemm_rows(flops, num_bytes, dtype: str = "float32"):
    """Rows ``M`` of a GEMM ``(M, K) @ (K, N)`` estimated from its FLOPs (``2 M K N``) and bytes
    (``(M K + K N + M N)`` elements): ``M K N / (M K + K N + M N)``, which is ``M`` when M is
    much smaller than K and N, and ``n / 3`` for a square one."""
    size = _DTYPE_BYTES.get(dtype, 4.0)
    return np.asarray(flops, float) * size / (2.0 * np.maximum(np.asarray(num_bytes, float), 1.0))


def _size_curve(points: list[tuple[float, float]], floor_s: float) -> SizeCurve:
    """A curve through ``(work, seconds)`` points: equal works merged (geometric mean), and the
    time made non-decreasing in the work (more work never takes less time; a dip is timing
    noise or a shape the library handles better, which a size alone cannot tell)."""
    merged: dict[float, list[float]] = {}
    for work, seconds in points:
        merged.setdefault(float(work), []).append(np.log(seconds))
    works = sorted(merged)
    log_s = np.maximum.accumulate(np.array([np.mean(merged[w]) for w in works]))
    return SizeCurve(np.log(works), log_s, floor_s)


def _flop_curve(family: str) -> bool:
    """Families whose time is keyed on FLOPs (the rest on bytes moved)."""
    return family in ("attention", "recurrent") or family.startswith(("gemm-", "conv-"))


def _intensity_rates(points: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """(log intensity, log rate) by increasing intensity; equal intensities averaged."""
    merged: dict[float, list[float]] = {}
    for log_i, log_rate in points:
        merged.setdefault(float(log_i), []).append(log_rate)
    keys = sorted(merged)
    return np.array(keys), np.array([np.mean(merged[k]) for k in keys])


#: Tensors of at most this many elements (1 MiB in FP32, half the L2 of the 2-core Xeon VM's
#: cores) are the small ones of an optimizer fit: their per-element cost is one constant; a
#: larger tensor's is read off the grid at its size (:func:`fit_optimizer_rates`).
OPTIMIZER_SMALL_ELEMENTS = 2**18


def _small_optimizer_points(points: list) -> list:
    """The points a per-tensor + per-element fit uses: those over tensors of at most
    :data:`OPTIMIZER_SMALL_ELEMENTS` elements where at least two are, else all."""
    small = [p for p in points
             if p.elements <= OPTIMIZER_SMALL_ELEMENTS * max(p.num_tensors, 1)]
    return small if len(small) >= 2 else list(points)


def fit_optimizers(points) -> dict[str, tuple[float, float]]:
    """Least-squares ``seconds = a * tensors + b * elements`` (a, b >= 0) per optimizer, over
    its steps on tensors of at most :data:`OPTIMIZER_SMALL_ELEMENTS` elements (all its steps
    where fewer than two are that small)."""
    out = {}
    names = {p.optimizer for p in points}
    for name in names:
        pts = _small_optimizer_points([p for p in points if p.optimizer == name])
        if len(pts) < 2:
            continue
        x = np.array([[p.num_tensors, p.elements] for p in pts], float)
        y = np.array([p.seconds for p in pts], float)
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        if (coef < 0).any():  # one term only: refit the other alone, through the origin
            col = int(np.argmax(coef))
            best = float(x[:, col] @ y / (x[:, col] @ x[:, col]))
            coef = np.zeros(2)
            coef[col] = best
        out[name] = (float(coef[0]), float(coef[1]))
    return out


def fit_optimizer_rates(points) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per optimizer, the per-element cost at each tensor size the grid timed above
    :data:`OPTIMIZER_SMALL_ELEMENTS`: (log elements per tensor, seconds per element), the
    small tensors' cost (:func:`fit_optimizers`) first, at that size. A step's per-element
    cost is what its seconds leave after the fitted per-tensor cost. Optimizers with no step
    over larger tensors are left out (the fit's constant applies at every size)."""
    fits = fit_optimizers(points)
    out = {}
    for name, (per_tensor, per_element) in fits.items():
        by_size: dict[float, list[float]] = {}
        for p in points:
            size = p.elements / max(p.num_tensors, 1)
            if p.optimizer == name and size > OPTIMIZER_SMALL_ELEMENTS:
                by_size.setdefault(size, []).append(
                    max(p.seconds - per_tensor * p.num_tensors, 0.0) / p.elements)
        if by_size:
            sizes = [float(OPTIMIZER_SMALL_ELEMENTS)] + sorted(by_size)
            rates = [per_element] + [float(np.median(by_size[k])) for k in sorted(by_size)]
            out[name] = (np.log(np.array(sizes)), np.array(rates))
    return out
