"""Which precision runs at full rate on which device, derived from the catalog's figures.

The one copy of the rule: :func:`support_level` answers for one spec, :func:`support_matrix`
for a whole table (the catalog or a user CSV); the recommender and the dashboard use them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import check_choice
from ..units import FP4_FORMAT_BITS, PRECISION_COLUMN, PRECISION_REQUIRES, PRECISIONS
from .spec_table import as_table

if TYPE_CHECKING:
    import pandas as pd

    from ..schema import HardwareSpec

__all__ = ["FALLBACKS", "PRECISION_COLUMN", "SUPPORT_LEVELS", "fp4_bits", "fp4_format",
           "support_level", "support_matrix"]

#: full: the catalog has a dense figure for this format (a native engine runs it; mxfp8 also
#: needs the block-scaled engine a dense FP4 figure marks, :data:`~aiadvisor.units.
#: PRECISION_REQUIRES`).
#: emulated: no figure, but a wider format has one: it runs by conversion (weight-only
#: dequantisation, upcast), at most at the wider format's rate.
#: unknown: neither the format nor any wider one has a figure in the catalog.
SUPPORT_LEVELS = ("full", "emulated", "unknown")

#: Wider formats a precision falls back to when it has no engine of its own.
FALLBACKS = {
    "fp32": (), "tf32": ("fp32",), "bf16": ("fp32",), "fp16": ("fp32",),
    "fp8": ("bf16", "fp16", "fp32"), "mxfp8": ("fp8", "bf16", "fp16", "fp32"),
    "fp4": ("fp8", "bf16", "fp16", "fp32"), "int8": ("bf16", "fp16", "fp32"),
    "int8wo": ("bf16", "fp16", "fp32"), "int4": ("int8", "bf16", "fp16", "fp32"),
    "nf4": ("bf16", "fp16", "fp32"),
}


def _level(has_figure: Callable[[str], bool], precision: str) -> str:
    column = PRECISION_COLUMN[precision]
    required = PRECISION_REQUIRES.get(precision)
    if column is not None and has_figure(column) and (required is None or has_figure(required)):
        return "full"
    if any(has_figure(PRECISION_COLUMN[p]) for p in FALLBACKS[precision]):
        return "emulated"
    return "unknown"


def support_level(spec: HardwareSpec, precision: str) -> str:
    """How ``spec`` runs ``precision``: one of :data:`SUPPORT_LEVELS`.

    ``full`` when the spec has a dense figure for it, ``emulated`` when only a wider format
    has one (:data:`FALLBACKS`), ``unknown`` when neither has.

    Examples
    --------
    >>> from aiadvisor.hardware import get
    >>> support_level(get("H100 SXM"), "fp8"), support_level(get("T4"), "fp8")
    ('full', 'emulated')
    """
    check_choice("precision", precision, PRECISIONS)
    return _level(lambda column: getattr(spec, column) is not None, precision)


#: The 4-bit float format each vendor's inference stack runs on its FP4 tensor cores. NVIDIA
#: Blackwell: NVFP4 (NVIDIA technical blog "Introducing NVFP4 for Efficient and Accurate
#: Low-Precision Inference": TensorRT Model Optimizer, TensorRT-LLM, vLLM and SGLang load NVFP4
#: checkpoints; Transformer Engine's ``NVFP4BlockScaling`` recipe). Everyone else with an FP4
#: figure in the catalog runs the OCP MX format, MXFP4: AMD CDNA4 (MI355X "MXFP4/MXFP6" peak on
#: its product page) and AWS Trainium3 ("MXFP8/MXFP4", Neuron architecture guide).
FP4_FORMAT_BY_VENDOR = {"NVIDIA": "nvfp4"}
DEFAULT_FP4_FORMAT = "mxfp4"


def fp4_format(spec: HardwareSpec) -> str | None:
    """The 4-bit float format ``spec`` runs ``precision="fp4"`` in (``"nvfp4"`` or
    ``"mxfp4"``), or None when it has no dense FP4 figure (no FP4 engine).

    Examples
    --------
    >>> from aiadvisor.hardware import get
    >>> fp4_format(get("B200")), fp4_format(get("MI355X")), fp4_format(get("H100 SXM"))
    ('nvfp4', 'mxfp4', None)
    """
    if spec.fp4_tflops is None:
        return None
    return FP4_FORMAT_BY_VENDOR.get(spec.vendor, DEFAULT_FP4_FORMAT)


def fp4_bits(spec: HardwareSpec) -> float:
    """Bits per element of ``precision="fp4"`` on ``spec``, block scales included: NVFP4 4.5,
    MXFP4 4.25 (:data:`aiadvisor.units.FP4_FORMAT_BITS`); NVFP4's where it has no FP4 engine.

    >>> from aiadvisor.hardware import get
    >>> fp4_bits(get("B200")), fp4_bits(get("MI355X"))
    (4.5, 4.25)
    """
    return FP4_FORMAT_BITS[fp4_format(spec) or "nvfp4"]


def support_matrix(catalog: pd.DataFrame | str | os.PathLike | None = None) -> pd.DataFrame:
    """Precision support per device, derived from which throughput columns hold a figure.

    Parameters
    ----------
    catalog : DataFrame, path or None
        A table from :func:`~aiadvisor.hardware.catalog`, a user CSV path, or None (shipped).

    Returns
    -------
    pandas.DataFrame
        Index: device names; columns: ``fp32, tf32, bf16, fp16, fp8, mxfp8, fp4, int8,
        int8wo, int4, nf4``; values
        ``"full"``, ``"emulated"`` or ``"unknown"`` (see :data:`SUPPORT_LEVELS`). A blank
        catalog cell can also mean "not published" (e.g. the A10G), which shows as unknown or
        emulated: the matrix never claims more than the table holds.

    Examples
    --------
    >>> m = support_matrix()
    >>> m.loc["NVIDIA V100 SXM2 32GB", "bf16"], m.loc["NVIDIA H100 SXM", "fp8"]
    ('emulated', 'full')
    >>> m.loc["NVIDIA H100 SXM", "fp4"], m.loc["NVIDIA B200", "mxfp8"]
    ('emulated', 'full')
    """
    import pandas as pd

    table = as_table(catalog)
    # A blank cell reads as NaN, which is the one value unequal to itself.
    data = {p: [_level(lambda c, row=row: row[c] == row[c], p) for _, row in table.iterrows()]
            for p in PRECISIONS}
    matrix = pd.DataFrame(data, index=pd.Index(table["name"].tolist(), name="name"),
                          columns=list(PRECISIONS))
    return matrix
