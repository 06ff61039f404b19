"""Wire a captured profile and the options into every table of a report (no torch, no UI)."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from ..codegen import CodeNames
from ..costmodel.precision import INFERENCE_ONLY
from ..errors import InvalidArgumentError, check_choice
from ..hardware.pricing import PriceRule
from ..profiler import rescale
from ..schema import HardwareSpec, ModelProfile, ParallelConfig, Prediction, Recommendation
from ..units import PRECISIONS
from .memory import PartsSource
from .parallel import MAX_DEVICES, plan_parallel_table
from .plan import Plan, build_plan
from .precision import fallback_precision, precision_table
from .predictor import Predictor
from .ranking import precision_note, rank_hardware

if TYPE_CHECKING:
    import pandas as pd

OPTION_KEYS = ("hardware", "num_devices", "precision", "batch_size", "seq_len",
               "budget_usd_per_hour", "price")


class ReportTables:
    """Everything a Report shows for one profile and one set of options.

    Each table is computed the first time it is read and then kept: a dashboard that redraws
    only its visible tab after a slider moves pays only for that tab. The parallel plan is the
    core the precision table, the prediction and the recommendations build on.
    """

    def __init__(self, base: ModelProfile, *, spec: HardwareSpec, specs: list[HardwareSpec],
                 options: dict[str, Any], names: CodeNames, predictor: Predictor,
                 applied: dict[str, str] | None = None) -> None:
        self.spec, self._specs, self._names, self._predictor = spec, specs, names, predictor
        self.applied = dict(applied or {})
        """Tactic id -> evidence that the model already does it (:mod:`.applied`)."""
        self._precision_notes: list[str] = []
        self.user_options = {k: options.get(k) for k in OPTION_KEYS if k != "hardware"}
        """The options as the user gave them (None: not pinned), for :func:`replace_options`."""
        batch, seq = options.get("batch_size"), options.get("seq_len")
        # Profiles and activation analyses are memoised on the captured profile, so
        # re-advising for another batch size or device count re-uses them (no re-trace).
        seq_prof = predictor.memo(base, ("seq", seq), lambda: rescale(base, seq_len=seq))
        self.profile = prof = predictor.at(seq_prof, batch or seq_prof.batch_size)
        self._parts_for = PartsSource(seq_prof, batch_size=prof.batch_size,
                                      cache=predictor.memo(seq_prof, ("parts",), dict)
                                      ).for_spec(spec)
        self.num_devices = options.get("num_devices") or 1
        self.requested = options.get("precision") or "fp32"
        #: The user pinned a precision: the hardware ranking uses it on every device. Otherwise
        #: each device is ranked at its best full-rate precision (the headline stays fp32).
        self.precision_pinned = options.get("precision") is not None
        self.precision_name = _effective_precision(spec, self.requested, prof.mode,
                                                   self._precision_notes)
        resolved = {**options, "hardware": spec.name, "num_devices": self.num_devices,
                    "precision": self.precision_name, "batch_size": prof.batch_size,
                    "seq_len": prof.seq_len, "mode": prof.mode}
        if self.requested != self.precision_name:
            resolved["requested_precision"] = self.requested
        self.options = resolved
        self._budget = options.get("budget_usd_per_hour")
        self._budget_notes: list[str] = []
        self.price_rule = PriceRule.from_value(options.get("price"))
        """Rent or own and the amortisation the hardware ranking prices devices with."""
        if options.get("price") is not None:
            self.options["price"] = self.price_rule.as_dict()

    @functools.cached_property
    def parallel(self) -> pd.DataFrame:
        return plan_parallel_table(self.profile, spec=self.spec, num_devices=self.num_devices,
                                   precision=self.precision_name,
                                   parts=self._parts_for(self.precision_name),
                                   predictor=self._predictor)

    @functools.cached_property
    def _chosen(self) -> tuple[ParallelConfig, bool, list[str]]:
        notes: list[str] = []
        config, fits = _chosen_plan(self.parallel, notes)
        return config, fits, notes

    @functools.cached_property
    def hardware(self) -> pd.DataFrame:
        table = rank_hardware(self.profile, specs=self._specs,
                              precision=self.requested if self.precision_pinned else None,
                              num_devices=self.num_devices, predictor=self._predictor,
                              parts_for=self._parts_for, price=self.price_rule)
        if not self.precision_pinned:
            table.attrs["precision_note"] = precision_note(None, mode=self.profile.mode,
                                                           current=self.precision_name)
        _apply_budget(table, self._budget, self._budget_notes)
        return table

    @functools.cached_property
    def precision(self) -> pd.DataFrame:
        return precision_table(self.profile, self.spec, parallel=self._chosen[0],
                               predictor=self._predictor, parts_for=self._parts_for)

    @functools.cached_property
    def _outcome(self):
        return self._predictor.plan(self.profile, self.spec, precision=self.precision_name,
                                    parallel=self._chosen[0])

    @property
    def prediction(self) -> Prediction | None:
        return self._outcome.prediction

    @functools.cached_property
    def stacked(self) -> Plan:
        return build_plan(self.profile, spec=self.spec, num_devices=self.num_devices,
                          precision=self.precision_name, names=self._names,
                          predictor=self._predictor, parts_for=self._parts_for,
                          plan_for=self._plan_for, applied=self.applied)

    def _plan_for(self, precision: str) -> tuple[ParallelConfig, bool]:
        """The planner's best plan at ``precision`` (the report's own at its precision)."""
        if precision == self.precision_name:
            table = self.parallel
        else:
            table = plan_parallel_table(self.profile, spec=self.spec,
                                        num_devices=self.num_devices, precision=precision,
                                        parts=self._parts_for(precision),
                                        predictor=self._predictor)
        return _chosen_plan(table, [], expert_parallel=True)

    @property
    def plan(self) -> pd.DataFrame:
        return self.stacked.table()

    @property
    def recommendations(self) -> list[Recommendation]:
        """The plan's steps in order, each priced on top of the ones before."""
        return list(self.stacked.recommendations)

    @property
    def notes(self) -> list[str]:
        """Explanations: precision fallbacks, what would make it fit, why a prediction is
        missing, the budget (reading this computes the plan and, with a budget, the ranking)."""
        notes = list(self._precision_notes) + list(self._chosen[2])
        notes += list(self.parallel.attrs.get("notes", []))
        if self.prediction is None and self._outcome.reason:
            notes.append(self._outcome.reason)
        if self._budget is not None:
            self.hardware  # noqa: B018 - computes the ranking and its budget note
            notes += self._budget_notes
        return notes


def check_count(name: str, value: Any, *, upper: int | None = None) -> int | None:
    """``value`` if it is None or an integer >= 1 (and <= ``upper``), else raise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (
            upper is not None and value > upper):
        limit = f" and <= {upper}" if upper else ""
        raise InvalidArgumentError(
            f"{name}={value!r} is not valid: expected an integer >= 1{limit}.")
    return value


def check_options(options: dict[str, Any]) -> None:
    """Validate the option values a report can be recomputed with."""
    check_count("num_devices", options.get("num_devices"), upper=MAX_DEVICES)
    check_count("batch_size", options.get("batch_size"))
    check_count("seq_len", options.get("seq_len"))
    if options.get("precision") is not None:
        check_choice("precision", options["precision"], PRECISIONS)
    budget = options.get("budget_usd_per_hour")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                               or not budget > 0):
        raise InvalidArgumentError(
            f"budget_usd_per_hour={budget!r} is not valid: expected a positive number of US "
            "dollars per hour, or None."
        )
    PriceRule.from_value(options.get("price"))  # raises on a bad rule, naming the field


def _config_from_row(row: Any) -> ParallelConfig:
    return ParallelConfig(dp_degree=int(row["dp"]), tp_degree=int(row["tp"]),
                          pp_degree=int(row["pp"]), zero_stage=int(row["zero_stage"]),
                          offload=bool(row["offload"]), checkpointing=str(row["checkpointing"]),
                          grad_accum_steps=int(row["grad_accum_steps"]),
                          num_microbatches=int(row["num_microbatches"]),
                          ep_degree=int(row.get("ep", 1)),
                          virtual_stages=int(row.get("virtual_stages", 1)))


def _effective_precision(spec: HardwareSpec, requested: str, mode: str,
                         notes: list[str]) -> str:
    chosen = fallback_precision(spec, requested, mode=mode)
    if chosen is None:
        notes.append(f"{spec.name} has no published throughput for {requested} or any wider "
                     "format; predictions use fp32 and are unreliable.")
        return "fp32"
    if chosen != requested:
        if mode == "train" and requested in INFERENCE_ONLY:
            why = "it is an inference format (W8A8 or weight-only quantization)"
        elif mode == "train" and requested == "fp4":
            why = "fp4 is offered for inference and serving only"
        else:
            why = f"{spec.name} has no {requested} engine"
        notes.append(f"precision {requested!r} cannot be used here ({why}); the report uses "
                     f"{chosen!r}, the nearest supported precision.")
    return chosen


def compute(base: ModelProfile, *, spec: HardwareSpec, specs: list[HardwareSpec],
            options: dict[str, Any], names: CodeNames, predictor: Predictor,
            applied: dict[str, str] | None = None) -> ReportTables:
    """The advice for ``base`` rescaled to the options' batch size and sequence length."""
    return ReportTables(base, spec=spec, specs=specs, options=options, names=names,
                        predictor=predictor, applied=applied)


def _chosen_plan(parallel: pd.DataFrame, notes: list[str], *,
                 expert_parallel: bool = False) -> tuple[ParallelConfig, bool]:
    """The best row; when nothing fits, say so (with the advice) and use the leanest row.

    Expert-parallel rows are estimates on top of a base plan (:mod:`.expert_parallel`): the
    report's own prediction uses the best plan without EP; with ``expert_parallel`` an EP row
    that ranks first and fits is returned (the stacked plan then has an EP step with its
    code)."""
    advice = parallel.attrs.get("advice") or ""
    if advice:
        notes.append(advice)
    if "ep" in parallel.columns and (parallel["ep"] > 1).any():
        top = parallel.iloc[0]
        if top["ep"] > 1 and top["fits"]:
            if expert_parallel:
                return _config_from_row(top), True
            notes.append(f"{top['strategy']} ranks first (expert parallel over {top['ep']} "
                         f"devices, {top['step_time_s']:.3g} s per step, an estimate); the "
                         "prediction below uses the best plan without expert parallelism; "
                         "the plan has an expert-parallel step (with its code) where an EP "
                         "plan ranks first at the plan's precision.")
        parallel = parallel[parallel["ep"] == 1]
    best = parallel.iloc[0]
    if not best["fits"]:
        leanest = parallel.sort_values("memory_per_device_bytes").iloc[0]
        return _config_from_row(leanest), False
    return _config_from_row(best), True


def _apply_budget(hardware: pd.DataFrame, budget: float | None, notes: list[str]) -> None:
    if budget is None:
        return
    cost = hardware["usd_per_hour"] * hardware["num_devices"]
    hardware["within_budget"] = (cost <= budget).where(cost.notna(), other=None)
    within = hardware[hardware["within_budget"].fillna(False).astype(bool)
                      & hardware["throughput"].notna()]
    if within.empty:
        notes.append(f"No priced device fits a budget of ${budget:g}/hour.")
    else:
        best = within.iloc[0]
        notes.append(f"Fastest within ${budget:g}/hour: {int(best['num_devices'])} x "
                     f"{best['hardware']} ({best['throughput']:.3g} samples/s).")


def replace_options(options: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``options`` (as the user gave them: :attr:`ReportTables.user_options`) with ``changes``."""
    unknown = sorted(set(changes) - set(OPTION_KEYS))
    if unknown:
        raise InvalidArgumentError(
            f"with_options() got {', '.join(map(repr, unknown))}: expected some of "
            f"{', '.join(OPTION_KEYS)} (a different mode needs a new advise() call: it changes "
            "the traced step)."
        )
    new = {k: v for k, v in options.items() if k in OPTION_KEYS}
    new.update(changes)
    check_options(new)
    return new


def profile_summary(prof: ModelProfile) -> dict[str, Any]:
    """Plain values describing the profile (for JSON, Markdown and text)."""
    m = prof.memory
    return {
        "model_name": prof.model_name, "model_type": prof.model_type, "mode": prof.mode,
        "precision": prof.precision, "optimizer": prof.optimizer,
        "batch_size": prof.batch_size, "seq_len": prof.seq_len, "num_params": prof.num_params,
        "num_trainable_params": prof.num_trainable_params,
        "flops_forward": prof.flops_forward, "flops_backward": prof.flops_backward,
        "flops_optimizer": prof.flops_optimizer, "flops_per_step": prof.flops_per_step,
        "memory": m.as_dict(), "num_blocks": prof.num_blocks, "path": prof.path,
        "measured_step_time_s": prof.measured_step_time_s, "notes": list(prof.notes),
    }


def prediction_dict(pred: Prediction | None) -> dict[str, Any] | None:
    return None if pred is None else dataclasses.asdict(pred)
