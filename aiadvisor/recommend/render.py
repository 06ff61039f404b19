"""Plain-text, Markdown and HTML renderings of a report (no widgets, no JavaScript).

Every string that comes from data (device names, notes, code) is escaped for HTML; the HTML uses
JupyterLab's CSS variables with fallbacks, so it reads in light and dark themes and outside
Jupyter.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from ..units import fmt_bytes, fmt_flops, fmt_params, fmt_seconds
from .plan import steps_label

if TYPE_CHECKING:
    import pandas as pd

HARDWARE_COLUMNS = [("hardware", "device"), ("precision", "precision"),
                    ("num_devices", "devices"), ("fits", "fits"), ("plan", "plan"),
                    ("memory_per_device_bytes", "memory/device"), ("step_time_s", "step time"),
                    ("throughput", "samples/s"), ("usd_per_hour", "$/device-hour"),
                    ("cost_per_million_samples_usd", "$ per 1M samples"),
                    ("energy_per_sample_j_upper_bound", "J/sample (at most)"),
                    ("pareto", "pareto")]
#: Markdown and HTML also say which price each row used, with its source and date.
HARDWARE_PRICED_COLUMNS = [*HARDWARE_COLUMNS, ("price_basis", "price used (source, date)")]
PRECISION_COLUMNS = [("precision", "precision"), ("support", "support"), ("usable", "usable"),
                     ("memory_per_device_bytes", "memory/device"), ("fits", "fits"),
                     ("speedup_vs_fp32", "speedup vs fp32"), ("numerical_risk", "risk"),
                     ("handled_by", "handled by"), ("notes", "notes")]
PARALLEL_COLUMNS = [("strategy", "plan"), ("memory_per_device_bytes", "memory/device"),
                    ("weights_bytes", "weights"), ("grads_bytes", "grads"),
                    ("optimizer_bytes", "optimizer"), ("activations_bytes", "activations"),
                    ("fits", "fits"), ("step_time_s", "step time"), ("throughput", "samples/s"),
                    ("notes", "notes")]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_value(column: str, value: Any) -> str:
    """Human-readable cell: bytes in binary units (MiB, GiB), seconds, ratios, yes/no."""
    if _missing(value):
        return "–"
    if isinstance(value, bool) or column in ("fits", "pareto", "usable", "offload"):
        return "yes" if value else "no"
    if column.endswith("_bytes"):
        return fmt_bytes(value)
    if column.endswith("_s"):
        return fmt_seconds(value)
    if column.startswith("speedup"):
        return f"{value:.2f}x"
    if column == "throughput":
        return f"{value:.3g}"
    if column.endswith("_usd"):
        return f"${value:,.2f}"
    if column.endswith("_upper_bound"):
        return f"{value:.3g} J"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _rows(df: pd.DataFrame, columns: list[tuple[str, str]], limit: int | None):
    present = [(c, h) for c, h in columns if c in df.columns]
    frame = df if limit is None else df.head(limit)
    body = [[fmt_value(c, v) for c, v in zip([c for c, _ in present], rec)]
            for rec in frame[[c for c, _ in present]].itertuples(index=False)]
    return [h for _, h in present], body


def markdown_table(df: pd.DataFrame, columns: list[tuple[str, str]],
                   limit: int | None = None) -> str:
    headers, body = _rows(df, columns, limit)

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in body]
    return "\n".join(lines)


def text_table(df: pd.DataFrame, columns: list[tuple[str, str]], limit: int | None = None,
               max_width: int = 40) -> str:
    headers, body = _rows(df, columns, limit)
    body = [[v if len(v) <= max_width else v[: max_width - 1] + "…" for v in row] for row in body]
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in body]
    return "\n".join(out)


def html_table(df: pd.DataFrame, columns: list[tuple[str, str]], limit: int | None = None) -> str:
    headers, body = _rows(df, columns, limit)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>"
                   for row in body)
    return f'<table class="aa-table"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def correction_line(pred: Any) -> str | None:
    """One sentence on the measured correction of ``pred`` (None when it has none)."""
    if pred is None or getattr(pred, "correction", None) is None:
        return None
    n = pred.correction_records
    return (f"Corrected by {n} {'measurement' if n == 1 else 'measurements'} on this device "
            f"(x{pred.correction:.2f}; {fmt_seconds(pred.uncorrected_step_time_s)} before), "
            "from the local measurement store that aa.verify fills.")


def summary_lines(report: Any) -> list[str]:
    """The few sentences at the top of every rendering."""
    p, o, pred = report.profile, report.options, report.prediction
    lines = [
        f"{p.model_name} ({p.model_type}): {fmt_params(p)}, {o['mode']} step at "
        f"batch {p.batch_size}" + (f" x {p.seq_len} tokens" if p.seq_len else "") + ".",
        (f"FLOPs per step: {fmt_flops(p.flops_per_step)}; memory as profiled: "
        f"{fmt_bytes(p.memory.peak_bytes)} peak."),
    ]
    target = f"{o['num_devices']} x {o['hardware']} in {o['precision']}"
    if pred is not None:
        lines.append(
            f"Predicted on {target}: {fmt_seconds(pred.step_time_s)} per step (likely "
            f"{fmt_seconds(pred.low_s)}-{fmt_seconds(pred.high_s)}), "
            f"{pred.throughput:.3g} samples/s, {pred.bound}-bound, {pred.confidence} "
            "confidence (an estimate from the cost model).")
        corrected = correction_line(pred)
        if corrected:
            lines.append(corrected)
        lines += [n for n in pred.notes if n.startswith("This CPU was not benchmarked")]
    else:
        lines.append(f"No prediction on {target}.")
    if len(report.parallel):
        best = report.parallel.iloc[0]
        single = all(int(best.get(k, 1) or 1) == 1 for k in ("dp", "tp", "pp", "ep"))
        if best["fits"] and single:
            lines.append(f"One device, no parallelism: the step fits in "
                         f"{fmt_bytes(best['memory_per_device_bytes'])}.")
        elif best["fits"]:
            lines.append(f"Best plan: {best['strategy']} "
                         f"({fmt_bytes(best['memory_per_device_bytes'])} per device).")
    return lines + list(report.notes)


PLAN_COLUMNS = [("step", "step"), ("title", "tactic"), ("speedup_step", "speedup"),
                ("speedup_cumulative", "with steps 1-k"),
                ("memory_saving_bytes", "memory saved"),
                ("memory_per_device_bytes", "memory/device after"), ("fits", "fits"),
                ("trigger", "triggered by"), ("alternatives", "alternatives")]


def plan_lines(report: Any) -> list[str]:
    """The plan's head and tail: as you run it, then with every step applied."""
    plan = report.plan
    a = plan.attrs
    if a.get("baseline_step_time_s") is None:
        return ["No prediction as you run it, so the plan has no speedups."]
    lines = [f"As you run it: {fmt_seconds(a['baseline_step_time_s'])} per step, "
             f"{fmt_bytes(a['baseline_memory_bytes'])} per device"
             + ("" if a.get("baseline_fits") in (None, True) else " (does not fit)") + "."]
    if len(plan):
        last = plan.iloc[-1]
        lines.append(f"With {steps_label(len(plan))} applied: "
                     f"{last['speedup_cumulative']:.2f}x the throughput, "
                     f"{fmt_bytes(last['memory_per_device_bytes'])} per device "
                     "(predicted by the cost model, each step on top of the ones before).")
    lines += list(a.get("skipped", []))
    return lines


def _rec_gain(rec: Any) -> str:
    parts = []
    if rec.predicted_speedup is not None:
        parts.append(f"predicted {rec.predicted_speedup:.2f}x"
                     + (f" (likely {rec.speedup_low:.2f}x-{rec.speedup_high:.2f}x)"
                        if rec.speedup_low is not None else ""))
    cumulative = rec.extra.get("speedup_cumulative")
    if cumulative is not None and not _missing(cumulative) and "step" in rec.extra:
        parts.append(f"{cumulative:.2f}x with {steps_label(rec.extra['step'])}")
    if rec.memory_saving_bytes:
        verb = "saves" if rec.memory_saving_bytes > 0 else "costs"
        parts.append(f"{verb} {fmt_bytes(abs(rec.memory_saving_bytes))} per device")
    return "; ".join(parts) or "no speed or memory figure"


def _alternatives(rec: Any) -> str:
    return ", ".join(f"{a['title']} ({a['predicted_speedup']:.2f}x)"
                     for a in rec.extra.get("alternatives", ()))


def _hardware_note(report: Any) -> list[str]:
    """The ranking's sentences on precision (which precision each device is ranked at) and on
    price (rent or own, the amortisation, how many devices have no price)."""
    attrs = report.hardware.attrs
    return [note for note in (attrs.get("precision_note", ""), attrs.get("price_note", ""),
                              attrs.get("host_note", "")) if note]


def to_text(report: Any, *, limit: int = 8) -> str:
    out = ["aiadvisor report", "================", *summary_lines(report), ""]
    out += ["Recommendations: the plan (each step on top of the ones before)",
            "--------------------------------------------------------------",
            *plan_lines(report)]
    for i, rec in enumerate(report.recommendations, 1):
        out += [f"{i}. {rec.title} [{rec.category}]: {_rec_gain(rec)}", f"   why: {rec.rationale}"]
        if rec.extra.get("alternatives"):
            out.append(f"   alternatives: {_alternatives(rec)}")
    if not report.recommendations:
        out.append("(none fired)")
    out += ["", "Parallel plans (best first)", text_table(report.parallel, PARALLEL_COLUMNS, limit)]
    out += ["", "Precision", text_table(report.precision, PRECISION_COLUMNS[:6]),
            *_block_format_notes(report.precision)]
    out += ["", f"Hardware (top {limit} of {len(report.hardware)})",
            *_hardware_note(report), text_table(report.hardware, HARDWARE_COLUMNS, limit)]
    out += ["", ("Times, costs and energies are estimates from the cost model; energy is an upper "
            "bound from TDP. Code for recommendation N: report.recommendations[N - 1].code")]
    return "\n".join(out)


#: Precisions whose row note the terminal report prints under its precision table (the text
#: table has no notes column): what the block-scaled formats mean on the device, and why a
#: training report does not offer fp4.
NOTED_PRECISIONS = ("mxfp8", "fp4")


def _block_format_notes(precision: Any) -> list[str]:
    if precision is None or not len(precision):
        return []
    rows = precision[precision["precision"].isin(NOTED_PRECISIONS)]
    return [f"  {row['precision']}: {row['notes']}" for _, row in rows.iterrows()
            if row["notes"]]


def to_markdown(report: Any, *, limit: int = 12) -> str:
    out = ["# aiadvisor report", "", *[f"- {line}" for line in summary_lines(report)], ""]
    out += ["## Plan", "", *[f"- {line}" for line in plan_lines(report)], ""]
    if len(report.plan):
        out += [markdown_table(report.plan, PLAN_COLUMNS), ""]
    out += ["## Recommendations", ""]
    for i, rec in enumerate(report.recommendations, 1):
        alt = ([f"Alternatives: {_alternatives(rec)}", ""] if rec.extra.get("alternatives")
               else [])
        out += [f"### {i}. {rec.title}", "", f"*{rec.category}* — {_rec_gain(rec)}", "",
                rec.rationale, "", *alt, "```python", rec.code.rstrip(), "```", ""]
    out += ["## Parallel plans", "", markdown_table(report.parallel, PARALLEL_COLUMNS, limit), ""]
    out += ["## Precision", "", markdown_table(report.precision, PRECISION_COLUMNS), ""]
    out += ["## Hardware", "", *[f"{line}\n" for line in _hardware_note(report)],
            markdown_table(report.hardware, HARDWARE_PRICED_COLUMNS, limit), "",
            ("Times, costs and energies are estimates; energy per sample is an upper bound from "
            "the TDP."), ""]
    return "\n".join(out)


CSS = """
.aiadvisor-report{font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;
 color:var(--jp-ui-font-color1,inherit);background:transparent;line-height:1.45;max-width:100%}
.aiadvisor-report h2{font-size:16px;margin:14px 0 6px}
.aiadvisor-report h3{font-size:14px;margin:4px 0}
.aiadvisor-report .aa-table{border-collapse:collapse;margin:4px 0 10px;font-size:12px}
.aiadvisor-report .aa-table th,.aiadvisor-report .aa-table td{padding:3px 8px;text-align:left;
 border-bottom:1px solid var(--jp-border-color2,rgba(128,128,128,.35));vertical-align:top}
.aiadvisor-report .aa-table th{color:var(--jp-ui-font-color2,inherit);font-weight:600}
.aiadvisor-report .aa-card{border:1px solid var(--jp-border-color1,rgba(128,128,128,.5));
 border-radius:6px;padding:8px 10px;margin:8px 0;background:var(--jp-layout-color1,transparent)}
.aiadvisor-report .aa-meta{color:var(--jp-ui-font-color2,inherit);opacity:.85}
.aiadvisor-report pre{background:var(--jp-cell-editor-background,rgba(128,128,128,.12));
 color:var(--jp-content-font-color1,inherit);padding:8px;border-radius:4px;overflow-x:auto;
 font-family:var(--jp-code-font-family,monospace);font-size:12px;white-space:pre}
.aiadvisor-report .aa-scroll{overflow-x:auto}
.aiadvisor-report .aa-note{color:var(--jp-warn-color0,#b26b00)}
"""


def to_html(report: Any, *, limit: int = 12) -> str:
    esc = html.escape
    lines = "".join(f"<li>{esc(line)}</li>" for line in summary_lines(report))
    cards = []
    for i, rec in enumerate(report.recommendations, 1):
        alt = (f'<p class="aa-meta">Alternatives: {esc(_alternatives(rec))}</p>'
               if rec.extra.get("alternatives") else "")
        cards.append(
            f'<div class="aa-card"><h3>{i}. {esc(rec.title)}</h3>'
            f'<div class="aa-meta">{esc(rec.category)} · {esc(_rec_gain(rec))}</div>'
            f"<p>{esc(rec.rationale)}</p>{alt}<pre><code>{esc(rec.code)}</code></pre></div>"
        )
    plan_items = "".join(f"<li>{esc(line)}</li>" for line in plan_lines(report))
    body = [
        f"<style>{CSS}</style>", '<div class="aiadvisor-report">',
        "<h2>aiadvisor report</h2>", f"<ul>{lines}</ul>",
        "<h2>Plan</h2>", f"<ul>{plan_items}</ul>",
        f'<div class="aa-scroll">{html_table(report.plan, PLAN_COLUMNS)}</div>'
        if len(report.plan) else "",
        f"<h2>Recommendations ({len(report.recommendations)})</h2>", *cards,
        "<h2>Parallel plans</h2>",
        f'<div class="aa-scroll">{html_table(report.parallel, PARALLEL_COLUMNS, limit)}</div>',
        "<h2>Precision</h2>",
        f'<div class="aa-scroll">{html_table(report.precision, PRECISION_COLUMNS)}</div>',
        f"<h2>Hardware (top {min(limit, len(report.hardware))} of {len(report.hardware)})</h2>",
        *[f'<p class="aa-meta">{esc(line)}</p>' for line in _hardware_note(report)],
        f'<div class="aa-scroll">{html_table(report.hardware, HARDWARE_PRICED_COLUMNS, limit)}'
        "</div>",
        ('<p class="aa-meta">Times, costs and energies are estimates from the cost model; energy '
        "per sample is an upper bound from the TDP.</p>"), "</div>",
    ]
    return "".join(body)
