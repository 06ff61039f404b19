"""Which precision runs at full rate on which device, derived from the catalog's figures."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..units import PRECISIONS
from .spec_table import as_table

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FALLBACKS", "PRECISION_COLUMN", "SUPPORT_LEVELS", "support_matrix"]

#: full: the catalog has a dense figure for this format (a native engine runs it).
#: emulated: no figure, but a wider format has one: it runs by conversion (weight-only
#: dequantisation, upcast), at most at the wider format's rate.
#: unknown: neither the format nor any wider one has a figure in the catalog.
SUPPORT_LEVELS = ("full", "emulated", "unknown")

PRECISION_COLUMN = {
    "fp32": "fp32_tflops", "tf32": "tf32_tflops", "bf16": "bf16_tflops",
    "fp16": "fp16_tflops", "fp8": "fp8_tflops", "int8": "int8_tops", "int4": "int4_tops",
    "nf4": None,  # NF4 has no engine anywhere: weights are dequantised to 16 bit
}

#: Wider formats a precision falls back to when it has no engine of its own.
FALLBACKS = {
    "fp32": (), "tf32": ("fp32",), "bf16": ("fp32",), "fp16": ("fp32",),
    "fp8": ("bf16", "fp16", "fp32"), "int8": ("bf16", "fp16", "fp32"),
    "int4": ("int8", "bf16", "fp16", "fp32"), "nf4": ("bf16", "fp16", "fp32"),
}


def _level(row: pd.Series, precision: str) -> str:
    column = PRECISION_COLUMN[precision]
    if column is not None and row[column] == row[column]:  # not NaN
        return "full"
    if any(row[PRECISION_COLUMN[p]] == row[PRECISION_COLUMN[p]] for p in FALLBACKS[precision]):
        return "emulated"
    return "unknown"


def support_matrix(catalog: pd.DataFrame | str | os.PathLike | None = None) -> pd.DataFrame:
    """Precision support per device, derived from which throughput columns hold a figure.

    Parameters
    ----------
    catalog : DataFrame, path or None
        A table from :func:`~aiadvisor.hardware.catalog`, a user CSV path, or None (shipped).

    Returns
    -------
    pandas.DataFrame
        Index: device names; columns: ``fp32, tf32, bf16, fp16, fp8, int8, int4, nf4``; values
        ``"full"``, ``"emulated"`` or ``"unknown"`` (see :data:`SUPPORT_LEVELS`). A blank
        catalog cell can also mean "not published" (e.g. the A10G), which shows as unknown or
        emulated: the matrix never claims more than the table holds.

    Examples
    --------
    >>> m = support_matrix()
    >>> m.loc["NVIDIA V100 SXM2 32GB", "bf16"], m.loc["NVIDIA H100 SXM", "fp8"]
    ('emulated', 'full')
    """
    import pandas as pd

    table = as_table(catalog)
    data = {p: [_level(row, p) for _, row in table.iterrows()] for p in PRECISIONS}
    matrix = pd.DataFrame(data, index=pd.Index(table["name"].tolist(), name="name"),
                          columns=list(PRECISIONS))
    return matrix
