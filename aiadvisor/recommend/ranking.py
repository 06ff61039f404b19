"""Rank the whole hardware catalog for one profile: speed, fit, cost and energy.

For each device: the precision it runs (the pinned one or the nearest it supports; when none is
pinned, its best full-rate precision for the mode, see :func:`.precision.best_precision`), the
fewest devices on which a plan without offload fits, a plan on that many devices (the fastest-
looking of a short list whose memory fits), the cost model's step time and throughput, the cost
per million samples from the cost of a device-hour (the rental price, or the purchase
amortised by a :class:`~aiadvisor.hardware.pricing.PriceRule`; ``price_basis`` says which, with
the price's source and date), an upper bound of the energy per sample from the TDP, and whether
the device is on the Pareto front of throughput vs cost over every priced row.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..costmodel.api import unpriced_reason
from ..errors import AIAdvisorError
from ..hardware.pricing import PriceRule
from ..schema import HardwareSpec, ModelProfile, ParallelConfig
from ..units import fmt_bytes
from .memory import DEVICES_PER_NODE, PartsSource, device_memory, usable_bytes
from .parallel import MAX_DEVICES
from .precision import BEST_ORDER, best_precision, fallback_precision
from .predictor import Predictor

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ["hardware", "vendor", "kind", "segment", "precision", "num_devices", "devices_needed",
           "fits", "plan", "memory_per_device_bytes", "step_time_s", "step_time_low_s",
           "step_time_high_s", "throughput", "usd_per_hour", "price_basis",
           "cost_per_million_samples_usd", "energy_per_sample_j_upper_bound", "pareto",
           "confidence", "host_bound", "notes"]


def _candidates(prof: ModelProfile, num_devices: int) -> list[ParallelConfig]:
    """Plans in the order they usually rank by speed: replicate, shard the optimizer/gradients,
    shard everything, add checkpointing, add tensor parallel within a node, shrink the
    micro-batch to one sample (accumulation)."""
    n = num_devices
    train = prof.mode == "train"
    ckpt = "full" if train and prof.num_blocks else "none"
    stage = 3 if n > 1 and train else 0
    out = [ParallelConfig(dp_degree=n)]
    if n > 1 and train:
        out += [ParallelConfig(dp_degree=n, zero_stage=2),
                ParallelConfig(dp_degree=n, zero_stage=3)]
    if ckpt != "none":
        out.append(ParallelConfig(dp_degree=n, zero_stage=stage, checkpointing=ckpt))
    tp = min(DEVICES_PER_NODE, n)
    tp_config = None
    if tp > 1 and n % tp == 0 and prof.num_blocks:
        dp = n // tp
        tp_config = ParallelConfig(dp_degree=dp, tp_degree=tp,
                                   zero_stage=3 if dp > 1 and train else 0, checkpointing=ckpt)
        out.append(tp_config)
    if train and prof.batch_size > 1:
        out.append(ParallelConfig(dp_degree=n, zero_stage=stage, checkpointing=ckpt,
                                  grad_accum_steps=prof.batch_size))
    if train and tp_config is not None:
        out.append(dataclasses.replace(tp_config, grad_accum_steps=tp * prof.batch_size))
    return out


class _Memory:
    """Per-device bytes of a plan, memoised: they depend on the profile, the precision and the
    plan, never on the device, so the whole catalog shares them."""

    def __init__(self, prof: ModelProfile, parts_for: PartsSource) -> None:
        self.prof = prof
        self.parts_for = parts_for
        self._totals: dict[tuple[str, ParallelConfig], float] = {}
        self._lists: dict[tuple[str, int], list[tuple[ParallelConfig, float]]] = {}
        self._others: dict[bool, _Memory] = {}

    def total(self, precision: str, config: ParallelConfig) -> float:
        key = (precision, config)
        if key not in self._totals:
            self._totals[key] = device_memory(self.prof, config, precision=precision,
                                              parts=self.parts_for(precision)).total_bytes
        return self._totals[key]

    def _options(self, precision: str, num_devices: int) -> list[tuple[ParallelConfig, float]]:
        """The candidate plans on ``num_devices`` with their memory, in preference order."""
        key = (precision, num_devices)
        if key not in self._lists:
            self._lists[key] = [(c, self.total(precision, c))
                                for c in _candidates(self.prof, num_devices)]
        return self._lists[key]

    def first_fitting(self, spec: HardwareSpec, precision: str, num_devices: int):
        source = self.parts_for.for_spec(spec)
        if source is not self.parts_for:  # the device keeps other activations (fused SDPA)
            other = self._others.setdefault(source.fused_attention, _Memory(self.prof, source))
            return other.first_fitting(spec, precision, num_devices)
        for config, mem in self._options(precision, num_devices):
            if spec.memory_bytes is None or mem <= usable_bytes(spec.memory_bytes):
                return config, mem
        return None, None

    def devices_needed(self, spec: HardwareSpec, precision: str) -> int | None:
        n = 1
        while n <= MAX_DEVICES:
            if self.first_fitting(spec, precision, n)[0] is not None:
                return n
            n *= 2
        return None


@dataclass
class _Choice:
    """What one device would run: precision, device count and plan (memory only)."""

    spec: HardwareSpec
    row: dict[str, Any]
    precision: str | None = None
    used: int = 1
    config: ParallelConfig | None = None
    notes: list[str] = field(default_factory=list)


def rank_hardware(prof: ModelProfile, *, specs: list[HardwareSpec], precision: str | None,
                  num_devices: int, predictor: Predictor,
                  parts_for: PartsSource | None = None,
                  price: PriceRule | None = None) -> pd.DataFrame:
    """Rank ``specs`` for ``prof`` (see the module docstring).

    Parameters
    ----------
    prof : ModelProfile
        The batch each device contributes to a step.
    specs : list of HardwareSpec
        The catalog (``aiadvisor.hardware.all_specs()``).
    precision : str or None
        The pinned precision; devices without it use their nearest supported one. None ranks
        each device at its best full-rate precision for ``prof.mode`` (bf16, else fp16, else
        tf32, else fp32): what a user would run there.
    num_devices : int
        Devices per option the user is considering; more are used where the model needs them.
    predictor : Predictor
        Cached cost-model calls.
    parts_for : PartsSource, optional
        Activation parts per precision (computed when not given).
    price : PriceRule, optional
        Rent or own, and the amortisation of purchase prices (None: the defaults, renting).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COLUMNS`, fastest first among devices that can run it;
        ``usd_per_hour`` is the cost of one device-hour under ``price`` and ``price_basis``
        the price it came from (source and date); ``attrs["precision_note"]`` is one sentence
        saying which precision each row uses and ``attrs["price_note"]`` the price rule.
    """
    import pandas as pd

    price = price or PriceRule()
    memory = _Memory(prof, parts_for or PartsSource(prof))
    choices = [_choose(prof, spec, precision, num_devices, memory, price) for spec in specs]
    _prefill(prof, choices, predictor)
    rows = [_predicted(prof, choice, predictor) for choice in choices]
    df = pd.DataFrame.from_records(rows, columns=COLUMNS)
    df["pareto"] = pareto_front(df, cost="cost_per_million_samples_usd", speed="throughput")
    # Fastest first; devices that tie (a step every one of them waits on the host for) go
    # cheapest first. Throughputs equal to 9 significant digits tie: the same host-bound step
    # summed in another order differs in its last bit.
    speed = df["throughput"].map(lambda v: float(f"{v:.9g}"), na_action="ignore")
    df = df.assign(_o=-speed.fillna(-math.inf),
                   _c=df["cost_per_million_samples_usd"].fillna(math.inf))
    df = df.sort_values(["_o", "_c"], kind="stable").drop(columns=["_o", "_c"])
    df = df.reset_index(drop=True)
    df.attrs["precision_note"] = precision_note(precision, mode=prof.mode)
    df.attrs["host_note"] = host_note(df)
    unpriced = int(df["usd_per_hour"].isna().sum())
    df.attrs["price_note"] = price.describe() + (
        f" {unpriced} device(s) have no price in the catalog: no cost and no place on the "
        "Pareto front." if unpriced else "")
    return df


def host_note(frame: pd.DataFrame) -> str:
    """A sentence when the host bounds the step on most of the ranked devices ("" otherwise):
    their times are then Python's (eager PyTorch issuing each kernel), not the hardware's.

    >>> import pandas as pd
    >>> frame = pd.DataFrame({"host_bound": [True, True, False], "throughput": [1.0] * 3})
    >>> host_note(frame)[:41]
    'On 2 of the 3 devices ranked, eager PyTor'
    """
    bound = frame["host_bound"].fillna(False).astype(bool) & frame["throughput"].notna()
    ranked = int(frame["throughput"].notna().sum())
    if not ranked or bound.sum() < max(2, ranked / 2):
        return ""
    return (f"On {int(bound.sum())} of the {ranked} devices ranked, eager PyTorch's host time "
            "(Python issuing each kernel, estimated) bounds this step, not the hardware: they "
            "tie, cheapest first. CUDA graphs or torch.compile (see the plan) or a larger batch "
            "let the devices' own speed show.")


def precision_note(precision: str | None, *, mode: str, current: str | None = None) -> str:
    """The sentence a rendering shows above the ranking: which precision each device runs.

    ``precision`` is the pinned one (None: each device's best); ``current`` the precision of
    the report's own prediction, named when it differs from the ranking's.

    >>> precision_note(None, mode="train")[:60]
    'Each device is ranked at its best full-rate precision for tr'
    """
    if precision is None:
        work = "training" if mode == "train" else "inference"
        order = ", else ".join(BEST_ORDER)
        headline = f", while the prediction above stays in {current}" if current else ""
        return (f"Each device is ranked at its best full-rate precision for {work} ({order}), "
                f"as you would run it there{headline}; pin a precision (precision=..., "
                "--precision) to rank every device at it.")
    return (f"Each device is ranked at {precision}, as pinned (a device without it runs the "
            "nearest precision it supports; its notes say so).")


def _prefill(prof: ModelProfile, choices: list[_Choice], predictor: Predictor) -> None:
    """One vectorised cost-model call per (plan, precision) group: most of the catalog shares
    a handful of plans and precisions (a call per group predicts no device x precision pair
    that no row needs)."""
    groups: dict[tuple[ParallelConfig, str], list[_Choice]] = {}
    for c in choices:
        if c.config is not None:
            groups.setdefault((c.config, c.precision), []).append(c)
    for (config, precision), group in groups.items():
        try:
            step = predictor.step_profile(prof, config)
        except AIAdvisorError:  # no scaling fit: each row says why it has no prediction
            continue
        predictor.prefill(step, [c.spec for c in group], [precision], config.num_devices,
                          parallel=config)


def _choose(prof, spec, requested, num_devices, memory, price: PriceRule) -> _Choice:
    nan = float("nan")
    quote = price.quote(spec)
    row: dict[str, Any] = {c: nan for c in COLUMNS}
    row.update(hardware=spec.name, vendor=spec.vendor, kind=spec.kind,
               segment=spec.segment or "", precision="",
               num_devices=num_devices, devices_needed=nan, fits=None, plan="",
               usd_per_hour=quote.usd_per_hour if quote is not None else nan,
               price_basis=quote.text if quote is not None else "no price in the catalog",
               pareto=False, confidence="", notes="")
    choice = _Choice(spec=spec, row=row)
    unpriced = unpriced_reason(spec, prof.mode)
    if unpriced is not None:
        choice.notes.append(f"{unpriced}: not priced")
        return choice
    if requested is None:
        precision = best_precision(spec, mode=prof.mode)
        if precision is None:
            choice.notes.append(f"no published {'/'.join(BEST_ORDER)} throughput for this "
                                "device")
            return choice
    else:
        precision = fallback_precision(spec, requested, mode=prof.mode)
        if precision is None:
            choice.notes.append(f"no published {requested} (or wider) throughput for this "
                                "device")
            return choice
        if precision != requested:
            choice.notes.append(f"{requested} not supported: runs {precision}")
    row["precision"] = choice.precision = precision
    needed = memory.devices_needed(spec, precision)
    if spec.memory_bytes is None:
        choice.notes.append("memory size not in the catalog: fit unknown")
    elif needed is None:
        choice.notes.append(f"does not fit on up to {MAX_DEVICES} devices")
        return choice
    row["devices_needed"] = needed if spec.memory_bytes is not None else nan
    choice.used = max(num_devices, needed or 1)
    config, mem = memory.first_fitting(spec, precision, choice.used)
    if config is None:  # cannot happen once `needed` fits, kept for safety
        return choice
    choice.config = config
    row.update(num_devices=choice.used, plan=config.label, memory_per_device_bytes=mem)
    if spec.memory_bytes is not None:
        row["fits"] = bool(needed is not None and needed <= num_devices)
    if choice.used > num_devices:
        choice.notes.append(f"needs {choice.used} devices ({fmt_bytes(mem)} each with "
                            f"{config.label})")
    return choice


def _predicted(prof, choice: _Choice, predictor: Predictor) -> dict[str, Any]:
    row, spec, used = choice.row, choice.spec, choice.used
    if choice.config is None:
        row["notes"] = "; ".join(choice.notes)
        return row
    outcome = predictor.plan(prof, spec, precision=choice.precision, parallel=choice.config)
    pred = outcome.prediction
    if pred is None:
        row["notes"] = "; ".join([*choice.notes, outcome.reason])
        return row
    row.update(step_time_s=pred.step_time_s, step_time_low_s=pred.low_s,
               step_time_high_s=pred.high_s, throughput=pred.throughput,
               confidence=pred.confidence, host_bound=bool(pred.host_bound))
    hourly = row["usd_per_hour"]
    if not math.isnan(hourly) and pred.throughput > 0:
        row["cost_per_million_samples_usd"] = hourly * used / 3600 / pred.throughput * 1e6
    if spec.tdp_w is not None and pred.throughput > 0:
        # Upper bound: every device drawing its full TDP for the whole step.
        row["energy_per_sample_j_upper_bound"] = spec.tdp_w * used / pred.throughput
    row["notes"] = "; ".join(choice.notes)
    return row


def pareto_front(frame: pd.DataFrame, *, cost: str, speed: str) -> pd.Series:
    """True for rows no other row beats: none is at most as costly and at least as fast with one
    of the two strictly better. Rows missing either value are never on the front.

    The one implementation: :func:`rank_hardware` fills its ``pareto`` column with it and
    :func:`aiadvisor.viz.plans.pareto_chart` draws that column.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"c": [1.0, 2.0, 3.0, 2.0], "s": [1.0, 3.0, 2.0, 3.0]})
    >>> pareto_front(df, cost="c", speed="s").tolist()
    [True, True, False, True]
    """
    import numpy as np
    import pandas as pd

    c = frame[cost].to_numpy(dtype=float)
    s = frame[speed].to_numpy(dtype=float)
    valid = ~(np.isnan(c) | np.isnan(s))
    cv, sv = c[valid], s[valid]
    # dominated[i]: some valid j is no dearer, no slower and strictly better in one of the two
    no_worse = (cv[None, :] <= cv[:, None]) & (sv[None, :] >= sv[:, None])
    strictly = (cv[None, :] < cv[:, None]) | (sv[None, :] > sv[:, None])
    on_front = np.zeros(len(frame), dtype=bool)
    on_front[valid] = ~(no_worse & strictly).any(axis=1)
    return pd.Series(on_front, index=frame.index)
