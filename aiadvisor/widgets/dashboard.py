"""The ``%advise`` dashboard: option sliders over five tabs, recomputed from the captured profile.

A change of batch size, sequence length, device count, precision or target device calls
``Report.with_options`` (no re-trace) and redraws the *visible* tab; the others redraw when they
are opened. Errors in these callbacks are shown in the dashboard's ``Output`` instead of being
lost, as ipywidgets would otherwise do. While the target is the attached CPU and it has not
been benchmarked (a CPU-only notebook with default arguments), a "Calibrate" button times it
(``aa.hardware.detect(benchmark=True)``: 15-45 s on a CPU, cached on disk for later sessions)
and recomputes the report on the measured figures.
"""

from __future__ import annotations

import contextlib
import html
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ipywidgets as W

from ..errors import AIAdvisorError
from ..hardware import detection
from ..units import PRECISIONS, fmt_params, fmt_seconds
from .charts import quick_charts
from .html import ESTIMATED, note
from .views import VIEWS, views_for

__all__ = ["Dashboard"]

CSS = Path(__file__).with_name("dashboard.css")
TAB_TITLES = tuple(view.title for view in VIEWS)
DEVICE_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


#: The precision dropdown's entry for "let the advisor choose" (an unpinned precision).
AUTO = "auto"
#: CSS class of a tab drawn for settings that have since changed (redrawn when opened).
STALE = "aiadvisor-stale"


def option(report: Any, name: str, default: Any = None) -> Any:
    """One of the options a report was computed with (``report.options`` is a mapping or an
    object with attributes)."""
    options = getattr(report, "options", None)
    if isinstance(options, dict):
        value = options.get(name, default)
    else:
        value = getattr(options, name, default)
    return default if value is None else value


def _powers_of_two(value: int, *, low: int, high: int) -> list[int]:
    """Powers of two from ``low`` to ``high`` (grown to 8 x value), plus ``value`` itself."""
    top = max(high, 8 * value)
    out, n = {value}, low
    while n <= top:
        out.add(n)
        n *= 2
    return sorted(out)


class Dashboard(W.VBox):
    """Tabs Profile, Hardware, Precision, Parallelism and Recommendations for one report, and
    Serving (opened first) for a ``mode="generate"`` report.

    Parameters
    ----------
    report : aiadvisor.Report
        What ``aiadvisor.advise`` returned.
    cell_id : str
        Id of the notebook cell that ran ``%advise``: "Insert below" puts code under it.
    """

    def __init__(self, report: Any, *, cell_id: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_class("aiadvisor-dashboard")
        self._report = report
        self.cell_id = cell_id
        self._syncing = False
        self.errors = W.Output(layout=W.Layout(max_height="240px", overflow="auto"))
        self.header = W.HTML()
        self._make_controls(report)
        self._make_calibrate()
        self.views = [view(self) for view in views_for(report)]
        self._stale = set(range(len(self.views)))
        self.tabs = W.Tab(children=[v.box for v in self.views],
                          titles=[v.title for v in self.views])
        if len(self.views) > len(VIEWS):  # mode="generate": open on the serving answer
            self.tabs.selected_index = len(self.views) - 1
        self.tabs.observe(self._on_tab, names="selected_index")
        controls = W.HBox([self.batch, self.seq, self.devices, self.precision, self.hardware],
                          layout=W.Layout(flex_flow="row wrap"))
        controls.add_class("aiadvisor-controls")
        style = W.HTML(f"<style>{CSS.read_text()}</style>",
                       layout=W.Layout(display="none"))
        self.children = [style, self.header, self.calibrate_row, controls, self.errors, self.tabs]
        self._refresh()

    # --- public state ---------------------------------------------------------------
    @property
    def report(self) -> Any:
        """The report for the current slider settings."""
        return self._report

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        if isinstance(bundle, tuple):
            data, meta = bundle
            return {**data, "text/plain": str(self._report)}, meta
        if isinstance(bundle, dict):
            return {**bundle, "text/plain": str(self._report)}
        return bundle

    # --- controls -------------------------------------------------------------------
    def _make_controls(self, report: Any) -> None:
        profile = report.profile
        style = {"description_width": "initial"}
        batch = int(option(report, "batch_size", profile.batch_size))
        self.batch = W.SelectionSlider(options=_powers_of_two(batch, low=1, high=1024),
                                       value=batch, description="batch size",
                                       continuous_update=False, style=style)
        seq = option(report, "seq_len", profile.seq_len)
        seq_options = _powers_of_two(int(seq), low=16, high=8192) if seq else ["n/a"]
        limit = profile.max_seq_len
        if seq and limit is not None:
            # Not past the model's position limit (prof.at would refuse); the limit itself is
            # offered even when it is not a power of two.
            seq_options = sorted({n for n in seq_options if n <= limit} | {limit, int(seq)})
        self.seq = W.SelectionSlider(options=seq_options, value=seq or "n/a",
                                     description="sequence length", continuous_update=False,
                                     disabled=not seq, style=style,
                                     layout=W.Layout(display=None if seq else "none"))
        devices = int(option(report, "num_devices", 1))
        counts = sorted({*DEVICE_COUNTS, devices})
        self.devices = W.SelectionSlider(options=counts, value=devices, description="devices",
                                         continuous_update=False, style=style)
        self.precision = W.Dropdown(options=self._precision_options(report),
                                    value=self._precision_value(report),
                                    description="precision", style=style,
                                    layout=W.Layout(width="200px"))
        # The target the report was made for keeps its resolved spec (the attached device, its
        # benchmark or a user-made spec need not be catalog rows): choosing it again passes
        # the spec back, never its name for a second lookup.
        self._own_specs = {report.hardware_spec.name: report.hardware_spec}
        names = self._hardware_names(report)
        self.hardware = W.Dropdown(options=names, value=report.hardware_spec.name,
                                   description="target", style=style,
                                   layout=W.Layout(width="320px"))
        for name, control in self._controls().items():
            control.observe(self._on_option, names="value")
            control.option_name = name

    def _make_calibrate(self) -> None:
        """The "Calibrate" button and its status line (shown by :meth:`_refresh` only while the
        target is the attached device, not benchmarked)."""
        try:
            self._attached = detection.detect(anchor=False).name
        except Exception:  # noqa: BLE001 - detect never raises; a broken probe hides the button
            self._attached = None
        self.calibrate = W.Button(
            description="Calibrate this device", icon="stopwatch",
            tooltip="Time this device's matmuls, memory bandwidth and ops (15-45 s on a CPU, "
                    "once: cached on disk) and predict from the measurements instead of its "
                    "estimated peaks",
            layout=W.Layout(width="210px", flex="0 0 auto"))
        self.calibrate.on_click(self._on_calibrate)
        self.calibrate_status = W.HTML(
            "Predicted from this device's estimated peaks (12-15 % off on average on the three "
            "CPUs last checked). Calibrating times its matmuls, bandwidth and ops: 15-45 s on a "
            "CPU, once (cached on disk).")
        self.calibrate_status.add_class("aa-meta")
        self.calibrate_row = W.HBox([self.calibrate, self.calibrate_status],
                                    layout=W.Layout(align_items="center"))
        self.calibrate_row.add_class("aiadvisor-calibrate")

    def _can_calibrate(self) -> bool:
        """The target is the attached CPU on estimated peaks (an attached GPU's catalog row has
        datasheet figures; ``--hardware local`` still benchmarks it)."""
        spec = self._report.hardware_spec
        return (spec.kind == "cpu" and not spec.measured and self._attached is not None
                and spec.name == self._attached)

    def _controls(self) -> dict[str, W.Widget]:
        return {"batch_size": self.batch, "seq_len": self.seq, "num_devices": self.devices,
                "precision": self.precision, "hardware": self.hardware}

    @staticmethod
    def _precision_options(report: Any) -> list[tuple[str, str]]:
        """``auto`` (the advisor's choice, shown in brackets) and every precision."""
        chosen = option(report, "precision")
        label = f"auto ({chosen})" if chosen else AUTO
        return [(label, AUTO), *((p, p) for p in PRECISIONS)]

    @staticmethod
    def _precision_value(report: Any) -> str:
        pinned = getattr(report, "pinned_options", {}).get("precision")
        return pinned or AUTO

    @staticmethod
    def _hardware_names(report: Any) -> list[str]:
        frame = report.hardware
        column = "hardware" if "hardware" in frame.columns else "name"
        names = sorted({str(n) for n in frame[column]})
        current = report.hardware_spec.name
        if current not in names:
            names.insert(0, current)
        return names

    def _sync_controls(self) -> None:
        """Show the current report's options (after a change, or after a failed one)."""
        self._syncing = True
        try:
            self.precision.options = self._precision_options(self._report)
            self.precision.value = self._precision_value(self._report)
            for name, control in self._controls().items():
                if name == "precision":
                    continue
                value = option(self._report, name)
                if value is None or control.disabled:
                    continue
                if value not in control.options:
                    control.options = sorted({*control.options, value}, key=str)
                control.value = value
        finally:
            self._syncing = False

    # --- callbacks ------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors_shown(self) -> Iterator[None]:
        """Send a callback's error to the dashboard's Output (ipywidgets would drop it)."""
        try:
            yield
        except AIAdvisorError as exc:
            self.errors.append_stderr(f"{exc}\n")
            self._sync_controls()
        except Exception:  # noqa: BLE001 - anything else is a bug: show it whole
            self.errors.append_stderr(traceback.format_exc())
            self._sync_controls()

    def _on_option(self, change: dict) -> None:
        if self._syncing:
            return
        with self._errors_shown():
            self.errors.outputs = ()  # (clear_output() would print escape codes without a kernel)
            name = change["owner"].option_name
            value = None if change["new"] == AUTO else change["new"]  # auto: unpinned
            if name == "hardware":
                value = self._own_specs.get(value, value)
            self._report = self._report.with_options(**{name: value})
            spec = self._report.hardware_spec
            self._own_specs.setdefault(spec.name, spec)
            self._refresh()

    def _on_calibrate(self, _button: Any = None) -> None:
        """Benchmark the attached device (a progress line while it runs) and recompute the
        report on the measured spec; a failed benchmark is said in the status line."""
        with self._errors_shown():
            self.errors.outputs = ()
            self.calibrate.disabled = True
            try:
                def progress(fraction: float, message: str) -> None:
                    self.calibrate_status.value = (f"calibrating: {fraction:.0%} "
                                                   f"{html.escape(message)}")

                spec = detection.detect(benchmark=True, progress=progress)
                if not spec.measured:
                    why = detection.benchmark_failure_for(spec) or "see the device's notes"
                    self.calibrate_status.value = (f"the calibration failed ({html.escape(why)}):"
                                                   " the prediction stays on estimated peaks")
                    return
                self._own_specs[spec.name] = spec
                self._report = self._report.with_options(hardware=spec)
                self.calibrate_status.value = ""
                self._refresh()
            finally:
                self.calibrate.disabled = False

    def _on_tab(self, change: dict) -> None:
        with self._errors_shown():
            self._render(change["new"])

    # --- drawing --------------------------------------------------------------------
    def _refresh(self) -> None:
        self._sync_controls()
        self.header.value = headline_html(self._report)
        self.calibrate_row.layout.display = None if self._can_calibrate() else "none"
        self._stale = set(range(len(self.views)))
        for view in self.views:
            # Until a tab is redrawn for the new settings its content is dimmed and its
            # buttons take no clicks: an "Insert below" there would carry the old code.
            view.box.add_class(STALE)
        self._render(self.tabs.selected_index or 0)

    def _render(self, index: int | None) -> None:
        if index is None or index not in self._stale:
            return
        with quick_charts():
            self.views[index].render(self._report)
        self.views[index].box.remove_class(STALE)
        self._stale.discard(index)

    def render_all(self) -> None:
        """Draw every tab now (tests, and exporting a notebook with the widget state)."""
        for index in sorted(self._stale):
            self._render(index)


def _rate(per_s: float) -> str:
    return f"{per_s:,.0f}" if per_s >= 100 else f"{per_s:.3g}"


def headline_html(report: Any) -> str:
    """Title line and the predicted step time for the current options."""
    profile = report.profile
    esc = html.escape
    seq = f", sequence {profile.seq_len}" if profile.seq_len else ""
    title = (f"<h3>aiadvisor: {esc(profile.model_type)} &middot; "
             f"{esc(fmt_params(profile))}</h3>"
             f'<div class="aiadvisor-sub">{esc(profile.mode)}, batch {profile.batch_size}{seq}, '
             f"traced on {esc(profile.path)} tensors</div>")
    pred = getattr(report, "prediction", None)
    if pred is None:
        return f'<div class="aiadvisor-header">{title}</div>'
    devices = f" × {pred.num_devices}" if pred.num_devices > 1 else ""
    line = (f"<b>{fmt_seconds(pred.step_time_s)}</b> per step on {esc(pred.hardware)}{devices} "
            f"in {esc(pred.precision)} (likely {fmt_seconds(pred.low_s)} to "
            f"{fmt_seconds(pred.high_s)}), {_rate(pred.throughput)} samples/s, "
            f"{esc(pred.bound)}-bound, {esc(pred.confidence)} confidence {ESTIMATED}")
    from ..recommend.render import correction_line

    corrected = correction_line(pred)
    if corrected:
        line += f'<div class="aa-meta">{esc(corrected)}</div>'
    notes = "".join(note(n, kind="warn") for n in getattr(report, "notes", ()) or ())
    return (f'<div class="aiadvisor-header">{title}'
            f'<div class="aiadvisor-headline">{line}</div>{notes}</div>')
