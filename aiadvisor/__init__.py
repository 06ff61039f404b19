"""aiadvisor: a Jupyter-native performance advisor for PyTorch.

``import aiadvisor`` is cheap: torch is imported only when a model is profiled, and IPython,
ipywidgets and altair only by the notebook extension (``%load_ext aiadvisor``).
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import AIAdvisorError

__version__ = "0.1.0"

# Public names resolved on first use, so that ``import aiadvisor`` stays cheap.
_LAZY = {
    "profile": ("aiadvisor.profiler", "profile"),
    "predict": ("aiadvisor.costmodel", "predict"),
    "plan_parallel": ("aiadvisor.recommend.parallel", "plan_parallel"),
    "advise": ("aiadvisor.api", "advise"),
    "profile_for_advice": ("aiadvisor.api", "profile_for_advice"),
    "verify": ("aiadvisor.verification", "verify"),
    "verify_plan": ("aiadvisor.verification", "verify_plan"),
    "profile_generation": ("aiadvisor.serving", "profile_generation"),
    "predict_generation": ("aiadvisor.serving", "predict_generation"),
    "plan_serving": ("aiadvisor.serving", "plan_serving"),
    "Report": ("aiadvisor.api", "Report"),
    "ModelProfile": ("aiadvisor.schema", "ModelProfile"),
    "HardwareSpec": ("aiadvisor.schema", "HardwareSpec"),
    "Prediction": ("aiadvisor.schema", "Prediction"),
    "Recommendation": ("aiadvisor.schema", "Recommendation"),
    "KVCacheLayout": ("aiadvisor.schema", "KVCacheLayout"),
    "GenerationProfile": ("aiadvisor.schema", "GenerationProfile"),
    "GenerationPrediction": ("aiadvisor.schema", "GenerationPrediction"),
}
_SUBMODULES = ("hardware",)

# Spelled out (same names, same order as _LAZY then _SUBMODULES) so linters can read it;
# tests/test_imports.py checks it against _LAZY and _SUBMODULES.
__all__ = [
    "AIAdvisorError", "__version__",
    "profile", "predict", "plan_parallel", "advise", "profile_for_advice", "verify",
    "verify_plan", "profile_generation", "predict_generation", "plan_serving",
    "Report", "ModelProfile", "HardwareSpec", "Prediction", "Recommendation",
    "KVCacheLayout", "GenerationProfile", "GenerationPrediction",
    "hardware",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module_name, attr = _LAZY[name]
        value = getattr(importlib.import_module(module_name), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'aiadvisor' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext aiadvisor``: registers the ``%advise`` magic (imports the UI lazily)."""
    from .magics import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unload_ipython_extension as _unload

    _unload(ipython)
