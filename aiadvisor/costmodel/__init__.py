"""The learned cost model: roofline x learned efficiency per op class, with P10-P90 intervals.

``predict(prof, hardware=..., precision=..., num_devices=..., parallel=...)`` returns a
:class:`~aiadvisor.schema.Prediction`; ``predict_table`` scores every device x precision at once;
``step_time`` is the planner's per-ParallelConfig call. The fitted efficiency tables ship as JSON
(:mod:`aiadvisor.costmodel.model`); ``scripts/train_costmodel.py`` rebuilds them.
"""

from __future__ import annotations

from .api import MFU_BAND, measured_calibration, predict, predict_table, resolve_hardware, step_time
from .model import EfficiencyModel, load_model
from .precision import check_precision, gemm_peak_tflops, supported_precisions

__all__ = [
    "MFU_BAND",
    "EfficiencyModel",
    "check_precision",
    "gemm_peak_tflops",
    "load_model",
    "measured_calibration",
    "predict",
    "predict_table",
    "resolve_hardware",
    "step_time",
    "supported_precisions",
]
