"""Charts of LLM serving: tokens/s against concurrency (one line per weight format) and time per
output token against context length (one line per device). Each takes a DataFrame and the names
of the columns it plots; every figure on them is estimated."""

from __future__ import annotations

import math
from typing import Any

import altair as alt
import pandas as pd

from ._style import PALETTE, chart, finish, layers

__all__ = ["throughput_chart", "tpot_context_chart"]


def _finite(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def throughput_chart(frame: pd.DataFrame, *, concurrency: str = "batch_size",
                     tokens: str = "tokens_per_s", series: str = "weight_precision",
                     fits: str | None = "fits", current: int | None = None,
                     subtitle: str = "") -> alt.LayerChart:
    """Aggregate output tokens/s against concurrent sequences (log x), one line per ``series``
    value; sequences that do not fit are left out; a dashed rule marks ``current``.

    Parameters
    ----------
    frame : DataFrame
        One row per (series, concurrency), e.g. :func:`aiadvisor.plan_serving`'s rows of one
        KV format and tensor-parallel degree.
    concurrency, tokens, series : str
        Columns plotted on x, y and as the line colour.
    current : int, optional
        The concurrency the dashboard shows now.
    """
    ok = frame[fits].astype(bool) if fits and fits in frame.columns else True
    data = frame[ok] if fits else frame
    records = [{"series": str(s), "concurrency": int(c), "tokens": float(t)}
               for s, c, t in zip(data[series], data[concurrency], data[tokens])
               if _finite(t) and t > 0]
    records.sort(key=lambda r: (r["series"], r["concurrency"]))
    order = list(dict.fromkeys(str(s) for s in frame[series]))
    x = alt.X("concurrency:Q", scale=alt.Scale(type="log", base=2, nice=False),
              title="concurrent sequences (log)")
    y = alt.Y("tokens:Q", scale=alt.Scale(type="log", nice=False), title="output tokens/s (log)")
    colour = alt.Color("series:N", title=series.replace("_", " "), sort=order,
                       scale=alt.Scale(range=list(PALETTE)))
    tooltip = [alt.Tooltip("series:N", title=series.replace("_", " ")),
               alt.Tooltip("concurrency:Q", title="concurrent"),
               alt.Tooltip("tokens:Q", title="tokens/s", format=",.4g")]
    lines = chart("line", None, width=460, height=260, point=True,
                  encoding={"x": x, "y": y, "color": colour, "tooltip": tooltip,
                            "order": alt.Order("concurrency:Q")})
    parts = [(lines, records)]
    if current:
        parts.append((chart("rule", None, strokeDash=[4, 3], color="#888888",
                            encoding={"x": alt.X("concurrency:Q")}),
                      [{"concurrency": int(current)}]))
    notes = ["estimated; only concurrencies that fit the device's memory"]
    if subtitle:
        notes.append(subtitle)
    return finish(layers(*parts), title="Tokens/s against concurrency", subtitle=notes)


def tpot_context_chart(frame: pd.DataFrame, *, context: str = "context_len",
                       tpot: str = "tpot_s", device: str = "hardware",
                       highlight: str | None = None, current: int | None = None,
                       subtitle: str = "") -> alt.LayerChart:
    """Time per output token (ms) against the prompt's context length, one line per device;
    the ``highlight`` device is drawn thicker, a dashed rule marks ``current``.

    Parameters
    ----------
    frame : DataFrame
        One row per (device, context length).
    context, tpot, device : str
        Columns plotted on x, y (seconds, drawn in ms) and as the line colour.
    """
    records = [{"device": str(d), "context": int(c), "tpot_ms": float(t) * 1e3,
                "target": str(d) == highlight}
               for d, c, t in zip(frame[device], frame[context], frame[tpot]) if _finite(t)]
    records.sort(key=lambda r: (r["device"], r["context"]))
    order = list(dict.fromkeys(str(d) for d in frame[device]))
    x = alt.X("context:Q", title="prompt tokens (context)")
    y = alt.Y("tpot_ms:Q", title="time per output token (ms)")
    lines = chart("line", None, width=460, height=260, point=True, encoding={
        "x": x, "y": y,
        "color": alt.Color("device:N", title="device", sort=order,
                           scale=alt.Scale(range=list(PALETTE))),
        "strokeWidth": alt.StrokeWidth("target:N", legend=None,
                                       scale=alt.Scale(domain=[True, False], range=[3.5, 1.5])),
        "order": alt.Order("context:Q"),
        "tooltip": [alt.Tooltip("device:N"), alt.Tooltip("context:Q", title="prompt tokens"),
                    alt.Tooltip("tpot_ms:Q", title="TPOT (ms)", format=".3g")]})
    parts = [(lines, records)]
    if current:
        parts.append((chart("rule", None, strokeDash=[4, 3], color="#888888",
                            encoding={"x": alt.X("context:Q")}), [{"context": int(current)}]))
    notes = ["estimated; thick line: the target device"]
    if subtitle:
        notes.append(subtitle)
    return finish(layers(*parts), title="Time per output token against context",
                  subtitle=notes)
