"""Notebook widgets: the ``%advise`` dashboard and the one-click ``InsertCellButton``.

Importing this package is cheap; ipywidgets, anywidget and altair are imported by the
submodules that need them (``aiadvisor.widgets.dashboard``, ``aiadvisor.widgets.insert``).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Dashboard": "aiadvisor.widgets.dashboard",
    "InsertCellButton": "aiadvisor.widgets.insert",
    "show_advice": "aiadvisor.widgets.show",
    "widgets_available": "aiadvisor.widgets.show",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aiadvisor.widgets' has no attribute {name!r}")
