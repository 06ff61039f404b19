"""Cached calls to the cost model, and speedups with intervals from its predictions.

Batch conventions: the advisor's profiles hold the batch *per device* ("1 x 2048 per device"),
so every plan on N devices trains on the same ``N x batch`` samples per optimizer step and plans
compare fairly. A data-parallel replica of ``tp x pp`` devices runs ``tp x pp x batch`` samples,
in ``num_microbatches`` pipeline micro-batches and ``grad_accum_steps`` accumulation steps.
:func:`aiadvisor.costmodel.predict` takes the batch of the whole step and splits it the same way;
:meth:`Predictor.plan` converts one into the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import AIAdvisorError
from ..profiler import rescale
from ..schema import HardwareSpec, ModelProfile, ParallelConfig, Prediction


@dataclass(frozen=True)
class Outcome:
    """A prediction, or why there is none (an impossible combination, explained)."""

    prediction: Prediction | None
    reason: str = ""


@dataclass(frozen=True)
class Layout:
    global_batch: int
    """Samples per optimizer step over all devices."""
    replica_batch: int
    """Samples per step of one data-parallel replica (``tp x pp`` devices)."""
    micro_batch: int
    """Samples per forward pass of a replica (after pipeline and accumulation splits)."""


def layout(config: ParallelConfig, per_device_batch: int) -> Layout:
    """Batch sizes of ``config`` when each device contributes ``per_device_batch`` samples.

    >>> layout(ParallelConfig(dp_degree=2, tp_degree=4), 1)
    Layout(global_batch=8, replica_batch=4, micro_batch=4)
    """
    total = config.num_devices * per_device_batch
    replica = total // config.dp_degree
    splits = config.grad_accum_steps * (config.num_microbatches if config.pp_degree > 1 else 1)
    return Layout(global_batch=total, replica_batch=replica, micro_batch=max(1, replica // splits))


def global_batch(config: ParallelConfig, per_device_batch: int) -> int:
    """Samples per optimizer step over all devices."""
    return config.num_devices * per_device_batch


#: Cache sizes: a dashboard session moves sliders hundreds of times; the oldest entries go.
_MAX_PREDICTIONS, _MAX_PROFILES = 4096, 256


def _put(cache: dict, key, value, limit: int):
    if len(cache) >= limit:
        del cache[next(iter(cache))]
    cache[key] = value
    return value


class Predictor:
    """Memoised :func:`aiadvisor.costmodel.predict` and :func:`aiadvisor.profiler.rescale` calls.

    Cache entries keep a reference to their profile and are matched by identity, so a profile
    that has been garbage-collected can never answer for a new one with the same ``id``.
    """

    def __init__(self, *, fabric: Any = None, node_size: int | None = None) -> None:
        self.fabric = fabric
        """The network between nodes every prediction assumes (see
        :func:`aiadvisor.hardware.fabrics.network_for`; None: each device's usual build)."""
        self.node_size = node_size
        self._cache: dict[tuple, tuple[ModelProfile, Outcome]] = {}
        self._at: dict[tuple, tuple[ModelProfile, ModelProfile]] = {}
        self._memo: dict[tuple, tuple[object, object]] = {}
        self._roots: dict[int, tuple[ModelProfile, ModelProfile]] = {}

    def derived(self, prof: ModelProfile, root: ModelProfile) -> ModelProfile:
        """Record that ``prof`` is ``rescale(root, ...)``: later :meth:`at` calls on ``prof`` are
        answered from ``root``, so their results are shared by every profile derived from it."""
        if prof is not root:
            _put(self._roots, id(prof), (prof, root), _MAX_PROFILES)
        return prof

    def memo(self, owner: object, key: tuple, compute):
        """``compute()`` once per (``owner`` object, ``key``), kept while the predictor lives."""
        full = (id(owner), *key)
        hit = self._memo.get(full)
        if hit is None or hit[0] is not owner:
            hit = _put(self._memo, full, (owner, compute()), _MAX_PROFILES)
        return hit[1]

    # -- profiles ----------------------------------------------------------------------------
    def at(self, prof: ModelProfile, batch_size: int) -> ModelProfile:
        """:func:`aiadvisor.profiler.rescale` to ``batch_size``, memoised."""
        if batch_size == prof.batch_size:
            return prof
        link = self._roots.get(id(prof))
        if link is not None and link[0] is prof:
            prof = link[1]
            if batch_size == prof.batch_size:
                return prof
        key = (id(prof), batch_size)
        hit = self._at.get(key)
        if hit is None or hit[0] is not prof:
            new = self.derived(rescale(prof, batch_size=batch_size), prof)
            hit = _put(self._at, key, (prof, new), _MAX_PROFILES)
        return hit[1]

    def step_profile(self, prof: ModelProfile, config: ParallelConfig) -> ModelProfile:
        """The profile of the whole step when each device contributes ``prof``'s batch."""
        return self.at(prof, global_batch(config, prof.batch_size))

    # -- predictions -------------------------------------------------------------------------
    def outcome(self, step_prof: ModelProfile, spec: HardwareSpec, *, precision: str,
                parallel: ParallelConfig | None = None) -> Outcome:
        """The cost model on ``step_prof`` as a whole step (global batch)."""
        parallel = parallel or ParallelConfig()
        if parallel.ep_degree > 1:
            # The all-to-all depends on the per-device batch, which a whole step's profile
            # does not carry: refuse rather than predict the plan without EP.
            return Outcome(None, f"{parallel.label}: expert-parallel plans are predicted "
                                 "from the per-device profile (Predictor.plan)")
        key = (id(step_prof), spec.name, id(spec), precision, parallel)
        hit = self._cache.get(key)
        if hit is None or hit[0] is not step_prof:
            hit = _put(self._cache, key, (step_prof, self._run(step_prof, spec, precision,
                                                               parallel)), _MAX_PREDICTIONS)
        return hit[1]

    def prefill(self, step_prof: ModelProfile, specs: list[HardwareSpec], precisions: list[str],
                num_devices: int, parallel: ParallelConfig | None = None) -> None:
        """Predict many devices and precisions in one vectorised cost-model call and cache the
        results, so that :meth:`plan` / :meth:`outcome` for them are free.

        One :func:`aiadvisor.costmodel.predict_table` call for any layout. Benchmarked
        ("local") specs are left to :meth:`outcome`, which uses their measured curves; pairs the
        table leaves out (a precision the device lacks) too, so that their reason is kept."""
        parallel = parallel or ParallelConfig(dp_degree=num_devices)
        todo = [s for s in specs if not s.measured and all(
            (id(step_prof), s.name, id(s), p, parallel) not in self._cache for p in precisions)]
        if not todo:
            return
        table = _vector_table(step_prof, todo, precisions, parallel, self.fabric,
                              self.node_size)
        by_name = {s.name: s for s in todo}
        for rec in table:
            spec = by_name.get(rec["hardware"])
            if spec is None:
                continue
            values = {k: rec[k] if k in ("bound", "confidence") else float(rec[k])
                      for k in _TABLE_FIELDS}
            values["host_bound"] = bool(rec["host_bound"])
            pred = Prediction(hardware=spec.name, precision=rec["precision"],
                              num_devices=parallel.num_devices, **values)
            key = (id(step_prof), spec.name, id(spec), rec["precision"], parallel)
            _put(self._cache, key, (step_prof, Outcome(pred)), _MAX_PREDICTIONS)

    def plan(self, prof: ModelProfile, spec: HardwareSpec, *, precision: str,
             parallel: ParallelConfig) -> Outcome:
        """The cost model when each device of ``parallel`` contributes ``prof``'s batch.

        An expert-parallel config (``ep_degree`` > 1) is its base plan's prediction adjusted
        for EP (:func:`~aiadvisor.recommend.expert_parallel.predict_expert_config`, balanced
        routing unless the profile says otherwise), as in :func:`aa.plan_parallel`'s EP rows.
        """
        if parallel.ep_degree > 1:
            from .expert_parallel import predict_expert_config

            return Outcome(*predict_expert_config(prof, parallel, spec, precision=precision,
                                                  predictor=self))
        try:
            step = self.step_profile(prof, parallel)
        except AIAdvisorError as exc:  # a profile without scaling traces cannot be rescaled
            return Outcome(None, str(exc))
        return self.outcome(step, spec, precision=precision, parallel=parallel)

    def __call__(self, prof: ModelProfile, spec: HardwareSpec, *, precision: str,
                 parallel: ParallelConfig | None = None) -> Prediction | None:
        """:meth:`plan`'s prediction (None when the combination cannot run)."""
        return self.plan(prof, spec, precision=precision,
                         parallel=parallel or ParallelConfig()).prediction

    def _run(self, prof, spec, precision, parallel) -> Outcome:
        from ..costmodel import step_time

        try:
            return Outcome(step_time(prof, spec, precision, parallel, fabric=self.fabric,
                                     node_size=self.node_size))
        except AIAdvisorError as exc:  # e.g. fp8 on a T4: explained, never raised
            return Outcome(None, str(exc))


_TABLE_FIELDS = ("step_time_s", "throughput", "low_s", "high_s", "bound", "confidence",
                 "compute_s", "memory_s", "communication_s", "overhead_s", "mfu", "host_s")


def _vector_table(step_prof, specs, precisions, parallel, fabric, node_size) -> list[dict]:
    """Rows of one vectorised prediction, one per supported spec x precision."""
    from ..costmodel import predict_table

    table = predict_table(step_prof, specs=specs, precisions=precisions,
                          num_devices=parallel.num_devices, parallel=parallel, fabric=fabric,
                          node_size=node_size)
    return table.to_dict(orient="records")


#: Relative width below which a ratio's quantile-by-quantile bounds are not an interval (see
#: :func:`speedup`): under 1 % they print as "1.03x-1.03x" and say nothing.
MIN_INTERVAL_WIDTH = 0.01


@dataclass(frozen=True)
class Speedup:
    point: float
    low: float | None
    """None when the cost model cannot separate the two predictions (see :func:`speedup`)."""
    high: float | None


def speedup(base: Prediction, new: Prediction) -> Speedup:
    """Time per sample of ``base`` over ``new``, with an interval where the cost model gives one.

    Per sample, so plans with different global batches compare fairly.

    The interval: each prediction's P10-P90 band comes from the cost model's learned efficiency
    quantiles, and two predictions on one device draw on the same efficiency tables, so their
    errors move together (if the device runs one step slower than predicted, it runs the other
    slower too). Treating the two bands as independent (best ``base`` over worst ``new``)
    would claim an uncertainty that mostly cancels; the bounds are taken quantile by quantile
    instead (P10 over P10, P90 over P90, widened to contain the point). They separate when the
    two steps differ in what the cost model is unsure about: another precision (its own
    peak, engine and spread), bigger or smaller ops (another point of the efficiency curve),
    a fixed cost such as an input copy that is a larger share of a faster step.

    When a what-if changes neither (the same ops minus some launches, the same mix at a
    larger batch), the band is a common factor that cancels in the ratio and the quantile
    bounds land within :data:`MIN_INTERVAL_WIDTH` of each other: the cost model cannot
    separate the two predictions, so no interval is given (``low`` and ``high`` are None;
    renderings then show the point alone). The gain's real uncertainty there lies in the
    tactic's own modelling (what fuses, what a graph replay saves), which the cost model does
    not quantify; a measurement (``%advise --verify``) settles it.
    """
    def per_sample(pred: Prediction, seconds: float) -> float:
        samples = pred.throughput * pred.step_time_s
        return seconds / samples

    point = per_sample(base, base.step_time_s) / per_sample(new, new.step_time_s)
    if not (new.low_s > 0 and new.high_s > 0 and base.low_s > 0 and base.high_s > 0):
        return Speedup(point=point, low=None, high=None)
    ratios = [point, per_sample(base, base.low_s) / per_sample(new, new.low_s),
              per_sample(base, base.high_s) / per_sample(new, new.high_s)]
    low, high = min(ratios), max(ratios)
    if high - low < MIN_INTERVAL_WIDTH * point:
        return Speedup(point=point, low=None, high=None)
    return Speedup(point=point, low=low, high=high)


def throughput_gain(base: Prediction, new: Prediction) -> Speedup:
    """Samples per second of ``new`` over ``base`` (e.g. for a larger batch): the same as
    :func:`speedup`, which compares time per sample."""
    return speedup(base, new)
