"""``aa.plan_parallel``: every way to spread a step over N devices, ranked, with memory per device.

Plans: data parallel (DDP), ZeRO-1/2/3 (FSDP) with and without CPU offload, tensor parallel
(within a node of 8), pipeline parallel, their combinations, full and selective activation
checkpointing and gradient accumulation. Memory comes from :mod:`.memory` (ZeRO and activation
arithmetic on the profile), step time from :func:`aiadvisor.costmodel.predict` with the plan's
:class:`~aiadvisor.schema.ParallelConfig`.

The profile's batch is what each device contributes to a step ("1 x 2048 per device"), so every
plan on N devices trains on the same N x batch samples per optimizer step: a replica of
``tp x pp`` devices runs ``tp x pp x batch`` samples, a pipeline splits them into up to ``4 x pp``
micro-batches, gradient accumulation into ``k`` forward passes
(:func:`~aiadvisor.recommend.predictor.layout`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..costmodel.attention import runs_cuda_kernels
from ..errors import InvalidArgumentError, check_choice
from ..schema import HardwareSpec, ModelProfile, ParallelConfig
from ..units import PRECISIONS, fmt_bytes
from .memory import (
    DEVICES_PER_NODE,
    HEADROOM_FRACTION,
    ActivationParts,
    DeviceMemory,
    activation_parts,
    device_memory,
    optimizer_step_bytes,
    state_bytes_per_param,
    usable_bytes,
)
from .predictor import Predictor, global_batch, layout

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "PlanRow", "enumerate_plans", "min_devices_to_fit", "plan_parallel"]

#: Pipeline micro-batches per step per stage (Megatron practice: m >= 4 pp keeps the 1F1B
#: bubble (pp - 1) / (m + pp - 1) under 20 %).
MICROBATCHES_PER_STAGE = 4
MAX_DEVICES = 1 << 16

COLUMNS = [
    "strategy", "dp", "tp", "pp", "zero_stage", "offload", "checkpointing", "grad_accum_steps",
    "num_microbatches", "virtual_stages", "micro_batch_size", "global_batch_size",
    "weights_bytes", "grads_bytes",
    "optimizer_bytes", "activations_bytes", "buffers_bytes", "memory_per_device_bytes",
    "device_memory_bytes", "usable_memory_bytes", "fits", "cpu_memory_per_node_bytes",
    "step_time_s", "step_time_low_s", "step_time_high_s", "throughput", "communication_s",
    "bound", "notes", "ep",
]


@dataclass(frozen=True)
class PlanRow:
    config: ParallelConfig
    memory: DeviceMemory
    micro_batch: int
    fits: bool


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _model_splits(prof: ModelProfile, num_devices: int) -> list[tuple[int, int]]:
    """(tp, pp) pairs: tp a power-of-two divisor within a node, pp at most the block count.

    Pipelines follow Megatron-LM's order of parallelisms (Narayanan et al. 2021, sec. 3.3):
    tensor parallel fills a node first, pipeline stages span nodes, so a pipeline plan uses
    the largest tp that fits in a node and leaves whole stages.
    """
    pairs = []
    for tp in _divisors(num_devices):
        if tp > DEVICES_PER_NODE or (tp > 1 and not prof.num_blocks) or tp & (tp - 1):
            continue
        for pp in _divisors(num_devices // tp):
            if pp > 1 and (not prof.num_blocks or pp > prof.num_blocks):
                continue
            if pp > 1 and tp != _node_tp(num_devices // pp):
                continue
            pairs.append((tp, pp))
    return pairs


def _node_tp(devices_per_stage_group: int) -> int:
    """The largest power of two up to the node size that divides the devices left per stage."""
    tp = 1
    while tp * 2 <= DEVICES_PER_NODE and devices_per_stage_group % (tp * 2) == 0:
        tp *= 2
    return tp


def pipeline_microbatches(pp: int, replica_batch: int) -> int:
    """Micro-batches per pipeline step: the largest divisor of the replica's batch up to
    ``4 x pp`` (fewer micro-batches than stages leave stages idle: bubble (pp-1)/(m+pp-1))."""
    if pp == 1:
        return 1
    return max(d for d in _divisors(replica_batch) if d <= MICROBATCHES_PER_STAGE * pp)


def _interleave(prof: ModelProfile, pp: int, num_microbatches: int, virtual_stages: int) -> int:
    """``virtual_stages`` where Megatron-LM's interleaved schedule can run it: the blocks
    split into ``pp * v`` equal chunks and the micro-batches a multiple of ``pp``; else 1."""
    if pp == 1 or virtual_stages == 1 or num_microbatches % pp:
        return 1
    return virtual_stages if prof.num_blocks % (pp * virtual_stages) == 0 else 1


#: The plans' tensor parallel is what their code runs (aiadvisor.codegen's tensor-parallel
#: snippet: column- and row-wise linear layers, no Megatron sequence parallelism), so norms and
#: residual adds stay whole on every tensor-parallel rank.
SEQUENCE_PARALLEL = False


def _base_configs(prof: ModelProfile, num_devices: int, virtual_stages: int = 1
                  ) -> list[ParallelConfig]:
    configs = []
    for tp, pp in _model_splits(prof, num_devices):
        dp = num_devices // (tp * pp)
        stages = (0, 1, 2, 3) if dp > 1 and prof.mode == "train" else (0,)
        if pp > 1:
            # Pipelines pair with a sharded optimizer only (Megatron-LM's distributed optimizer;
            # DeepSpeed does not run ZeRO-2/3 under pipeline parallelism).
            stages = tuple(s for s in stages if s <= 1)
        m = pipeline_microbatches(pp, tp * pp * prof.batch_size)
        v = _interleave(prof, pp, m, virtual_stages)
        for stage in stages:
            configs.append(ParallelConfig(dp_degree=dp, tp_degree=tp, pp_degree=pp,
                                          zero_stage=stage, num_microbatches=m,
                                          virtual_stages=v, sequence_parallel=SEQUENCE_PARALLEL))
    return configs


def _accum_options(config: ParallelConfig, per_device_batch: int) -> list[int]:
    """Gradient-accumulation factors that split a replica's micro-batch evenly: 2, 4, 8, ..."""
    micro = layout(config, per_device_batch).micro_batch
    out, k = [], 2
    while k <= micro:
        if micro % k == 0:
            out.append(k)
        k *= 2
    return out


def _variants(base: ParallelConfig, prof: ModelProfile, parts: ActivationParts
              ) -> list[ParallelConfig]:
    """Cheaper-in-memory versions of ``base``, cheapest in time first: selective then full
    checkpointing, then smaller micro-batches (accumulation), then CPU offload."""
    if prof.mode != "train":
        return []
    ckpts = []
    if prof.num_blocks:
        if parts.block_quadratic_bytes > 0:
            ckpts.append("selective")
        ckpts.append("full")
    out = [_replace(base, checkpointing=c) for c in ckpts]
    for k in _accum_options(base, prof.batch_size):
        out += [_replace(base, grad_accum_steps=k, checkpointing=c) for c in ["none", *ckpts]]
    single = base.num_devices == 1
    if base.zero_stage >= 2 or single:
        # ZeRO-Offload (stage 2) / FSDP CPU offload (stage 3; on one device it holds everything)
        off = _replace(base, zero_stage=3 if single else base.zero_stage, offload=True)
        out += [off] + [_replace(off, checkpointing=c) for c in ckpts]
        for k in _accum_options(off, prof.batch_size):
            out += [_replace(off, grad_accum_steps=k, checkpointing=c) for c in ckpts]
    return out


def _replace(config: ParallelConfig, **changes: Any) -> ParallelConfig:
    from dataclasses import replace

    return replace(config, **changes)


def _evaluate(prof, config, *, precision, parts, capacity_bytes) -> PlanRow:
    micro = layout(config, prof.batch_size).micro_batch
    mem = device_memory(prof, config, precision=precision, parts=parts, micro_batch=micro)
    return PlanRow(config=config, memory=mem, micro_batch=micro,
                   fits=mem.total_bytes <= usable_bytes(capacity_bytes))


#: Tensor and pipeline parallel are left out when plain data parallel fits using less than this
#: fraction of the usable memory: they only add communication to a model that small.
ROOMY_FRACTION = 0.5


def _roomy(prof, num_devices, *, precision, parts, capacity_bytes) -> bool:
    ddp = _evaluate(prof, ParallelConfig(dp_degree=num_devices), precision=precision,
                    parts=parts, capacity_bytes=capacity_bytes)
    return ddp.memory.total_bytes <= ROOMY_FRACTION * usable_bytes(capacity_bytes)


def enumerate_plans(prof: ModelProfile, *, num_devices: int, precision: str,
                    capacity_bytes: float, parts: ActivationParts | None = None,
                    virtual_stages: int = 1) -> list[PlanRow]:
    """Every base plan (fits or not) plus, for each base that does not fit, the first variant
    that does (checkpointing, accumulation, then offload); memory only, no timing. Tensor and
    pipeline parallel plans are skipped when plain data parallel fits with room to spare
    (:data:`ROOMY_FRACTION`)."""
    parts = parts or activation_parts(prof, precision=precision)
    roomy = _roomy(prof, num_devices, precision=precision, parts=parts,
                   capacity_bytes=capacity_bytes)
    rows = []
    for base in _base_configs(prof, num_devices, virtual_stages):
        if roomy and (base.tp_degree > 1 or base.pp_degree > 1):
            continue
        row = _evaluate(prof, base, precision=precision, parts=parts,
                        capacity_bytes=capacity_bytes)
        rows.append(row)
        if row.fits:
            continue
        for variant in _variants(base, prof, parts):
            alt = _evaluate(prof, variant, precision=precision, parts=parts,
                            capacity_bytes=capacity_bytes)
            if alt.fits:
                rows.append(alt)
                break
    return rows


def _leanest_configs(prof: ModelProfile, num_devices: int) -> list[ParallelConfig]:
    """The few plans with the least memory per device on ``num_devices`` (no offload): ZeRO-3
    over the data-parallel group, tensor parallel 1 or the node size, full checkpointing,
    micro-batch 1. Memory falls monotonically with these degrees, so they bound the rest."""
    train = prof.mode == "train"
    ckpt = "full" if train and prof.num_blocks else "none"
    out = []
    for tp in sorted({1, min(DEVICES_PER_NODE, num_devices)}):
        if num_devices % tp or (tp > 1 and not prof.num_blocks):
            continue
        dp = num_devices // tp
        stage = 3 if dp > 1 and train else 0
        accum = tp * prof.batch_size if train else 1  # a replica's samples, one at a time
        out.append(ParallelConfig(dp_degree=dp, tp_degree=tp, zero_stage=stage,
                                  checkpointing=ckpt, grad_accum_steps=accum,
                                  sequence_parallel=SEQUENCE_PARALLEL))
    return out


def min_devices_to_fit(prof: ModelProfile, *, precision: str, capacity_bytes: float,
                       start: int = 1, parts: ActivationParts | None = None
                       ) -> tuple[int, ParallelConfig] | None:
    """The fewest devices (a power of two times ``start``) on which some plan without offload
    fits, with that plan; None when even ``MAX_DEVICES`` devices are not enough."""
    parts = parts or activation_parts(prof, precision=precision)
    n = max(1, start)
    while n <= MAX_DEVICES:
        for config in _leanest_configs(prof, n):
            row = _evaluate(prof, config, precision=precision, parts=parts,
                            capacity_bytes=capacity_bytes)
            if row.fits:
                return n, config
        n *= 2
    return None


def _predict(prof: ModelProfile, spec: HardwareSpec, precision: str, row: PlanRow,
             predictor: Predictor):
    # The replica runs the profile's batch (in accumulation steps of row.micro_batch).
    return predictor.plan(prof, spec, precision=precision, parallel=row.config)


def _row_notes(row: PlanRow, prof: ModelProfile, spec: HardwareSpec) -> list[str]:
    notes = []
    c = row.config
    if spec.memory_bytes is None:
        notes.append("device memory is not in the catalog: assumed to fit")
    elif not row.fits:
        notes.append(f"needs {fmt_bytes(row.memory.total_bytes)} per device, "
                     f"{fmt_bytes(usable_bytes(spec.memory_bytes or 0))} usable")
    step = optimizer_step_bytes(prof, c)
    m = row.memory
    if step > 0 and m.other_bytes == step - m.activations_bytes - m.gathered_bytes:
        notes.append(f"peaks in the optimizer step: {prof.optimizer}'s foreach update (PyTorch's "
                     f"CUDA default) holds a {fmt_bytes(step)} list per device; fused=True "
                     "holds none")
    if c.offload:
        per_node = row.memory.cpu_bytes * min(c.num_devices, DEVICES_PER_NODE)
        notes.append(f"host memory per node: {fmt_bytes(per_node)} for offloaded states")
    if c.tp_degree > 1:
        notes.append("tensor parallel with sequence parallelism (activations / tp)"
                     if c.sequence_parallel else
                     "tensor parallel as its code runs it, without sequence parallelism: norms, "
                     "dropout and residual activations stay whole on every rank")
    if c.pp_degree > 1:
        notes.append(f"pipeline: {c.num_microbatches} micro-batches of {row.micro_batch} per "
                     "replica" + (f", interleaved: {c.virtual_stages} virtual stages per device"
                                  if c.virtual_stages > 1 else ""))
    return notes


def _to_row(row: PlanRow, prof: ModelProfile, spec: HardwareSpec, outcome) -> dict[str, Any]:
    c, m = row.config, row.memory
    nan = float("nan")
    notes = _row_notes(row, prof, spec)
    pred = outcome.prediction if outcome is not None else None
    if pred is not None:
        # The network is the same for every plan: said once in the table's notes.
        notes += [n for n in pred.notes if n != pred.network]
    elif outcome is not None and outcome.reason:
        notes.append(outcome.reason)
    return {
        "strategy": c.label, "dp": c.dp_degree, "tp": c.tp_degree, "pp": c.pp_degree,
        "zero_stage": c.zero_stage, "offload": c.offload, "checkpointing": c.checkpointing,
        "grad_accum_steps": c.grad_accum_steps, "num_microbatches": c.num_microbatches,
        "virtual_stages": c.virtual_stages,
        "micro_batch_size": row.micro_batch,
        "global_batch_size": global_batch(c, prof.batch_size),
        "weights_bytes": int(m.weights_bytes), "grads_bytes": int(m.grads_bytes),
        "optimizer_bytes": int(m.optimizer_bytes), "activations_bytes": int(m.activations_bytes),
        "buffers_bytes": int(m.gathered_bytes + m.other_bytes),
        "memory_per_device_bytes": int(m.total_bytes),
        "device_memory_bytes": spec.memory_bytes if spec.memory_bytes is not None else nan,
        "usable_memory_bytes": (int(usable_bytes(spec.memory_bytes))
                                if spec.memory_bytes is not None else nan),
        "fits": bool(row.fits),
        "cpu_memory_per_node_bytes": int(m.cpu_bytes * min(c.num_devices, DEVICES_PER_NODE)),
        "step_time_s": pred.step_time_s if pred else nan,
        "step_time_low_s": pred.low_s if pred else nan,
        "step_time_high_s": pred.high_s if pred else nan,
        "throughput": pred.throughput if pred else nan,
        "communication_s": pred.communication_s if pred else nan,
        "bound": pred.bound if pred else "",
        "notes": "; ".join(notes),
    }


def _check(prof: ModelProfile, num_devices: Any, precision: Any) -> None:
    if not isinstance(prof, ModelProfile):
        raise InvalidArgumentError(
            f"prof of type {type(prof).__name__} is not valid: expected a ModelProfile from "
            "aiadvisor.profile(model, inputs)."
        )
    if isinstance(num_devices, bool) or not isinstance(num_devices, int) or not (
            1 <= num_devices <= MAX_DEVICES):
        raise InvalidArgumentError(
            f"num_devices={num_devices!r} is not valid: expected an integer from 1 to "
            f"{MAX_DEVICES}."
        )
    check_choice("precision", precision, PRECISIONS)
    state_bytes_per_param(mode=prof.mode, precision=precision, optimizer=prof.optimizer)


def advice_when_nothing_fits(prof: ModelProfile, spec: HardwareSpec, *, num_devices: int,
                             precision: str, parts: ActivationParts,
                             rows: list[PlanRow]) -> str:
    """One sentence: how many devices (or which tactic) would make the step fit."""
    capacity = spec.memory_bytes or 0
    offload = [r for r in rows if r.fits and r.config.offload]
    found = min_devices_to_fit(prof, precision=precision, capacity_bytes=capacity,
                               start=2 * num_devices, parts=parts)
    parts_text = []
    if offload:
        parts_text.append(f"only with CPU offload ({offload[0].config.label})")
    if found is not None:
        n, config = found
        parts_text.append(f"without offload it needs {n} devices (e.g. {config.label})")
    else:
        parts_text.append(f"no plan on up to {MAX_DEVICES} devices fits without offload")
    if parts.cuda_target and optimizer_step_bytes(prof, ParallelConfig()) > 0:
        # torch.optim's foreach AdamW (its CUDA default) holds a 4-byte-per-parameter list in
        # step(); the fused implementation holds none.
        from .transforms import fused_optimizer

        fused = min_devices_to_fit(fused_optimizer(prof), precision=precision,
                                   capacity_bytes=capacity, start=num_devices,
                                   parts=parts)
        if fused is not None and (found is None or fused[0] < found[0]):
            where = ("fits on these devices" if fused[0] <= num_devices
                     else f"needs {fused[0]} devices")
            parts_text.append(f"with {prof.optimizer}(..., fused=True) (no parameter-sized "
                              f"list in step(), as the foreach default holds) it {where} "
                              f"(e.g. {fused[1].label})")
    if prof.batch_size > 1 and prof.mode == "train":
        parts_text.append("or a smaller batch per device")
    return (f"Nothing fits on {num_devices} x {spec.name} ({spec.memory_gb:g} GB) without "
            f"offload: " + "; ".join(parts_text) + ".")


def plan_parallel(prof: ModelProfile, *, hardware: str | HardwareSpec, num_devices: int,
                  precision: str = "bf16", fabric: Any = None,
                  node_size: int | None = None, ep_degrees: int | list[int] | None = None,
                  moe_imbalance: float | None = None,
                  nic_gbs_per_node: float | None = None,
                  virtual_stages: int = 1) -> pd.DataFrame:
    """Rank the ways to run one step of ``prof`` on ``num_devices`` devices.

    Parameters
    ----------
    prof : ModelProfile
        From :func:`aiadvisor.profile`; its batch is one data-parallel replica's (micro-)batch.
    hardware : str or HardwareSpec
        A catalog name, a spec, or ``"local"``.
    num_devices : int
        Devices in total; tensor parallel stays within nodes of 8.
    precision : str, default "bf16"
        ``bf16``/``fp16``/``fp8`` training is mixed precision: ZeRO plans (DeepSpeed) keep
        2 + 2 + 12 bytes per parameter with Adam; plans without ZeRO run ``torch.autocast``:
        4 + 4 + 8 plus 2 bytes of 16-bit weight copies (in ``buffers_bytes``).
        ``fp32``/``tf32`` keep 4 + 4 + 8.
    fabric : str or dict, optional
        The network between nodes (a name from ``data/fabrics.csv`` or ``{"gbps": NIC Gb/s
        per device, "latency_us": ...}``); default: the device's usual build.
    node_size : int, optional
        Devices per node; ``num_devices`` must then fill whole nodes.
    ep_degrees : int or list of int, optional
        Mixture-of-experts profiles only: expert-parallel degrees to try, each dividing the
        number of experts and ``num_devices`` (default: all of them). EP splits each MoE
        layer's experts over that many devices of the data-parallel group and adds the
        all-to-all dispatch/combine (:mod:`aiadvisor.recommend.expert_parallel`); the ``ep``
        column says which degree a row uses (1: none).
    moe_imbalance : float, optional
        The most loaded expert's tokens over the mean, in [1, number of experts] (default:
        the profile's own, 1.0 for balanced routing); the busiest EP rank's extra expert
        compute is added.
    nic_gbs_per_node : float, optional
        NIC bandwidth per node across nodes, GB/s per direction, for EP's all-to-all
        (default: the node's NICs at the fabric's efficiency, from ``fabric``/``node_size``).
    virtual_stages : int, default 1
        Interleaved pipeline schedule (Megatron-LM's virtual stages): pipeline plans whose
        blocks split into ``pp * virtual_stages`` equal chunks and whose micro-batch count is
        a multiple of ``pp`` run ``virtual_stages`` model chunks per device, with the bubble
        ``(pp - 1) / (v m + pp - 1)`` and ``v`` times the stage-to-stage sends; other pipeline
        plans stay plain 1F1B (the ``virtual_stages`` column says which).

    Returns
    -------
    pandas.DataFrame
        One row per plan, best first (plans that fit, by throughput; then the rest by memory).
        ``df.attrs`` holds ``hardware``, ``num_devices``, ``precision``, ``headroom_fraction``,
        ``advice`` (what would make it fit, when nothing does without offload) and
        ``network`` (the network assumed).

    Examples
    --------
    >>> import torch, aiadvisor as aa
    >>> prof = aa.profile(torch.nn.Linear(64, 64), torch.randn(8, 64))  # doctest: +SKIP
    >>> aa.plan_parallel(prof, hardware="H100 SXM",
    ...                  num_devices=8).iloc[0]["strategy"]  # doctest: +SKIP
    'ddp'
    """
    from ..hardware import resolve
    from ..hardware.fabrics import network_for
    from .expert_parallel import (
        check_ep_degrees,
        check_moe_imbalance,
        nic_bandwidth_per_device_gbs,
    )

    _check(prof, num_devices, precision)
    if isinstance(virtual_stages, bool) or not isinstance(virtual_stages, int) \
            or virtual_stages < 1:
        raise InvalidArgumentError(
            f"virtual_stages={virtual_stages!r} is not valid: expected an integer >= 1 "
            "(model chunks per pipeline device; 1 = plain 1F1B)."
        )
    ep = check_ep_degrees(prof, ep_degrees, num_devices=num_devices)
    imbalance = check_moe_imbalance(prof, moe_imbalance)
    spec = resolve(hardware)
    # Bad network input raises here, not as a reason on every row.
    network = network_for(spec, fabric=fabric, node_size=node_size, num_devices=num_devices)
    # EP's all-to-all crosses the same NICs: the node's line rate at the fabric's efficiency,
    # unless the user gives a figure.
    nic = (network.node_gbps / 8 * network.efficiency if nic_gbs_per_node is None
           else nic_gbs_per_node)
    nic_bandwidth_per_device_gbs(nic_gbs_per_node=nic)  # checks it
    return plan_parallel_table(prof, spec=spec, num_devices=num_devices, precision=precision,
                               parts=activation_parts(
                                   prof, precision=precision,
                                   fused_attention=runs_cuda_kernels(spec)),
                               predictor=Predictor(fabric=fabric, node_size=node_size),
                               ep_degrees=ep, moe_imbalance=imbalance, nic_gbs_per_node=nic,
                               virtual_stages=virtual_stages)


def plan_parallel_table(prof: ModelProfile, *, spec: HardwareSpec, num_devices: int,
                        precision: str, parts: ActivationParts,
                        predictor: Predictor, ep_degrees: list[int] | None = None,
                        moe_imbalance: float | None = None,
                        nic_gbs_per_node: float | None = None,
                        virtual_stages: int = 1) -> pd.DataFrame:
    """:func:`plan_parallel` with a resolved spec, precomputed activation parts and a shared
    prediction cache (what ``advise`` uses). ``ep_degrees=None`` tries every valid EP degree
    of a mixture-of-experts profile."""
    import pandas as pd

    from .expert_parallel import check_ep_degrees, check_moe_imbalance

    # Unknown memory (a CPU row of the catalog): assume it fits, and say so in the notes.
    capacity = spec.memory_bytes if spec.memory_bytes is not None else math.inf
    rows = enumerate_plans(prof, num_devices=num_devices, precision=precision,
                           capacity_bytes=capacity, parts=parts, virtual_stages=virtual_stages)
    records = []
    for row in rows:
        outcome = _predict(prof, spec, precision, row, predictor) if row.fits else None
        records.append({**_to_row(row, prof, spec, outcome), "ep": 1})
    if ep_degrees is None:
        ep_degrees = check_ep_degrees(prof, None, num_devices=num_devices)
    imbalance = check_moe_imbalance(prof, moe_imbalance) if prof.moe is not None else 1.0
    ep_rows = _expert_records(prof, spec, rows, ep_degrees, precision=precision, parts=parts,
                              capacity=capacity, predictor=predictor, imbalance=imbalance,
                              nic_gbs_per_node=nic_gbs_per_node)
    records += [r for r, _ in ep_rows]
    df = pd.DataFrame.from_records(records, columns=COLUMNS)
    df = _rank(df)
    advice = ""
    if not any(r.fits and not r.config.offload for r in rows) and not any(
            fits for _, fits in ep_rows):
        advice = advice_when_nothing_fits(prof, spec, num_devices=num_devices,
                                          precision=precision, parts=parts, rows=rows)
        # also in the table itself: DataFrame attrs do not survive every pandas operation
        df.loc[0, "notes"] = "; ".join(filter(None, [advice, df.loc[0, "notes"]]))
    notes = list(parts.notes)
    network = None
    if num_devices > 1:
        from ..hardware.fabrics import network_for

        network = network_for(spec, fabric=predictor.fabric, node_size=predictor.node_size,
                              num_devices=num_devices).describe(num_devices)
        notes.append(network)
    if num_devices > 1 and (df["tp"] == 1).all() and (df["pp"] == 1).all() and prof.num_blocks:
        notes.append("tensor and pipeline parallel not listed: plain data parallel fits in "
                     f"under {ROOMY_FRACTION:.0%} of the memory, and they would only add "
                     "communication")
    df.attrs.update({"hardware": spec.name, "num_devices": num_devices, "precision": precision,
                     "headroom_fraction": HEADROOM_FRACTION, "advice": advice,
                     "notes": notes, "network": network})
    return df


def _expert_records(prof, spec, rows, ep_degrees, *, precision, parts, capacity, predictor,
                    imbalance, nic_gbs_per_node) -> list[tuple[dict[str, Any], bool]]:
    """Table rows of the expert-parallel versions of ``rows``' plans, with whether each fits."""
    from .expert_parallel import (
        DEFAULT_NIC_GBS_PER_NODE,
        ep_label,
        expert_plans,
        predict_expert_plan,
    )
    from .predictor import Outcome

    if not ep_degrees or prof.moe is None:
        return []
    nic = DEFAULT_NIC_GBS_PER_NODE if nic_gbs_per_node is None else nic_gbs_per_node
    out = []
    for plan in expert_plans(prof, [r.config for r in rows], ep_degrees, precision=precision,
                             parts=parts, capacity_bytes=capacity):
        outcome = None
        if plan.fits:
            pred, reason = predict_expert_plan(prof, plan, spec, precision=precision,
                                               predictor=predictor, imbalance=imbalance,
                                               nic_gbs_per_node=nic)
            outcome = Outcome(pred, reason)
        record = _to_row(plan, prof, spec, outcome)
        record.update(strategy=ep_label(plan.config, plan.ep), ep=plan.ep)
        out.append((record, plan.fits))
    return out


def _rank(df: pd.DataFrame) -> pd.DataFrame:
    df = df.assign(_order=(~df["fits"]).astype(int),
                   _speed=-df["throughput"].fillna(-math.inf))
    df = df.sort_values(["_order", "_speed", "memory_per_device_bytes"], kind="stable")
    return df.drop(columns=["_order", "_speed"]).reset_index(drop=True)
