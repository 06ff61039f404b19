"""The attached CPU's thread settings as this process sees them: PyTorch's intra-op and inter-op
thread pools against the cores the process may use (CPU affinity, a container's CPU quota and
physical cores, which SMT siblings do not add to for dense math).

Containers (Docker, Binder, Kubernetes) often cap the CPU time of a process with a cgroup quota
while ``os.cpu_count()`` still reports the host's CPUs; the cap is read from cgroup v2's
``cpu.max`` ("quota period") or v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class ThreadSettings:
    """Thread pools of this process and the cores it can use."""

    intra_op_threads: int
    """``torch.get_num_threads()``: the threads one matmul or convolution is split over."""
    inter_op_threads: int
    """``torch.get_num_interop_threads()``."""
    usable_cores: int
    """Physical cores this process can keep busy: min(physical cores, CPUs in its affinity
    mask, its container's CPU quota)."""
    source: str = ""
    """Where ``usable_cores`` comes from, for the rationale."""


def cgroup_cpu_limit(root: str = "/sys/fs/cgroup") -> float | None:
    """CPUs allowed by the cgroup quota (e.g. 2.0 for ``200000 100000``), or None if unlimited.

    >>> import tempfile, pathlib
    >>> d = tempfile.mkdtemp(); _ = pathlib.Path(d, "cpu.max").write_text("150000 100000\\n")
    >>> cgroup_cpu_limit(d)
    1.5
    """
    base = Path(root)
    try:
        text = (base / "cpu.max").read_text().split()
        if text and text[0] != "max":
            return int(text[0]) / int(text[1])
        if text:
            return None
    except (OSError, ValueError, IndexError):
        pass
    try:
        quota = int((base / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((base / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def usable_cores(*, physical_cores: int | None, affinity: int | None,
                 quota: float | None) -> tuple[int, str]:
    """The smallest of the three limits (a fractional quota rounds down, at least 1), and which
    one it was.

    >>> usable_cores(physical_cores=32, affinity=64, quota=None)
    (32, 'physical cores')
    >>> usable_cores(physical_cores=32, affinity=64, quota=2.5)
    (2, 'container CPU quota')
    """
    limits = []
    if physical_cores:
        limits.append((physical_cores, "physical cores"))
    if affinity:
        limits.append((affinity, "CPU affinity"))
    if quota:
        limits.append((max(1, math.floor(quota)), "container CPU quota"))
    if not limits:
        return 1, "unknown"
    return min(limits, key=lambda item: item[0])


def thread_settings() -> ThreadSettings:
    """This process's thread pools and usable cores (imports torch)."""
    import torch

    from .detection import cpu_info

    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = os.cpu_count()
    cores, source = usable_cores(physical_cores=cpu_info().num_cores, affinity=affinity,
                                 quota=cgroup_cpu_limit())
    return ThreadSettings(intra_op_threads=torch.get_num_threads(),
                          inter_op_threads=torch.get_num_interop_threads(),
                          usable_cores=cores, source=source)


def is_local_cpu(spec) -> bool:
    """The spec describes the attached CPU (detected or benchmarked), not a catalog row."""
    return spec.kind == "cpu" and (spec.measured or "(local CPU" in spec.name
                                   or spec.notes.startswith("Detected local CPU"))
