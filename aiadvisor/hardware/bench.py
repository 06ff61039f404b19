"""Microbenchmarks of the attached device: matmul throughput per precision over a few sizes,
memory bandwidth (copy and add of large tensors), per-op launch overhead (a tiny op) and, unless
``ops=False``, the op-level calibration of :mod:`aiadvisor.hardware.calibrate` (time-vs-size of
the non-GEMM ops models spend time in, and optimizer steps).

Results are cached as JSON in the user cache directory, keyed by device name, backend and torch
version, with the date and library versions; the next call reuses them unless the requested
configuration differs or ``refresh=True``. The per-size figures (achieved TFLOP/s vs matrix
size) are kept for the cost model.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError
from ..schema import HardwareSpec
from ..units import PRECISION_COLUMN
from .calibrate import (
    ATTENTION_SEQ,
    CACHE_CONTEXTS,
    COLD_ELEMENTS,
    CONV_SHAPES,
    CPU_ELEMENTS,
    GPU_ELEMENTS,
    LINEAR_SHAPES,
    OPTIMIZER_GRID,
    RECURRENT_SHAPES,
    SKINNY_HOT_SHAPES,
    SKINNY_NARROW_SHAPES,
    SKINNY_SHAPES,
    SKINNY_WARM_SHAPES,
    WIDE_SHAPES,
    OpPoint,
    OptimizerPoint,
    cache_points,
    cold_points,
    conv_points,
    first_touch_points,
    linear_points,
    op_points,
    optimizer_points,
    recurrent_points,
    zero_sqrt_points,
)

__all__ = [
    "BandwidthPoint",
    "BenchmarkResult",
    "MatmulPoint",
    "OpPoint",
    "OptimizerPoint",
    "benchmark",
    "cache_directory",
    "cached_benchmark",
    "cached_measurement_for",
    "text_progress",
]

_CACHE_VERSION = 25
_DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}

Progress = Callable[[float, str], None]


@dataclass(frozen=True, kw_only=True)
class MatmulPoint:
    """One square matmul ``(n, n) @ (n, n)``: 2 n^3 FLOPs in ``seconds`` (median)."""

    precision: str
    n: int
    seconds: float
    tflops: float


@dataclass(frozen=True, kw_only=True)
class BandwidthPoint:
    """One streaming op over ``num_bytes`` of traffic (reads + writes) in ``seconds``."""

    op: str
    num_bytes: int
    seconds: float
    gbs: float


@dataclass(frozen=True, kw_only=True)
class BenchmarkResult:
    """Measured figures of one device, per size, with where and when they were taken."""

    device_name: str
    backend: str
    torch_version: str
    date: str
    """ISO timestamp of the run (UTC)."""
    library_versions: dict[str, str]
    config: dict[str, Any]
    matmul: tuple[MatmulPoint, ...]
    bandwidth: tuple[BandwidthPoint, ...]
    launch_overhead_us: float
    """Median time of one tiny op (a one-element add), microseconds."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Precisions not measured, with the reason (e.g. no native bf16 on this CPU)."""
    num_threads: int | None = None
    duration_s: float = 0.0
    ops: tuple[OpPoint, ...] = ()
    """Op-level calibration points (empty when run with ``ops=False``)."""
    optimizer: tuple[OptimizerPoint, ...] = ()
    """Timed optimizer steps (empty when run with ``ops=False``)."""
    from_cache: bool = False
    cache_path: str | None = None

    def curve(self, precision: str) -> list[tuple[int, float]]:
        """Achieved TFLOP/s against matrix size ``n`` for one precision, by increasing n."""
        return sorted((p.n, p.tflops) for p in self.matmul if p.precision == precision)

    def peak_tflops(self, precision: str) -> float | None:
        """Best achieved TFLOP/s over the measured sizes (None if not measured)."""
        values = [t for _, t in self.curve(precision)]
        return max(values) if values else None

    @property
    def precisions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.precision for p in self.matmul))

    @property
    def memory_bw_gbs(self) -> float | None:
        """Best streaming bandwidth over the copy/add measurements, GB/s."""
        return max((p.gbs for p in self.bandwidth), default=None)

    def table(self):
        """Per-size matmul figures as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame([dataclasses.asdict(p) for p in self.matmul])

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("from_cache")
        data.pop("cache_path")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], **extra: Any) -> BenchmarkResult:
        data = dict(data)
        data["matmul"] = tuple(MatmulPoint(**p) for p in data["matmul"])
        data["bandwidth"] = tuple(BandwidthPoint(**p) for p in data["bandwidth"])
        data["ops"] = tuple(OpPoint(**p) for p in data.get("ops", ()))
        data["optimizer"] = tuple(OptimizerPoint(**p) for p in data.get("optimizer", ()))
        return cls(**data, **extra)

    def apply_to(self, spec: HardwareSpec) -> HardwareSpec:
        """``spec`` with the measured figures in place of the datasheet ones, measured=True."""
        measured = {PRECISION_COLUMN[p]: self.peak_tflops(p) for p in self.precisions}
        bandwidth = self.memory_bw_gbs
        if bandwidth is not None:
            measured["memory_bw_gbs"] = bandwidth
        names = ", ".join(f"{p} matmul" for p in self.precisions)
        if self.ops:
            names += (f", an op grid ({len(self.ops)} timings of {len({p.op for p in self.ops})}"
                      " ops)")
        note = (f"MEASURED on this device {self.date[:10]} (torch {self.torch_version}, "
                f"{self.backend}): {names}, memory bandwidth and launch overhead; other columns "
                "are datasheet/catalog figures.")
        if self.skipped:
            note += " Not measured: " + "; ".join(f"{k} ({v})" for k, v in self.skipped.items())
            note += "."
        applied = dataclasses.replace(spec, measured=True,
                                      launch_overhead_us=self.launch_overhead_us,
                                      notes=f"{note} {spec.notes}".strip(), **measured)
        _APPLIED[(applied.name, applied.notes)] = self
        return applied


def attention_grid(elements: Sequence[int]) -> tuple[int, ...]:
    """Attention sequence lengths timed with an op grid of ``elements``: those whose q/k/v
    (16 heads x seq x 64) are no bigger than the largest grid tensor."""
    return tuple(s for s in ATTENTION_SEQ if 16 * 64 * s <= max(elements))


def cache_grid(elements: Sequence[int]) -> tuple[int, ...]:
    """Decode-cache context lengths timed with an op grid of ``elements`` (a CPU's): those whose
    key tensor (16 heads x context x 64) is no bigger than the largest grid tensor."""
    return tuple(c for c in CACHE_CONTEXTS if 16 * 64 * c <= max(elements))


def cold_grid(elements: Sequence[int]) -> tuple[int, ...]:
    """Cold-input grid sizes timed with an op grid of ``elements`` (a CPU's): those of
    :data:`~aiadvisor.hardware.calibrate.COLD_ELEMENTS` no bigger than the largest grid
    tensor (a cold timing's slowdown is read against the hot curve at the same size)."""
    return tuple(n for n in COLD_ELEMENTS if n <= max(elements))


#: Benchmarks applied to a spec in this process, by (spec name, notes): how the cost model finds
#: the op curves of the very measurement behind a ``hardware="local"`` spec.
_APPLIED: dict[tuple[str, str], BenchmarkResult] = {}


def measurement_for(spec: HardwareSpec) -> BenchmarkResult | None:
    """The benchmark whose figures ``spec`` carries (from :meth:`BenchmarkResult.apply_to` in
    this process), or None."""
    return _APPLIED.get((spec.name, spec.notes))


def cached_measurement_for(spec: HardwareSpec, *, cache_dir: str | os.PathLike | None = None
                           ) -> BenchmarkResult | None:
    """The benchmark behind a ``measured`` spec: the one applied in this process, else the one
    in the on-disk cache that produced its figures; None when neither has it. Never measures.

    A cached result matches when its launch overhead and bandwidth are the spec's (measured
    floats, a fingerprint of the run) and its date, torch version and backend are the ones the
    spec's note quotes.
    """
    if not spec.measured:
        return None
    hit = measurement_for(spec)
    if hit is not None:
        return hit
    try:
        paths = sorted(cache_directory(cache_dir).glob("benchmark-*.json"))
    except OSError:
        return None
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.pop("cache_version", None) != _CACHE_VERSION:
                continue
            result = BenchmarkResult.from_dict(data, from_cache=True, cache_path=str(path))
        except (OSError, ValueError, TypeError, KeyError):
            continue
        quoted = (f"{result.date[:10]} (torch {result.torch_version}, {result.backend})"
                  in spec.notes)
        if (quoted and result.launch_overhead_us == spec.launch_overhead_us
                and result.memory_bw_gbs == spec.memory_bw_gbs):
            return result
    return None


# ---------------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------------

def cache_directory(override: str | os.PathLike | None = None) -> Path:
    """Benchmark cache directory: ``override``, ``$AIADVISOR_CACHE_DIR``,
    ``$XDG_CACHE_HOME/aiadvisor`` or ``~/.cache/aiadvisor``."""
    if override is not None:
        return Path(override)
    if os.environ.get("AIADVISOR_CACHE_DIR"):
        return Path(os.environ["AIADVISOR_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aiadvisor"


def _cache_file(directory: Path, device_name: str, backend: str, torch_version: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", f"{device_name}-{backend}-torch{torch_version}")
    return directory / f"benchmark-{slug.strip('-').lower()}.json"


def _load_cached(path: Path, config: dict[str, Any]) -> BenchmarkResult | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.pop("cache_version", None) != _CACHE_VERSION or data.get("config") != config:
        return None
    try:
        return BenchmarkResult.from_dict(data, from_cache=True, cache_path=str(path))
    except (TypeError, KeyError):
        return None


def _store(path: Path, result: BenchmarkResult) -> str | None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"cache_version": _CACHE_VERSION, **result.to_dict()},
                                  indent=1), encoding="utf-8")
        tmp.replace(path)
        return str(path)
    except OSError:
        return None  # a read-only cache dir only costs a re-run next time


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------

def _time_op(fn: Callable[[], Any], *, sync: Callable[[], None], min_time_s: float,
             max_reps: int = 50) -> float:
    """Median seconds per call of ``fn`` after one warm-up call; at least 3 timed calls,
    more until ``min_time_s`` of timed work or ``max_reps``.

    The median, not the fastest call: the cost model predicts steady steps, and on the 2-core
    development machine fastest-call calibration predicted all 12 steps of
    bench/costmodel_local_cpu.py too fast (MAPE 21.7 %, against 14.8 % with the median in the
    same session). A busy moment is caught by
    :func:`stalled_sizes` instead.
    """
    fn()
    sync()
    times: list[float] = []
    total = 0.0
    while len(times) < 3 or (total < min_time_s and len(times) < max_reps):
        start = time.perf_counter()
        fn()
        sync()
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        total += elapsed
    return statistics.median(times)


#: Share of the machine (process CPU seconds over wall seconds x torch threads) under which a
#: CPU timing is taken as contended. On the 2-core development machine a parallel 1 M-element add
#: ran at a share of 0.93-1.05 idle, and at 0.35-0.50 beside one busy process, when it also
#: took 2.5-35 x longer (OpenMP threads waiting at each barrier for a descheduled worker).
BUSY_SHARE = 0.75
#: Timings of one point are retried this many times (after a short sleep) while contended.
BUSY_RETRIES = 3
#: After this many points stayed contended the machine is taken as busy for good: the rest are
#: timed once (a calibration on a shared host must not take minutes of retries).
BUSY_GIVE_UP = 3


#: Bytes of the tensor :func:`prime_allocator` allocates and frees: just under glibc's largest
#: dynamic mmap threshold (32 MiB on 64-bit Linux).
PRIME_BYTES = 30 * 2**20


def prime_allocator(torch: Any) -> None:
    """Put the CPU allocator where a training loop's steady state has it before timing.

    glibc serves a request of at least its mmap threshold (128 KiB at start) with fresh,
    page-faulting pages, and raises the threshold to the size of each such block freed (up to
    32 MiB). After one step of a model the threshold sits at its largest freed tensor and most
    outputs come from reused heap memory; a calibration in a fresh process would otherwise time
    page faults too (measured on the 2-core development machine: an 8 x 32 x 64 x 64 convolution
    took 3.1 ms per call before a larger block was freed, 0.5 ms after). Allocating and freeing
    one block of :data:`PRIME_BYTES` does what the first step does. Other allocators ignore it.
    """
    block = torch.empty(PRIME_BYTES // 4)
    block.fill_(0.0)
    del block


class ContentionGuard:
    """Times CPU ops only while this process has the cores to itself.

    After each point, the share of the machine the timing loop got (process CPU time over wall
    time x torch threads) is checked; a point below :data:`BUSY_SHARE` (which a single-threaded
    small op also shows on an idle machine) is cross-checked with a sentinel, a parallel
    elementwise add, whose share only drops when another process holds a core. A contended
    point is timed again after a pause, up to :data:`BUSY_RETRIES` times (none once
    :data:`BUSY_GIVE_UP` points stayed contended); ``busy`` counts the points that stayed
    contended, and a benchmark with any is not cached.
    """

    def __init__(self, torch: Any, *, sentinel_s: float = 0.02):
        self.threads = max(int(torch.get_num_threads()), 1)
        a, b = torch.randn(2**20), torch.randn(2**20)
        out = torch.empty(2**20)
        self._sentinel = lambda: torch.add(a, b, out=out)
        self.sentinel_s = sentinel_s
        self.points = self.retried = self.busy = 0

    def share(self, fn: Callable[[], Any], min_time_s: float) -> float:
        """Share of the machine ``fn`` got when called repeatedly for ``min_time_s``."""
        fn()
        c0, t0 = time.process_time(), time.perf_counter()
        while time.perf_counter() - t0 < min_time_s:
            fn()
        wall = time.perf_counter() - t0
        return (time.process_time() - c0) / (wall * self.threads)

    def quiet(self) -> bool:
        """Whether the sentinel got the cores (always, with one thread and nothing else)."""
        return self.share(self._sentinel, self.sentinel_s) >= BUSY_SHARE

    def time_op(self, fn: Callable[[], Any], *, sync: Callable[[], None], min_time_s: float,
                max_reps: int = 50) -> float:
        """:func:`_time_op`, retried while another process holds the cores."""
        self.points += 1
        retries = BUSY_RETRIES if self.busy < BUSY_GIVE_UP else 0
        for attempt in range(retries + 1):
            c0, t0 = time.process_time(), time.perf_counter()
            seconds = _time_op(fn, sync=sync, min_time_s=min_time_s, max_reps=max_reps)
            share = (time.process_time() - c0) / ((time.perf_counter() - t0) * self.threads)
            if share >= BUSY_SHARE or self.quiet():
                return seconds
            if attempt < retries:
                self.retried += 1
                time.sleep(0.25 * (attempt + 1))
        self.busy += 1
        return seconds


def text_progress(stream: Any = None, width: int = 24) -> Progress:
    """A dependency-free text progress bar: ``[#####-----]  40% matmul fp32 n=1024``."""
    out = stream if stream is not None else sys.stderr

    def report(fraction: float, message: str) -> None:
        filled = round(width * min(max(fraction, 0.0), 1.0))
        bar = "#" * filled + "-" * (width - filled)
        end = "\n" if fraction >= 1.0 else ""
        out.write(f"\r[{bar}] {fraction:4.0%} {message:<40.40}{end}")
        out.flush()

    return report


def _progress_fn(progress: Any) -> Progress:
    if progress is True:
        return text_progress()
    if progress in (False, None):
        return lambda fraction, message: None
    if callable(progress):
        return progress
    raise InvalidArgumentError(
        f"progress={progress!r} is not valid: expected True, False or a callable "
        "(fraction, message)."
    )


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------

def _sync_fn(torch: Any, backend: str) -> Callable[[], None]:
    if backend in ("cuda", "rocm"):
        return torch.cuda.synchronize
    if backend == "mps":
        return torch.mps.synchronize
    if backend == "xpu":
        return torch.xpu.synchronize
    return lambda: None


def _torch_device(backend: str) -> str:
    return {"rocm": "cuda"}.get(backend, backend)


def _default_precisions(device: Any) -> tuple[tuple[str, ...], dict[str, str]]:
    """fp32 always; tf32/bf16/fp16 where the device runs them natively (CPU: from ISA flags)."""
    skipped: dict[str, str] = {}
    if device.backend in ("cuda", "rocm"):
        major = int((device.compute_capability or "0.0").split(".")[0])
        if device.backend == "rocm" or major >= 8:
            return ("fp32", "tf32", "bf16", "fp16"), skipped
        skipped.update(tf32="needs compute capability >= 8.0",
                       bf16="needs compute capability >= 8.0")
        return ("fp32", "fp16"), skipped
    if device.backend in ("mps", "xpu"):
        return ("fp32", "fp16", "bf16"), skipped
    cpu = device.cpu
    chosen = ["fp32"]
    for precision, fast in (("bf16", cpu is not None and cpu.fast_bf16),
                            ("fp16", cpu is not None and cpu.fast_fp16)):
        if fast:
            chosen.append(precision)
        else:
            skipped[precision] = "no native support in this CPU's ISA flags (would run emulated)"
    skipped["tf32"] = "CPUs have no TF32 mode"
    return tuple(chosen), skipped


def _matmul_points(torch: Any, *, dev: str, sync: Callable[[], None], precision: str,
                   sizes: Sequence[int], min_time_s: float, step: Callable[[str], None],
                   time_op: Callable[..., float] | None = None) -> list[MatmulPoint]:
    time_op = time_op or _time_op
    dtype = getattr(torch, _DTYPES[precision])
    points = []
    tf32_flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        for n in sizes:
            step(f"matmul {precision} n={n}")
            a = torch.randn(n, n, device=dev, dtype=torch.float32).to(dtype)
            b = torch.randn(n, n, device=dev, dtype=torch.float32).to(dtype)
            seconds = time_op(functools.partial(torch.mm, a, b), sync=sync,
                              min_time_s=min_time_s)
            points.append(MatmulPoint(precision=precision, n=int(n), seconds=seconds,
                                      tflops=2.0 * n**3 / seconds / 1e12))
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32_flags
    return points


def _bandwidth_points(torch: Any, *, dev: str, sync: Callable[[], None], num_bytes: int,
                      min_time_s: float, step: Callable[[str], None],
                      time_op: Callable[..., float] | None = None) -> list[BandwidthPoint]:
    time_op = time_op or _time_op
    numel = max(num_bytes // 4, 1)
    a = torch.ones(numel, device=dev, dtype=torch.float32)
    b = torch.ones(numel, device=dev, dtype=torch.float32)
    c = torch.empty(numel, device=dev, dtype=torch.float32)
    nbytes = numel * 4
    points = []
    # copy reads a and writes c (2 x nbytes); add reads a, b and writes c (3 x nbytes)
    for op, fn, traffic in (("copy", lambda: c.copy_(a), 2 * nbytes),
                            ("add", lambda: torch.add(a, b, out=c), 3 * nbytes)):
        step(f"memory {op} {nbytes / 2**20:.0f} MiB")
        seconds = time_op(fn, sync=sync, min_time_s=min_time_s)
        points.append(BandwidthPoint(op=op, num_bytes=traffic, seconds=seconds,
                                     gbs=traffic / seconds / 1e9))
    return points


def _launch_overhead_us(torch: Any, *, dev: str, sync: Callable[[], None], min_time_s: float,
                        step: Callable[[str], None], ops_per_call: int = 200,
                        time_op: Callable[..., float] | None = None) -> float:
    time_op = time_op or _time_op
    step("launch overhead (tiny op)")
    tiny = torch.zeros(1, device=dev)

    def many() -> None:
        for _ in range(ops_per_call):
            tiny.add_(1.0)

    return time_op(many, sync=sync, min_time_s=min_time_s) / ops_per_call * 1e6


def _library_versions(torch: Any) -> dict[str, str]:
    from .. import __version__

    versions = {"aiadvisor": __version__, "torch": torch.__version__,
                "python": platform.python_version(), "platform": platform.platform()}
    try:
        import numpy

        versions["numpy"] = numpy.__version__
    except ImportError:
        pass
    return versions


def _resolve_config(device: Any, sizes: Sequence[int] | None, precisions: Sequence[str] | None,
                    bandwidth_bytes: int | None, min_time_s: float, ops: bool = True,
                    op_elements: Sequence[int] | None = None
                    ) -> tuple[dict[str, Any], dict[str, str]]:
    on_cpu = device.backend == "cpu"
    default_precisions, skipped = _default_precisions(device)
    if precisions is None:
        precisions = default_precisions
    else:
        bad = [p for p in precisions if p not in _DTYPES]
        if bad:
            raise InvalidArgumentError(
                f"precisions={list(precisions)!r} is not valid: {bad[0]!r} cannot be "
                f"benchmarked; expected a subset of {', '.join(_DTYPES)}."
            )
        skipped = {k: v for k, v in skipped.items() if k not in precisions}
    sizes = tuple(int(n) for n in (sizes or ((128, 256, 512, 1024, 2048) if on_cpu
                                             else (1024, 2048, 4096, 8192))))
    if not sizes or min(sizes) < 1:
        raise InvalidArgumentError(f"sizes={sizes!r} is not valid: expected positive integers.")
    config = {"sizes": list(sizes), "precisions": list(precisions),
              "bandwidth_bytes": int(bandwidth_bytes or (2**28 if on_cpu else 2**30)),
              "min_time_s": float(min_time_s), "ops": bool(ops)}
    if ops:
        elements = tuple(int(n) for n in (op_elements or (CPU_ELEMENTS if on_cpu
                                                         else GPU_ELEMENTS)))
        if not elements or min(elements) < 1:
            raise InvalidArgumentError(
                f"op_elements={elements!r} is not valid: expected positive integers.")
        config["op_elements"] = list(elements)
        # The grid runs in FP32 and in each 16-bit type the matmul benchmark measures natively.
        config["op_dtypes"] = ["float32"] + [_DTYPES[p] for p in precisions
                                             if p in ("bf16", "fp16")]
    return config, skipped


def benchmark(*, device: Any = None, sizes: Sequence[int] | None = None,
              precisions: Sequence[str] | None = None, bandwidth_bytes: int | None = None,
              min_time_s: float = 0.2, refresh: bool = False,
              cache_dir: str | os.PathLike | None = None, progress: Any = True,
              ops: bool = True, op_elements: Sequence[int] | None = None
              ) -> BenchmarkResult:
    """Measure the attached device (or reuse the cached measurement).

    Parameters
    ----------
    device : DetectedDevice, optional
        From :func:`~aiadvisor.hardware.detection.probe`; probed when omitted.
    sizes : sequence of int, optional
        Square matmul sizes n (default 128...2048 on a CPU, 1024...8192 on a GPU).
    precisions : sequence of str, optional
        Subset of fp32, tf32, bf16, fp16 (default: fp32 plus the precisions the device runs
        natively; on a CPU bf16/fp16 only with AVX512-BF16/AMX or AVX512-FP16 flags).
    bandwidth_bytes : int, optional
        Size of each tensor of the copy/add bandwidth test (default 256 MiB CPU, 1 GiB GPU).
    min_time_s : float
        Timed work per measurement point (at least 3 timed calls, median reported).
    refresh : bool
        Ignore the cache and measure again.
    cache_dir : path, optional
        Cache directory (see :func:`cache_directory`).
    progress : bool or callable
        True prints a text bar to stderr; a callable gets ``(fraction, message)``.
    ops : bool
        Also time the op grid of :mod:`aiadvisor.hardware.calibrate` (elementwise,
        activation, dropout-mask, normalisation, pooling, embedding and attention ops at several
        sizes, in FP32 and in each native 16-bit type, and optimizer steps); the cost model reads
        these curves for ``hardware="local"``. About 5 s more per dtype on a 2-core CPU.
    op_elements : sequence of int, optional
        Elements per tensor of that grid (default 16 K...8 M on a CPU, 64 K...64 M on a GPU).

    Returns
    -------
    BenchmarkResult
        Per-size matmul TFLOP/s, copy/add bandwidth, launch overhead, date and versions.
        On a 2-core CPU the defaults take about 30-35 s (two thirds of it the op grid).
    """
    import torch

    from .detection import probe

    device = device if device is not None else probe()
    config, skipped = _resolve_config(device, sizes, precisions, bandwidth_bytes, min_time_s,
                                      ops, op_elements)
    path = _cache_file(cache_directory(cache_dir), device.name, device.backend,
                       torch.__version__)
    if not refresh:
        cached = _load_cached(path, config)
        if cached is not None:
            return cached
    # The timings draw random tensors: the caller's RNG streams (CPU and CUDA) are left as
    # they were, as profiling and advice leave them.
    cuda = [torch.cuda.current_device()] if device.backend in ("cuda", "rocm") and \
        torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda):
        result = _run(torch, device, config, skipped, _progress_fn(progress))
    busy = any(k.startswith("timing ") for k in result.skipped)
    stored = None if busy else _store(path, result)
    return dataclasses.replace(result, cache_path=stored)


def cached_benchmark(*, device: Any = None, cache_dir: str | os.PathLike | None = None
                     ) -> BenchmarkResult | None:
    """The benchmark :func:`benchmark` with its default options would return from the disk
    cache for the attached device (same device, backend and torch version), or None. Never
    measures."""
    import torch

    from .detection import probe

    device = device if device is not None else probe()
    try:
        config, _ = _resolve_config(device, None, None, None, 0.2, True, None)
    except InvalidArgumentError:
        return None
    return _load_cached(_cache_file(cache_directory(cache_dir), device.name, device.backend,
                                    torch.__version__), config)


#: A matmul shorter than this is launch-bound: its time need not grow with n.
_STALL_FLOOR_S = 200e-6


def stalled_sizes(points: Sequence[MatmulPoint]) -> list[int]:
    """Sizes whose timing cannot be the device's own: doubling ``n`` multiplies the FLOPs by 8,
    so the next size up must take at least twice as long unless both are launch-bound. A busy
    machine breaks this (a cached CPU run once took 32 ms for n=128, 256 and 512 alike)."""
    by_n = sorted(points, key=lambda p: p.n)
    stalled = []
    for small, big in zip(by_n, by_n[1:]):
        if big.n >= 2 * small.n and big.seconds > _STALL_FLOOR_S \
                and big.seconds < 2 * small.seconds:
            stalled.append(small.n)
    return stalled


def _run(torch: Any, device: Any, config: dict[str, Any], skipped: dict[str, str],
         report: Progress) -> BenchmarkResult:
    dev, sync = _torch_device(device.backend), _sync_fn(torch, device.backend)
    total_steps = len(config["precisions"]) * len(config["sizes"]) + 3
    if config["ops"]:
        per_dtype = (len(config["op_elements"]) + len(attention_grid(config["op_elements"]))
                     + (len(LINEAR_SHAPES) + len(WIDE_SHAPES) + len(SKINNY_SHAPES)
                        + len(SKINNY_NARROW_SHAPES) + len(SKINNY_HOT_SHAPES)
                        + len(SKINNY_WARM_SHAPES)
                        + len(cache_grid(config["op_elements"]))
                        if device.backend == "cpu" else 0))
        # Cold inputs, the first touch and the square root of zeros.
        total_steps += len(cold_grid(config["op_elements"])) + 2 if device.backend == "cpu" \
            else 0
        total_steps += per_dtype * len(config["op_dtypes"]) + 3 * len(OPTIMIZER_GRID)
        if device.backend == "cpu":
            # Convolutions in both layouts (NCHW, channels_last), LSTM layers.
            total_steps += (2 * len(CONV_SHAPES) + len(RECURRENT_SHAPES)) * len(
                [d for d in config["op_dtypes"] if d != "float16"])
    done = [0]

    def step(message: str) -> None:
        report(done[0] / total_steps, message)
        done[0] += 1

    started = time.perf_counter()
    min_time_s = config["min_time_s"]
    guard = ContentionGuard(torch) if device.backend == "cpu" else None
    if device.backend == "cpu":
        prime_allocator(torch)
    time_op = guard.time_op if guard is not None else _time_op
    # First, before the grid's large tensors leave hundreds of MB of freed heap behind (later
    # fresh buffers came from it: a fifth of the faults' time at the end of the calibration).
    touch = first_touch_points(torch, dev=dev, sync=sync, time_op=time_op,
                               min_time_s=min_time_s / 4, step=step) \
        if device.backend == "cpu" and config["ops"] else []
    matmul: list[MatmulPoint] = []
    for precision in config["precisions"]:
        points = _matmul_points(torch, dev=dev, sync=sync, precision=precision,
                                sizes=config["sizes"], min_time_s=min_time_s, step=step,
                                time_op=time_op)
        if stalled_sizes(points):  # once more, in case another process held the cores
            points = _matmul_points(torch, dev=dev, sync=sync, precision=precision,
                                    sizes=config["sizes"], min_time_s=min_time_s,
                                    step=lambda _message: None, time_op=time_op)
        stalled = stalled_sizes(points)
        if stalled:
            skipped = {**skipped, f"timing {precision}": (
                f"matmul n={', '.join(map(str, stalled))} took no longer than the next size up "
                "(8x the FLOPs): the machine looked busy; this benchmark is not cached")}
        matmul += points
    bandwidth = _bandwidth_points(torch, dev=dev, sync=sync, num_bytes=config["bandwidth_bytes"],
                                  min_time_s=min_time_s, step=step, time_op=time_op)
    overhead = _launch_overhead_us(torch, dev=dev, sync=sync, min_time_s=min_time_s, step=step,
                                   time_op=time_op)
    op_pts: list[OpPoint] = []
    opt_pts: list[OptimizerPoint] = []
    if config["ops"]:
        # A quarter of the matmul timing budget per point: ~110 points per dtype.
        op_time = min_time_s / 4
        elements = tuple(config["op_elements"])
        dtypes = tuple(config["op_dtypes"])
        op_pts, op_skipped = op_points(torch, dev=dev, sync=sync, time_op=time_op,
                                       elements=elements, attention_seq=attention_grid(elements),
                                       min_time_s=op_time, step=step, dtypes=dtypes)
        skipped = {**skipped, **{f"op {k}": v for k, v in op_skipped.items()}}
        if device.backend == "cpu":  # GPU GEMMs: the matmul curve (these shapes are too small)
            op_pts += linear_points(torch, dev=dev, sync=sync, time_op=time_op,
                                    min_time_s=op_time, step=step, dtypes=dtypes)
            # Not in FP16: a CPU's FP16 convolutions took 26 s of a 57 s calibration on the
            # development machine (a slow fallback path); FP16 CPU steps keep the matmul curve.
            layer_dtypes = tuple(d for d in dtypes if d != "float16")
            op_pts += conv_points(torch, dev=dev, sync=sync, time_op=time_op,
                                  min_time_s=op_time, step=step, dtypes=layer_dtypes)
            op_pts += recurrent_points(torch, dev=dev, sync=sync, time_op=time_op,
                                       min_time_s=op_time, step=step, dtypes=layer_dtypes)
            op_pts += cache_points(torch, dev=dev, sync=sync, time_op=time_op,
                                   min_time_s=op_time, step=step, dtypes=dtypes,
                                   contexts=cache_grid(elements))
            op_pts += cold_points(torch, dev=dev, sync=sync, time_op=time_op,
                                  min_time_s=op_time, step=step, elements=cold_grid(elements))
        opt_pts = optimizer_points(torch, dev=dev, sync=sync, time_op=time_op,
                                   min_time_s=op_time, step=step)
        if device.backend == "cpu":
            op_pts += zero_sqrt_points(torch, dev=dev, sync=sync, time_op=time_op,
                                       min_time_s=op_time, step=step)
        op_pts += touch
    if guard is not None and guard.busy:
        skipped = {**skipped, "timing busy": (
            f"{guard.busy} of {guard.points} timings ran while another process held the cores "
            f"(this process got under {BUSY_SHARE:.0%} of the CPU time of its "
            f"{guard.threads} thread(s), after up to {BUSY_RETRIES} retries): they are too slow "
            "and this benchmark is not cached; run it again on a quiet machine")}
    report(1.0, f"done in {time.perf_counter() - started:.1f} s")
    return BenchmarkResult(
        device_name=device.name, backend=device.backend, torch_version=torch.__version__,
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        library_versions=_library_versions(torch), config=config, matmul=tuple(matmul),
        bandwidth=tuple(bandwidth), launch_overhead_us=overhead, skipped=skipped,
        num_threads=torch.get_num_threads(), duration_s=time.perf_counter() - started,
        ops=tuple(op_pts), optimizer=tuple(opt_pts),
    )
