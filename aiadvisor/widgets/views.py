"""The five tabs of the dashboard. Each view owns its widgets and redraws them from a report."""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from ..units import fmt_bytes, fmt_flops, fmt_seconds
from ..viz import plans as plan_charts
from ..viz import profile as profile_charts
from . import html as H
from .charts import DashboardChart
from .insert import InsertCellButton

__all__ = ["VIEWS"]


class _View:
    title = ""

    def __init__(self, dashboard: Any) -> None:
        self.dashboard = dashboard
        self.box = W.VBox()
        self.charts: dict[str, DashboardChart] = {}
        self._drawn: dict[str, Any] = {}

    def chart(self, key: str, build: Any, *, inputs: Any) -> DashboardChart:
        """The chart widget for ``key``: created once, then redrawn in place only when the
        ``inputs`` it is drawn from changed (``build()`` returns the altair chart)."""
        if key not in self.charts:
            self.charts[key] = DashboardChart(build())
        elif self._drawn.get(key) != inputs:
            self.charts[key].show(build())
        self._drawn[key] = inputs
        return self.charts[key]

    def render(self, report: Any) -> None:
        raise NotImplementedError


def _frame_table(frame: Any, columns: list[tuple[str, str]], **kwargs: Any) -> str:
    present = [(key, header) for key, header in columns if key in frame.columns]
    return H.table(frame.to_dict("records"), present, **kwargs)


def _frame_key(frame: Any) -> Any:
    """A cheap identity of a table's content, to skip redrawing an unchanged chart."""
    return (tuple(frame.columns), frame.to_json())


class ProfileView(_View):
    title = "Profile"

    def render(self, report: Any) -> None:
        prof = report.profile
        # The report's resolved target: never looked up again by name (the attached device or
        # a user-made spec is not a catalog row).
        spec = report.hardware_spec
        step = _fingerprint(prof)
        parts = [W.HTML(_summary_html(prof))]
        device_bytes, name = spec.memory_bytes, spec.name
        parts.append(self.chart("memory", lambda: profile_charts.memory_chart(
            prof, device_memory_bytes=device_bytes, device_name=name), inputs=(step, name)))
        parts.append(self.chart("modules", lambda: profile_charts.module_chart(prof),
                                inputs=step))
        precision = report.prediction.precision if report.prediction else prof.precision
        if spec.memory_bw_gbs and (spec.peak_tflops(precision) or spec.fp32_tflops):
            parts.append(self.chart("roofline", lambda: profile_charts.roofline_chart(
                prof, spec, precision=precision), inputs=(step, name, precision)))
        self.box.children = parts


_PATHS = {"fake": "traced on fake tensors (no memory used)",
          "meta": "traced on the meta device",
          "real": "ran a real batch of one and scaled it"}


def _fingerprint(prof: Any) -> tuple:
    """What the profile charts are drawn from (a new report may carry an equal profile)."""
    return (prof.mode, prof.precision, prof.batch_size, prof.seq_len, prof.flops_per_step,
            prof.bytes_per_step, prof.memory)


def _summary_html(prof: Any) -> str:
    mem = prof.memory
    seq = f", sequence {prof.seq_len}" if prof.seq_len else ""
    optimizer = f", {prof.optimizer}" if prof.mode == "train" else ""
    flops = (f"{fmt_flops(prof.flops_per_step)} (forward {fmt_flops(prof.flops_forward)}, "
             f"backward {fmt_flops(prof.flops_backward)}, optimizer "
             f"{fmt_flops(prof.flops_optimizer)})")
    memory = (f"{fmt_bytes(mem.peak_bytes)} (weights {fmt_bytes(mem.weights_bytes)}, gradients "
              f"{fmt_bytes(mem.grads_bytes)}, optimizer {fmt_bytes(mem.optimizer_bytes)}, "
              f"activations {fmt_bytes(mem.activations_bytes)})")
    rows = [
        ("model", (f"{prof.model_type}: {prof.num_params:,} parameters "
                  f"({prof.num_trainable_params:,} trainable)")),
        ("step", f"{prof.mode}, batch {prof.batch_size}{seq}, {prof.precision}{optimizer}"),
        ("FLOPs per step", flops),
        ("bytes moved per step", fmt_bytes(prof.bytes_per_step)),
        ("peak memory", memory),
        ("how", _PATHS.get(prof.path, prof.path)),
    ]
    if prof.measured_step_time_s:
        measured = f"{fmt_seconds(prof.measured_step_time_s)} on {prof.device}"
        rows.append(("measured step time", measured))
    notes = "".join(H.note(n) for n in prof.notes)
    return (H.kv_table(rows) + notes
            + '<div class="aiadvisor-muted-text">FLOPs, bytes and memory are counted from the '
              "traced step; times are estimated.</div>")


class HardwareView(_View):
    title = "Hardware"
    COLUMNS = (("hardware", "device"), ("vendor", "vendor"), ("precision", "precision"),
               ("num_devices", "devices"), ("fits", "fits"), ("plan", "plan"),
               ("memory_per_device_bytes", "memory per device"), ("step_time_s", "step time"),
               ("throughput", "samples/s"), ("usd_per_hour", "$/hour per device"),
               ("cost_per_million_samples_usd", "$ per 1M samples"),
               ("energy_per_sample_j_upper_bound", "J/sample (at most)"),
               ("confidence", "confidence"), ("notes", "notes"))
    COST = "cost_per_million_samples_usd"

    def __init__(self, dashboard: Any) -> None:
        super().__init__(dashboard)
        self.vendor = W.Dropdown(description="vendor", options=["all"], value="all")
        self.kind = W.Dropdown(description="kind", options=["all"], value="all")
        self.fits_only = W.Checkbox(description="only devices it fits on", value=False)
        for control in (self.vendor, self.kind, self.fits_only):
            control.observe(self._on_filter, names="value")
        self.filters = W.HBox([self.vendor, self.kind, self.fits_only])
        self._report: Any = None

    def _on_filter(self, change: dict) -> None:
        if self._report is not None:
            with self.dashboard._errors_shown():
                self._draw(self._report)

    def render(self, report: Any) -> None:
        self._report = report
        frame = report.hardware
        for control, column in ((self.vendor, "vendor"), (self.kind, "kind")):
            if column in frame.columns:
                values = ["all", *sorted({str(v) for v in frame[column].dropna()})]
                if list(control.options) != values:
                    current = control.value
                    control.options = values
                    control.value = current if current in values else "all"
        self._draw(report)

    def _filtered(self, frame: Any) -> Any:
        if self.vendor.value != "all" and "vendor" in frame.columns:
            frame = frame[frame["vendor"] == self.vendor.value]
        if self.kind.value != "all" and "kind" in frame.columns:
            frame = frame[frame["kind"] == self.kind.value]
        if self.fits_only.value and "fits" in frame.columns:
            frame = frame[frame["fits"].astype(bool)]
        return frame

    def _draw(self, report: Any) -> None:
        frame = self._filtered(report.hardware)
        parts: list[W.Widget] = [self.filters]
        precision_note = report.hardware.attrs.get("precision_note", "")
        if precision_note:
            parts.append(W.HTML(H.note(precision_note)))
        cost = self.COST
        if {cost, "throughput"} <= set(frame.columns) and frame[cost].notna().any():
            parts.append(self.chart("pareto", lambda: plan_charts.pareto_chart(
                frame, cost=cost, speed="throughput", name="hardware",
                cost_title="$ per million samples (log)", speed_title="samples/s (log)"),
                inputs=_frame_key(frame)))
        target = getattr(report.prediction, "hardware", None)
        table = _frame_table(frame, self.COLUMNS,
                             highlight=lambda r: r.get("hardware") == target,
                             muted=lambda r: r.get("fits") is False)
        parts.append(W.HTML(f'<div class="aiadvisor-scroll aiadvisor-wide">{table}</div>'
                            '<div class="aiadvisor-muted-text">Fastest first. Speeds, costs and '
                            "energies are estimated: cost from the hourly price in the catalog, "
                            "energy an upper bound from the TDP; the highlighted row is the "
                            "target.</div>"))
        self.box.children = parts


class PrecisionView(_View):
    title = "Precision"
    COLUMNS = (("precision", "precision"), ("support", "device support"), ("usable", "usable"),
               ("speedup_vs_fp32", "speedup vs fp32"), ("speedup_low", "likely from"),
               ("speedup_high", "likely to"), ("step_time_s", "step time"),
               ("memory_per_device_bytes", "memory per device"), ("fits", "fits"),
               ("confidence", "confidence"), ("numerical_risk", "numerical risk"),
               ("handled_by", "what handles it"), ("notes", "notes"))

    def render(self, report: Any) -> None:
        frame = report.precision
        parts: list[W.Widget] = []
        if {"precision", "speedup_vs_fp32"} <= set(frame.columns):
            parts.append(self.chart("precision", lambda: plan_charts.precision_chart(
                frame, precision="precision", speedup="speedup_vs_fp32",
                supported="usable" if "usable" in frame.columns else None,
                low="speedup_low" if "speedup_low" in frame.columns else None,
                high="speedup_high" if "speedup_high" in frame.columns else None),
                inputs=_frame_key(frame)))
        current = report.prediction.precision if report.prediction else None
        table = _frame_table(frame, self.COLUMNS,
                             highlight=lambda r: r.get("precision") == current,
                             muted=lambda r: r.get("usable") is False)
        parts.append(W.HTML(f'<div class="aiadvisor-scroll aiadvisor-wide">{table}</div>'
                            '<div class="aiadvisor-muted-text">Speedups, times and memory are '
                            "estimated; the highlighted row is the precision in use.</div>"))
        self.box.children = parts


class ParallelView(_View):
    title = "Parallelism"
    COLUMNS = (("strategy", "plan"), ("fits", "fits"),
               ("memory_per_device_bytes", "memory per device"), ("step_time_s", "step time"),
               ("step_time_low_s", "likely from"), ("step_time_high_s", "likely to"),
               ("throughput", "samples/s"), ("communication_s", "communication"),
               ("global_batch_size", "global batch"), ("bound", "bound"), ("notes", "notes"))
    MAX_BARS = 16

    def render(self, report: Any) -> None:
        frame = report.parallel
        spec = report.hardware_spec
        advice = frame.attrs.get("advice", "")
        parts: list[W.Widget] = [W.HTML(H.note(advice))] if advice else []
        if {"strategy", "memory_per_device_bytes"} <= set(frame.columns) and len(frame):
            top = frame.head(self.MAX_BARS)
            parts.append(self.chart("memory", lambda: plan_charts.memory_per_device_chart(
                top, memory="memory_per_device_bytes", label="strategy",
                fits="fits" if "fits" in top.columns else None,
                device_memory_bytes=spec.memory_bytes, device_name=spec.name),
                inputs=(_frame_key(top), spec.name)))
        best = frame["strategy"].iloc[0] if len(frame) and "strategy" in frame.columns else None
        table = _frame_table(frame, self.COLUMNS, highlight=lambda r: r.get("strategy") == best,
                             muted=lambda r: r.get("fits") is False)
        parts.append(W.HTML(f'<div class="aiadvisor-scroll aiadvisor-wide">{table}</div>'
                            '<div class="aiadvisor-muted-text">Best plan first (highlighted); '
                            "memory and times are estimated.</div>"))
        self.box.children = parts


class RecommendationsView(_View):
    title = "Recommendations"

    def __init__(self, dashboard: Any) -> None:
        super().__init__(dashboard)
        self.cards: list[tuple[W.HTML, InsertCellButton, W.VBox]] = []

    def _card(self, index: int) -> tuple[W.HTML, InsertCellButton, W.VBox]:
        while len(self.cards) <= index:
            head = W.HTML()
            button = InsertCellButton(cell_id=self.dashboard.cell_id)
            card = W.VBox([head, button])
            card.add_class("aiadvisor-card")
            self.cards.append((head, button, card))
        return self.cards[index]

    def render(self, report: Any) -> None:
        recs = list(report.recommendations)
        if not recs:
            self.box.children = [W.HTML(H.note("No recommendation fired for these options."))]
            return
        boxes = []
        for i, rec in enumerate(recs):
            head, button, card = self._card(i)
            head.value = H.recommendation_card(rec, i + 1)
            button.code = rec.code
            boxes.append(card)
        self.box.children = boxes


VIEWS = (ProfileView, HardwareView, PrecisionView, ParallelView, RecommendationsView)
