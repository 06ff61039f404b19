"""Charts of the advisor's tables: hardware speed vs cost, per-device memory of parallel plans,
and precisions. Each takes a DataFrame and the names of the columns it plots."""

from __future__ import annotations

import math
from typing import Any

import altair as alt
import pandas as pd

from ..recommend.ranking import pareto_front
from ..units import fmt_bytes
from ._style import FIT_COLOURS, PALETTE, byte_unit, chart, finish, layers

__all__ = ["memory_per_device_chart", "pareto_chart", "plan_waterfall_chart", "precision_chart"]


def pareto_chart(frame: pd.DataFrame, *, cost: str, speed: str, name: str = "name",
                 colour: str = "vendor", fits: str | None = "fits", front: str = "pareto",
                 cost_title: str, speed_title: str) -> alt.LayerChart:
    """Speed against cost, one point per device (log-log), the Pareto front as a line.

    Parameters
    ----------
    frame : DataFrame
        One row per device option.
    cost, speed : str
        Columns plotted on x (lower is better) and y (higher is better).
    front : str
        Column saying which rows are on the Pareto front (the hardware ranking's ``pareto``,
        computed over the whole catalog): drawn as it is, so the chart and the table agree. A
        frame without it gets :func:`~aiadvisor.recommend.ranking.pareto_front`.
    cost_title, speed_title : str
        Axis titles with units.
    """
    ok = frame[cost].notna() & frame[speed].notna()
    data = frame[ok]
    data = data[(data[cost] > 0) & (data[speed] > 0)]
    flags = data[front].astype(bool) if front in data.columns else pareto_front(
        data, cost=cost, speed=speed)
    colours = data[colour] if colour in data.columns else [""] * len(data)
    fit_values = data[fits] if fits else [True] * len(data)
    records = [{"name": str(n), "short": _short_name(str(n), v), "colour": str(v),
                "cost": float(c), "speed": float(s), "pareto": bool(on),
                "fit_text": _fit_text(f)}
               for n, v, c, s, on, f in zip(data[name], colours, data[cost], data[speed], flags,
                                            fit_values)]
    on_front = sorted((r for r in records if r["pareto"]), key=lambda r: r["cost"])
    # Log scales fitted to the data (nice=False): devices cluster within a decade or two.
    x = alt.X("cost:Q", scale=alt.Scale(type="log", nice=False, padding=12), title=cost_title)
    y = alt.Y("speed:Q", scale=alt.Scale(type="log", nice=False, padding=12), title=speed_title)
    line = chart("line", None, color="#888888", strokeDash=[5, 3],
                 encoding={"x": x, "y": y, "order": alt.Order("cost:Q")})
    points = chart("point", None, filled=True, size=70, opacity=0.85, encoding={
        "x": x, "y": y,
        "color": alt.Color("colour:N", title=colour, scale=alt.Scale(range=list(PALETTE))),
        "shape": alt.Shape("fit_text:N", title=None,
                           scale=alt.Scale(domain=["fits", "does not fit"],
                                           range=["circle", "cross"]),
                           legend=alt.Legend(symbolFillColor="#888888",
                                             symbolStrokeColor="#888888")),
        "tooltip": [alt.Tooltip("name:N", title="device"),
                    alt.Tooltip("speed:Q", title=speed_title, format=",.3g"),
                    alt.Tooltip("cost:Q", title=cost_title, format=",.3g"),
                    alt.Tooltip("pareto:N", title="on the front")]})
    labels = chart("text", None, align="left", dx=6, dy=-6, fontSize=10,
                   encoding={"x": x, "y": y, "text": alt.Text("short:N")})
    labelled = _apart(on_front, records)
    subtitle = ["estimated; dashed line: the Pareto front (nothing is both cheaper and faster)"]
    missing = len(frame) - len(records)
    if missing:
        subtitle.append(f"{missing} device(s) without a price or a prediction are not shown")
    layered = layers((line, on_front), (points, records), (labels, labelled), width=520,
                     height=320)
    return finish(layered, title="Speed against cost", subtitle=subtitle)


#: Share of each log axis a front label keeps clear of the labels before it (a label runs
#: right of its point: about a tenth of the 520 px plot wide, 12 px of 320 high).
LABEL_CLEARANCE = (0.12, 0.05)


def _apart(front: list[dict], records: list[dict]) -> list[dict]:
    """The front points whose labels would not overprint an earlier one's (in cost order;
    the point itself and its tooltip stay). Two devices at nearly the same cost and speed, e.g.
    two CPUs whose step the host bounds, otherwise print their names on top of each other."""
    if len(front) < 2:
        return front
    spans = []
    for key in ("cost", "speed"):
        logs = [math.log(r[key]) for r in records]
        spans.append(max(max(logs) - min(logs), 1e-9))
    kept: list[dict] = []
    for r in front:
        clear = all(abs(math.log(r["cost"] / k["cost"])) / spans[0] >= LABEL_CLEARANCE[0]
                    or abs(math.log(r["speed"] / k["speed"])) / spans[1] >= LABEL_CLEARANCE[1]
                    for k in kept)
        if clear:
            kept.append(r)
    return kept


def _short_name(name: str, vendor: object) -> str:
    """Label text without the vendor's prefix ("NVIDIA H100 SXM" -> "H100 SXM")."""
    for prefix in (f"{vendor} Instinct ", f"{vendor} GeForce ", f"{vendor} ", "Google "):
        if isinstance(vendor, str) and name.startswith(prefix):
            return name[len(prefix):]
    return name


def _fit_text(value: object) -> str:
    return "does not fit" if value is False or value == 0 else "fits"


def memory_per_device_chart(frame: pd.DataFrame, *, memory: str, label: str,
                            device_memory_bytes: int | None, fits: str | None = "fits",
                            device_name: str = "") -> alt.LayerChart:
    """Per-device memory of each plan against the device's memory (the dashed rule)."""
    largest = max([*frame[memory].dropna(), device_memory_bytes or 0, 1])
    divisor, unit = byte_unit(largest)
    plans = [str(v) for v in frame[label]]
    fit_values = list(frame[fits]) if fits else [True] * len(frame)
    records = [{"plan": plan, "value": float(value) / divisor, "text": fmt_bytes(value),
                "fit_text": _fit_text(fit)}
               for plan, value, fit in zip(plans, frame[memory], fit_values)]
    bars = chart("bar", None, width=460, height=alt.Step(18), encoding={
        "x": alt.X("value:Q", title=f"{unit} per device"),
        "y": alt.Y("plan:N", sort=plans, title=None),
        "color": alt.Color("fit_text:N", title=None,
                           scale=alt.Scale(domain=list(FIT_COLOURS),
                                           range=list(FIT_COLOURS.values()))),
        "tooltip": [alt.Tooltip("plan:N"), alt.Tooltip("text:N", title="per device")]})
    parts = [(bars, records)]
    if device_memory_bytes:
        limit = [{"value": device_memory_bytes / divisor,
                  "label": f"{device_name} {fmt_bytes(device_memory_bytes)}"}]
        parts.append((chart("rule", None, strokeDash=[4, 3], size=2, color="#888888",
                            encoding={"x": alt.X("value:Q"),
                                      "tooltip": [alt.Tooltip("label:N",
                                                              title="device memory")]}), limit))
    return finish(layers(*parts), title="Memory per device of each plan",
                  subtitle="estimated from the profile; dashed: the device's memory")


def precision_chart(frame: pd.DataFrame, *, precision: str, speedup: str,
                    supported: str | None = None, low: str | None = None,
                    high: str | None = None) -> alt.LayerChart:
    """Predicted speedup of each precision (bars, with the likely range when ``low``/``high``
    are given); precisions the device cannot run are muted, ones without a figure left out."""
    def column(name: str | None, default: Any) -> list:
        return list(frame[name]) if name else [default] * len(frame)

    records = []
    for p, s, ok, lo, hi in zip(frame[precision], frame[speedup], column(supported, True),
                                column(low, None), column(high, None)):
        if s is None or math.isnan(s):
            continue
        row = {"precision": str(p), "speedup": float(s),
               "support": "usable" if ok else "not usable here"}
        if lo is not None and hi is not None and not (math.isnan(lo) or math.isnan(hi)):
            row.update(low=float(lo), high=float(hi))
        records.append(row)
    order = [r["precision"] for r in records]
    x = alt.X("precision:N", sort=order, title=None)
    bars = chart("bar", None, width=380, height=200, encoding={
        "x": x, "y": alt.Y("speedup:Q", title="predicted speedup (×)"),
        "color": alt.Color("support:N", title=None,
                           scale=alt.Scale(domain=["usable", "not usable here"],
                                           range=[PALETTE[0], "#bab0ac"])),
        "tooltip": [alt.Tooltip("precision:N"), alt.Tooltip("speedup:Q", format=".2f"),
                    alt.Tooltip("low:Q", format=".2f", title="likely from"),
                    alt.Tooltip("high:Q", format=".2f", title="likely to")]})
    parts = [(bars, records)]
    ranged = [r for r in records if "low" in r]
    if ranged:
        parts.append((chart("rule", None, color="#888888", strokeWidth=2, encoding={
            "x": x, "y": alt.Y("low:Q"), "y2": alt.Y2("high")}), ranged))
    parts.append((chart("rule", None, color="#888888", strokeDash=[2, 2],
                        encoding={"y": alt.Y("one:Q")}), [{"one": 1.0}]))
    return finish(layers(*parts), title="Step speed by precision",
                  subtitle="estimated; whiskers: the likely range")


def plan_waterfall_chart(frame: pd.DataFrame, *, label: str = "title",
                         speedup: str = "speedup_step",
                         cumulative: str = "speedup_cumulative") -> alt.LayerChart:
    """The stacked plan as a waterfall: each step a bar from the throughput before it to the
    throughput after it (as a multiple of the step as you run it, 1.0x), so the last bar ends at
    the plan's cumulative speedup; bars going down are steps that trade speed for memory."""
    records = [{"step": "as you run it", "order": 0, "start": 0.0, "end": 1.0,
                "text": "1.00x", "kind": "start"}]
    before = 1.0
    for i, (name, gain, after) in enumerate(zip(frame[label], frame[speedup], frame[cumulative]),
                                            1):
        if after is None or not math.isfinite(after):
            continue
        records.append({"step": f"{i}. {name}", "order": i, "start": before, "end": float(after),
                        "text": f"{gain:.2f}x" if gain is not None and math.isfinite(gain)
                        else "", "kind": "faster" if after >= before else "slower"})
        before = float(after)
    steps = [r["step"] for r in records]
    x = alt.X("step:N", sort=steps, title=None, axis=alt.Axis(labelAngle=-30, labelLimit=180))
    kinds = {"start": "#bab0ac", "faster": FIT_COLOURS["fits"],
             "slower": FIT_COLOURS["does not fit"]}
    bars = chart("bar", None, width=alt.Step(46), height=240, encoding={
        "x": x, "y": alt.Y("start:Q", title="throughput (× as you run it)"),
        "y2": alt.Y2("end:Q"),
        "color": alt.Color("kind:N", title=None, scale=alt.Scale(
            domain=list(kinds), range=list(kinds.values()))),
        "tooltip": [alt.Tooltip("step:N"), alt.Tooltip("text:N", title="this step"),
                    alt.Tooltip("end:Q", title="with steps 1-k", format=".2f")]})
    labels = chart("text", None, dy=-6, fontSize=10, baseline="bottom", encoding={
        "x": x, "y": alt.Y("end:Q"), "text": alt.Text("text:N")})
    return finish(layers((bars, records), (labels, records)), title="The plan, step by step",
                  subtitle="predicted by the cost model; each step on top of the ones before")
