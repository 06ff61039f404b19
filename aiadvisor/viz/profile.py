"""Charts of one profiled step: FLOPs and memory per module, the memory stack, the roofline."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..errors import InvalidArgumentError
from ..schema import HardwareSpec, ModelProfile
from ..units import fmt_bytes, fmt_flops
from ._style import PALETTE, byte_unit, chart, finish, flop_unit, layers
from .modules import module_breakdown

__all__ = ["memory_chart", "module_chart", "roofline_chart", "roofline_points"]

_MEMORY_PARTS = (("weights_bytes", "weights"), ("grads_bytes", "gradients"),
                 ("optimizer_bytes", "optimizer state"), ("activations_bytes", "activations"),
                 ("inputs_bytes", "inputs"), ("temporaries_bytes", "temporaries"))


def _labels(frame: pd.DataFrame) -> list[str]:
    """``name (Type)``, with ``×N`` for rows that stand for N repeated blocks."""
    out = []
    for module, kind, repeat in zip(frame["module"], frame["type"], frame["repeat"]):
        label = f"{module} ({kind})" if kind and "own ops" not in module else module
        out.append(f"{label} ×{repeat}" if repeat > 1 else label)
    return out


def _long(labels: list[str], frame: pd.DataFrame, parts: dict[str, str], divisor: float,
          fmt) -> list[dict]:
    return [{"label": label, "part": name, "value": float(value) / divisor, "text": fmt(value)}
            for col, name in parts.items()
            for label, value in zip(labels, frame[col])]


def module_chart(profile: ModelProfile, *, max_rows: int = 12) -> alt.HConcatChart:
    """Bars per module: FLOPs per step (forward / backward) and bytes held (weights /
    saved activations). Repeated blocks are summed over all blocks (``×N``).

    Parameters
    ----------
    profile : ModelProfile
    max_rows : int
        Most modules shown (see :func:`aiadvisor.viz.modules.module_breakdown`).

    Returns
    -------
    altair.HConcatChart
    """
    frame = module_breakdown(profile, max_rows=max_rows)
    labels = _labels(frame)
    flop_div, flop_name = flop_unit(frame["flops_total"].max() if len(frame) else 0)
    mem_max = (frame["param_bytes"] + frame["activation_bytes"]).max() if len(frame) else 0
    byte_div, byte_name = byte_unit(mem_max)
    flops = _long(labels, frame, {"flops_forward": "forward", "flops_backward": "backward"},
                  flop_div, fmt_flops)
    memory = _long(labels, frame, {"param_bytes": "weights",
                                   "activation_bytes": "saved activations"}, byte_div, fmt_bytes)
    left = chart("bar", None, width=240, height=alt.Step(18), encoding={
        "x": alt.X("value:Q", title=f"{flop_name} per step", stack="zero"),
        "y": alt.Y("label:N", sort=labels, title=None),
        "color": alt.Color("part:N", title="FLOPs", sort=["forward", "backward"],
                           scale=alt.Scale(domain=["forward", "backward"],
                                           range=list(PALETTE[:2])),
                           legend=alt.Legend(orient="bottom")),
        "tooltip": [alt.Tooltip("label:N", title="module"), alt.Tooltip("part:N", title="phase"),
                    alt.Tooltip("text:N", title="FLOPs")]})
    right = chart("bar", None, width=200, height=alt.Step(18), encoding={
        "x": alt.X("value:Q", title=byte_name, stack="zero"),
        "y": alt.Y("label:N", sort=labels, title=None, axis=alt.Axis(labels=False, ticks=False)),
        "color": alt.Color("part:N", title="Memory",
                           scale=alt.Scale(domain=["weights", "saved activations"],
                                           range=list(PALETTE[2:4])),
                           legend=alt.Legend(orient="bottom")),
        "tooltip": [alt.Tooltip("label:N", title="module"), alt.Tooltip("part:N", title="kind"),
                    alt.Tooltip("text:N", title="bytes")]})
    both = alt.HConcatChart(hconcat=[left, right],
                            resolve=alt.Resolve(scale=alt.ScaleResolveMap(color="independent")))
    # Data after the concat (its constructor deep-copies the parts).
    both.hconcat[0].data = alt.Data(values=flops)
    both.hconcat[1].data = alt.Data(values=memory)
    phase = "forward + backward" if profile.mode == "train" else "forward"
    return finish(both, title="Where the FLOPs and memory go",
                  subtitle=f"counted from the traced {phase} step, batch {profile.batch_size}")


def memory_chart(profile: ModelProfile, *, device_memory_bytes: int | None = None,
                 device_name: str = "") -> alt.LayerChart:
    """One stacked bar of what the step holds at its peak, against the device's memory."""
    parts = [(name, getattr(profile.memory, attr)) for attr, name in _MEMORY_PARTS]
    parts = [(name, value) for name, value in parts if value > 0]
    peak = profile.memory.peak_bytes
    share = peak / device_memory_bytes if device_memory_bytes else None
    # A step that uses a sliver of the device would be an invisible bar next to its limit.
    show_limit = share is not None and share >= 0.05
    divisor, unit = byte_unit(max(peak, device_memory_bytes if show_limit else 0, 1))
    records = [{"part": name, "value": value / divisor, "text": fmt_bytes(value), "order": i,
                "row": "this step"} for i, (name, value) in enumerate(parts)]
    bar = chart("bar", None, width=460, height=50, size=26, encoding={
        "x": alt.X("value:Q", title=unit, stack="zero"),
        "y": alt.Y("row:N", title=None),
        "color": alt.Color("part:N", sort=[p for p, _ in parts], title=None,
                           scale=alt.Scale(range=list(PALETTE))),
        "order": alt.Order("order:Q"),
        "tooltip": [alt.Tooltip("part:N", title="held"), alt.Tooltip("text:N", title="bytes")]})
    parts_ = [(bar, records)]
    subtitle = f"peak {fmt_bytes(peak)} (traced, batch {profile.batch_size})"
    if show_limit:
        limit = [{"value": device_memory_bytes / divisor,
                  "label": f"{device_name} {fmt_bytes(device_memory_bytes)}"}]
        parts_.append((chart("rule", None, color="#888888", strokeDash=[4, 3], size=2, encoding={
            "x": alt.X("value:Q"), "tooltip": [alt.Tooltip("label:N", title="device memory")]}),
            limit))
        subtitle += f"; dashed: the {fmt_bytes(device_memory_bytes)} of {device_name}"
    elif share is not None:
        subtitle += f", {share:.2%} of the {fmt_bytes(device_memory_bytes)} of {device_name}"
    return finish(layers(*parts_), title="Memory at the peak of one step", subtitle=subtitle)


def roofline_points(profile: ModelProfile, hardware: HardwareSpec, *,
                    precision: str) -> pd.DataFrame:
    """Arithmetic intensity and roofline-attainable TFLOP/s per op class and for the whole step.

    Attainable = min(peak, intensity x bandwidth): FLOP/byte x GB/s = GFLOP/s, / 1000 = TFLOP/s.
    Ops without FLOPs or bytes (views, copies without math) cannot be placed and are left out.
    """
    peak, bandwidth = _peak_and_bandwidth(hardware, precision)
    groups: dict[str, list[float]] = {}
    for op in profile.ops:
        acc = groups.setdefault(op.op_class, [0.0, 0.0])
        acc[0] += op.flops
        acc[1] += op.bytes_total
    total = [sum(v[0] for v in groups.values()), sum(v[1] for v in groups.values())]
    rows = []
    for name, (flops, nbytes) in [*sorted(groups.items()), ("whole step", total)]:
        if flops <= 0 or nbytes <= 0:
            continue
        intensity = flops / nbytes
        rows.append({"what": name, "intensity": intensity, "flops": flops,
                     "attainable_tflops": min(peak, intensity * bandwidth / 1000),
                     "flops_share": flops / total[0], "text": fmt_flops(flops)})
    return pd.DataFrame(rows, columns=["what", "intensity", "flops", "attainable_tflops",
                                       "flops_share", "text"])


def _peak_and_bandwidth(hardware: HardwareSpec, precision: str) -> tuple[float, float]:
    peak = hardware.peak_tflops(precision) or hardware.fp32_tflops
    if not peak or not hardware.memory_bw_gbs:
        raise InvalidArgumentError(
            f"hardware {hardware.name!r} has no {precision} peak or memory bandwidth in the "
            "catalog: a roofline needs both.")
    return float(peak), float(hardware.memory_bw_gbs)


def roofline_chart(profile: ModelProfile, hardware: HardwareSpec, *,
                   precision: str) -> alt.LayerChart:
    """The device's roofline (log-log) with the step's op classes placed on it.

    Points sit at the roofline bound, an estimated upper limit: real kernels reach less.
    """
    peak, bandwidth = _peak_and_bandwidth(hardware, precision)
    points = roofline_points(profile, hardware, precision=precision)
    ridge = peak * 1000 / bandwidth  # FLOP/byte where bandwidth x intensity reaches the peak
    lo = min([ridge / 100, *points["intensity"]]) / 2
    hi = max([ridge * 10, *points["intensity"]]) * 2
    roof = [{"intensity": lo, "attainable_tflops": lo * bandwidth / 1000},
            {"intensity": ridge, "attainable_tflops": peak},
            {"intensity": hi, "attainable_tflops": peak}]
    x = alt.X("intensity:Q", scale=alt.Scale(type="log"), title="arithmetic intensity (FLOP/byte)")
    y = alt.Y("attainable_tflops:Q", scale=alt.Scale(type="log"), title="TFLOP/s")
    line = chart("line", None, color="#888888", strokeWidth=2, encoding={"x": x, "y": y})
    dots = chart("circle", None, opacity=0.9, encoding={
        "x": x, "y": y,
        "size": alt.Size("flops_share:Q", scale=alt.Scale(range=[60, 600]), legend=None),
        "color": alt.Color("what:N", title="ops", scale=alt.Scale(range=list(PALETTE))),
        "tooltip": [alt.Tooltip("what:N", title="ops"), alt.Tooltip("text:N", title="FLOPs"),
                    alt.Tooltip("intensity:Q", title="FLOP/byte", format=".3g"),
                    alt.Tooltip("attainable_tflops:Q", title="bound, TFLOP/s", format=".3g")]})
    layered = layers((line, roof), (dots, points.to_dict("records")), width=420, height=260)
    subtitle = [(f"{hardware.name}, {precision}: peak {peak:g} TFLOP/s (dense), "
                 f"{bandwidth:g} GB/s; ridge at {ridge:.0f} FLOP/byte"),
                "estimated: points sit on the roofline bound, an upper limit"]
    return finish(layered, title="The step on the device's roofline", subtitle=subtitle)
