"""Close the loop: re-measure a model on the attached device and put the measurement beside the
prediction (``%advise --verify``; DESIGN.md, user journey 4).

The predicted step time is the cost model on the attached device as benchmarked once
(``hardware="local"``); the predicted peak memory is the traced profile's peak (fake tensors, no
memory allocated). The measured figures are real steps on the model's own device
(:func:`aiadvisor.profile` with ``measure=True``: the median of 5 steps after a warm-up, and the
peak PyTorch's allocator reached), on copies, so the user's model is left as it was.

Each measurement is appended to the local measurement store (``record=False`` skips it; see
:mod:`aiadvisor.costmodel.measurements`), and later ``hardware="local"`` predictions for the
same device take a correction from it (:mod:`aiadvisor.costmodel.correction`).
"""

from __future__ import annotations

import dataclasses
import html
import math
from dataclasses import dataclass
from typing import Any

from .errors import InvalidArgumentError, InvalidModelError, check_choice
from .schema import HardwareSpec, ModelProfile, Prediction
from .units import MODES, fmt_bytes, fmt_seconds

__all__ = ["PlanVerification", "StepMeasurement", "Verification", "verify", "verify_plan"]

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
    """The cost model's prediction on ``hardware`` for ``profile`` (with the correction of
    earlier measurements of this device, if any: ``prediction.correction``)."""
    recorded_to: str | None = None
    """The measurement store this measurement was appended to (None: not recorded)."""

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
        if pred.correction is not None:
            plural = "measurement" if pred.correction_records == 1 else "measurements"
            out.append(f"The predicted step time is corrected by {pred.correction_records} "
                       f"earlier {plural} on this device (x{pred.correction:.2f}; "
                       f"{fmt_seconds(pred.uncorrected_step_time_s)} before).")
        if self.recorded_to:
            out.append(f"This measurement was added to the local measurement store "
                       f"({self.recorded_to}).")
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


def _record(prof: ModelProfile, spec: HardwareSpec, prediction: Prediction, *,
            measured_step_s: float, num_steps: int, source: str) -> str | None:
    """Append one measurement to the local store (:mod:`aiadvisor.costmodel.measurements`);
    returns the file written, or None (not a benchmarked device, or not writable)."""
    import torch

    from . import __version__
    from .costmodel import measurements

    if not spec.measured or not measured_step_s > 0:
        return None  # a correction applies to benchmarked devices only (see predict)
    record = measurements.Measurement(
        device=spec.name, device_key=measurements.device_key(spec.kind, spec.name),
        model=prof.model_type, flops=float(prof.flops_forward + prof.flops_backward),
        batch_size=int(prof.batch_size), seq_len=prof.seq_len, mode=prof.mode,
        precision=prediction.precision, predicted_step_s=prediction.uncorrected_step_time_s,
        measured_step_s=float(measured_step_s), num_steps=num_steps,
        aiadvisor_version=__version__, torch_version=torch.__version__,
        timestamp=measurements.now_utc(), source=source)
    path = measurements.append(record)
    return None if path is None else str(path)


def verify(model: Any, example_inputs: Any, *, mode: str = "train", precision: str | None = None,
           optimizer: str = "adamw", model_name: str = "model",
           hardware: str | HardwareSpec = "local", record: bool = True) -> Verification:
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
    record : bool
        Append the measurement to the local measurement store (the user cache directory; see
        :mod:`aiadvisor.costmodel.measurements`), from which later ``hardware="local"``
        predictions take a per-device correction. The prediction shown is the one made before
        this measurement was added.

    Returns
    -------
    Verification
        Predicted and measured step time and peak memory, with their ratios; ``recorded_to``
        names the store file (None when not recorded).

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
    path = (_record(prof, spec, prediction, measured_step_s=prof.measured_step_time_s,
                    num_steps=5, source="verify") if record else None)
    return Verification(profile=prof, hardware=spec, prediction=prediction, recorded_to=path)


# -- the plan, step by step ---------------------------------------------------------------------

#: Tactics whose effect the measurement takes from the report instead of running their code:
#: a larger batch needs the user's dataset (the bench repeats the example batch instead).
_BATCH_TACTICS = ("larger_batch",)
#: Steps whose code changes the whole process, so the runs timed in turns would all see it:
#: measured apart (a fresh kernel before and after), not here.
_PROCESS_WIDE = {"cpu_threads": "sets the process's thread pools (time it in a fresh kernel "
                                "with and without the setting)"}
_AUTOCAST = {"bf16_autocast": "bfloat16", "fp16_autocast": "float16"}


@dataclass(frozen=True)
class StepMeasurement:
    """One plan step applied on the attached device: predicted vs measured speedup."""

    step: int
    tactic: str
    title: str
    status: str
    """``measured``, ``failed`` (its code raised: ``error`` says what; the step is undone and
    the next ones run without it) or ``not run here`` (needs CUDA, several processes or a
    library that is not installed)."""
    predicted_speedup: float | None
    measured_speedup: float | None = None
    seconds_per_sample: float | None = None
    error: str = ""


@dataclass(frozen=True)
class PlanVerification:
    """The plan of a report measured step by step on copies of the model."""

    baseline_seconds_per_sample: float
    steps: tuple[StepMeasurement, ...]
    repeats: int
    recorded_to: str | None = None
    """The measurement store the step as you run it was appended to (None: not recorded)."""

    @property
    def measured(self) -> tuple[StepMeasurement, ...]:
        return tuple(s for s in self.steps if s.status == "measured")

    @property
    def measured_cumulative(self) -> float:
        """Time per sample as you run it over time per sample with every measured step."""
        out = 1.0
        for s in self.measured:
            out *= s.measured_speedup
        return out

    @property
    def predicted_cumulative(self) -> float:
        """The product of the predicted speedups of the steps that were measured."""
        out = 1.0
        for s in self.measured:
            out *= s.predicted_speedup or 1.0
        return out

    def table(self):
        """One row per step: predicted and measured speedup, each step and cumulative."""
        import pandas as pd

        rows, pred_cum, meas_cum = [], 1.0, 1.0
        for s in self.steps:
            if s.status == "measured":
                pred_cum *= s.predicted_speedup or 1.0
                meas_cum *= s.measured_speedup
            rows.append({"step": s.step, "tactic": s.tactic, "status": s.status,
                         "predicted_speedup": s.predicted_speedup,
                         "measured_speedup": s.measured_speedup,
                         "predicted_cumulative": pred_cum, "measured_cumulative": meas_cum,
                         "seconds_per_sample": s.seconds_per_sample, "error": s.error})
        return pd.DataFrame.from_records(rows)

    def _repr_html_(self) -> str:
        esc = html.escape
        cols = ("step", "tactic", "status", "predicted_speedup", "measured_speedup",
                "predicted_cumulative", "measured_cumulative", "error")
        head = "".join(f"<th>{esc(c.replace('_', ' '))}</th>" for c in cols)

        def cell(value: Any) -> str:
            if isinstance(value, float):
                return "-" if value != value else f"{value:.2f}"
            return esc(str(value))

        body = "".join("<tr>" + "".join(f"<td>{cell(row[c])}</td>" for c in cols) + "</tr>"
                       for row in self.table().to_dict("records"))
        return (f'<div class="aiadvisor-verify"><b>The plan, measured step by step</b> (as '
                f"you run it: {esc(fmt_seconds(self.baseline_seconds_per_sample))} per sample; "
                f"median of {self.repeats} steps each)"
                f'<table class="aa-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
                "</table></div>")

    def __str__(self) -> str:
        lines = [f"As you run it: {fmt_seconds(self.baseline_seconds_per_sample)} per sample "
                 f"(median of {self.repeats} steps)."]
        def ratio(value: Any) -> str:
            return "-" if value is None or value != value else f"{value:.2f}x"

        for row in self.table().itertuples(index=False):
            pred, meas = ratio(row.predicted_speedup), ratio(row.measured_speedup)
            lines.append(f"{row.step}. {row.tactic:<18} {row.status:<11} predicted {pred:>6} "
                         f"measured {meas:>6}   cumulative {row.predicted_cumulative:.2f}x "
                         f"predicted, {row.measured_cumulative:.2f}x measured"
                         + (f"  ({row.error})" if row.error else ""))
        return "\n".join(lines)


@dataclass
class _Run:
    """How one step is run now: the model, inputs, optimizer and autocast dtype in use."""

    model: Any
    inputs: Any
    optimizer: Any
    mode: str
    call_style: str
    loss_fn: Any
    autocast: str | None = None
    batch_factor: int = 1

    def batch(self) -> Any:
        return _repeat(self.inputs, self.batch_factor)

    def once(self, inputs: Any) -> None:
        import contextlib

        import torch

        cast = (torch.autocast("cpu", dtype=getattr(torch, self.autocast)) if self.autocast
                else contextlib.nullcontext())
        if self.mode == "infer":
            with torch.inference_mode(), cast:
                _call(self.model, inputs, self.call_style)
            return
        with cast:
            loss = self.loss_fn(_call(self.model, inputs, self.call_style))
        loss.backward()
        if self.optimizer is not None:
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)


def _call(model: Any, inputs: Any, style: str) -> Any:
    if style == "kwargs":
        return model(**inputs)
    if style == "star":
        return model(*inputs)
    return model(inputs)


def _repeat(value: Any, factor: int) -> Any:
    """The batch ``factor`` times over (dimension 0), for a larger-batch step."""
    import torch

    if factor == 1:
        return value
    if isinstance(value, torch.Tensor):  # cat keeps a channels_last batch channels_last
        return torch.cat([value] * factor) if value.dim() else value
    if isinstance(value, dict):
        return {k: _repeat(v, factor) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_repeat(v, factor) for v in value)
    return value


def _default_loss(output: Any) -> Any:
    """A loss for timing only, the one the profile's traced and measured steps take (so the
    step timed is the step predicted): the model's own ``loss`` if it returns one, else the sum
    of its first floating-point output that requires grad
    (:func:`~aiadvisor.profiler.trace.reduce_output`). The mean square of the output, cast to
    FP32, which this was before, costs a full pass or three over the output: on tiny-gpt at
    8 x 512 (33.5 M logits) about 150-200 ms of a 735 ms FP32 step on a 2-core Xeon VM, the same
    in FP32 and bf16, so it cut the measured bf16 speedup to 1.65-1.91x where the step the
    report prices ran 2.2x, and its baseline, recorded as the predicted step, read slow."""
    from .profiler.trace import reduce_output

    return reduce_output(output)


def _seconds_per_sample(run: _Run, *, warmup: int, repeats: int, batch_size: int) -> float:
    return _interleaved([run], warmup=warmup, repeats=repeats, batch_size=batch_size)[0]


def _interleaved(runs: list[_Run], *, warmup: int, repeats: int, batch_size: int
                 ) -> list[float]:
    """Median seconds per sample of each run, timed in turns (A B A B ...): a load that comes
    and goes on a shared machine slows both sides of a comparison alike."""
    import statistics
    import time

    batches = [run.batch() for run in runs]
    for run, inputs in zip(runs, batches):
        for _ in range(warmup):  # first calls compile, allocate and fill caches
            run.once(inputs)
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(repeats):
        for run, inputs, out in zip(runs, batches, times):
            start = time.perf_counter()
            run.once(inputs)
            out.append(time.perf_counter() - start)
    return [statistics.median(t) / (batch_size * run.batch_factor)
            for t, run in zip(times, runs)]


def _copy_run(run: _Run) -> _Run:
    """A copy to apply the next step to, so that a failing step leaves ``run`` as it was."""
    import copy
    import inspect

    model = copy.deepcopy(run.model)
    optimizer = None
    if run.optimizer is not None:  # the same class and settings, on the copy's parameters
        cls = type(run.optimizer)
        accepted = inspect.signature(cls.__init__).parameters
        optimizer = cls(model.parameters(), **{k: v for k, v in run.optimizer.defaults.items()
                                               if k in accepted})
    return dataclasses.replace(run, model=model, optimizer=optimizer)


def _runnable(rec: Any) -> str:
    """Why ``rec`` cannot run here ("" when it can)."""
    import importlib.util

    import torch

    extra = rec.extra
    if rec.id in _PROCESS_WIDE:
        return _PROCESS_WIDE[rec.id]
    if extra.get("needs_cuda") and not torch.cuda.is_available():
        return "needs CUDA"
    if extra.get("launcher") == "torchrun":
        return "runs under torchrun on several devices"
    missing = [p for p in extra.get("requires", ()) if importlib.util.find_spec(p) is None]
    return f"needs {', '.join(missing)}" if missing else ""


def _apply(run: _Run, rec: Any, names: Any, batch_size: int) -> _Run:
    """``run`` with ``rec``'s generated code executed on it (raises what the code raises)."""
    ns = {names.model: run.model, names.inputs: run.inputs, names.optimizer: run.optimizer,
          names.loss_fn: run.loss_fn}
    if rec.id not in _BATCH_TACTICS:
        exec(compile(rec.code, f"<plan step {rec.id}>", "exec"), ns)  # noqa: S102 - the step's code is what is measured
    model = ns.get(f"quantized_{names.model}", ns[names.model])
    new = dataclasses.replace(run, model=model, inputs=ns[names.inputs],
                              optimizer=ns.get(names.optimizer))
    if rec.id in _AUTOCAST:
        new.autocast = _AUTOCAST[rec.id]
    if rec.id in _BATCH_TACTICS:
        new.batch_factor = max(1, rec.extra["effect"]["batch_size"] // batch_size)
    return new


def _record_baseline(report: Any, spec: HardwareSpec | None, seconds_per_sample: float, *,
                     repeats: int, custom_loss: bool) -> str | None:
    """Record the plan's step as you run it when it is the step the report predicted: a
    benchmarked device, one device, fp32 (the measurement runs no autocast) and, in training,
    AdamW with the default loss (what the measurement runs)."""
    from .costmodel import predict

    prof = getattr(report, "profile", None)
    options = getattr(report, "options", {})
    if spec is None or not spec.measured or not isinstance(prof, ModelProfile):
        return None
    same_step = (options.get("precision") == "fp32" and options.get("num_devices", 1) in (1, None)
                 and (prof.mode == "infer" or (prof.optimizer == "adamw" and not custom_loss)))
    if not same_step:
        return None
    prediction = predict(prof, hardware=spec, precision="fp32", correction=False)
    return _record(prof, spec, prediction, measured_step_s=seconds_per_sample * prof.batch_size,
                   num_steps=repeats, source="verify_plan")


def verify_plan(model: Any, example_inputs: Any, report: Any, *, loss_fn: Any = None,
                warmup: int = 3, repeats: int = 7, steps: int | None = None,
                record: bool = True) -> PlanVerification:
    """Apply ``report``'s plan to copies of ``model`` one step at a time and time each step.

    Each step's generated code runs on a copy of the model as the steps before left it; the
    step is timed against the model before it, in turns (median of ``repeats`` steps each
    after ``warmup``), and its speedup is the time per sample before it over the time per
    sample after it. A step whose code raises is
    reported as failed with the error and undone, and the next steps run without it.
    ``model``, its gradients, the global RNG and TF32 switches are left as they were.

    Parameters
    ----------
    model : torch.nn.Module
        The user's model with real weights, on the CPU.
    example_inputs : Tensor, tuple or dict
        One batch, as the report was made with.
    report : Report
        ``aa.advise(...)`` on the attached device (``hardware="local"`` for a benchmarked one).
    loss_fn : callable, optional
        ``loss_fn(output) -> scalar`` for training (default: the model's own loss, else
        the sum of its output, as the profile's step takes).
    warmup, repeats : int
        Untimed and timed steps per measurement.
    steps : int, optional
        Measure only the first ``steps`` steps.
    record : bool
        Append the step as you run it to the local measurement store (as :func:`verify`
        does) when it is the step the report predicted: a benchmarked device, fp32, one
        device and, in training, AdamW with the default loss.
    """
    import copy

    import torch

    kind = _device_type(model)
    spec = getattr(report, "hardware_spec", None)
    if spec is not None and (kind == "cpu") != (spec.kind == "cpu"):
        raise InvalidArgumentError(
            f"The plan was made for {spec.name} but the model is on {kind}: a measurement here "
            "says nothing about that device. Advise for the attached device "
            "(aa.advise(model, x, hardware='local'), %advise model x --hardware local) and "
            "verify that plan.")
    names = report._names  # noqa: SLF001 - the names the code was generated with
    mode = report.options["mode"]
    batch_size = report.profile.batch_size
    rng, tf32 = torch.get_rng_state(), torch.backends.cuda.matmul.allow_tf32
    matmul, cudnn_tf32 = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    try:
        user = copy.deepcopy(model)
        optimizer = torch.optim.AdamW(user.parameters(), lr=1e-4) if mode == "train" else None
        user.train(mode == "train")
        run = _Run(model=user, inputs=example_inputs, optimizer=optimizer, mode=mode,
                   call_style=names.call_style, loss_fn=loss_fn or _default_loss)
        base = _seconds_per_sample(run, warmup=warmup, repeats=repeats,
                                   batch_size=batch_size)
        out = []
        for rec in list(report.recommendations)[:steps]:
            common = {"step": rec.extra.get("step", len(out) + 1), "tactic": rec.id,
                      "title": rec.title, "predicted_speedup": rec.predicted_speedup}
            why = _runnable(rec)
            if why:
                out.append(StepMeasurement(status="not run here", error=why, **common))
                continue
            try:
                candidate = _apply(_copy_run(run), rec, names, batch_size)
                before, after = _interleaved([run, candidate], warmup=warmup,
                                             repeats=repeats, batch_size=batch_size)
            except Exception as exc:  # noqa: BLE001 - a failing step is reported, not raised
                out.append(StepMeasurement(status="failed", error=f"{type(exc).__name__}: "
                                           f"{str(exc).splitlines()[0][:160] if str(exc) else ''}",
                                           **common))
                continue
            out.append(StepMeasurement(status="measured", measured_speedup=before / after,
                                       seconds_per_sample=after, **common))
            run = candidate
        path = (_record_baseline(report, spec, base, repeats=repeats,
                                 custom_loss=loss_fn is not None) if record else None)
        return PlanVerification(baseline_seconds_per_sample=base, steps=tuple(out),
                                repeats=repeats, recorded_to=path)
    finally:
        torch.set_rng_state(rng)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = cudnn_tf32
        torch.set_float32_matmul_precision(matmul)
