"""HTML pieces of the dashboard: summary, tables and recommendation cards (pure functions).

Every string that comes from data is escaped. Colours come from JupyterLab's ``--jp-*`` CSS
variables (``dashboard.css``) so the same markup reads in light and dark themes.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..recommend.plan import steps_label, trigger_text
from ..units import fmt_bytes, fmt_flops, fmt_seconds

__all__ = ["format_value", "kv_table", "note", "recommendation_card", "table"]

ESTIMATED = '<span class="aiadvisor-est" title="predicted by the cost model">estimated</span>'


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _number(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


_SUFFIX_FORMATS: tuple[tuple[str, Callable[[float], str]], ...] = (
    ("_bytes", fmt_bytes),
    ("_s", fmt_seconds),
    ("_tflops", lambda v: f"{v:,.1f} TFLOP/s"),
    ("_tops", lambda v: f"{v:,.1f} TOP/s"),
    ("flops", fmt_flops),
    ("_gbs", lambda v: f"{v:,.0f} GB/s"),
    ("_gb", lambda v: f"{v:,.0f} GB"),
    ("_w", lambda v: f"{v:,.0f} W"),
    ("_j", lambda v: f"{v:.3g} J"),
)


def format_value(column: str, value: Any) -> str:
    """Format one table cell by the unit its column name ends in (``peak_bytes`` -> GiB, ...).

    >>> format_value("memory_per_device_bytes", 3 * 1024**3)
    '3.00 GiB'
    >>> format_value("step_time_s", 0.0123)
    '12.3 ms'
    >>> format_value("fits", True)
    'yes'
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "yes" if value else "no"
    if isinstance(value, (int, float)) or hasattr(value, "__float__") and not isinstance(
            value, str):
        number = float(value)
        if "usd" in column:
            if number >= 1000:
                return f"${number:,.0f}"
            return f"${number:.2f}" if number >= 1 else f"${number:.2g}"
        for suffix, fmt in _SUFFIX_FORMATS:
            if column.endswith(suffix) or (suffix == "flops" and column.startswith("flops_")):
                return fmt(number)
        if "speedup" in column:
            return f"{number:.2f}×"
        if "_j_" in column:
            return f"{number:.3g} J"
        return _number(number) if isinstance(value, float) else f"{int(number):,}"
    return str(value)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]], *,
          highlight: Callable[[dict[str, Any]], bool] | None = None,
          muted: Callable[[dict[str, Any]], bool] | None = None) -> str:
    """An HTML table of ``rows`` (dicts); ``columns`` is ``(key, header)`` pairs."""
    head = "".join(f"<th>{_esc(header)}</th>" for _, header in columns)
    body = []
    for row in rows:
        cls = []
        if highlight and highlight(row):
            cls.append("aiadvisor-best")
        if muted and muted(row):
            cls.append("aiadvisor-muted")
        cells = "".join(f"<td>{_esc(format_value(key, row.get(key)))}</td>"
                        for key, _ in columns)
        body.append(f'<tr class="{" ".join(cls)}">{cells}</tr>')
    return (f'<table class="aiadvisor-table"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def kv_table(items: Iterable[tuple[str, str]]) -> str:
    """A two-column key/value table; values are already formatted (and escaped here)."""
    rows = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in items)
    return f'<table class="aiadvisor-kv">{rows}</table>'


def note(text: str, *, kind: str = "info") -> str:
    return f'<div class="aiadvisor-note aiadvisor-{_esc(kind)}">{_esc(text)}</div>'


def _gain(rec: Any) -> str:
    if rec.predicted_speedup is None:
        return "no speed change predicted"
    text = f"{rec.predicted_speedup:.2f}× as fast"
    if rec.speedup_low is not None and rec.speedup_high is not None:
        text += f" (likely {rec.speedup_low:.2f}–{rec.speedup_high:.2f}×)"
    return text


def _memory_effect(rec: Any) -> str:
    saving = rec.memory_saving_bytes
    if not saving:
        return "no memory change"
    if saving > 0:
        return f"saves {fmt_bytes(saving)} per device"
    return f"needs {fmt_bytes(-saving)} more per device"


def recommendation_card(rec: Any, number: int) -> str:
    """Head of one recommendation card: number, title, why, predicted gain, memory effect.

    The code and its "Insert below" button follow the card (``InsertCellButton``).
    """
    label = ESTIMATED if getattr(rec, "estimated", True) else "measured"
    return (
        f'<div class="aiadvisor-card-head"><span class="aiadvisor-num">{number}</span>'
        f'<span class="aiadvisor-title">{_esc(rec.title)}</span>'
        f'<span class="aiadvisor-tag">{_esc(rec.category)}</span></div>'
        f'<div class="aiadvisor-why">{_esc(rec.rationale)}</div>'
        f'<div class="aiadvisor-gain"><b>Predicted:</b> {_esc(_gain(rec))}; '
        f'{_esc(_memory_effect(rec))} ({label}). '
        f'<span class="aiadvisor-muted-text">Keyboard: <code>%advise --insert {number}</code>'
        f'</span></div>{_plan_line(rec)}'
    )


def _plan_line(rec: Any) -> str:
    """Where the step sits in the plan: the cumulative speedup, its trigger, alternatives."""
    extra = getattr(rec, "extra", {}) or {}
    parts = []
    cumulative = extra.get("speedup_cumulative")
    if "step" in extra and isinstance(cumulative, float) and cumulative == cumulative:
        parts.append(f"With {steps_label(extra['step'])}: {cumulative:.2f}x")
    if extra.get("trigger"):
        parts.append(f"triggered by {trigger_text(extra['trigger'])}")
    alternatives = extra.get("alternatives") or ()
    if alternatives:
        parts.append("alternatives: " + ", ".join(
            f"{a['title']} ({a['predicted_speedup']:.2f}x)" for a in alternatives))
    if not parts:
        return ""
    return f'<div class="aiadvisor-muted-text">{_esc("; ".join(parts))}.</div>'
