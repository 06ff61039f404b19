"""Shared look of aiadvisor's charts and the unit scaling of their axes."""

from __future__ import annotations

import math
from typing import Any

import altair as alt

# Categorical colours readable on white and on JupyterLab's dark background (Tableau 10).
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")
FIT_COLOURS = {"fits": "#59a14f", "does not fit": "#e15759"}

_FLOP_UNITS = ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP"),
               (1.0, "FLOP"))
_BYTE_UNITS = ((1024**4, "TiB"), (1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"), (1, "B"))


def flop_unit(max_flops: float) -> tuple[float, str]:
    """Divisor and name of the decimal FLOP unit that shows ``max_flops`` as 1 to 999.

    >>> flop_unit(3.2e11)
    (1000000000.0, 'GFLOP')
    """
    return _pick(max_flops, _FLOP_UNITS)


def byte_unit(max_bytes: float) -> tuple[float, str]:
    """Divisor and name of the binary byte unit (GiB = 1024**3) that fits ``max_bytes``.

    >>> byte_unit(5 * 1024**3)
    (1073741824, 'GiB')
    """
    return _pick(max_bytes, _BYTE_UNITS)


def _pick(value: float, units: tuple[tuple[float, str], ...]) -> tuple[float, str]:
    value = abs(float(value)) if value is not None and math.isfinite(value) else 0.0
    for divisor, name in units:
        if value >= divisor:
            return divisor, name
    return units[-1]


# One shared config object: assigning it (instead of chained .configure_*() calls, each of which
# deep-copies the chart and its data) keeps a chart build at a few milliseconds.
CONFIG = alt.Config(
    background="transparent", font="sans-serif", view=alt.ViewConfig(stroke=None),
    axis=alt.AxisConfig(labelFontSize=11, titleFontSize=12, gridOpacity=0.35),
    title=alt.TitleConfig(fontSize=14, subtitleFontSize=11, subtitleFontStyle="italic",
                          anchor="start"),
    legend=alt.LegendConfig(labelFontSize=11, titleFontSize=11),
)


def chart(kind: str, records: list[dict] | None, *, encoding: dict[str, Any],
          width: Any = None, height: Any = None, **mark_options: Any) -> alt.Chart:
    """A chart of ``kind`` marks over ``records`` with channels ``encoding``.

    Data goes in last and sizes are set in place: altair copies a chart (and its data) on each
    ``.mark_*()``, ``.encode()`` and ``.properties()``. ``records=None`` leaves the data for
    :func:`layers` to attach.
    """
    built = alt.Chart(mark=alt.MarkDef(type=kind, **mark_options)).encode(**encoding)
    if records is not None:
        built.data = alt.Data(values=records)
    if width is not None:
        built.width = width
    if height is not None:
        built.height = height
    return built


def layers(*parts: tuple[alt.Chart, list[dict]], **properties: Any) -> alt.LayerChart:
    """Layer charts built with ``records=None`` and attach each one's records afterwards
    (``LayerChart()`` deep-copies its layers, data included)."""
    layered = alt.LayerChart(layer=[part for part, _ in parts], **properties)
    for layer, (_, records) in zip(layered.layer, parts):
        layer.data = alt.Data(values=records)
    return layered


def finish(chart: alt.TopLevelMixin, *, title: str, subtitle: str | list[str] = ""):
    """Set the title and the shared config in place (the chart is freshly built by the caller)."""
    chart.title = alt.TitleParams(title, subtitle=subtitle)
    chart.config = CONFIG
    return chart
