"""``aa.advise``: profile a model once, then rank hardware, precisions and parallel plans and
recommend tactics with code. The returned :class:`Report` recomputes everything for other
options (batch size, sequence length, devices, precision, hardware) from the captured profile.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from .codegen import CodeNames
from .errors import InvalidArgumentError, ProfileOptionError, check_choice
from .schema import (
    GenerationPrediction,
    GenerationProfile,
    HardwareSpec,
    ModelProfile,
    Prediction,
    Recommendation,
)
from .units import ADVISE_MODES, MODES, OPTIMIZERS, PRECISIONS

__all__ = ["Report", "advise", "check_profile_options", "profile_for_advice", "trace_precision"]


def _call_style(example_inputs: Any) -> str:
    if isinstance(example_inputs, dict):
        return "kwargs"
    if isinstance(example_inputs, (tuple, list)):
        return "star"
    return "positional"


class _Serving:
    """The generation side of a ``mode="generate"`` report: the captured GenerationProfile, the
    model's Hub id for the generated code, and memoised answers (a dashboard asks the same
    question again whenever a slider comes back)."""

    def __init__(self, gp: GenerationProfile, model_id: str) -> None:
        self.gp, self.model_id = gp, model_id
        self._memo: dict[tuple, Any] = {}

    def memo(self, key: tuple, make: Any) -> Any:
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]


class Report:
    """The advice for one model: plain values and DataFrames, recomputable for other options.

    Attributes
    ----------
    profile : ModelProfile
        The step at the report's batch size and sequence length.
    hardware : pandas.DataFrame
        The whole catalog ranked: step time, throughput, fit and devices needed, cost per million
        samples, energy per sample (an upper bound from TDP), Pareto front of speed vs cost.
        Without a pinned ``precision`` each device runs its best full-rate precision for the
        mode (bf16, else fp16, else tf32, else fp32: its ``precision`` column); with one, that
        precision (or the nearest the device supports). ``attrs["precision_note"]`` says which.
    precision : pandas.DataFrame
        fp32 ... nf4 (fp32, tf32, bf16, fp16, fp8, mxfp8, fp4, int8, int8wo, int4, nf4) on the
        chosen device: support, memory, predicted speedup, numerical risk; ``notes`` says which
        block format mxfp8/fp4 mean there (NVFP4 or MXFP4) and why fp4 is not offered for training.
    parallel : pandas.DataFrame
        :func:`aiadvisor.plan_parallel` for the chosen device and number of devices.
    recommendations : list of Recommendation
        The steps of :attr:`plan` in order, each with its trigger, predicted gain on top of
        the steps before it and code.
    plan : pandas.DataFrame
        The recommendations as a stacked plan (see :attr:`plan`).
    prediction : Prediction or None
        The cost model on the chosen device, precision and plan.
    hardware_spec : HardwareSpec
        The target device as resolved once (a catalog row, the detected device, its benchmark,
        or a spec the user made): every table and view reads this, none looks it up again.
    options : dict
        hardware, num_devices, precision, batch_size, seq_len, mode (as used).
    notes : list of str
        Explanations: impossible combinations, what would make the model fit.
    generation : GenerationPrediction or None
        ``mode="generate"`` only: :func:`aiadvisor.predict_generation` at the report's
        defaults (see :meth:`generation_for`); None in the other modes.
    serving : pandas.DataFrame or None
        ``mode="generate"`` only: :func:`aiadvisor.plan_serving` on the report's device and
        number of devices at the default request, best first.
    """

    __slots__ = ("_advice", "_base", "_names", "_predictor", "_serving", "_spec", "_specs")

    def __init__(self, *, advice: Any, base: ModelProfile, names: CodeNames, spec: HardwareSpec,
                 specs: list[HardwareSpec], predictor: Any, serving: _Serving | None = None
                 ) -> None:
        for name, value in (("_advice", advice), ("_base", base), ("_names", names),
                            ("_spec", spec), ("_predictor", predictor), ("_serving", serving),
                            ("_specs", specs)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, "_specs"):
            raise AttributeError("Report is read-only; use report.with_options(...) for changes.")
        object.__setattr__(self, name, value)

    # -- the data ----------------------------------------------------------------------------
    @property
    def profile(self) -> ModelProfile:
        return self._advice.profile

    @property
    def hardware(self):
        return self._advice.hardware

    @property
    def precision(self):
        return self._advice.precision

    @property
    def parallel(self):
        return self._advice.parallel

    @property
    def recommendations(self) -> list[Recommendation]:
        """Tactics that fired; with ``mode="generate"`` the serving configurations come first
        (:meth:`serving_recommendations`), then the tactics for the prompt forward."""
        serving = self.serving_recommendations() if self._serving is not None else []
        return serving + list(self._advice.recommendations)

    @property
    def plan(self):
        """The recommendations as an ordered plan: one row per step with its speedup on top of
        the steps before (``speedup_step``), the product so far (``speedup_cumulative``), its
        memory effect, the memory per device after it and what triggered it; mutually
        exclusive choices are one step with their ``alternatives``. ``attrs`` hold the step
        as you run it (``baseline_step_time_s``, ``baseline_memory_bytes``) and the tactics
        not offered, with why (``skipped``: already applied, or under 3 %). Predicted by the
        cost model, not measured (``aa.verify_plan`` measures on the attached device)."""
        return self._advice.plan

    @property
    def prediction(self) -> Prediction | None:
        return self._advice.prediction

    @property
    def hardware_spec(self) -> HardwareSpec:
        """The target device's spec, resolved once when the report was made (or changed with
        :meth:`with_options`); it need not be a catalog row."""
        return self._spec

    @property
    def options(self) -> dict[str, Any]:
        """The options this report was computed with, resolved (e.g. the precision the advisor
        chose when none was given)."""
        options = dict(self._advice.options)
        if self._serving is not None:
            options["mode"] = "generate"
        return options

    @property
    def pinned_options(self) -> dict[str, Any]:
        """The options as the user gave them: None where the advisor chooses (an unpinned
        precision stays unpinned through :meth:`with_options`)."""
        return dict(self._advice.user_options)

    @property
    def notes(self) -> list[str]:
        return list(self._advice.notes)

    # -- serving (mode="generate") -----------------------------------------------------------
    @property
    def generation_profile(self) -> GenerationProfile | None:
        """The captured causal LM (``mode="generate"``), or None."""
        return None if self._serving is None else self._serving.gp

    def serving_defaults(self) -> dict[str, Any]:
        """The request and formats :attr:`generation` answers: ``prompt_len`` (the example's
        sequence length, capped so that prompt + output fit the model's positions),
        ``output_len`` (128, capped the same way), ``batch_size`` 1 and ``weight_precision``
        bf16 where the device runs it, else fp16, else fp32."""
        from .recommend.serving import default_request, default_weight_precision

        gp = self._serving_state().gp
        prompt_len, output_len = default_request(gp)
        return {"prompt_len": prompt_len, "output_len": output_len, "batch_size": 1,
                "weight_precision": default_weight_precision(self._spec)}

    def generation_for(self, *, prompt_len: int | None = None, output_len: int | None = None,
                       batch_size: int | None = None, weight_precision: str | None = None,
                       kv_precision: str | None = None) -> GenerationPrediction:
        """:func:`aiadvisor.predict_generation` on the report's device and devices for another
        request or format (None: :meth:`serving_defaults`); no re-trace, answers are kept.

        Raises
        ------
        InvalidArgumentError
            The report was not made with ``mode="generate"``, or a value is not valid (see
            :func:`aiadvisor.predict_generation`).
        """
        from .serving import predict_generation

        serving = self._serving_state()
        d = self.serving_defaults()
        args = {"tp": self.serving_tp(),
                "prompt_len": prompt_len or d["prompt_len"],
                "output_len": output_len or d["output_len"],
                "batch_size": batch_size or d["batch_size"],
                "weight_precision": weight_precision or d["weight_precision"],
                "kv_precision": kv_precision}
        key = ("generation", self._spec.name, self.options["num_devices"],
               *sorted(args.items()))
        return serving.memo(key, lambda: predict_generation(
            serving.gp, hardware=self._spec, num_devices=self.options["num_devices"], **args))

    def serving_tp(self) -> int:
        """Tensor-parallel degree of :attr:`generation`: the largest divisor of the number of
        devices that also divides the model's KV heads (the rest are data-parallel replicas)."""
        heads = self._serving_state().gp.kv.kv_heads
        n = self.options["num_devices"]
        return max(d for d in range(1, n + 1)
                   if n % d == 0 and (heads is None or d == 1 or heads % d == 0))

    @property
    def generation(self) -> GenerationPrediction | None:
        return None if self._serving is None else self.generation_for()

    def serving_plan(self, *, prompt_len: int | None = None, output_len: int | None = None):
        """:func:`aiadvisor.plan_serving` on the report's device and devices for a request
        (None: :meth:`serving_defaults`), best first; answers are kept."""
        from .serving import plan_serving

        serving = self._serving_state()
        d = self.serving_defaults()
        prompt_len, output_len = prompt_len or d["prompt_len"], output_len or d["output_len"]
        key = ("plan", self._spec.name, self.options["num_devices"], prompt_len, output_len)
        return serving.memo(key, lambda: plan_serving(
            serving.gp, hardware=self._spec, num_devices=self.options["num_devices"],
            prompt_len=prompt_len, output_len=output_len))

    @property
    def serving(self):
        return None if self._serving is None else self.serving_plan()

    def serving_recommendations(self, *, prompt_len: int | None = None,
                                output_len: int | None = None) -> list[Recommendation]:
        """Engine configurations with code (vLLM, TGI, TensorRT-LLM, transformers) from
        :meth:`serving_plan`'s best rows, each with its estimated tokens/s and TPOT."""
        from .recommend.serving import serving_recommendations

        serving = self._serving_state()
        d = self.serving_defaults()
        prompt_len, output_len = prompt_len or d["prompt_len"], output_len or d["output_len"]
        plan = self.serving_plan(prompt_len=prompt_len, output_len=output_len)
        key = ("recommendations", self._spec.name, self.options["num_devices"], prompt_len,
               output_len)
        baseline = self._eager_baseline(prompt_len, output_len)
        return list(serving.memo(key, lambda: serving_recommendations(
            plan, names=self._names, model_id=serving.model_id, prompt_len=prompt_len,
            output_len=output_len, baseline_tokens_per_s=baseline.tokens_per_s,
            spec=self._spec)))

    def _eager_baseline(self, prompt_len: int, output_len: int) -> GenerationPrediction:
        """Plain eager transformers ``generate``, one user, 16-bit weights, one device: what
        the serving recommendations' speedups are measured against."""
        from .serving import predict_generation

        serving = self._serving_state()
        weights = self.serving_defaults()["weight_precision"]
        key = ("eager", self._spec.name, prompt_len, output_len, weights)
        return serving.memo(key, lambda: predict_generation(
            serving.gp, hardware=self._spec, num_devices=1, weight_precision=weights,
            prompt_len=prompt_len, output_len=output_len, engine="eager"))

    def serving_devices(self, count: int = 3) -> list[HardwareSpec]:
        """The target device, then the hardware ranking's first ``count`` other devices with a
        memory and bandwidth figure (what a TPOT-vs-context chart compares)."""
        self._serving_state()
        by_name = {s.name: s for s in self._specs}
        out = [self._spec]
        for name in self.hardware["hardware"]:
            spec = by_name.get(name)
            if len(out) > count:
                break
            if spec and spec.name != self._spec.name and spec.memory_gb and spec.memory_bw_gbs:
                out.append(spec)
        return out

    def serving_context_curves(self, *, output_len: int, batch_size: int,
                               weight_precision: str, kv_precision: str | None = None):
        """TPOT against prompt length on :meth:`serving_devices` (see
        :func:`aiadvisor.recommend.serving.context_curves`); answers are kept."""
        from .recommend.serving import context_curves, context_points

        serving = self._serving_state()
        tp = self.serving_tp()
        specs = self.serving_devices()
        contexts = context_points(serving.gp.max_positions, output_len=output_len,
                                  current=self.serving_defaults()["prompt_len"])
        key = ("context", tuple(s.name for s in specs), self.options["num_devices"], tp,
               output_len, batch_size, weight_precision, kv_precision)
        return serving.memo(key, lambda: context_curves(
            serving.gp, specs, num_devices=self.options["num_devices"], tp=tp,
            weight_precision=weight_precision, kv_precision=kv_precision,
            batch_size=batch_size, output_len=output_len, contexts=contexts))

    def _serving_state(self) -> _Serving:
        if self._serving is None:
            raise InvalidArgumentError(
                f"this report was made with mode={self._advice.options['mode']!r}: serving "
                "figures need mode='generate' (aa.advise(model, x, mode='generate')), or call "
                "aa.predict_generation / aa.plan_serving directly.")
        return self._serving

    # -- recompute ---------------------------------------------------------------------------
    def with_options(self, **changes: Any) -> Report:
        """The report for other options, from the captured profile (no re-trace).

        Parameters
        ----------
        **changes
            Any of ``hardware``, ``num_devices``, ``precision``, ``batch_size``, ``seq_len``,
            ``budget_usd_per_hour``, ``price``. ``hardware`` is a catalog name, a HardwareSpec
            (e.g. ``report.hardware_spec`` of another report), ``"local"`` or None (the
            attached device); a name equal to the current target's keeps the resolved spec (no
            second lookup or benchmark).

        Examples
        --------
        >>> bigger = report.with_options(batch_size=32, num_devices=8)  # doctest: +SKIP
        """
        from .recommend.assemble import compute, replace_options

        # The user's own options (an unpinned precision stays unpinned), not the resolved ones.
        options = replace_options(self._advice.user_options, changes)
        spec = self._spec
        if "hardware" in changes and changes["hardware"] != spec.name:
            spec = _resolve_hardware(changes["hardware"])
        from .hardware.fabrics import network_for

        network_for(spec, fabric=self._predictor.fabric, node_size=self._predictor.node_size,
                    num_devices=options.get("num_devices") or 1)
        advice = compute(self._base, spec=spec, specs=self._specs, options=options,
                         names=self._names, predictor=self._predictor,
                         applied=self._advice.applied)
        return Report(advice=advice, base=self._base, names=self._names, spec=spec,
                      specs=self._specs, predictor=self._predictor, serving=self._serving)

    # -- renderings --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-safe values (NaN becomes None)."""
        from .recommend.assemble import prediction_dict, profile_summary

        data = {
            "options": self.options,
            "profile": profile_summary(self.profile),
            "prediction": prediction_dict(self.prediction),
            "notes": self.notes,
            "recommendations": [dataclasses.asdict(r) for r in self.recommendations],
            "plan": {"steps": self.plan.to_dict(orient="records"), **self.plan.attrs},
            "hardware": self.hardware.to_dict(orient="records"),
            "precision": self.precision.to_dict(orient="records"),
            "parallel": self.parallel.to_dict(orient="records"),
            "parallel_advice": self.parallel.attrs.get("advice", ""),
            "hardware_note": self.hardware.attrs.get("precision_note", ""),
            "price_note": self.hardware.attrs.get("price_note", ""),
            "host_note": self.hardware.attrs.get("host_note", ""),
        }
        if self._serving is not None:
            data["generation"] = dataclasses.asdict(self.generation)
            data["serving"] = self.serving.to_dict(orient="records")
        return _json_safe(data)

    def to_json(self, *, indent: int | None = 2) -> str:
        """The report as JSON (standard JSON: no NaN)."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def to_markdown(self) -> str:
        from .recommend.render import to_markdown

        text = to_markdown(self)
        if self._serving is None:
            return text
        from .recommend.serving import serving_markdown

        return text + "\n" + serving_markdown(self.generation, self.serving)

    def _repr_html_(self) -> str:
        from .recommend.render import to_html

        page = to_html(self)
        if self._serving is None:
            return page
        from .recommend.serving import serving_html

        # Inside the report's own block (its last tag closes it), so its styles apply.
        body, closing = page.rsplit("</div>", 1)
        return body + serving_html(self.generation, self.serving) + "</div>" + closing

    def __str__(self) -> str:
        from .recommend.render import to_text

        text = to_text(self)
        if self._serving is None:
            return text
        from .recommend.serving import serving_lines

        section = ["", "Serving (LLM generation)", "------------------------",
                   *serving_lines(self.generation, self.serving)]
        return text + "\n" + "\n".join(section)

    def __repr__(self) -> str:
        o = self.options
        return (f"<aiadvisor.Report {self.profile.model_name}: {o['mode']} on "
                f"{o['num_devices']} x {o['hardware']} ({o['precision']}), "
                f"{len(self.recommendations)} recommendations>")


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _json_safe(value.item())
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def _resolve_hardware(hardware: Any) -> HardwareSpec:
    """None: the attached device, on its own benchmark when this process ran one or the disk
    cache holds one (never measured here), else on its detected figures."""
    from .hardware import resolve
    from .hardware.detection import detect_calibrated

    if hardware is None:
        return detect_calibrated()
    return resolve(hardware)


def advise(model: Any, example_inputs: Any = None, *, mode: str | None = None,
           hardware: str | HardwareSpec | None = None, num_devices: int | None = None,
           precision: str | None = None, batch_size: int | None = None,
           seq_len: int | None = None, budget_usd_per_hour: float | None = None,
           price: Any = None, model_name: str = "model", inputs_name: str = "x",
           optimizer_name: str = "optimizer", optimizer: Any = None,
           measure: bool | None = None, fabric: str | dict | None = None,
           node_size: int | None = None, dataloader: Any = None) -> Report:
    """Profile ``model`` on ``example_inputs`` and advise on hardware, precision and parallelism.

    Parameters
    ----------
    model : torch.nn.Module, ModelProfile or GenerationProfile
        The live model (profiled once, on fake tensors), or an already captured profile from
        :func:`profile_for_advice` or :func:`aiadvisor.profile`. A profile's step is fixed:
        ``mode``, ``optimizer`` and ``measure`` are the ones it was captured with (leave them
        None), a different value raises :class:`~aiadvisor.errors.ProfileOptionError`, and
        ``example_inputs`` only tells the generated code how the model is called. A
        :class:`~aiadvisor.schema.GenerationProfile` (:func:`aiadvisor.profile_generation`)
        advises with ``mode="generate"``.
    example_inputs : Tensor, tuple or dict
        One batch, as the model is called: ``model(x)``, ``model(*x)`` or ``model(**x)``.
    mode : {"train", "infer", "generate"}, optional
        The step to profile (None: ``"train"`` for a live model, ``"infer"`` for one with
        no trainable parameter (a note says so), the profile's own for a profile).
        ``"generate"`` captures a causal LM for serving
        (:func:`aiadvisor.profile_generation`): the tabs show its prompt forward (an inference
        profile), and ``report.generation`` / ``report.serving`` answer how it generates on
        the target (see :meth:`Report.serving_defaults`).
    hardware : str, HardwareSpec or None
        A catalog name, a spec, ``"local"`` (benchmarked), or None for the attached device (on
        its own benchmark when this process ran one or the disk cache holds one, e.g. from
        ``aiadvisor calibrate`` or the dashboard's Calibrate button; never measured here).
    num_devices : int, optional
        Devices to plan for (default 1).
    precision : str, optional
        The precision the model runs in now (default ``"fp32"``: plain PyTorch). A precision the
        device cannot run is explained in ``report.notes`` and replaced by the nearest one.
        When given, the hardware ranking runs every device at it too; when None, each device
        is ranked at its best full-rate precision (bf16, else fp16, else tf32, else fp32).
    batch_size, seq_len : int, optional
        Advise for another batch size / sequence length than the example's (no re-trace).
    budget_usd_per_hour : float, optional
        Marks the hardware rows within budget and names the fastest of them.
    price : str, dict or aiadvisor.hardware.PriceRule, optional
        How the hardware ranking prices a device-hour: ``"rent"`` (default: the rental price
        where a device has one, else its purchase amortised over 3 years at 50 % use plus TDP
        power at 0.15 $/kWh), ``"own"`` (the amortised purchase where there is one), or a
        mapping / :class:`~aiadvisor.hardware.PriceRule` that also sets ``years``,
        ``utilisation`` and ``usd_per_kwh``. Each ranked row's ``price_basis`` says which price
        it used, its source and its date.
    model_name, inputs_name, optimizer_name : str
        The variable names the generated code uses (validated Python identifiers).
    optimizer : str or torch.optim.Optimizer, optional
        The optimizer to account for: adamw, adam, sgd, sgd_momentum or none (None:
        ``"adamw"`` for a live model, ``"sgd"`` for one with sparse embeddings, which AdamW
        cannot step (a note says so), the profile's own for a profile; inference profiles
        have ``"none"``). The user's own AdamW, Adam or SGD instance works too: its update
        rule is read from its class, and a ``fused``/``foreach`` one is not told to fuse.
    measure : bool, optional
        Also time real steps on the attached device (see :func:`aiadvisor.profile`; None:
        False). With a profile, ``measure=True`` needs one captured with ``measure=True``.
    fabric : str or dict, optional
        The network between nodes for every prediction of the report: a name from
        ``data/fabrics.csv`` (``"InfiniBand NDR 400G"``, ``"RoCE 400G"``, ``"p5"``, ...) or
        ``{"gbps": NIC Gb/s per device, "latency_us": ...}``. Default: each device's usual
        build. The prediction's notes say which network was assumed.
    node_size : int, optional
        Devices per node; ``num_devices`` must then fill whole nodes. Both stay fixed for
        :meth:`Report.with_options`.
    dataloader : torch.utils.data.DataLoader, optional
        The user's loader: with ``pin_memory=True`` and workers, the plan does not offer
        them again.

    Tactics the model already uses (fused attention, a fused/foreach optimizer,
    channels_last weights, a compiled model, gradient checkpointing, the loader's pinned
    memory and workers, the TF32 switch) are detected (:mod:`aiadvisor.recommend.applied`)
    and left out of the plan; ``report.plan.attrs["skipped"]`` says which and why.

    Returns
    -------
    Report

    Raises
    ------
    ProfileOptionError
        ``model`` is a profile and ``mode``, ``optimizer`` or ``measure`` asks for another
        step than the one it captured (profile again with those options).
    NotACausalLMError
        ``mode="generate"`` and the model is not a causal LM that takes token ids.

    Examples
    --------
    >>> import torch, aiadvisor as aa
    >>> model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    >>> report = aa.advise(model, torch.randn(32, 64), hardware="H100 SXM")
    >>> report.prediction.hardware, len(report.recommendations) > 0
    ('NVIDIA H100 SXM', True)
    """
    from .hardware import all_specs
    from .hardware.fabrics import network_for
    from .recommend.applied import detect
    from .recommend.applied import optimizer_name as _optimizer_name
    from .recommend.assemble import check_options, compute
    from .recommend.predictor import Predictor

    names = CodeNames(model=model_name, inputs=inputs_name, optimizer=optimizer_name,
                      call_style=_call_style(example_inputs))
    optimizer_object, optimizer = optimizer, _optimizer_name(optimizer)
    options = {"num_devices": num_devices, "precision": precision, "batch_size": batch_size,
               "seq_len": seq_len, "budget_usd_per_hour": budget_usd_per_hour, "price": price}
    check_options(options)
    serving = None
    if mode is not None:
        check_choice("mode", mode, ADVISE_MODES)
    if mode == "generate" or isinstance(model, GenerationProfile):
        serving = _serving_for(model, example_inputs, mode=mode, optimizer=optimizer,
                               measure=measure, model_name=model_name)
        base = serving.gp.prefill
    elif isinstance(model, ModelProfile):
        base = model
        check_profile_options(base, mode=mode, optimizer=optimizer, measure=measure)
    else:
        assumed = optimizer or _default_optimizer(model)
        step_mode = mode or _default_mode(model)
        base = profile_for_advice(model, example_inputs, mode=step_mode,
                                  precision=precision, optimizer=assumed,
                                  measure=_check_measure(measure), model_name=model_name)
        if mode is None and step_mode == "infer":
            base = dataclasses.replace(base, notes=(*base.notes, (
                "mode 'infer' assumed: the model has no trainable parameter (frozen, or "
                "quantized layers); pass mode='train' after unfreezing to advise on training")))
        if optimizer is None and assumed != "adamw" and base.mode == "train":
            base = dataclasses.replace(base, notes=(*base.notes, (
                f"optimizer {assumed!r} assumed: the model's sparse embeddings "
                f"({', '.join(repr(n) for n in _sparse_names(model))}) rule out AdamW, "
                "which cannot step sparse gradients; pass optimizer=... to choose")))
    applied = detect(model, optimizer=optimizer_object,
                     dataloader=dataloader, profile=base)
    spec = _resolve_hardware(hardware)
    # Bad network input raises here, with the choices, before any prediction swallows it.
    network_for(spec, fabric=fabric, node_size=node_size, num_devices=num_devices or 1)
    specs = all_specs()
    predictor = Predictor(fabric=fabric, node_size=node_size)
    advice = compute(base, spec=spec, specs=specs, options=options, names=names,
                     predictor=predictor, applied=applied)
    return Report(advice=advice, base=base, names=names, spec=spec, specs=specs,
                  predictor=predictor, serving=serving)


def _sparse_names(model: Any) -> list[str]:
    """Trainable embeddings of ``model`` with ``sparse=True`` (none for anything else)."""
    import torch

    from .profiler import sparse_embedding_tables

    return sparse_embedding_tables(model) if isinstance(model, torch.nn.Module) else []


def _default_mode(model: Any) -> str:
    """The step advised on when none is given: training, or inference for a model with no
    trainable parameter (all frozen, or quantized)."""
    import torch

    from .profiler import has_trainable_parameters

    if isinstance(model, torch.nn.Module) and not has_trainable_parameters(model):
        return "infer"
    return "train"


def _default_optimizer(model: Any) -> str:
    """The optimizer a training profile assumes when none is given: AdamW, or SGD for a model
    with sparse embeddings (``sparse=True``), which AdamW cannot step."""
    return "sgd" if _sparse_names(model) else "adamw"


def _serving_for(model: Any, example_inputs: Any, *, mode: str | None, optimizer: str | None,
                 measure: bool | None, model_name: str) -> _Serving:
    """The generation capture of ``model`` (or ``model`` itself when it is one)."""
    if isinstance(model, GenerationProfile) and mode not in (None, "generate"):
        _mismatch("mode", mode, "generate", fix="pass the live model to profile another step")
    if isinstance(model, ModelProfile):
        raise ProfileOptionError(
            f"mode='generate' needs the causal LM itself or aa.profile_generation(model, x)'s "
            f"result, not a ModelProfile (captured with mode={model.mode!r}): generation reads "
            "the KV cache from a traced forward. Pass the model, or omit mode= for this profile.")
    if optimizer not in (None, "none"):
        raise ProfileOptionError(
            f"optimizer={optimizer!r} does not apply to mode='generate': serving runs no "
            "optimizer. Expected optimizer=None or 'none'.")
    if _check_measure(measure):
        raise ProfileOptionError(
            "measure=True is not valid with mode='generate': serving figures are estimated. "
            "Expected measure=None or False; aa.verify(model, x, mode='infer') times the prompt "
            "forward.")
    if isinstance(model, GenerationProfile):
        return _Serving(model, model_id="")
    return _Serving(profile_for_advice(model, example_inputs, mode="generate",
                                       model_name=model_name), model_id=hub_id(model))


def hub_id(model: Any) -> str:
    """The model's Hugging Face Hub id (``model.config._name_or_path``), or "" when it has none
    (a model built from a config, or not a transformers model).

    >>> from types import SimpleNamespace as NS
    >>> hub_id(NS(config=NS(_name_or_path="meta-llama/Llama-3.1-8B"))), hub_id(object())
    ('meta-llama/Llama-3.1-8B', '')
    """
    name = getattr(getattr(model, "config", None), "_name_or_path", "")
    return name if isinstance(name, str) else ""


def check_profile_options(prof: ModelProfile, *, mode: str | None, optimizer: str | None,
                          measure: bool | None) -> None:
    """Raise ``ProfileOptionError`` where an option asks for another step than ``prof``'s.

    None means "as the profile was captured". A captured step cannot change its mode or
    optimizer (they decide which ops ran) or gain a measurement afterwards. Precision, batch
    size and sequence length are not checked here: the cost model re-prices a trace in any
    precision and the profile's scaling fit answers other sizes.

    >>> import torch, aiadvisor as aa
    >>> prof = aa.profile(torch.nn.Linear(8, 8), torch.randn(2, 8))
    >>> check_profile_options(prof, mode="train", optimizer=None, measure=None)  # no error
    """
    if mode is not None:
        check_choice("mode", mode, MODES)
        if mode != prof.mode:
            _mismatch("mode", mode, prof.mode, fix=f"profile again with mode={mode!r}")
    if optimizer is not None:
        check_choice("optimizer", optimizer, OPTIMIZERS)
        if optimizer != prof.optimizer:
            fix = (f"profile again with optimizer={optimizer!r}" if prof.mode == "train" else
                   "an inference step has no optimizer; profile again with mode='train', "
                   f"optimizer={optimizer!r} to account for one")
            _mismatch("optimizer", optimizer, prof.optimizer, fix=fix)
    if _check_measure(measure) and prof.measured_step_time_s is None:
        raise ProfileOptionError(
            "measure=True is not valid for this profile: it was captured without a "
            "measurement (measured_step_time_s is None). Expected measure=None or False here; "
            "omit measure=, or profile again with measure=True "
            "(aa.profile(model, x, measure=True)) to time real steps."
        )


def _mismatch(name: str, value: str, captured: str, *, fix: str) -> None:
    raise ProfileOptionError(
        f"{name}={value!r} does not match the profile: it was captured with {name}={captured!r}"
        f" and a captured step cannot change its {name}. Expected {name}={captured!r} or None; "
        f"omit {name}= to use the profile's, or {fix}."
    )


def _check_measure(measure: bool | None) -> bool:
    if measure is None or isinstance(measure, bool):
        return bool(measure)
    raise InvalidArgumentError(
        f"measure={measure!r} is not valid: expected True, False or None (None: False).")


def profile_for_advice(model: Any, example_inputs: Any, *, mode: str = "train",
                       precision: str | None = None, optimizer: str = "adamw",
                       measure: bool = False, model_name: str = "model"
                       ) -> ModelProfile | GenerationProfile:
    """Trace the step :func:`advise` would trace, without advising yet.

    ``advise(model, x, ...)`` is ``advise(profile_for_advice(model, x, ...), x, ...)``: the
    slow part (tracing the model) and the fast part (advice from the captured profile) can
    run separately, e.g. to show progress between them or to advise many times on one trace.

    Parameters
    ----------
    model : torch.nn.Module
    example_inputs : Tensor, tuple or dict
        One batch, as the model is called (see :func:`advise`).
    mode : {"train", "infer", "generate"}
        ``"generate"`` returns :func:`aiadvisor.profile_generation`'s capture (token ids of
        the example's shape; ``precision``, ``optimizer`` and ``measure`` do not apply).
    precision : str, optional
        The precision the model runs in now, as given to :func:`advise` (None: fp32). It is
        traced in that precision; training in fp8/mxfp8 or a weight-only format (int8, int4,
        nf4) is traced in bf16 autocast, the closest thing PyTorch runs, and priced in the
        requested format by the cost model (fp4 training is not offered: the report uses the
        nearest precision and says so).
    optimizer : str
        adamw, adam, sgd, sgd_momentum or none.
    measure : bool
        Also time real steps on the model's device (``measured_step_time_s``,
        ``measured_peak_bytes``; see :func:`aiadvisor.profile`).
    model_name : str
        Recorded in the profile.

    Returns
    -------
    ModelProfile, or GenerationProfile for ``mode="generate"``

    Examples
    --------
    >>> import torch
    >>> model, x = torch.nn.Linear(64, 64), torch.randn(32, 64)
    >>> prof = profile_for_advice(model, x, mode="train")
    >>> advise(prof, x, hardware="H100 SXM").profile.batch_size
    32
    """
    check_choice("mode", mode, ADVISE_MODES)
    if mode == "generate":
        from .serving import profile_generation

        return profile_generation(model, example_inputs, model_name=model_name)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    if precision is not None:
        check_choice("precision", precision, PRECISIONS)
    from .profiler import profile

    return profile(model, example_inputs, mode=mode, optimizer=optimizer,
                   precision=trace_precision(precision, mode=mode), measure=measure,
                   model_name=model_name)


def trace_precision(precision: str | None, *, mode: str) -> str:
    """The precision :func:`profile_for_advice` traces in for a requested one.

    Plain PyTorch (None) is fp32; fp32/tf32/bf16/fp16 trace as themselves; training in fp8,
    mxfp8 or a weight-only format traces in bf16 (autocast); inference in fp8/mxfp8/fp4/int8/
    int4/nf4 traces with the weights stored in that format.

    >>> trace_precision(None, mode="train"), trace_precision("fp8", mode="train")
    ('fp32', 'bf16')
    >>> trace_precision("nf4", mode="infer")
    'nf4'
    """
    if precision is None or precision in ("fp32", "tf32", "bf16", "fp16"):
        return precision or "fp32"
    return "bf16" if mode == "train" else precision
