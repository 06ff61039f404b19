"""The five tabs of the dashboard. Each view owns its widgets and redraws them from a report."""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as W

from ..errors import AIAdvisorError
from ..profiler.summary import process_memory_text
from ..units import fmt_bytes, fmt_flops, fmt_params, fmt_seconds
from ..viz import plans as plan_charts
from ..viz import profile as profile_charts
from . import html as H
from .charts import DashboardChart
from .insert import InsertCellButton

__all__ = ["VIEWS", "ServingView", "views_for"]


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
        ("model", (f"{prof.model_type}: {fmt_params(prof)} "
                  f"({prof.num_trainable_params:,} trainable)")),
        ("step", f"{prof.mode}, batch {prof.batch_size}{seq}, {prof.precision}{optimizer}"),
        ("FLOPs per step", flops),
        ("bytes moved per step", fmt_bytes(prof.bytes_per_step)),
        ("peak memory", memory),
    ]
    process = process_memory_text(prof)
    if process:
        rows.append(("as the process shows it", process))
    rows.append(("how", _PATHS.get(prof.path, prof.path)))
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
               ("confidence", "confidence"), ("price_basis", "price used (source, date)"),
               ("notes", "notes"))
    COST = "cost_per_million_samples_usd"

    def __init__(self, dashboard: Any) -> None:
        super().__init__(dashboard)
        self.vendor = W.Dropdown(description="vendor", options=["all"], value="all")
        self.kind = W.Dropdown(description="kind", options=["all"], value="all")
        self.segment = W.Dropdown(description="segment", options=["all"], value="all")
        self.fits_only = W.Checkbox(description="only devices it fits on", value=False)
        # 0 = no limit; the budget is per device-hour, as the $/hour column shows it.
        self.max_usd = W.BoundedFloatText(description="max $/device-hour (0: any)", value=0.0,
                                          min=0.0, max=1000.0, step=0.1,
                                          style={"description_width": "initial"},
                                          layout=W.Layout(width="240px"))
        for control in (self.vendor, self.kind, self.segment, self.fits_only, self.max_usd):
            control.observe(self._on_filter, names="value")
        # Renting vs owning re-prices the ranking (report.with_options(price=...)).
        self.basis = W.ToggleButtons(options=[("rent", "rent"), ("own", "own")], value="rent",
                                     description="price", style={"button_width": "60px"})
        self.basis.observe(self._on_basis, names="value")
        self.filters = W.HBox([self.vendor, self.kind, self.segment, self.fits_only,
                               self.max_usd, self.basis], layout=W.Layout(flex_flow="row wrap"))
        self._report: Any = None

    def _on_basis(self, change: dict) -> None:
        dashboard = self.dashboard
        if self._report is None or getattr(dashboard, "_syncing", False):
            return
        with dashboard._errors_shown():
            current = dict(getattr(self._report, "options", {}).get("price") or {})
            if current.get("basis", "rent") == change["new"]:
                return
            dashboard._report = dashboard._report.with_options(
                price={**current, "basis": change["new"]})
            dashboard._refresh()

    def _on_filter(self, change: dict) -> None:
        if self._report is not None:
            with self.dashboard._errors_shown():
                self._draw(self._report)

    def render(self, report: Any) -> None:
        self._report = report
        frame = report.hardware
        basis = (getattr(report, "options", {}).get("price") or {}).get("basis", "rent")
        if self.basis.value != basis:
            self.dashboard._syncing = True
            try:
                self.basis.value = basis
            finally:
                self.dashboard._syncing = False
        for control, column in ((self.vendor, "vendor"), (self.kind, "kind"),
                                (self.segment, "segment")):
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
        for control, column in ((self.kind, "kind"), (self.segment, "segment")):
            if control.value != "all" and column in frame.columns:
                frame = frame[frame[column] == control.value]
        if self.fits_only.value and "fits" in frame.columns:
            frame = frame[frame["fits"].astype(bool)]
        if self.max_usd.value and "usd_per_hour" in frame.columns:
            frame = frame[frame["usd_per_hour"] <= self.max_usd.value]  # unpriced rows drop
        return frame

    def _draw(self, report: Any) -> None:
        frame = self._filtered(report.hardware)
        parts: list[W.Widget] = [self.filters]
        for key in ("precision_note", "price_note", "host_note"):
            note = report.hardware.attrs.get(key, "")
            if note:
                parts.append(W.HTML(H.note(note)))
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
                            "energies are estimated: cost from the catalog price (rented, or "
                            "bought and amortised as the note above says; each row names its "
                            "price's source and date), energy an upper bound from the TDP; the "
                            "Pareto chart covers every priced row; the highlighted row is the "
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
        self.plan_box = W.VBox()
        """The plan's waterfall chart and its head and tail sentences."""
        self.cards_box = W.VBox()
        """One card per step, in the plan's order."""

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
        boxes: list[W.Widget] = []
        for i, rec in enumerate(recs):
            head, button, card = self._card(i)
            head.value = H.recommendation_card(rec, i + 1)
            button.code = rec.code
            boxes.append(card)
        self.cards_box.children = boxes
        self.plan_box.children = self._plan(report)
        self.box.children = [self.plan_box, self.cards_box]

    def _plan(self, report: Any) -> list[W.Widget]:
        """The waterfall of the stacked plan (a generate report's serving cards have none)."""
        from ..recommend.render import plan_lines

        plan = report.plan
        if not len(plan):
            return []
        lines = "".join(f"<li>{html.escape(line)}</li>" for line in plan_lines(report))
        return [self.chart("plan", lambda: plan_charts.plan_waterfall_chart(plan),
                           inputs=_frame_key(plan)),
                W.HTML(f'<ul class="aiadvisor-muted-text">{lines}</ul>')]




def _lengths(value: int, *, low: int, high: int) -> list[int]:
    """Powers of two from ``low`` to ``high``, plus ``value`` and ``high`` themselves."""
    out, n = {value, high}, low
    while n < high:
        out.add(n)
        n *= 2
    return sorted(v for v in out if v <= max(high, value))


CONCURRENCY = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: The KV dropdown's entry for the engine's default cache format (the model's 16-bit dtype).
AUTO_KV = "auto"


class ServingView(_View):
    """LLM serving (``mode="generate"``): request and format controls, the predicted figures,
    tokens/s against concurrency, TPOT against context per device, the plan and engine code.

    The controls answer from the captured generation profile (no re-trace); plans and curves
    are kept by the report, so returning to a setting costs nothing.
    """

    title = "Serving"
    COLUMNS = (("weight_precision", "weights"), ("kv_precision", "KV cache"), ("tp", "tp"),
               ("batch_size", "concurrent"), ("fits", "fits"), ("tokens_per_s", "tokens/s"),
               ("tokens_per_s_per_user", "tokens/s per user"), ("tpot_s", "TPOT"),
               ("ttft_s", "TTFT"), ("max_batch", "max concurrency"),
               ("usd_per_million_tokens", "$ per 1M tokens"), ("bound", "bound"))
    TABLE_ROWS = 16

    def __init__(self, dashboard: Any) -> None:
        super().__init__(dashboard)
        report = dashboard.report
        d = report.serving_defaults()
        limit = report.generation_profile.max_positions
        style = {"description_width": "initial"}
        self.prompt = W.SelectionSlider(
            options=_lengths(d["prompt_len"], low=16, high=(limit - 1) if limit else 32768),
            value=d["prompt_len"], description="prompt tokens", continuous_update=False,
            style=style)
        self.output = W.SelectionSlider(
            options=_lengths(d["output_len"], low=16,
                             high=min(4096, limit - 1) if limit else 4096),
            value=d["output_len"], description="output tokens", continuous_update=False,
            style=style)
        self.concurrency = W.SelectionSlider(options=list(CONCURRENCY), value=1,
                                             description="concurrent sequences",
                                             continuous_update=False, style=style)
        self.weights = W.Dropdown(options=[d["weight_precision"]], value=d["weight_precision"],
                                  description="weights", style=style,
                                  layout=W.Layout(width="170px"))
        self.kv = W.Dropdown(options=[AUTO_KV], value=AUTO_KV, description="KV cache",
                             style=style, layout=W.Layout(width="170px"))
        self._syncing = False
        for control in self._controls():
            control.observe(self._on_change, names="value")
        self.controls = W.HBox(list(self._controls()), layout=W.Layout(flex_flow="row wrap"))
        self.controls.add_class("aiadvisor-controls")
        self.summary = W.HTML()
        self.cards: list[tuple[W.HTML, InsertCellButton, W.VBox]] = []
        self._report: Any = None

    def _controls(self) -> tuple[W.Widget, ...]:
        return (self.prompt, self.output, self.concurrency, self.weights, self.kv)

    # --- state ----------------------------------------------------------------------
    def request(self) -> dict[str, Any]:
        """The controls as :meth:`aiadvisor.Report.generation_for` arguments."""
        kv = None if self.kv.value == AUTO_KV else self.kv.value
        return {"prompt_len": self.prompt.value, "output_len": self.output.value,
                "batch_size": self.concurrency.value, "weight_precision": self.weights.value,
                "kv_precision": kv}

    def _set(self, control: W.Widget, value: Any) -> None:
        self._syncing = True
        try:
            control.value = value
        finally:
            self._syncing = False

    def _sync_formats(self, plan: Any) -> None:
        """Weight and KV formats the target runs (the plan's), keeping the choice if it can."""
        from ..costmodel.generation import KV_PRECISIONS, WEIGHT_PRECISIONS

        default = self._report.serving_defaults()["weight_precision"]
        weights = [p for p in WEIGHT_PRECISIONS if p in set(plan["weight_precision"])] or [default]
        kvs = [AUTO_KV, *(p for p in KV_PRECISIONS if p in set(plan["kv_precision"]))]
        self._syncing = True
        try:
            for control, options, fallback in ((self.weights, weights, default),
                                               (self.kv, kvs, AUTO_KV)):
                if list(control.options) != options:
                    current = control.value
                    control.options = options
                    control.value = current if current in options \
                        else fallback if fallback in options else options[0]
        finally:
            self._syncing = False

    # --- callbacks ------------------------------------------------------------------
    def _on_change(self, change: dict) -> None:
        if self._syncing or self._report is None:
            return
        with self.dashboard._errors_shown():
            self.dashboard.errors.outputs = ()
            try:
                self._draw()
            except AIAdvisorError:
                self._set(change["owner"], change["old"])  # e.g. prompt + output too long
                raise

    def render(self, report: Any) -> None:
        self._report = report
        self._sync_formats(report.serving_plan(prompt_len=self.prompt.value,
                                               output_len=self.output.value))
        self._draw()

    # --- drawing --------------------------------------------------------------------
    def _draw(self) -> None:
        from ..costmodel.generation import WEIGHT_PRECISIONS, default_kv_precision
        from ..viz import serving as serving_charts

        report, req = self._report, self.request()
        g = report.generation_for(**req)
        plan = report.serving_plan(prompt_len=req["prompt_len"], output_len=req["output_len"])
        self.summary.value = _serving_summary_html(g)
        spec = report.hardware_spec
        kv_for = {wp: req["kv_precision"] or default_kv_precision(spec, wp)
                  for wp in set(plan["weight_precision"])}
        rows = plan[(plan["tp"] == g.tp)
                    & (plan["kv_precision"] == plan["weight_precision"].map(kv_for))]
        # Lines and legend in the formats' own order (widest first), not the plan's.
        rows = rows.sort_values("weight_precision", key=lambda c: c.map(WEIGHT_PRECISIONS.index),
                                kind="stable")
        parts: list[W.Widget] = [self.controls, self.summary]
        parts.append(self.chart("throughput", lambda: serving_charts.throughput_chart(
            rows, current=g.batch_size,
            subtitle=f"prompt {g.prompt_len} + output {g.output_len} tokens, KV "
                     f"{req['kv_precision'] or 'auto'}, tp {g.tp}"),
            inputs=(_frame_key(rows), g.batch_size)))
        curves = report.serving_context_curves(
            output_len=req["output_len"], batch_size=req["batch_size"],
            weight_precision=req["weight_precision"], kv_precision=req["kv_precision"])
        parts.append(self.chart("context", lambda: serving_charts.tpot_context_chart(
            curves, highlight=spec.name, current=g.prompt_len,
            subtitle=f"{g.weight_precision} weights, {g.batch_size} concurrent, output "
                     f"{g.output_len} tokens"),
            inputs=(_frame_key(curves), g.prompt_len, spec.name)))
        head = plan.head(self.TABLE_ROWS)
        mine = (g.weight_precision, g.kv_precision, g.tp, g.batch_size)
        table = _frame_table(head, self.COLUMNS, highlight=lambda r: (
            r.get("weight_precision"), r.get("kv_precision"), r.get("tp"),
            r.get("batch_size")) == mine, muted=lambda r: r.get("fits") is False)
        parts.append(W.HTML(
            f'<div class="aiadvisor-scroll aiadvisor-wide">{table}</div>'
            f'<div class="aiadvisor-muted-text">Serving plans on {H._esc(spec.name)}, best first '
            f"(the first {len(head)} of {len(plan)}); the highlighted row is the setting "
            "above when the plan has it. Times, throughputs and costs are estimated.</div>"))
        parts += self._cards(report.serving_recommendations(prompt_len=req["prompt_len"],
                                                            output_len=req["output_len"]))
        self.box.children = parts

    def _cards(self, recs: list[Any]) -> list[W.Widget]:
        boxes = []
        for i, rec in enumerate(recs):
            while len(self.cards) <= i:
                head = W.HTML()
                button = InsertCellButton(cell_id=self.dashboard.cell_id)
                card = W.VBox([head, button])
                card.add_class("aiadvisor-card")
                self.cards.append((head, button, card))
            head, button, card = self.cards[i]
            head.value = H.recommendation_card(rec, i + 1)
            button.code = rec.code
            boxes.append(card)
        return boxes


def _serving_summary_html(g: Any) -> str:
    """The predicted figures of one serving setting, every one marked estimated."""
    fits = (f"fits: up to {g.max_batch:,} concurrent sequences" if g.fits else
            f"does not fit (at most {g.max_batch:,} concurrent sequences)")
    rate = "{:,.0f}".format if g.tokens_per_s >= 100 else "{:.3g}".format
    user = "{:,.0f}".format if g.tokens_per_s_per_user >= 100 else "{:.3g}".format
    # The interval's low end can fall below zero for a step this short: show only the top.
    likely = (f"likely {fmt_seconds(g.tpot_low_s)} to {fmt_seconds(g.tpot_high_s)}"
              if g.tpot_low_s > 0 else f"likely under {fmt_seconds(g.tpot_high_s)}")
    line = (f"TTFT <b>{fmt_seconds(g.ttft_s)}</b>, TPOT <b>{fmt_seconds(g.tpot_s)}</b> "
            f"({likely}), "
            f"<b>{rate(g.tokens_per_s)}</b> tokens/s, {user(g.tokens_per_s_per_user)} tokens/s "
            f"per user; {fits} {H.ESTIMATED}")
    memory = (f"weights {fmt_bytes(g.weights_bytes)}, KV cache {fmt_bytes(g.kv_bytes_per_token)}"
              f" per token ({H._esc(g.kv_precision)}), {fmt_bytes(g.kv_bytes)} for this batch; "
              f"{H._esc(g.hardware)} x {g.num_devices} (tp {g.tp}), {H._esc(g.bound)}-bound, "
              f"{H._esc(g.confidence)} confidence")
    return (f'<div class="aiadvisor-headline aiadvisor-serving-summary">{line}</div>'
            f'<div class="aiadvisor-muted-text">{memory}</div>')


VIEWS = (ProfileView, HardwareView, PrecisionView, ParallelView, RecommendationsView)


def views_for(report: Any) -> tuple[type[_View], ...]:
    """The tabs for ``report``: the five, and Serving when it has a generation answer."""
    if getattr(report, "generation_profile", None) is not None:
        return (*VIEWS, ServingView)
    return VIEWS
