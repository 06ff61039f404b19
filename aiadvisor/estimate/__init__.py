"""Pure formulas (numpy only): roofline times and alpha-beta collective times.

Nothing here reads files or knows about devices beyond the numbers it is given; the learned
parts live in :mod:`aiadvisor.costmodel`.
"""

from __future__ import annotations

from .collectives import (
    BUS_FACTOR,
    COLLECTIVES,
    DDP_BUCKET_BYTES,
    all_to_all_time_s,
    bubble_fraction,
    collective_time_s,
    exposed_time_s,
    hierarchical_time_s,
    stage_imbalance,
)
from .roofline import ridge_point, roofline_time_s

__all__ = [
    "BUS_FACTOR",
    "COLLECTIVES",
    "DDP_BUCKET_BYTES",
    "all_to_all_time_s",
    "bubble_fraction",
    "collective_time_s",
    "exposed_time_s",
    "hierarchical_time_s",
    "ridge_point",
    "roofline_time_s",
    "stage_imbalance",
]
