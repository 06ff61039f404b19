"""Close the loop: re-measure a model on the attached device and put the measurement beside the
prediction (``%advise --verify``; DESIGN.md, user journey 4).

The predicted step time is the cost model on the attached device as benchmarked once
(``hardware="local"``); the predicted peak memory is the traced profile's peak (fake tensors, no
memory allocated). The measured figures are real steps on the model's own device
(:func:`aiadvisor.profile` with ``measure=True``: the median of 5 steps after a warm-up, and the
peak PyTorch's allocator reached), on copies, so the user's model is left as it was.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

from .errors import InvalidArgumentError, InvalidModelError, check_choice
from .schema import HardwareSpec, ModelProfile, Prediction
from .units import MODES, fmt_bytes, fmt_seconds

__all__ = ["Verification", "verify"]

#: Precisions a measured step runs faithfully: what plain PyTorch runs (autocast for 16 bit,
#: the global TF32 switch for tf32). fp8 and the integer formats need other libraries.
VERIFIABLE_PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class Verification:
    """Predicted vs measured step time and peak memory of one step on the attached device."""

    profile: ModelProfile
    """The traced (and measured) step."""
    hardware: HardwareSpec
    """The attached device, as benchmarked."""
    prediction: Prediction
    """The cost model's prediction on ``hardware`` for ``profile``."""

    @property
    def measured_step_time_s(self) -> float:
        return float(self.profile.measured_step_time_s)

    @property
    def measured_peak_bytes(self) -> int:
        return int(self.profile.measured_peak_bytes)

    @property
    def predicted_peak_bytes(self) -> int:
        return int(self.profile.memory.peak_bytes)

    @property
    def step_time_ratio(self) -> float:
        """Measured over predicted step time (1.0: the prediction was exact)."""
        return self.measured_step_time_s / self.prediction.step_time_s

    @property
    def peak_ratio(self) -> float:
        """Measured over predicted (traced) peak memory."""
        return self.measured_peak_bytes / self.predicted_peak_bytes \
            if self.predicted_peak_bytes else math.nan

    def rows(self) -> list[dict[str, str]]:
        """The table as text cells: quantity, predicted, measured, measured / predicted."""
        pred = self.prediction
        low, high = fmt_seconds(pred.low_s), fmt_seconds(pred.high_s)
        predicted = fmt_seconds(pred.step_time_s)
        if low != high:  # a range that prints as "1.0 ms-1.0 ms" says nothing
            predicted += f" (likely {low}-{high})"
        return [
            {"quantity": "step time", "predicted": predicted,
             "measured": fmt_seconds(self.measured_step_time_s),
             "ratio": f"{self.step_time_ratio:.2f}"},
            {"quantity": "peak memory", "predicted": fmt_bytes(self.predicted_peak_bytes),
             "measured": fmt_bytes(self.measured_peak_bytes), "ratio": f"{self.peak_ratio:.2f}"},
        ]

    def title(self) -> str:
        p = self.profile
        seq = f" x {p.seq_len}" if p.seq_len else ""
        return (f"Predicted vs measured: {p.model_name}, {p.mode} step at batch "
                f"{p.batch_size}{seq} in {self.prediction.precision} on {self.hardware.name}")

    def notes(self) -> list[str]:
        pred = self.prediction
        within = pred.low_s <= self.measured_step_time_s <= pred.high_s
        out = [("The measured step time is within the cost model's likely range." if within else
                "The measured step time is outside the cost model's likely range "
                f"({self.step_time_ratio:.2f}x the prediction).")]
        out.append(
            "Predicted: step time from the cost model on this device's own benchmark "
            f"(hardware='local', {pred.confidence} confidence); peak memory traced on fake "
            "tensors. Measured: median of 5 real steps after a warm-up, peak from PyTorch's "
            "allocator.")
        return out

    def __str__(self) -> str:
        rows = self.rows()
        headers = {"quantity": "quantity", "predicted": "predicted", "measured": "measured",
                   "ratio": "measured / predicted"}
        widths = {k: max(len(h), *(len(r[k]) for r in rows)) for k, h in headers.items()}
        lines = [self.title(), "  ".join(h.ljust(widths[k]) for k, h in headers.items())]
        lines += ["  ".join(r[k].ljust(widths[k]) for k in headers) for r in rows]
        return "\n".join([*lines, *self.notes()])

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{esc(h)}</th>" for h in
                       ("quantity", "predicted", "measured", "measured / predicted"))
        body = "".join("<tr>" + "".join(f"<td>{esc(r[k])}</td>" for k in
                                        ("quantity", "predicted", "measured", "ratio")) + "</tr>"
                       for r in self.rows())
        notes = "".join(f'<p class="aa-meta">{esc(n)}</p>' for n in self.notes())
        return (f'<div class="aiadvisor-verify"><b>{esc(self.title())}</b>'
                f'<table class="aa-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
                f"</table>{notes}</div>")


def _device_type(model: Any) -> str:
    """The device type the model's weights are on; refuses what cannot be measured."""
    import torch

    if not isinstance(model, torch.nn.Module):
        raise InvalidModelError(
            f"model of type {type(model).__name__} is not valid: expected a torch.nn.Module.")
    tensor = next(iter([*model.parameters(), *model.buffers()]), None)
    kind = tensor.device.type if tensor is not None else "cpu"
    if kind == "meta":
        raise InvalidArgumentError(
            "The model is on the meta device (no real weights): nothing can be measured. "
            "Build it with real weights on the attached device to verify.")
    return kind


def verify(model: Any, example_inputs: Any, *, mode: str = "train", precision: str | None = None,
           optimizer: str = "adamw", model_name: str = "model",
           hardware: str | HardwareSpec = "local") -> Verification:
    """Measure one step of ``model`` on its device and compare with the cost model.

    Parameters
    ----------
    model : torch.nn.Module
        The model as it is now (with a recommendation applied), on the attached device.
    example_inputs : Tensor, tuple or dict
        One batch, on the same device.
    mode : {"train", "infer"}
    precision : {"fp32", "tf32", "bf16", "fp16"}, optional
        The precision the step runs in (None: fp32). bf16/fp16 run under autocast; tf32 follows
        ``torch.backends.cuda.matmul.allow_tf32``.
    optimizer : str
        The optimizer of a training step (adamw, adam, sgd, sgd_momentum or none).
    model_name : str
        Shown in the table.
    hardware : str or HardwareSpec
        The device the prediction is for: ``"local"`` (the attached device, benchmarked once
        and cached) or an already benchmarked spec.

    Returns
    -------
    Verification
        Predicted and measured step time and peak memory, with their ratios.

    Raises
    ------
    InvalidArgumentError
        A meta-device model, a model on another device than ``hardware``, or a precision a
        measured step cannot run.
    UnsupportedPrecisionError
        The attached device has no engine for ``precision``.

    Examples
    --------
    >>> v = verify(model, x, mode="train", precision="bf16")  # doctest: +SKIP
    >>> v.step_time_ratio, v.peak_ratio  # doctest: +SKIP
    """
    from .api import profile_for_advice
    from .costmodel import check_precision, predict, resolve_hardware

    check_choice("mode", mode, MODES)
    precision = precision or "fp32"
    if precision not in VERIFIABLE_PRECISIONS:
        raise InvalidArgumentError(
            f"precision={precision!r} cannot be verified: a measured step runs one of "
            f"{', '.join(VERIFIABLE_PRECISIONS)} (fp8 and the integer formats need other "
            "libraries).")
    kind = _device_type(model)
    spec = resolve_hardware(hardware)
    if (kind == "cpu") != (spec.kind == "cpu"):
        raise InvalidArgumentError(
            f"The model is on {kind} but the attached device is {spec.name}: move the model "
            "and the example batch to it (e.g. model.to('cuda')) to verify there.")
    check_precision(spec, precision)  # before the slow part: measuring
    prof = profile_for_advice(model, example_inputs, mode=mode, precision=precision,
                              optimizer=optimizer, measure=True, model_name=model_name)
    if prof.measured_step_time_s is None or prof.measured_peak_bytes is None:
        raise InvalidArgumentError(
            f"The step of {model_name!r} could not be measured: {'; '.join(prof.notes)}.")
    prediction = predict(prof, hardware=spec, precision=precision)
    return Verification(profile=prof, hardware=spec, prediction=prediction)
