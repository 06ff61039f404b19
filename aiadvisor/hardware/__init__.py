"""Hardware: the spec catalog (dense figures with sources) and the attached device.

>>> import aiadvisor as aa
>>> aa.hardware.get("H100").name
'NVIDIA H100 SXM'

Importing this package imports neither torch nor pandas; :func:`detect` and :func:`benchmark`
import torch when called, the table functions import pandas.
"""

from __future__ import annotations

from .bench import BandwidthPoint, BenchmarkResult, MatmulPoint, benchmark, cache_directory
from .detection import CpuInfo, DetectedDevice, cpu_info, detect, detect_calibrated, probe
from .fabrics import get_fabric, network_for
from .lookup import find, get, resolve
from .pricing import PriceQuote, PriceRule, hourly_cost
from .spec_table import (
    COLUMNS,
    FIGURE_COLUMNS,
    KINDS,
    SEGMENTS,
    all_specs,
    catalog,
    filter_catalog,
    shipped_csv_path,
)
from .support import SUPPORT_LEVELS, support_matrix

__all__ = [
    "COLUMNS",
    "FIGURE_COLUMNS",
    "KINDS",
    "SEGMENTS",
    "SUPPORT_LEVELS",
    "BandwidthPoint",
    "BenchmarkResult",
    "CpuInfo",
    "DetectedDevice",
    "MatmulPoint",
    "PriceQuote",
    "PriceRule",
    "all_specs",
    "benchmark",
    "cache_directory",
    "catalog",
    "cpu_info",
    "detect",
    "detect_calibrated",
    "filter_catalog",
    "find",
    "get",
    "get_fabric",
    "hourly_cost",
    "network_for",
    "probe",
    "resolve",
    "shipped_csv_path",
    "support_matrix",
]
