"""Expert parallelism (EP) for mixture-of-experts profiles in :func:`aa.plan_parallel`.

EP splits each MoE layer's routed experts over ``ep`` devices of the data-parallel group
(DeepSpeed-MoE, Megatron-LM's expert-model-parallel group): every device keeps ``E / ep``
experts and runs, for the tokens of all ``ep`` devices, the experts it holds. What changes from
the same plan without EP (its *base*):

* **Memory.** The routed experts' states on a device are divided by ``ep``; ZeRO shards them over
  the ``dp / ep`` devices that hold the same experts (the expert-data-parallel group) instead of
  ``dp``. With ZeRO-3 the two cancel for the sharded states (``ep x dp / ep = dp``): EP then
  saves only the gathered working copies of the experts. Activations are unchanged with
  balanced routing (as many tokens come in as go out).
* **All-to-all.** Each MoE layer sends every token's hidden vector to its ``top_k`` experts'
  devices and back (dispatch and combine): two all-to-alls of ``tokens x hidden x bytes x
  top_k`` per device in forward, two more in backward, two more when full checkpointing
  recomputes the forward; priced by
  :func:`~aiadvisor.estimate.collectives.all_to_all_time_s` over NVLink inside a node and the
  NICs across nodes (:func:`nic_bandwidth_per_device_gbs`). Not overlapped with compute
  (Megatron's default; DeepSeek's DualPipe overlaps it).
* **Gradient synchronisation.** Expert gradients are reduced over ``dp / ep`` devices with
  ``1 / ep`` of the bytes: the base's exposed data-parallel communication is scaled by the ratio
  of the two layouts' alpha-beta times (credited for plans with ``tp = pp = 1``, where the
  base's communication is all data-parallel).
* **Load imbalance.** With ``moe_imbalance`` > 1 the device holding the most loaded expert
  computes more than the mean (:func:`hot_device_load`); its extra expert compute is added.

These are estimates built on the base plan's cost-model prediction; the notes of each row say so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InvalidArgumentError
from ..estimate.collectives import all_to_all_time_s, collective_time_s
from ..schema import HardwareSpec, ModelProfile, MoERouting, ParallelConfig, Prediction
from .memory import (
    _MIXED,
    AUTOCAST_COPY_BYTES,
    DEVICES_PER_NODE,
    ActivationParts,
    DeviceMemory,
    activation_element_bytes,
    device_memory,
    state_bytes_per_param,
    usable_bytes,
)
from .predictor import Predictor, layout

__all__ = ["DEFAULT_NIC_GBS_PER_NODE", "ExpertPlan", "all_to_all_step_s", "check_ep_degrees",
           "check_moe_imbalance", "ep_label", "expert_parallel_memory", "expert_plans",
           "hot_device_load", "nic_bandwidth_per_device_gbs", "predict_expert_config",
           "predict_expert_plan"]

#: NIC bandwidth of one node, GB/s per direction: a DGX H100's compute fabric is eight
#: ConnectX-7 ports of 400 Gb/s InfiniBand NDR, one per GPU (NVIDIA DGX H100 User Guide, sec.
#: 1.2.3 "Network Modules"), 8 x 50 GB/s. A stand-in until the fabric table gives per-cluster
#: figures.
DEFAULT_NIC_GBS_PER_NODE = 400.0

#: Alpha-beta latency of the data-parallel collectives in the gradient-sync ratio, seconds.
_SYNC_ALPHA_S = 20e-6


def nic_bandwidth_per_device_gbs(*, nic_gbs_per_node: float = DEFAULT_NIC_GBS_PER_NODE,
                                 devices_per_node: int = DEVICES_PER_NODE) -> float:
    """Per-direction NIC bandwidth one device gets across nodes: the node's NICs shared by its
    devices (all of them talk at once in an all-to-all).

    >>> nic_bandwidth_per_device_gbs()   # 400 GB/s over 8 GPUs
    50.0
    """
    if not nic_gbs_per_node > 0 or devices_per_node < 1:
        raise InvalidArgumentError(
            f"nic_gbs_per_node={nic_gbs_per_node!r}, devices_per_node={devices_per_node!r} are "
            "not valid: expected a bandwidth > 0 GB/s and at least one device per node.")
    return nic_gbs_per_node / devices_per_node


def intra_bandwidth_gbs(spec: HardwareSpec) -> float:
    """Per-direction intra-node bandwidth of one device: half the catalog's bidirectional
    interconnect figure (NVLink 4: 900 GB/s -> 450); PCIe 4 x16 (32 GB/s) when unknown."""
    bw = spec.interconnect_bw_gbs
    return bw / 2 if bw else 32.0


@dataclass(frozen=True)
class ExpertPlan:
    """A base plan with its data-parallel group split into ``ep`` expert-parallel ranks."""

    config: ParallelConfig
    ep: int
    memory: DeviceMemory
    micro_batch: int
    fits: bool


def _positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value)


def check_moe_imbalance(prof: ModelProfile, moe_imbalance: Any) -> float:
    """The load imbalance to plan with: ``moe_imbalance`` if given (checked to lie in
    [1, number of experts]), else the profile's own (1.0: balanced routing)."""
    moe = prof.moe
    if moe_imbalance is None:
        return moe.imbalance if moe is not None else 1.0
    if moe is None:
        raise InvalidArgumentError(
            f"moe_imbalance={moe_imbalance!r} is not valid for this profile: the model has no "
            "mixture-of-experts layers. Expected moe_imbalance=None for a dense model.")
    if not _positive_number(moe_imbalance) or not 1.0 <= moe_imbalance <= moe.num_experts:
        raise InvalidArgumentError(
            f"moe_imbalance={moe_imbalance!r} is not valid: expected the most loaded expert's "
            f"tokens over the mean, a number in [1, {moe.num_experts}] (1: balanced; "
            f"{moe.num_experts}: every token on one expert, the number of experts).")
    return float(moe_imbalance)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def check_ep_degrees(prof: ModelProfile, ep_degrees: Any, *, num_devices: int) -> list[int]:
    """The EP degrees to try, each > 1, dividing the number of experts and ``num_devices``.

    Default (None): every such degree for a MoE profile, none for a dense one."""
    moe = prof.moe
    if ep_degrees is None:
        if moe is None:
            return []
        return [d for d in _divisors(moe.num_experts) if d > 1 and num_devices % d == 0]
    if moe is None:
        raise InvalidArgumentError(
            f"ep_degrees={ep_degrees!r} is not valid for this profile: the model has no "
            "mixture-of-experts layers, so there are no experts to split. Expected "
            "ep_degrees=None.")
    if isinstance(ep_degrees, int) and not isinstance(ep_degrees, bool):
        ep_degrees = [ep_degrees]
    valid = [d for d in _divisors(moe.num_experts) if num_devices % d == 0]
    out = []
    for ep in ep_degrees:
        if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1 or moe.num_experts % ep:
            raise InvalidArgumentError(
                f"ep={ep!r} is not valid: expert parallelism splits the {moe.num_experts} "
                f"experts of each layer evenly, so it must divide {moe.num_experts}. Valid "
                f"degrees on {num_devices} devices: {', '.join(map(str, valid))}.")
        if num_devices % ep:
            raise InvalidArgumentError(
                f"ep={ep!r} is not valid: it must divide num_devices={num_devices} (EP ranks "
                f"come from the data-parallel group). Valid degrees: "
                f"{', '.join(map(str, valid))}.")
        if ep > 1 and ep not in out:
            out.append(ep)
    return out


def ep_label(config: ParallelConfig, ep: int) -> str:
    """The base label with ``ep<N>`` after the data/tensor/pipeline parts: ``fsdp+ep8+ckpt``
    (:attr:`ParallelConfig.label` with ``ep_degree=ep``)."""
    return replace(config, ep_degree=ep).label


def _expert_states(prof: ModelProfile, config: ParallelConfig, *, precision: str,
                   ep: int) -> tuple[float, float, float, float]:
    """(weights, grads, optimizer, gathered) bytes of the routed experts on one device.

    The same per-parameter arithmetic as :func:`~aiadvisor.recommend.memory.model_state_memory`
    applied to the experts alone, split over ``tp x pp x ep`` and ZeRO-sharded over the
    expert-data-parallel group ``dp / ep``; ZeRO-3 gathers one MoE layer's experts (and
    prefetches the next) plus their gradients before the reduce-scatter."""
    moe = prof.moe
    tp, pp, dp, stage = config.tp_degree, config.pp_degree, config.dp_degree, config.zero_stage
    train = prof.mode == "train"
    x = moe.expert_params / (tp * pp * ep)
    edp = max(1, dp // ep)
    copy = 0.0
    if stage == 0 and precision in _MIXED and train:
        w, g, o = state_bytes_per_param(mode="train", precision="fp32", optimizer=prof.optimizer)
        copy = AUTOCAST_COPY_BYTES
    else:
        w, g, o = state_bytes_per_param(mode=prof.mode, precision=precision,
                                        optimizer=prof.optimizer)
    weights = x * w / (edp if stage == 3 else 1)
    grads = x * g / (edp if stage >= 2 else 1)
    opt = x * o / (edp if stage >= 1 else 1)
    gathered = x * copy
    if stage == 3:
        gathered = x / moe.num_moe_layers * (2 * w + g)
    return weights, grads, opt, gathered


def expert_parallel_memory(prof: ModelProfile, config: ParallelConfig, ep: int, *,
                           precision: str, parts: ActivationParts | None = None,
                           micro_batch: int | None = None) -> DeviceMemory:
    """Memory on one device of ``config`` with its experts split over ``ep`` devices: the base
    plan's memory with the experts' states replaced by their EP share."""
    base = device_memory(prof, config, precision=precision, parts=parts,
                         micro_batch=micro_batch)
    old = _expert_states(prof, config, precision=precision, ep=1)
    new = _expert_states(prof, config, precision=precision, ep=ep)
    return replace(
        base,
        weights_bytes=max(0.0, base.weights_bytes - old[0] + new[0]),
        grads_bytes=max(0.0, base.grads_bytes - old[1] + new[1]),
        optimizer_bytes=max(0.0, base.optimizer_bytes - old[2] + new[2]),
        gathered_bytes=max(0.0, base.gathered_bytes - old[3] + new[3]),
    )


def ep_ranks_per_node(config: ParallelConfig, ep: int) -> int:
    """EP ranks inside one node: tensor parallel fills a node first, so a node holds
    ``node size / tp`` consecutive data-parallel ranks."""
    return max(1, min(ep, DEVICES_PER_NODE // min(config.tp_degree, DEVICES_PER_NODE)))


def all_to_all_step_s(prof: ModelProfile, config: ParallelConfig, ep: int, spec: HardwareSpec,
                      *, precision: str, micro_batch: int,
                      nic_gbs_per_node: float = DEFAULT_NIC_GBS_PER_NODE) -> float:
    """Seconds of dispatch and combine all-to-alls one device spends per step.

    Per call a device sends its tokens' hidden vectors once per chosen expert: ``tokens x
    hidden x bytes x top_k`` with ``tokens = micro_batch x seq_len / tp`` (sequence
    parallelism leaves each tensor-parallel rank its share). Calls per step: 2 per MoE layer
    on the device's stage and micro-batch in forward, 2 in backward, 2 more for the forward
    that full checkpointing reruns."""
    moe: MoERouting = prof.moe
    hidden = moe.hidden_size or _hidden_from_blocks(prof)
    tokens = micro_batch * (prof.seq_len or 1) / config.tp_degree
    size = tokens * hidden * activation_element_bytes(precision) * moe.top_k
    per_call = all_to_all_time_s(size, ep, intra_bandwidth_gbs(spec),
                                 nic_bandwidth_per_device_gbs(nic_gbs_per_node=nic_gbs_per_node),
                                 ep_ranks_per_node(config, ep))
    passes = config.grad_accum_steps * (config.num_microbatches if config.pp_degree > 1 else 1)
    directions = 2 if prof.mode == "train" else 1
    if prof.mode == "train" and config.checkpointing == "full":
        directions += 1
    layers = math.ceil(moe.num_moe_layers / config.pp_degree)
    return 2 * directions * layers * passes * per_call


def _hidden_from_blocks(prof: ModelProfile) -> float:
    """Token width from a block's output (tokens x hidden x element bytes), 0 when unknown."""
    from .memory import dtype_bytes

    tokens = prof.batch_size * (prof.seq_len or 1)
    if not prof.block_output_bytes or not tokens:
        return 0.0
    return prof.block_output_bytes / (tokens * dtype_bytes(prof.compute_dtype))


def hot_device_load(num_experts: int, ep: int, imbalance: float) -> float:
    """Expert work of the busiest EP rank over the mean rank's.

    The most loaded expert takes ``imbalance`` times the mean load ``m``; the other ``E - 1``
    share the remaining ``(E - imbalance) m``. The rank holding it and ``E / ep - 1`` others
    at their mean does ``imbalance m + (E / ep - 1)(E - imbalance) m / (E - 1)`` against
    ``(E / ep) m`` for the mean rank. Without EP (``ep = 1``) every rank runs every expert:
    1; one expert per rank (``ep = E``): ``imbalance``.

    >>> hot_device_load(8, 8, 2.0), hot_device_load(8, 1, 2.0)
    (2.0, 1.0)
    >>> round(hot_device_load(8, 4, 2.0), 4)   # (2 + 1 x 6/7) / 2
    1.4286
    """
    local = num_experts / ep
    if num_experts == 1:
        return 1.0
    hot = imbalance + (local - 1) * (num_experts - imbalance) / (num_experts - 1)
    return hot / local


def _sync_s(params_bytes: float, group: int, stage: int, spec: HardwareSpec,
            nic_gbs_per_node: float) -> float:
    """Alpha-beta time of a plan's data-parallel sync of ``params_bytes`` per device over
    ``group`` devices (DDP all-reduce; ZeRO-1/2 reduce-scatter + all-gather; ZeRO-3 two
    all-gathers + a reduce-scatter)."""
    if group <= 1:
        return 0.0
    bw = intra_bandwidth_gbs(spec)
    if group > DEVICES_PER_NODE:
        bw = min(bw, nic_bandwidth_per_device_gbs(nic_gbs_per_node=nic_gbs_per_node))
    kinds = {0: ["all_reduce"], 1: ["reduce_scatter", "all_gather"],
             2: ["reduce_scatter", "all_gather"],
             3: ["all_gather", "all_gather", "reduce_scatter"]}[stage]
    return sum(collective_time_s(k, params_bytes, num_devices=group, bus_bw_gbs=bw,
                                 alpha_s=_SYNC_ALPHA_S) for k in kinds)


def sync_ratio(prof: ModelProfile, config: ParallelConfig, ep: int, spec: HardwareSpec, *,
               nic_gbs_per_node: float = DEFAULT_NIC_GBS_PER_NODE) -> float:
    """Data-parallel sync time with EP over that without: the dense parameters still sync over
    ``dp``; the experts over ``dp / ep`` with ``1 / ep`` of the bytes."""
    dp, stage = config.dp_degree, config.zero_stage
    expert = float(prof.moe.expert_params)
    dense = max(0.0, prof.num_params - expert)
    base = _sync_s(dense + expert, dp, stage, spec, nic_gbs_per_node)
    if base <= 0:
        return 1.0
    new = (_sync_s(dense, dp, stage, spec, nic_gbs_per_node)
           + _sync_s(expert / ep, dp // ep, stage, spec, nic_gbs_per_node))
    return new / base


def predict_expert_plan(prof: ModelProfile, plan: ExpertPlan, spec: HardwareSpec, *,
                        precision: str, predictor: Predictor, imbalance: float,
                        nic_gbs_per_node: float = DEFAULT_NIC_GBS_PER_NODE
                        ) -> tuple[Prediction | None, str]:
    """The base plan's prediction adjusted for EP (see the module docstring), or why none."""
    return _predict_ep(prof, plan.config, plan.ep, spec, precision=precision,
                       micro_batch=plan.micro_batch, predictor=predictor, imbalance=imbalance,
                       nic_gbs_per_node=nic_gbs_per_node)


def predict_expert_config(prof: ModelProfile, config: ParallelConfig, spec: HardwareSpec, *,
                          precision: str, predictor: Predictor, imbalance: float | None = None,
                          nic_gbs_per_node: float = DEFAULT_NIC_GBS_PER_NODE
                          ) -> tuple[Prediction | None, str]:
    """:func:`predict_expert_plan` for a :class:`ParallelConfig` with ``ep_degree`` > 1: its
    base (the same config with ``ep_degree=1``) predicted, then adjusted for EP; ``imbalance``
    defaults to the profile's own. Returns ``(None, reason)`` when the model cannot use it."""
    ep, moe = config.ep_degree, prof.moe
    if moe is None:
        return None, (f"{config.label} needs a mixture-of-experts model: this profile has no "
                      "MoE layers (use ep_degree=1)")
    if moe.num_experts % ep:
        return None, (f"{config.label} cannot split {moe.num_experts} experts over {ep} "
                      f"devices (expected an ep_degree that divides {moe.num_experts})")
    base = replace(config, ep_degree=1)
    return _predict_ep(prof, base, ep, spec, precision=precision,
                       micro_batch=layout(base, prof.batch_size).micro_batch,
                       predictor=predictor, imbalance=check_moe_imbalance(prof, imbalance),
                       nic_gbs_per_node=nic_gbs_per_node)


def _predict_ep(prof: ModelProfile, c: ParallelConfig, ep: int, spec: HardwareSpec, *,
                precision: str, micro_batch: int, predictor: Predictor, imbalance: float,
                nic_gbs_per_node: float) -> tuple[Prediction | None, str]:
    outcome = predictor.plan(prof, spec, precision=precision, parallel=c)
    base = outcome.prediction
    if base is None:
        return None, outcome.reason
    moe = prof.moe
    a2a = all_to_all_step_s(prof, c, ep, spec, precision=precision,
                            micro_batch=micro_batch, nic_gbs_per_node=nic_gbs_per_node)
    comm = base.communication_s
    if prof.mode == "train" and c.tp_degree == 1 and c.pp_degree == 1:
        comm *= sync_ratio(prof, c, ep, spec, nic_gbs_per_node=nic_gbs_per_node)
    # Expert GEMM share of the compute: FLOPs per token follow the active parameters.
    active_experts = moe.expert_params * moe.top_k / moe.num_experts
    expert_share = active_experts / prof.num_active_params if prof.num_active_params else 0.0
    extra = base.compute_s * expert_share * (hot_device_load(moe.num_experts, ep,
                                                             imbalance) - 1.0)
    delta = a2a + extra + comm - base.communication_s
    step = base.step_time_s + delta
    samples = base.throughput * base.step_time_s
    note = (f"expert parallel over {ep} devices: {moe.num_experts // ep} experts "
            f"per device, all-to-all {a2a * 1e3:.3g} ms per step (NVLink "
            f"{intra_bandwidth_gbs(spec):g} GB/s, NIC {nic_gbs_per_node:g} GB/s per node, "
            "not overlapped); an estimate on top of the base plan's prediction")
    if extra > 0:
        note += f"; load imbalance {imbalance:g}x adds {extra * 1e3:.3g} ms of expert compute"
    pred = replace(
        base, step_time_s=step, low_s=base.low_s + delta, high_s=base.high_s + delta,
        throughput=samples / step, communication_s=comm + a2a, compute_s=base.compute_s + extra,
        mfu=base.mfu * base.step_time_s / step if base.mfu is not None else None,
        notes=(note, *base.notes))
    return pred, ""


def expert_plans(prof: ModelProfile, bases: list[ParallelConfig], ep_degrees: list[int], *,
                 precision: str, parts: ActivationParts, capacity_bytes: float
                 ) -> list[ExpertPlan]:
    """Each base plan without offload whose data-parallel degree ``ep`` divides, with EP."""
    out = []
    for config in bases:
        if config.offload:
            continue
        micro = layout(config, prof.batch_size).micro_batch
        for ep in ep_degrees:
            if config.dp_degree % ep:
                continue
            mem = expert_parallel_memory(prof, config, ep, precision=precision, parts=parts,
                                         micro_batch=micro)
            out.append(ExpertPlan(config=config, ep=ep, memory=mem, micro_batch=micro,
                                  fits=mem.total_bytes <= usable_bytes(capacity_bytes)))
    return out
