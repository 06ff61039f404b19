"""What ``%advise`` displays: a progress bar, then the dashboard (or the static report).

This module imports no widget library at import time, so ``%advise`` can fall back to the
report's HTML and text where ipywidgets, anywidget or altair are missing.
"""

from __future__ import annotations

import html
import importlib.util
from typing import Any

__all__ = ["show_advice", "widgets_available"]

_UI_PACKAGES = ("ipywidgets", "anywidget", "altair")


def widgets_available() -> bool:
    """Whether the packages the dashboard needs are installed."""
    return all(importlib.util.find_spec(name) is not None for name in _UI_PACKAGES)


def show_advice(model: Any, inputs: Any, *, options: dict[str, Any], shell: Any,
                use_widgets: bool, offline_charts: str = "auto") -> Any:
    """Advise on ``model`` and display the result; returns the dashboard or the report.

    Parameters
    ----------
    model, inputs
        The user's model and example batch.
    options : dict
        Keyword arguments for :func:`aiadvisor.advise` (mode, hardware, model_name, ...).
    shell : IPython.InteractiveShell
        The running shell (its kernel tells which notebook cell is running).
    use_widgets : bool
        Show the interactive dashboard; otherwise the report's HTML / text.
    offline_charts : {"auto", "always", "never"}
        See ``Advisor.offline_charts``.
    """
    from IPython.display import display

    from ..api import advise

    if not use_widgets:
        report = advise(model, inputs, **options)
        # The full text, not repr(), for plain-text front ends (terminal IPython, consoles).
        display({"text/html": report._repr_html_(), "text/plain": str(report)}, raw=True)
        return report
    return _show_dashboard(advise, model, inputs, options=options, shell=shell,
                           offline_charts=offline_charts, display=display)


def _profile(model: Any, inputs: Any, options: dict[str, Any]) -> Any:
    """Trace the step first (the slow part), as ``advise`` would, so progress can say so."""
    from ..api import profile_for_advice

    keys = ("mode", "precision", "optimizer", "model_name")
    return profile_for_advice(model, inputs, **{k: options[k] for k in keys if k in options})


def _show_dashboard(advise: Any, model: Any, inputs: Any, *, options: dict[str, Any],
                    shell: Any, offline_charts: str, display: Any) -> Any:
    import ipywidgets as W

    from .insert import current_cell_id

    cell_id = current_cell_id(shell)  # read now: the request's metadata names this cell
    bar = W.IntProgress(value=1, min=0, max=3, description="Profiling…",
                        style={"description_width": "initial"}, bar_style="info")
    detail = W.HTML("tracing one step on fake tensors (no memory is allocated)")
    progress = W.HBox([bar, detail])
    handle = display(progress, display_id=True)
    try:
        profile = _profile(model, inputs, options)
        bar.value, bar.description = 2, "Advising…"
        detail.value = "ranking devices, precisions, parallel plans and tactics"
        report = advise(profile, inputs, **options)
        bar.value, bar.description = 3, "Drawing…"
        from .charts import use_offline_bundle
        from .dashboard import Dashboard

        use_offline_bundle(offline_charts)
        dashboard = Dashboard(report, cell_id=cell_id)
    except BaseException as exc:
        bar.bar_style, bar.description = "danger", "Failed"
        detail.value = html.escape(f"{type(exc).__name__}: {exc}")
        raise
    # The progress widgets are not closed: closing a view that the display update is replacing
    # breaks JupyterLab's output area (lumino detachWidget error, blank output).
    if handle is not None:
        handle.update(dashboard)
    else:
        display(dashboard)
    return dashboard
