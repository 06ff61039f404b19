"""The shipped efficiency model: tables of learned log slow-downs, read from versioned JSON.

What is learned
---------------
For an op call with ``F`` FLOPs and ``B`` bytes on a device with dense peak ``P`` (of the engine
that runs it) and bandwidth ``W``, the roofline without launch cost is ``max(F / P, B / W)``.
Measured time over roofline-plus-harness time, ``y = log(t_measured / t_roofline)``, was fitted
with scikit-learn ``HistGradientBoostingRegressor`` (squared error for the centre, quantile loss
for P10 and P90) on two device-relative features:

* ``f1 = log10(max(F / P, B / W))``: the roofline time in seconds (how big the op is for this
  device: small ops cannot fill the device);
* ``f2 = log10((F / P) / (B / W))``: arithmetic intensity over the ridge point (ops near the
  ridge reach neither peak).

Because the features are device-relative, one fitted curve serves every device; only the scale
comes from the spec. ``y`` is clipped to ``[0, log 20]``, so efficiency ``exp(-y)`` lies in
``[0.05, 1]``.

Shipped format
--------------
The fitted regressors have only two inputs, so instead of pickled trees the model ships their
predictions sampled on a regular grid (``f1`` step 0.1, ``f2`` step 0.2), read back with bilinear
interpolation (flat beyond the edges, like the trees). ``scripts/train_costmodel.py`` records the
largest difference between the grid and the trees. The file is plain JSON
(``data/costmodel/efficiency_model.json``, format ``aiadvisor-costmodel`` version 1): no code is
executed when it is loaded, and it needs nothing but numpy.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import AIAdvisorError

MODEL_FORMAT = "aiadvisor-costmodel"
MODEL_VERSION = 1
MODEL_FILENAME = "efficiency_model.json"
MAX_LOG_SLOWDOWN = math.log(20.0)
"""Efficiency is never below 1/20 of the roofline."""

QUANTILES = ("p10", "p50", "p90")
LOW_POWER_SUFFIX = "@lowpower"
LOW_POWER_TDP_W = 100.0
"""Boards with a power limit this low (T4 70 W, L4 72 W, P4 75 W) cannot hold their boost clock
through long kernels: their large GEMMs reach 30-45 % of the datasheet peak where 250-700 W parts
reach 75-90 % (opdata NeuSight kernels). They get tables of their own, e.g.
``gemm/simt@lowpower``, used for devices whose spec says ``tdp_w <= 100``."""


def op_features(flops, num_bytes, peak_tflops, bw_gbs):
    """The two device-relative features ``(f1, f2)`` of op calls (numpy arrays).

    ``f1 = log10(max(t_compute, t_memory))`` in seconds, ``f2 = log10(t_compute / t_memory)``;
    times are floored at 1e-12 s so empty ops stay finite.

    >>> f1, f2 = op_features(2 * 4096.0**3, 6 * 4096.0**2, 1000.0, 3000.0)
    >>> # compute 1.374e11 / 1e15 = 137 us; memory 1.007e8 / 3e12 = 33.6 us: 4.096x the ridge
    >>> round(float(f1), 3), round(float(f2), 3)
    (-3.862, 0.612)
    """
    compute_s = np.maximum(
        np.asarray(flops, float) / (np.asarray(peak_tflops, float) * 1e12), 1e-12)
    memory_s = np.maximum(np.asarray(num_bytes, float) / (np.asarray(bw_gbs, float) * 1e9), 1e-12)
    return np.log10(np.maximum(compute_s, memory_s)), np.log10(compute_s / memory_s)


@dataclass(frozen=True)
class Grid:
    """A regular 2-D grid ``f1 = f1_start + i * f1_step``, ``f2 = f2_start + j * f2_step``."""

    f1_start: float
    f1_step: float
    f1_num: int
    f2_start: float
    f2_step: float
    f2_num: int

    @property
    def f1(self) -> np.ndarray:
        return self.f1_start + self.f1_step * np.arange(self.f1_num)

    @property
    def f2(self) -> np.ndarray:
        return self.f2_start + self.f2_step * np.arange(self.f2_num)

    def interpolate(self, table: np.ndarray, f1, f2) -> np.ndarray:
        """Bilinear interpolation of ``table[..., i, j]`` at ``(f1, f2)``, flat beyond the
        edges. Leading axes of ``table`` (e.g. quantiles) come first in the result."""
        u = np.clip((np.asarray(f1, float) - self.f1_start) / self.f1_step, 0, self.f1_num - 1)
        v = np.clip((np.asarray(f2, float) - self.f2_start) / self.f2_step, 0, self.f2_num - 1)
        i0 = np.minimum(u.astype(int), self.f1_num - 2)
        j0 = np.minimum(v.astype(int), self.f2_num - 2)
        du, dv = u - i0, v - j0
        return ((1 - du) * (1 - dv) * table[..., i0, j0] + du * (1 - dv) * table[..., i0 + 1, j0]
                + (1 - du) * dv * table[..., i0, j0 + 1] + du * dv * table[..., i0 + 1, j0 + 1])


@dataclass(frozen=True)
class EfficiencyTable:
    """Learned log slow-downs of one op class and engine group (e.g. ``gemm/tensor``)."""

    key: str
    grid: Grid
    p10: np.ndarray
    p50: np.ndarray
    p90: np.ndarray
    median_log_slowdown: float
    """Median of ``y`` in the training data weighted by roofline time (what a shrunk prediction
    tends to)."""
    peak_log10_range: tuple[float, float]
    bw_log10_range: tuple[float, float]
    """log10 of the dense peak (TFLOP/s) and bandwidth (GB/s) spanned by the training devices."""
    devices: tuple[str, ...]
    precisions: tuple[str, ...]
    """Precisions whose measurements trained this table (others are extrapolated)."""

    @classmethod
    def from_dict(cls, key: str, grid: Grid, data: dict) -> EfficiencyTable:
        shape = (grid.f1_num, grid.f2_num)
        return cls(
            key=key, grid=grid,
            **{q: np.asarray(data[q], float).reshape(shape) for q in QUANTILES},
            median_log_slowdown=float(data["median_log_slowdown"]),
            peak_log10_range=tuple(data["peak_log10_range"]),
            bw_log10_range=tuple(data["bw_log10_range"]),
            devices=tuple(data["devices"]), precisions=tuple(data["precisions"]),
        )

    def log_slowdown(self, f1, f2, quantile: str = "p50") -> np.ndarray:
        """``log(t / t_roofline)`` at the features, clipped to ``[0, log 20]``."""
        table = getattr(self, quantile)
        return np.clip(self.grid.interpolate(table, f1, f2), 0.0, MAX_LOG_SLOWDOWN)

    def log_slowdowns(self, f1, f2) -> np.ndarray:
        """P10, P50 and P90 at once, stacked on a new first axis (unclipped)."""
        stacked = self.__dict__.get("_stacked")
        if stacked is None:
            stacked = np.stack([self.p10, self.p50, self.p90])
            object.__setattr__(self, "_stacked", stacked)
        return self.grid.interpolate(stacked, f1, f2)


@dataclass(frozen=True)
class CollectiveFit:
    """Alpha-beta constants of collectives, fitted on NCCL measurements."""

    alpha_s: dict[str, float]
    """Fixed latency per call of each collective kind, seconds."""
    intra_node_efficiency: float
    """Achieved bus bandwidth / nominal per-direction link bandwidth inside a node."""
    inter_node_bus_bw_gbs: float
    """Achieved bus bandwidth per device when a collective crosses nodes, GB/s."""
    devices_per_node: int = 8


@dataclass(frozen=True)
class EfficiencyModel:
    """All tables plus the collective fit and provenance, as loaded from JSON."""

    tables: dict[str, EfficiencyTable]
    collectives: CollectiveFit
    provenance: dict = field(default_factory=dict)
    validation: dict = field(default_factory=dict)

    def table(self, key: str) -> EfficiencyTable:
        return self.tables[key]

    def table_key(self, key: str, *, low_power: bool) -> str:
        """``key`` or its power-limited variant when the device is one and the variant exists."""
        variant = key + LOW_POWER_SUFFIX
        return variant if low_power and variant in self.tables else key

    @classmethod
    def from_dict(cls, data: dict) -> EfficiencyModel:
        if data.get("format") != MODEL_FORMAT or data.get("version") != MODEL_VERSION:
            raise AIAdvisorError(
                f"cost model file has format={data.get('format')!r} "
                f"version={data.get('version')!r}:"
                f" expected {MODEL_FORMAT!r} version {MODEL_VERSION}. Retrain it with "
                "scripts/train_costmodel.py."
            )
        grid = Grid(**data["grid"])
        tables = {key: EfficiencyTable.from_dict(key, grid, t) for key, t in data["tables"].items()}
        c = data["collectives"]
        collectives = CollectiveFit(
            alpha_s=dict(c["alpha_s"]), intra_node_efficiency=float(c["intra_node_efficiency"]),
            inter_node_bus_bw_gbs=float(c["inter_node_bus_bw_gbs"]),
            devices_per_node=int(c.get("devices_per_node", 8)),
        )
        return cls(tables=tables, collectives=collectives,
                   provenance=data.get("provenance", {}), validation=data.get("validation", {}))


def _default_model_text() -> str:
    """The shipped JSON: inside the wheel (``aiadvisor/_data/costmodel``) or the source tree."""
    packaged = resources.files("aiadvisor").joinpath("_data", "costmodel", MODEL_FILENAME)
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    source_tree = Path(__file__).resolve().parents[2] / "data" / "costmodel" / MODEL_FILENAME
    if source_tree.is_file():
        return source_tree.read_text(encoding="utf-8")
    raise AIAdvisorError(
        f"the shipped cost model {MODEL_FILENAME} was not found "
        "(looked in aiadvisor/_data/costmodel"
        f" and {source_tree.parent}). Reinstall aiadvisor, or rebuild it with "
        "scripts/train_costmodel.py."
    )


@lru_cache(maxsize=1)
def load_model(path: str | None = None) -> EfficiencyModel:
    """Load the efficiency model (the shipped one unless ``path`` names another JSON file)."""
    text = Path(path).read_text(encoding="utf-8") if path else _default_model_text()
    return EfficiencyModel.from_dict(json.loads(text))
