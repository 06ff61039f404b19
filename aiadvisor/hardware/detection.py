"""The attached device: CUDA, ROCm, XPU, MPS or the CPU.

:func:`probe` reads what the driver and the OS report (never raising); :func:`detect` turns that
into a :class:`~aiadvisor.schema.HardwareSpec`, from the matching catalog row when there is one,
and optionally benchmarks it (:mod:`aiadvisor.hardware.bench`). torch is imported inside the
functions, never at module import.
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..schema import HardwareSpec
from .lookup import candidates, find

__all__ = ["CpuInfo", "DetectedDevice", "benchmark_failure_for", "cpu_info", "detect",
           "parse_cpuinfo", "probe"]

BACKENDS = ("cuda", "rocm", "xpu", "mps", "cpu")
_ISA_PATTERN = re.compile(
    r"^(avx512\w*|amx\w*|avx_vnni\w*|avx2|avx|fma|f16c|sse4_2|asimd\w*|sve\w*|sme\w*|bf16|i8mm"
    r"|fphp|asimdhp)$"
)


@dataclass(frozen=True, kw_only=True)
class CpuInfo:
    """What the OS reports about the host CPU."""

    model: str
    vendor_id: str = ""
    family: int | None = None
    num_cores: int | None = None
    """Physical cores (unique socket/core pairs), or logical CPUs when the OS does not say."""
    num_threads: int | None = None
    mhz: float | None = None
    isa_flags: tuple[str, ...] = ()
    """Vector/matrix ISA extensions: avx512*, amx*, avx2, fma, sve, ... (subset of all flags)."""
    memory_bytes: int | None = None

    @property
    def fast_bf16(self) -> bool:
        """The CPU has native bf16 math (AVX512-BF16, AMX-BF16 or Arm BF16)."""
        return bool({"avx512_bf16", "amx_bf16", "bf16"} & set(self.isa_flags))

    @property
    def fast_fp16(self) -> bool:
        """The CPU has native fp16 arithmetic (AVX512-FP16, AMX-FP16 or Arm FP16)."""
        return bool({"avx512_fp16", "amx_fp16", "fphp", "asimdhp"} & set(self.isa_flags))


@dataclass(frozen=True, kw_only=True)
class DetectedDevice:
    """The attached device as the driver reports it, with the spec built from it."""

    backend: str
    """cuda, rocm, xpu, mps or cpu."""
    name: str
    spec: HardwareSpec
    memory_bytes: int | None = None
    num_devices: int = 1
    num_sm: int | None = None
    """Streaming multiprocessors (CUDA) or compute units (ROCm)."""
    compute_capability: str | None = None
    clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    power_limit_w: float | None = None
    catalog_name: str | None = None
    """The catalog row the device matched, if any."""
    fallback_reason: str | None = None
    """Why no accelerator was used (CPU fallback), e.g. a CPU-only torch build or a driver error."""
    torch_version: str | None = None
    cpu: CpuInfo | None = None
    details: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------------

def parse_cpuinfo(text: str, *, meminfo: str = "") -> CpuInfo:
    """Parse Linux ``/proc/cpuinfo`` (and optionally ``/proc/meminfo``) text.

    >>> info = parse_cpuinfo("processor : 0\\nmodel name : X\\nflags : fpu avx2 fma avx512f\\n")
    >>> info.model, info.isa_flags
    ('X', ('avx2', 'fma', 'avx512f'))
    """
    blocks = [b for b in re.split(r"\n\s*\n", text.strip()) if b.strip()]
    fields: list[dict[str, str]] = []
    for block in blocks:
        entry = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                entry[key.strip().lower()] = value.strip()
        fields.append(entry)
    first = fields[0] if fields else {}
    flags = (first.get("flags") or first.get("features") or "").split()
    cores = {(f.get("physical id", "0"), f.get("core id")) for f in fields if "core id" in f}
    threads = sum(1 for f in fields if "processor" in f) or None
    model = first.get("model name") or first.get("hardware") or first.get("cpu model") or ""
    family = first.get("cpu family")
    mhz = first.get("cpu mhz")
    return CpuInfo(
        model=model or platform.processor() or "unknown CPU",
        vendor_id=first.get("vendor_id", ""),
        family=int(family) if family and family.isdigit() else None,
        num_cores=len(cores) or threads, num_threads=threads,
        mhz=float(mhz) if mhz else None,
        isa_flags=tuple(f for f in flags if _ISA_PATTERN.match(f)),
        memory_bytes=_parse_meminfo(meminfo),
    )


def _parse_meminfo(text: str) -> int | None:
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, flags=re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _sysctl(key: str) -> str:
    try:
        out = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True,
                             timeout=5, check=False)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu_info() -> CpuInfo:
    """The host CPU: model, cores, clock and ISA flags (Linux ``/proc``; sysctl on macOS)."""
    text = _read("/proc/cpuinfo")
    if text:
        return parse_cpuinfo(text, meminfo=_read("/proc/meminfo"))
    model = _sysctl("machdep.cpu.brand_string") or platform.processor() or "unknown CPU"
    memsize = _sysctl("hw.memsize")
    cores = _sysctl("hw.physicalcpu")
    return CpuInfo(
        model=model, num_cores=int(cores) if cores.isdigit() else os.cpu_count(),
        num_threads=os.cpu_count(), memory_bytes=int(memsize) if memsize.isdigit() else None,
    )


def _fp32_flops_per_cycle(cpu: CpuInfo) -> int | None:
    """FP32 FLOP per cycle per core from the ISA flags (x86 only), assuming 2 FMA pipes.

    Zen 4 (family 25 with AVX-512) executes AVX-512 on a 256-bit datapath."""
    flags = set(cpu.isa_flags)
    if "avx512f" in flags:
        return 32 if (cpu.vendor_id == "AuthenticAMD" and cpu.family == 25) else 64
    if {"avx2", "fma"} <= flags:
        return 32  # 2 FMA x 8 lanes x 2
    if "avx" in flags:
        return 16
    return None


#: BF16 FLOP per cycle per core of one AMX tile-multiply unit (TMUL): 1024 on Sapphire Rapids
#: and later (Intel AMX overview, Intel Architecture Day 2021: "2048 INT8 or 1024 BF16 operations
#: per cycle"; the catalog's Xeon rows use the same figure).
AMX_BF16_FLOPS_PER_CYCLE = 1024


def _bf16_flops_per_cycle(cpu: CpuInfo) -> int | None:
    """BF16 FLOP per cycle per core from the ISA flags (x86 only); None without native bf16.

    AMX-BF16: the TMUL rate, :data:`AMX_BF16_FLOPS_PER_CYCLE`. AVX512-BF16 alone (Cooper Lake,
    Zen 4): ``VDPBF16PS`` multiplies two bf16 pairs into each FP32 lane (4 FLOP where an FP32
    FMA does 2), so twice the FP32 FMA rate, assuming it issues on the FMA pipes at their rate
    (not a vendor figure)."""
    flags = set(cpu.isa_flags)
    if "amx_bf16" in flags:
        return AMX_BF16_FLOPS_PER_CYCLE
    fp32 = _fp32_flops_per_cycle(cpu)
    if "avx512_bf16" in flags and fp32:
        return 2 * fp32
    return None


#: Opens the note of an estimated bf16 peak; it stays in a benchmarked spec's notes while the
#: benchmark did not time bf16 (the cost model then still treats the figure as an estimate).
BF16_ESTIMATE_MARK = "bf16_tflops is ESTIMATED"


def _bf16_note(cpu: CpuInfo, per_cycle: int, bf16: float) -> str:
    engine = "AMX-BF16 tile unit" if per_cycle == AMX_BF16_FLOPS_PER_CYCLE else (
        "AVX512-BF16 VDPBF16PS, 2x the FP32 FMA rate")
    # Measured on a 2-core Sapphire Rapids VM (2.6 GHz, peak 5.3 TFLOP/s by this formula):
    # bf16 matmul 0.19 TFLOP/s at n=128, 1.5 at 512, 2.8 at 2048; fp32 0.44 at 2048.
    return (f"{BF16_ESTIMATE_MARK}, not measured: {cpu.num_cores} cores x {cpu.mhz:.0f} MHz "
            f"x {per_cycle} FLOP/cycle ({engine}, from ISA flags) = {bf16:.3f} TFLOP/s, a peak: "
            "matmuls reach about half of it at n=2048 and far less at small sizes. ")


def _bf16_estimate(cpu: CpuInfo) -> tuple[float | None, str]:
    """Estimated bf16 peak (TFLOP/s) of a CPU not in the catalog and the note saying so."""
    per_cycle = _bf16_flops_per_cycle(cpu)
    if not (per_cycle and cpu.num_cores and cpu.mhz):
        return None, ""
    bf16 = cpu.num_cores * cpu.mhz * 1e6 * per_cycle / 1e12
    return bf16, _bf16_note(cpu, per_cycle, bf16)


#: Throughput fields of a spec, scaled together when a CPU's peaks are (fewer cores than the
#: catalog row, or the quick matmul's clock).
_PEAK_FIELDS = ("fp32_tflops", "tf32_tflops", "bf16_tflops", "fp16_tflops", "fp8_tflops",
                "fp4_tflops", "int8_tops", "int4_tops")
_ROW_CORES = re.compile(r"fp32 = (\d+) x")


def _catalog_cores(spec: HardwareSpec) -> int | None:
    """The cores a catalog CPU row's peaks count (its notes write "fp32 = cores x GHz x
    FLOP/cycle = X"), or None."""
    match = _ROW_CORES.search(spec.notes)
    return int(match.group(1)) if match else None


def usable_cpu_cores(cpu: CpuInfo) -> tuple[int | None, str]:
    """The cores this process can keep busy (:func:`~aiadvisor.hardware.threads.usable_cores`:
    physical cores, CPU affinity, a container's CPU quota) and which limit it was. A container
    (Binder, Docker, Kubernetes) sees the host's /proc/cpuinfo, all its cores, while its quota
    gives it one or two."""
    from .threads import cgroup_cpu_limit, usable_cores

    if not cpu.num_cores:
        return cpu.num_cores, ""
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return usable_cores(physical_cores=cpu.num_cores, affinity=affinity,
                        quota=cgroup_cpu_limit())


def _slice_of_row(matched: HardwareSpec, cores: int | None, source: str
                  ) -> tuple[HardwareSpec, str]:
    """A catalog CPU row cut to the ``cores`` this process can use (peaks x cores / the row's
    cores, bandwidth at most ``cores`` x :data:`CPU_BW_PER_CORE_GBS`), and the note saying so;
    the row itself where the process has all of it."""
    row_cores = _catalog_cores(matched)
    if not (cores and row_cores and cores < row_cores):
        return matched, ""
    share = cores / row_cores
    scaled = {f: getattr(matched, f) * share for f in _PEAK_FIELDS
              if getattr(matched, f) is not None}
    bandwidth = matched.memory_bw_gbs
    if bandwidth is not None:
        bandwidth = min(bandwidth, cores * CPU_BW_PER_CORE_GBS)
    note = (f"This process can use {cores} of the row's {row_cores} cores ({source}): its peaks "
            f"are the row's x {cores}/{row_cores}, its memory bandwidth ESTIMATED at "
            f"{cores} x {CPU_BW_PER_CORE_GBS:.0f} GB/s per core (at most the row's). ")
    return dataclasses.replace(matched, memory_bw_gbs=bandwidth, **scaled), note


def _cpu_spec(cpu: CpuInfo, reason: str | None, *, cores_source: str = ""
              ) -> tuple[HardwareSpec, str | None, str]:
    """The CPU's spec, the matched catalog name, and the note sentence a benchmark replaces.
    ``cpu.num_cores``: the cores this process can use (:func:`usable_cpu_cores`), which
    ``cores_source`` names."""
    matched = find(cpu.model)
    why = f" Fell back to the CPU: {reason}." if reason else ""
    if matched is not None:
        row, sliced = _slice_of_row(matched, cpu.num_cores, cores_source)
        note = f"Detected local CPU {cpu.model!r} ({cpu.num_cores} cores).{why} {sliced}"
        spec = dataclasses.replace(row, notes=f"{note.strip()} {matched.notes}".strip())
        return spec, matched.name, ""
    per_cycle = _fp32_flops_per_cycle(cpu)
    fp32 = None
    bandwidth = _estimated_cpu_bandwidth_gbs(cpu)
    estimate = "Memory bandwidth unknown until benchmarked (detect(benchmark=True))."
    if bandwidth is not None:
        estimate = (
            f"memory_bw_gbs is ESTIMATED, not measured: {cpu.num_cores} cores x "
            f"{CPU_BW_PER_CORE_GBS:.0f} GB/s per core (capped at {CPU_BW_CAP_GBS:.0f}) = "
            f"{bandwidth:.0f} GB/s; benchmark (detect(benchmark=True)) to measure it."
        )
    if per_cycle and cpu.num_cores and cpu.mhz:
        fp32 = cpu.num_cores * cpu.mhz * 1e6 * per_cycle / 1e12
        estimate = (
            f"fp32_tflops is ESTIMATED, not measured: {cpu.num_cores} cores x {cpu.mhz:.0f} MHz "
            f"x {per_cycle} FLOP/cycle (from ISA flags) = {fp32:.3f} TFLOP/s. " + estimate
        )
    bf16, bf16_note = _bf16_estimate(cpu)
    estimate = bf16_note + estimate
    if cores_source and cores_source != "physical cores":
        estimate += f" Cores: the {cpu.num_cores} this process can use ({cores_source})."
    spec = HardwareSpec(
        name=f"{cpu.model} (local CPU, {cpu.num_cores} core{'' if cpu.num_cores == 1 else 's'})",
        vendor=_cpu_vendor(cpu),
        kind="cpu", memory_gb=None if cpu.memory_bytes is None else cpu.memory_bytes / 1024**3,
        fp32_tflops=fp32, bf16_tflops=bf16, memory_bw_gbs=bandwidth,
        source="detected: /proc/cpuinfo, /proc/meminfo",
        notes=f"Local CPU {cpu.model!r}, not in the catalog: built from /proc/cpuinfo. "
              f"{estimate}{why}",
    )
    return spec, None, estimate


#: Streaming bandwidth one core draws, GB/s: measured here with a 256 MiB ``copy_`` (read +
#: write) at 1 thread, 18.1 GB/s on a 2-core Xeon VM and 17.8 GB/s per core on a 2-core EPYC VM
#: (data/calibration/amd-epyc-2core-vm.json, 35.6 GB/s at 2 threads). Rounded down: an estimate,
#: used only until the CPU is benchmarked. Without it the cost model fell back to 1 GB/s and
#: predicted an unbenchmarked CPU's memory-bound steps 10x or more too slow.
CPU_BW_PER_CORE_GBS = 15.0
#: Cores stop adding bandwidth once the memory channels are full: 8 channels of DDR4-3200 are
#: 204.8 GB/s (JEDEC: 3200 MT/s x 8 bytes x 8), and streams reach about 80 % of that.
CPU_BW_CAP_GBS = 160.0


def _estimated_cpu_bandwidth_gbs(cpu: CpuInfo) -> float | None:
    """Estimated streaming bandwidth of a CPU not in the catalog (None without a core count)."""
    if not cpu.num_cores:
        return None
    return min(cpu.num_cores * CPU_BW_PER_CORE_GBS, CPU_BW_CAP_GBS)


def _cpu_vendor(cpu: CpuInfo) -> str:
    return {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(cpu.vendor_id, "") or (
        "Apple" if cpu.model.startswith("Apple") else "")


# ---------------------------------------------------------------------------------------------
# Accelerators
# ---------------------------------------------------------------------------------------------

def _nvml_details() -> dict[str, Any]:
    """Clocks and power limit of GPU 0 through nvidia-ml-py, when it is installed."""
    try:
        import pynvml
    except Exception:  # noqa: BLE001 - optional dependency, any import failure means "absent"
        return {}
    try:
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            return {
                "clock_mhz": float(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                "memory_clock_mhz": float(
                    pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
                "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000.0,
            }
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - NVML errors only lose optional detail
        return {}


def _probe_cuda(torch: Any, reasons: list[str]) -> dict[str, Any] | None:
    hip = getattr(torch.version, "hip", None)
    if not torch.cuda.is_available():
        if torch.version.cuda is None and hip is None:
            reasons.append(f"no CUDA/ROCm: torch {torch.__version__} is a CPU-only build")
        else:
            reasons.append("no CUDA/ROCm device visible: torch.cuda.is_available() is False "
                           "(no GPU, no driver, or CUDA_VISIBLE_DEVICES hides it)")
        return None
    props = torch.cuda.get_device_properties(0)
    clock_khz = getattr(props, "clock_rate", None)
    info = {
        "backend": "rocm" if hip else "cuda", "name": torch.cuda.get_device_name(0),
        "memory_bytes": int(props.total_memory), "num_devices": torch.cuda.device_count(),
        "num_sm": getattr(props, "multi_processor_count", None),
        "compute_capability": f"{props.major}.{props.minor}" if hasattr(props, "major") else None,
        "clock_mhz": clock_khz / 1000.0 if clock_khz else None,
    }
    if not hip:
        info.update({k: v for k, v in _nvml_details().items() if v is not None})
    return info


def _probe_xpu(torch: Any, reasons: list[str]) -> dict[str, Any] | None:
    xpu = getattr(torch, "xpu", None)
    if xpu is None or not xpu.is_available():
        return None
    props = xpu.get_device_properties(0)
    return {"backend": "xpu", "name": xpu.get_device_name(0),
            "memory_bytes": int(getattr(props, "total_memory", 0)) or None,
            "num_devices": xpu.device_count()}


def _probe_mps(torch: Any, reasons: list[str]) -> dict[str, Any] | None:
    mps = getattr(torch.backends, "mps", None)
    if mps is None or not mps.is_available():
        if sys.platform == "darwin":
            reasons.append("MPS not available (macOS < 12.3, or torch built without MPS)")
        return None
    return {"backend": "mps", "name": _sysctl("machdep.cpu.brand_string") or "Apple GPU (MPS)"}


_VENDOR = {"cuda": "NVIDIA", "rocm": "AMD", "xpu": "Intel", "mps": "Apple"}


def _match_by_memory(name: str, memory_bytes: int | None) -> HardwareSpec | None:
    """The catalog row for a device name, checked against the memory the driver reports.

    Some names are shared (every Jetson Orin reports "Orin"): among the rows the name could
    mean, keep those whose memory is within 35% of the detected amount (drivers report a
    little less than the marketed GB, or GiB for GB); match only if one remains."""
    spec = find(name)
    if memory_bytes is None:
        return spec
    detected_gb = memory_bytes / 1024**3  # binary, as HardwareSpec.memory_bytes

    def fits(row: HardwareSpec) -> bool:
        return row.memory_gb is None or abs(row.memory_gb - detected_gb) <= 0.35 * row.memory_gb

    if spec is not None and fits(spec):
        return spec
    fitting = [row for row in candidates(name) if fits(row)]
    return fitting[0] if len(fitting) == 1 else None


def _accelerator_spec(info: dict[str, Any], cpu: CpuInfo
                      ) -> tuple[HardwareSpec, str | None, str]:
    memory_bytes = info.get("memory_bytes") or (cpu.memory_bytes if info["backend"] == "mps"
                                                else None)
    # Apple catalog rows give the maximum configurable unified memory: do not check it.
    matched = _match_by_memory(info["name"], None if info["backend"] == "mps" else memory_bytes)
    seen = f"Detected {info['name']!r} via {info['backend']}."
    if matched is not None:
        spec = dataclasses.replace(matched, notes=f"{seen} {matched.notes}".strip())
        return spec, matched.name, ""
    estimate = ("Throughput and bandwidth unknown until benchmarked "
                "(detect(benchmark=True)).")
    spec = HardwareSpec(
        name=info["name"], vendor=_VENDOR.get(info["backend"], ""), kind="gpu",
        memory_gb=None if memory_bytes is None else memory_bytes / 1024**3,  # see HardwareSpec
        tdp_w=info.get("power_limit_w"), source=f"detected: torch ({info['backend']})",
        notes=f"{seen} Not in the catalog: memory from the driver. {estimate}",
    )
    return spec, None, estimate


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------

def probe() -> DetectedDevice:
    """Read the attached device; never raises (a broken driver falls back to the CPU).

    Returns
    -------
    DetectedDevice
        ``backend`` cuda/rocm/xpu/mps/cpu, names, memory, SM count, clocks, power limit (with
        nvidia-ml-py), CPU model/cores/ISA flags, the matched catalog row and, for the CPU
        fallback, ``fallback_reason``.
    """
    cpu = _safe_cpu_info()
    reasons: list[str] = []
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a missing or broken torch means "CPU only"
        reasons.append(f"torch is not importable ({type(exc).__name__}: {exc})")
        return _cpu_device(cpu, reasons, torch_version=None)
    for probe_one in (_probe_cuda, _probe_xpu, _probe_mps):
        try:
            info = probe_one(torch, reasons)
        except Exception as exc:  # noqa: BLE001 - driver errors must not crash a notebook
            backend = probe_one.__name__.removeprefix("_probe_")
            reasons.append(f"{backend} probe failed: {type(exc).__name__}: {exc}")
            continue
        if info is not None:
            spec, matched, estimate = _accelerator_spec(info, cpu)
            extra = {k: info.get(k) for k in ("memory_bytes", "num_devices", "num_sm",
                                              "compute_capability", "clock_mhz",
                                              "memory_clock_mhz", "power_limit_w")}
            extra = {k: v for k, v in extra.items() if v is not None}
            return DetectedDevice(backend=info["backend"], name=info["name"], spec=spec,
                                  catalog_name=matched, torch_version=torch.__version__,
                                  cpu=cpu, details={"estimate_note": estimate}, **extra)
    return _cpu_device(cpu, reasons, torch_version=torch.__version__)


def _safe_cpu_info() -> CpuInfo:
    try:
        return cpu_info()
    except Exception:  # noqa: BLE001 - unreadable /proc must not crash detection
        return CpuInfo(model=platform.processor() or "unknown CPU", num_cores=os.cpu_count())


def _cpu_device(cpu: CpuInfo, reasons: list[str], *, torch_version: str | None
                ) -> DetectedDevice:
    reason = "; ".join(reasons) or None
    cores, source = usable_cpu_cores(cpu)
    used = dataclasses.replace(cpu, num_cores=cores) if cores and cpu.num_cores \
        and cores < cpu.num_cores else cpu
    spec, matched, estimate = _cpu_spec(used, reason, cores_source=source)
    bf16_note = _bf16_estimate(used)[1] if matched is None else ""
    return DetectedDevice(backend="cpu", name=cpu.model, spec=spec, memory_bytes=cpu.memory_bytes,
                          catalog_name=matched, fallback_reason=reason,
                          torch_version=torch_version, cpu=cpu,
                          details={"estimate_note": estimate, "bf16_estimate_note": bf16_note})


# ---------------------------------------------------------------------------------------------
# A CPU not benchmarked: its peaks anchored on one quick matmul
# ---------------------------------------------------------------------------------------------

#: The quick matmul that anchors the peaks of a CPU priced without a benchmark: square FP32,
#: n from :data:`ANCHOR_MIN_N` doubling while the estimated peak would run it in under
#: :data:`ANCHOR_MIN_SECONDS` (at most :data:`ANCHOR_MAX_N`), the fastest of
#: :data:`ANCHOR_REPEATS` calls after two warm-up calls. On a 2-core VM: n = 512, about 1.5 ms
#: a call, 20 ms in all.
ANCHOR_MIN_N, ANCHOR_MAX_N = 512, 2048
ANCHOR_MIN_SECONDS = 1e-3
ANCHOR_REPEATS = 9
#: A quick matmul further than this factor from the estimate is not trusted (a clock read
#: wrong by /proc/cpuinfo is off by up to about 1.5x; beyond that something else timed it).
ANCHOR_MAX_FACTOR = 4.0
#: Opens the note of an anchored spec.
ANCHOR_MARK = "Peaks scaled by a quick matmul"
#: One-element in-place adds timed for the per-op cost of the anchored spec, as the device
#: benchmark times it (:func:`aiadvisor.hardware.bench._launch_overhead_us`). The cost model
#: otherwise assumes ``costmodel.devices.DEFAULT_LAUNCH_US["cpu"]`` (5 us, about the
#: development EPYC's 4.3 us measured), where the Xeon VM's is 1.7-1.8 us. A reading of
#: :data:`ANCHOR_MAX_TINY_US` or more is taken as a busy moment (not used).
ANCHOR_TINY_OPS = 200
ANCHOR_MAX_TINY_US = 50.0
_ANCHORS: dict[tuple, tuple[int, float, float, float] | None] = {}
_anchoring = False


def _anchor_size(fp32_tflops: float) -> int:
    n = ANCHOR_MIN_N
    while n < ANCHOR_MAX_N and 2 * n**3 / (fp32_tflops * 1e12) < ANCHOR_MIN_SECONDS:
        n *= 2
    return n


def _quick_matmul_seconds(n: int, repeats: int = ANCHOR_REPEATS) -> float:
    """The fastest of ``repeats`` ``n x n`` FP32 ``torch.mm`` calls on this process's threads
    (operands of ones: no random numbers drawn)."""
    import torch

    a, b = torch.ones(n, n), torch.ones(n, n)
    best = math.inf
    with torch.no_grad():
        for i in range(repeats + 2):
            start = time.perf_counter()
            torch.mm(a, b)
            if i >= 2:
                best = min(best, time.perf_counter() - start)
    return best


def _tiny_op_us() -> float:
    """Microseconds a one-element in-place add takes from Python on this process's threads:
    the per-op cost the device benchmark measures (the median of at least three runs of
    :data:`ANCHOR_TINY_OPS` adds, after one)."""
    import torch

    from .bench import _launch_overhead_us

    return _launch_overhead_us(torch, dev="cpu", sync=lambda: None, min_time_s=0.002,
                               step=lambda message: None, ops_per_call=ANCHOR_TINY_OPS)


def _learned_matmul_seconds(spec: HardwareSpec, n: int) -> float:
    """What the cost model prices the same matmul at on ``spec`` (an ``n x n`` linear layer,
    inference, traced on the meta device; compute and memory, no host time)."""
    import torch

    from ..costmodel import predict
    from ..profiler import profile

    with torch.random.fork_rng(devices=[]):
        layer = torch.nn.Linear(n, n, bias=False, device="meta")
    prof = profile(layer, torch.empty(n, n, device="meta"), mode="infer", scaling=False,
                   precision="fp32")
    pred = predict(prof, hardware=spec, precision="fp32")
    return pred.compute_s + pred.memory_s


def anchored_cpu_spec(spec: HardwareSpec) -> HardwareSpec:
    """The attached CPU's ``spec`` (not benchmarked) with its peaks scaled so that the cost
    model prices one quick matmul (:data:`ANCHOR_MIN_N`) as it ran here; ``spec`` unchanged for
    a benchmarked spec, an accelerator, or where the timing fails or reads more than
    :data:`ANCHOR_MAX_FACTOR` away. Once per process and spec.

    The estimated peak is cores x the clock /proc/cpuinfo reports x FLOP/cycle, and that clock
    is the nominal one: under load a core runs at its boost clock, higher or lower. On a 2-core
    Zen 4 EPYC VM (2596 MHz reported) the matmul ran 1.41x faster than the cost model priced
    it at the estimated peak, and the eleven models of ``bench/cpu_estimate_band.py`` were
    predicted 28 % slow on average (signed +28 %); with the peaks scaled by this factor, 10.6 %
    (signed +0.9 %), against the same measured steps. Every other figure (the learned curves,
    the bandwidth estimate, the band) is unchanged, and the spec still says it is an estimate.

    The per-op cost is timed too (:func:`_tiny_op_us`, a few ms) and replaces the 5 us the
    cost model assumes for a CPU without a figure: on the Xeon VM it read 2.0 us, and the
    eleven models' estimate went from 17.2 to 14.5 % off (a GRU's 2,300 small per-step ops had
    been priced 52-76 % slow), where the development EPYC's benchmark had measured 4.3 us.

    Cost: the matmul about 20 ms on 2 cores; pricing it profiles and predicts a one-layer model,
    about 2 s in a process that has done neither yet (imports, the host-cost timings), which a
    report then does not pay again: ``aa.advise`` of a small MLP in a fresh process took
    2.5-2.7 s with the anchor and without it (three runs each, the Zen 4 VM)."""
    global _anchoring
    if spec.kind != "cpu" or spec.measured or not spec.fp32_tflops or _anchoring:
        return spec
    try:
        import torch

        key = (spec.name, spec.fp32_tflops, torch.get_num_threads())
    except Exception:  # noqa: BLE001 - no torch: nothing to time
        return spec
    if key not in _ANCHORS:
        _anchoring = True   # the cost model below resolves no hardware, but never recurse
        try:
            n = _anchor_size(spec.fp32_tflops)
            _ANCHORS[key] = (n, _quick_matmul_seconds(n), _learned_matmul_seconds(spec, n),
                             _tiny_op_us())
        except Exception:  # noqa: BLE001 - a failed timing leaves the estimate as it was
            _ANCHORS[key] = None
        finally:
            _anchoring = False
    timing = _ANCHORS[key]
    if timing is None:
        return spec
    n, measured, learned, tiny_us = timing
    factor = learned / measured if measured > 0 else 0.0
    if not 1 / ANCHOR_MAX_FACTOR <= factor <= ANCHOR_MAX_FACTOR:
        return spec
    scaled: dict[str, Any] = {f: getattr(spec, f) * factor for f in _PEAK_FIELDS
                              if getattr(spec, f) is not None}
    note = (f"{ANCHOR_MARK} (x{factor:.2f}): a {n} x {n} FP32 matmul ran in {measured * 1e3:.2f} "
            f"ms here ({2 * n**3 / measured / 1e9:.0f} GFLOP/s), where the cost model at the "
            f"estimated peaks priced it at {learned * 1e3:.2f} ms (the clock under load is not "
            "the one /proc/cpuinfo reports). ")
    if spec.launch_overhead_us is None and 0 < tiny_us < ANCHOR_MAX_TINY_US:
        from ..costmodel.devices import DEFAULT_LAUNCH_US

        scaled["launch_overhead_us"] = tiny_us
        note += (f"Per-op cost {tiny_us:.2g} us (a one-element add timed here; "
                 f"{DEFAULT_LAUNCH_US['cpu']:g} us is assumed without it). ")
    return dataclasses.replace(spec, notes=note + spec.notes, **scaled)


#: Batches, time steps and width (input = hidden) of the LSTM layer timed by
#: :func:`recurrent_anchor`.
RECURRENT_ANCHOR_BATCHES = (8, 64)
RECURRENT_ANCHOR_STEPS, RECURRENT_ANCHOR_WIDTH = 32, 256
RECURRENT_ANCHOR_REPEATS = 3
#: Factors further than this from 1 are taken as a failed timing (no correction).
RECURRENT_ANCHOR_MAX_FACTOR = 4.0
_RECURRENT_ANCHORS: dict[tuple, tuple[Any, Any] | None] = {}


def _fastest_step(layer: Any, x: Any, *, train: bool, repeats: int) -> float:
    """The fastest of ``repeats`` steps of ``layer`` on ``x`` (after one warm-up): its forward
    under ``no_grad``, or forward and the backward of the sum of its (first) output."""
    import torch

    best = math.inf
    for i in range(repeats + 1):
        start = time.perf_counter()
        if train:
            out = layer(x)
            (out[0] if isinstance(out, tuple) else out).sum().backward()
        else:
            with torch.no_grad():
                layer(x)
        if i:
            best = min(best, time.perf_counter() - start)
        layer.zero_grad(set_to_none=True)
    return best


def _recurrent_seconds(batch: int, *, train: bool,
                       repeats: int = RECURRENT_ANCHOR_REPEATS) -> float:
    """The fastest of ``repeats`` steps (after one warm-up) of one FP32 LSTM layer
    (:data:`RECURRENT_ANCHOR_WIDTH` wide, :data:`RECURRENT_ANCHOR_STEPS` steps, batch first)
    on inputs of ones: its forward under ``no_grad``, or forward and backward (``train``).
    The layer's initialisation draws from a forked RNG: the caller's state is untouched."""
    import torch

    with torch.random.fork_rng(devices=[]):
        layer = torch.nn.LSTM(RECURRENT_ANCHOR_WIDTH, RECURRENT_ANCHOR_WIDTH, batch_first=True)
    x = torch.ones(batch, RECURRENT_ANCHOR_STEPS, RECURRENT_ANCHOR_WIDTH)
    return _fastest_step(layer, x, train=train, repeats=repeats)


def _learned_recurrent_seconds(spec: HardwareSpec, batch: int, *, train: bool) -> float:
    """What the cost model prices the same LSTM step at on ``spec`` (traced on the meta device,
    no optimizer; compute and memory, no host time)."""
    import torch

    from ..costmodel import predict
    from ..profiler import profile

    with torch.random.fork_rng(devices=[]):
        layer = torch.nn.LSTM(RECURRENT_ANCHOR_WIDTH, RECURRENT_ANCHOR_WIDTH, batch_first=True,
                              device="meta")
    x = torch.empty(batch, RECURRENT_ANCHOR_STEPS, RECURRENT_ANCHOR_WIDTH, device="meta")
    prof = profile(layer, x, mode="train" if train else "infer", scaling=False,
                   precision="fp32", **({"optimizer": "none"} if train else {}))
    pred = predict(prof, hardware=spec, precision="fp32")
    return pred.compute_s + pred.memory_s


def recurrent_anchor(spec: HardwareSpec, *, train: bool):
    """``(log batches, log factors)``: how much longer a fused recurrent layer's step
    (oneDNN's ``mkldnn_rnn_layer`` and its backward, which an LSTM runs on a CPU) took here
    than the cost model prices it on ``spec``, the attached CPU not benchmarked
    (:func:`anchored_cpu_spec`), at the batches of :data:`RECURRENT_ANCHOR_BATCHES`; None for
    any other spec, where a timing failed or a factor reads more than
    :data:`RECURRENT_ANCHOR_MAX_FACTOR` from 1. Timed once per process, spec and mode, when a
    recurrent model is first priced (about 0.1 s on 2 cores, the pricing included).

    The GPU-learned curves price such a layer at its per-step size (a GEMM of batch rows) on
    the time scale of a GPU kernel, where it runs near peak; a CPU runs the same small GEMMs,
    one per time step, far below it, the more so the fewer rows. On a 2-core Xeon VM with AMX,
    before this anchor, six LSTMs (1-2 layers, 128-1024 wide, batch 8-128, one bidirectional)
    were predicted 11-55 % fast, and the fewer the rows the faster (batch 8: 50-55 %; batch
    128: 11-25 %)."""
    def fit():
        logs = []
        for batch in RECURRENT_ANCHOR_BATCHES:
            measured = _recurrent_seconds(batch, train=train)
            priced = _learned_recurrent_seconds(spec, batch, train=train)
            factor = measured / priced if priced > 0 else 0.0
            if not 1 / RECURRENT_ANCHOR_MAX_FACTOR <= factor <= RECURRENT_ANCHOR_MAX_FACTOR:
                raise ValueError(f"factor {factor:.3g} at batch {batch}")
            logs.append(math.log(factor))
        return tuple(math.log(b) for b in RECURRENT_ANCHOR_BATCHES), tuple(logs)

    return _layer_anchor(_RECURRENT_ANCHORS, spec, train, fit)


def _layer_anchor(cache: dict, spec: HardwareSpec, train: bool, fit: Callable[[], Any]):
    """What ``fit()`` returns for ``spec`` in this mode, once per process (``cache``), or None:
    for a spec other than the attached CPU whose peaks the quick matmul scaled
    (:func:`anchored_cpu_spec`), without torch, or where ``fit`` raised (a failed timing leaves
    the estimate as it was). While ``fit`` runs, no anchor applies (its pricing must not
    apply the factor it is measuring)."""
    global _anchoring
    if spec.kind != "cpu" or spec.measured or ANCHOR_MARK not in spec.notes or _anchoring:
        return None
    try:
        import torch

        key = (spec.name, spec.notes, torch.get_num_threads(), train)
    except Exception:  # noqa: BLE001 - no torch: nothing to time
        return None
    if key not in cache:
        _anchoring = True
        try:
            cache[key] = fit()
        except Exception:  # noqa: BLE001 - a failed timing leaves the estimate as it was
            cache[key] = None
        finally:
            _anchoring = False
    return cache[key]


#: Convolutions timed by :func:`conv_anchor`: (batch, channels in, height = width, channels
#: out, kernel), NCHW FP32, stride 1, padding kernel // 2, no bias: a 3 x 3 layer (about 140
#: FLOPs per byte) and a 1 x 1 projection (about 25), 0.6 and 0.3 GFLOP a forward.
CONV_ANCHOR_SHAPES = ((8, 64, 32, 64, 3), (8, 64, 32, 256, 1))
CONV_ANCHOR_REPEATS = 3
#: Factors further than this from 1 are taken as a failed timing (no correction).
CONV_ANCHOR_MAX_FACTOR = 4.0
_CONV_ANCHORS: dict[tuple, tuple[Any, Any] | None] = {}


def _conv_layer(shape, device: str | None = None):
    import torch

    _batch, cin, _size, cout, kernel = shape
    with torch.random.fork_rng(devices=[]):
        return torch.nn.Conv2d(cin, cout, kernel, padding=kernel // 2, bias=False,
                               device=device)


def _conv_seconds(shape, *, train: bool, repeats: int = CONV_ANCHOR_REPEATS) -> float:
    """The fastest of ``repeats`` steps (after one warm-up) of one FP32 convolution of
    ``shape`` (:data:`CONV_ANCHOR_SHAPES`) on inputs of ones: its forward under ``no_grad``, or
    forward and backward (``train``; the weight's gradient, as a first layer's). The layer's
    initialisation draws from a forked RNG: the caller's state is untouched."""
    import torch

    layer = _conv_layer(shape)
    batch, cin, size = shape[:3]
    x = torch.ones(batch, cin, size, size)
    return _fastest_step(layer, x, train=train, repeats=repeats)


def _learned_conv(spec: HardwareSpec, shape, *, train: bool) -> tuple[float, float]:
    """(seconds the cost model prices the same convolution step at on ``spec``, compute and
    memory, no host time; the forward convolution's FLOPs per byte), traced on the meta
    device, no optimizer."""
    import torch

    from ..costmodel import predict
    from ..profiler import profile

    layer = _conv_layer(shape, device="meta")
    batch, cin, size = shape[:3]
    x = torch.empty(batch, cin, size, size, device="meta")
    prof = profile(layer, x, mode="train" if train else "infer", scaling=False,
                   precision="fp32", **({"optimizer": "none"} if train else {}))
    pred = predict(prof, hardware=spec, precision="fp32")
    conv = [op for op in prof.ops if op.op_class == "conv" and op.phase == "forward"]
    flops = sum(op.flops for op in conv)
    moved = sum(op.bytes_read + op.bytes_written for op in conv)
    return pred.compute_s + pred.memory_s, flops / moved if moved else 0.0


def conv_anchor(spec: HardwareSpec, *, train: bool):
    """``(log FLOPs per byte, log factors)``: how much longer a convolution step took here than
    the cost model prices it on ``spec``, the attached CPU not benchmarked
    (:func:`anchored_cpu_spec`), for the shapes of :data:`CONV_ANCHOR_SHAPES`, by increasing
    intensity; None for any other spec, where a timing failed or a factor reads more than
    :data:`CONV_ANCHOR_MAX_FACTOR` from 1. Timed once per process, spec and mode, when a model
    with convolutions is first priced (0.04 s infer, 0.07 s train on the 2-core Xeon VM, the
    pricing included; it read 2.3x the price at the 1 x 1 and 1.5x at the 3 x 3 there).

    The GPU-learned curves price a convolution as cuDNN runs it, near the (anchored) peak; on a
    CPU, oneDNN reorders NCHW data into its blocked layout and back around each call and runs
    the small spatial GEMMs of a conv net well below the matmul's rate. On the 2-core Xeon VM
    with AMX, before this anchor, a batch-norm ResNet's step was predicted 33 % (training) and
    48 % (inference) fast."""
    def fit():
        points = []
        for shape in CONV_ANCHOR_SHAPES:
            measured = _conv_seconds(shape, train=train)
            priced, intensity = _learned_conv(spec, shape, train=train)
            factor = measured / priced if priced > 0 else 0.0
            if not 1 / CONV_ANCHOR_MAX_FACTOR <= factor <= CONV_ANCHOR_MAX_FACTOR \
                    or intensity <= 0:
                raise ValueError(f"factor {factor:.3g} for {shape}")
            points.append((math.log(intensity), math.log(factor)))
        points.sort()
        return tuple(p[0] for p in points), tuple(p[1] for p in points)

    return _layer_anchor(_CONV_ANCHORS, spec, train, fit)


#: Elements of the quick ``bernoulli_`` of :func:`bernoulli_anchor` (256 KiB in FP32).
BERNOULLI_ANCHOR_ELEMENTS = 2**16
_BERNOULLI_ANCHORS: dict[int, float | None] = {}


def _bernoulli_seconds(n: int = BERNOULLI_ANCHOR_ELEMENTS, repeats: int = 3) -> float:
    """The fastest of ``repeats`` in-place ``bernoulli_(0.9)`` calls over ``n`` FP32 elements
    (after one), drawing from a private generator: the caller's RNG state is untouched."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x = torch.empty(n)
    best = math.inf
    for i in range(repeats + 1):
        start = time.perf_counter()
        x.bernoulli_(0.9, generator=gen)
        if i:
            best = min(best, time.perf_counter() - start)
    return best


def bernoulli_anchor(spec: HardwareSpec) -> float | None:
    """Seconds per byte (as the profiler counts ``aten.bernoulli_``: 8 an FP32 element, read
    and written) that eager dropout's random draws took here, for the attached CPU not
    benchmarked (:func:`anchored_cpu_spec`); None for any other spec or where the timing
    failed. Timed once per process and thread count, when a model that draws them is first
    priced (about 1.5 ms).

    A random number per element is compute, not bandwidth: on a 2-core Xeon VM with AMX
    ``bernoulli_`` took 4.7-4.9 ns an element at 64 K to 4 M elements (0.05 of the streaming
    bandwidth), where the learned curves price it as a GPU streams it: a BERT-style encoder's
    thirteen dropouts 1.4 ms of a 138 ms training step, where they took 22 ms."""
    if spec.kind != "cpu" or spec.measured or ANCHOR_MARK not in spec.notes:
        return None
    try:
        import torch

        key = torch.get_num_threads()
    except Exception:  # noqa: BLE001 - no torch: nothing to time
        return None
    if key not in _BERNOULLI_ANCHORS:
        try:
            _BERNOULLI_ANCHORS[key] = _bernoulli_seconds() / (8 * BERNOULLI_ANCHOR_ELEMENTS)
        except Exception:  # noqa: BLE001 - a failed timing leaves the estimate as it was
            _BERNOULLI_ANCHORS[key] = None
    return _BERNOULLI_ANCHORS[key]


#: Benchmark outcomes of this process by (backend, device, cache directory, options): the
#: result, or the failure as "ExceptionType: message".
_RUNS: dict[tuple[str, str, str, str], Any] = {}
#: Specs returned after a failed benchmark, by (name, notes) -> the failure.
_FAILED: dict[tuple[str, str], str] = {}


def benchmark_failure_for(spec: HardwareSpec) -> str | None:
    """Why the benchmark behind ``spec`` failed (``"RuntimeError: ..."``) when ``spec`` is what
    :func:`detect` returned after a failed benchmark in this process, else None."""
    return _FAILED.get((spec.name, spec.notes))


def detect(benchmark: bool = False, *, refresh: bool = False, cache_dir: str | None = None,
           progress: Any = True, benchmark_options: dict[str, Any] | None = None,
           anchor: bool = True) -> HardwareSpec:
    """The attached device as a :class:`~aiadvisor.schema.HardwareSpec`; never raises.

    A benchmark runs at most once per process for a given cache directory and options (then
    the disk cache serves later processes); ``refresh=True`` runs it again. When it fails the
    spec keeps the detected (datasheet or estimated) figures and its ``notes`` say why, and so
    does every prediction made with it.

    Parameters
    ----------
    benchmark : bool
        Also measure matmul throughput per supported precision, memory bandwidth, per-op
        launch overhead and the op grid the cost model reads for ``hardware="local"`` (about
        15-20 s on a 2-core CPU; cached on disk, see :func:`~aiadvisor.hardware.benchmark`). The
        spec then has ``measured=True``.
    refresh : bool
        Ignore a cached benchmark and run it again.
    cache_dir : str, optional
        Where benchmark results are cached (default ``$XDG_CACHE_HOME/aiadvisor`` or
        ``~/.cache/aiadvisor``; ``AIADVISOR_CACHE_DIR`` overrides).
    progress : bool or callable
        True prints a text progress bar to stderr; a callable gets ``(fraction, message)``.
    benchmark_options : dict, optional
        Extra keyword arguments for :func:`~aiadvisor.hardware.benchmark` (sizes, precisions...).
    anchor : bool
        Without a benchmark, scale a CPU's estimated peaks by one quick matmul timed here
        (:func:`anchored_cpu_spec`, once per process); False keeps the figures from the ISA
        flags and the reported clock alone.

    Returns
    -------
    HardwareSpec
        The matching catalog row when the device is in the catalog, else a spec built from what
        the driver reports. Its ``notes`` say how it was detected and, on a CPU fallback, why.
    """
    device = probe()
    if not benchmark:
        return anchored_cpu_spec(device.spec) if anchor else device.spec
    from .bench import benchmark as run_benchmark
    from .bench import cache_directory

    # Once per process and configuration: a result the disk cache could not keep (read-only
    # directory) or a failure is not measured again on every predict(hardware="local").
    key = (device.backend, device.name, str(cache_directory(cache_dir)),
           repr(sorted((benchmark_options or {}).items())))
    if refresh or key not in _RUNS:
        try:
            _RUNS[key] = run_benchmark(device=device, refresh=refresh, cache_dir=cache_dir,
                                       progress=progress, **(benchmark_options or {}))
        except Exception as exc:  # noqa: BLE001 - detection returns a spec that says so
            _RUNS[key] = f"{type(exc).__name__}: {exc}"
    result = _RUNS[key]
    if isinstance(result, str):
        note = f" Benchmark failed ({result}); figures are not measured."
        failed = dataclasses.replace(device.spec, notes=device.spec.notes + note)
        _FAILED[(failed.name, failed.notes)] = result
        return failed
    return _measured_spec(device, result)


def detect_calibrated(*, cache_dir: str | None = None) -> HardwareSpec:
    """The attached device on its own benchmark when one exists, else :func:`detect`'s spec;
    never measures. The benchmark is the one this process ran with the default options
    (``detect(benchmark=True)``, ``hardware="local"``, the dashboard's Calibrate button) or the
    one the disk cache holds for this device and torch version (``aiadvisor calibrate`` in an
    earlier session). What a report with no ``hardware`` predicts on: calibrate once, and later
    reports use it."""
    device = probe()
    from .bench import cache_directory, cached_benchmark

    key = (device.backend, device.name, str(cache_directory(cache_dir)), repr([]))
    result = _RUNS.get(key)
    if result is None or isinstance(result, str):
        try:
            result = cached_benchmark(device=device, cache_dir=cache_dir)
        except Exception:  # noqa: BLE001 - an unreadable cache is no calibration
            result = None
        if result is not None:  # read once per process, as detect(benchmark=True) would
            _RUNS[key] = result
    return anchored_cpu_spec(device.spec) if result is None else _measured_spec(device, result)


def _measured_spec(device: DetectedDevice, result: Any) -> HardwareSpec:
    """``device``'s spec with the figures ``result`` measured (its estimate notes dropped)."""
    estimate = device.details.get("estimate_note") or ""
    if "bf16" not in result.precisions:  # a benchmark without bf16 keeps its estimate, said so
        estimate = estimate.replace(device.details.get("bf16_estimate_note") or "\0", "")
    base = device.spec
    if estimate:  # the measurement replaces the estimate: drop the sentence that announced it
        base = dataclasses.replace(base, notes=base.notes.replace(estimate, "").replace("  ", " "))
    return result.apply_to(base)
