"""The advice as a plan: ordered steps, each priced by the cost model on top of the steps before.

The plan starts from the step as the user runs it ("as you run it": the current precision, every
device holding a full replica) and applies, in the order a user would apply them:

1. one precision step (TF32, bf16 or fp16 autocast: mutually exclusive, so the fastest is the
   step and the others are listed as its alternatives, ranked by the device's time); where
   the step is host-bound (eager PyTorch issuing small kernels) and no precision gains, it is
   tried again right after the CUDA-graphs step, priced on the replayed step;
2. the parallel plan the planner picks at that precision (ZeRO/FSDP, offload, tensor,
   pipeline and expert parallel, activation checkpointing, gradient accumulation), one
   component a step;
3. the kernel, memory and model tactics of :mod:`.tactics`, in :data:`RULE_ORDER`.

Each rule runs on a :class:`~.tactics.Context` that carries the earlier steps (their precision,
plan, batch and what-if rewrites of the profile), so its speedup is relative to them and the
cumulative speedup is their product. A tactic the model already uses (:mod:`.applied`) is not
offered; a speed-only step under :data:`~.tactics.MIN_SPEEDUP` is dropped (and said so).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..codegen import CodeNames
from ..schema import HardwareSpec, ModelProfile, ParallelConfig, Prediction, Recommendation
from ..units import fmt_bytes
from . import tactics, transforms
from .memory import PartsSource, usable_bytes
from .precision import support_level
from .predictor import Predictor, layout, speedup
from .tactics import MIN_SPEEDUP, Context, plan_memory

if TYPE_CHECKING:
    import pandas as pd

#: The order of the tactic steps after the precision and parallel-plan steps: the parallel
#: plan's own settings (FSDP resharding), the CPU's thread pools (their step changes no state:
#: the steps after it are priced at the threads as they are, a conservative product), kernels
#: (they change what later steps see), then memory, batch, model changes and deployment. CUDA
#: graphs lead the kernel steps (after the fused optimizer, whose launches a graph of forward and
#: backward does not capture): while Python issues every kernel (a host-bound step at small
#: batch), faster kernels gain nothing, so they are priced on the replayed step.
RULE_ORDER = ("fsdp_overlap", "cpu_threads", "sdpa", "fused_optimizer", "cuda_graphs", "fp8",
              "mxfp8", "fp4", "channels_last", "torch_compile", "dataloader", "optimizer_8bit",
              "larger_batch", "sparsity_24",
              "dynamic_int8", "weight_only_int8", "weight_only_int4", "embedding_int8",
              "weight_only_nf4",
              "onnx_export", "distill_prune", "serving")
PRECISION_TACTICS = ("bf16_autocast", "fp16_autocast", "tf32")
#: Mutually exclusive tactics among :data:`RULE_ORDER`: one step, the fastest, with the others
#: listed as its alternatives (low-precision formats of the weights, FP8 with per-tensor or
#: MX block scales and FP4 among them; two ways to fuse kernels for inference; two ways to run
#: more samples a step: a bigger batch or a serving engine).
EXCLUSIVE = (("fp8", "mxfp8", "fp4", "weight_only_int8", "weight_only_int4", "dynamic_int8"),
             ("torch_compile", "onnx_export"), ("larger_batch", "serving"))
#: Components of a parallel plan, in the order they are added to plain data parallel.
STRUCTURE_TACTICS = ("fsdp", "deepspeed_zero", "cpu_offload", "tensor_parallel",
                     "pipeline_parallel", "expert_parallel", "activation_checkpointing",
                     "grad_accumulation")
#: A memory step is kept when it saves at least this share of the per-device memory (or makes
#: the step fit); a smaller saving with no speed gain is noise.
MIN_MEMORY_SHARE = 0.05

COLUMNS = ["step", "tactic", "title", "category", "speedup_step", "speedup_low",
           "speedup_high", "speedup_cumulative", "memory_saving_bytes",
           "memory_per_device_bytes", "fits", "trigger", "alternatives"]


@dataclass(frozen=True, kw_only=True)
class State:
    """The step after the plan's first k steps."""

    batch_size: int
    """Samples per device (changed by a larger-batch step)."""
    precision: str
    config: ParallelConfig
    spec: HardwareSpec
    transforms: tuple[Callable[[ModelProfile], ModelProfile], ...] = ()
    saved_bytes: float = 0.0
    """Per-device memory saved by steps the planner's memory model does not see (fused
    attention, 8-bit optimizer state, 8-bit embeddings)."""


@dataclass(frozen=True, kw_only=True)
class Plan:
    """Ordered steps (stacked recommendations) and what was left out, and why."""

    recommendations: tuple[Recommendation, ...]
    baseline: Prediction | None
    """The cost model on the step as the user runs it."""
    baseline_memory_bytes: float
    baseline_fits: bool | None
    skipped: tuple[str, ...] = ()
    """One sentence per tactic not offered: already applied, or under the noise threshold."""

    def table(self) -> pd.DataFrame:
        """One row per step (:data:`COLUMNS`); ``attrs`` hold the baseline and the skips."""
        import pandas as pd

        rows = []
        for rec in self.recommendations:
            x = rec.extra
            rows.append({
                "step": x["step"], "tactic": rec.id, "title": rec.title,
                "category": rec.category, "speedup_step": rec.predicted_speedup,
                "speedup_low": rec.speedup_low, "speedup_high": rec.speedup_high,
                "speedup_cumulative": x["speedup_cumulative"],
                "memory_saving_bytes": rec.memory_saving_bytes,
                "memory_per_device_bytes": x["memory_per_device_bytes"], "fits": x["fits"],
                "trigger": trigger_text(x["trigger"]),
                "alternatives": ", ".join(f"{a['title']} ({a['predicted_speedup']:.2f}x)"
                                          for a in x.get("alternatives", ())),
            })
        df = pd.DataFrame.from_records(rows, columns=COLUMNS)
        base = self.baseline
        df.attrs.update({
            "baseline_step_time_s": None if base is None else base.step_time_s,
            "baseline_throughput": None if base is None else base.throughput,
            "baseline_memory_bytes": self.baseline_memory_bytes,
            "baseline_fits": self.baseline_fits, "skipped": list(self.skipped),
        })
        return df


def steps_label(k: int) -> str:
    """The first ``k`` plan steps in words: "step 1" for one, "steps 1-3" for three.

    >>> steps_label(1), steps_label(3)
    ('step 1', 'steps 1-3')
    """
    return "step 1" if int(k) == 1 else f"steps 1-{int(k)}"


def trigger_text(trigger: dict[str, Any]) -> str:
    """``{"conv_flops_share": 0.91}`` -> ``"conv_flops_share = 91%"`` (bytes and shares
    written for people).

    >>> trigger_text({"conv_flops_share": 0.912, "free_bytes": 2**30, "precision": "fp32"})
    'conv_flops_share = 91%; free_bytes = 1.00 GiB; precision = fp32'
    """
    parts = []
    for key, value in trigger.items():
        if isinstance(value, float) and key.endswith("_share"):
            text = f"{100 * value:.0f}%"
        elif isinstance(value, (int, float)) and "bytes" in key:
            text = fmt_bytes(value)
        elif isinstance(value, float):
            text = f"{value:.3g}"
        else:
            text = str(value)
        parts.append(f"{key} = {text}")
    return "; ".join(parts)


@dataclass
class _Builder:
    base_prof: ModelProfile
    num_devices: int
    names: CodeNames
    predictor: Predictor
    parts_for: PartsSource
    plan_for: Callable[[str], tuple[ParallelConfig, bool]]
    applied: dict[str, str]
    steps: list[Recommendation] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    cumulative: float = 1.0
    step_cache: dict = field(default_factory=dict)
    deferred_precision: bool = False
    """The precision step waits for the CUDA-graphs step (a host-bound step)."""

    # -- the state ---------------------------------------------------------------------------
    def context(self, state: State) -> Context:
        parts = self.parts_for(state.precision)
        if state.batch_size != parts.batch_size:
            parts = parts.at_batch(state.batch_size)
        return Context(prof=self.predictor.at(self.base_prof, state.batch_size),
                       spec=state.spec, precision=state.precision,
                       num_devices=self.num_devices, config=state.config,
                       plan_fits=bool(self.fits(state)), parts=parts, names=self.names,
                       predictor=self.predictor, parts_for=self.parts_for,
                       transforms=state.transforms, _steps=self.step_cache)

    def memory(self, state: State) -> float:
        parts = self.parts_for(state.precision)
        micro = layout(state.config, state.batch_size).micro_batch
        mem = plan_memory(self.base_prof, state.config, precision=state.precision,
                          parts=parts, micro_batch=micro)
        return max(0.0, mem.total_bytes - state.saved_bytes)

    def fits(self, state: State) -> bool | None:
        if state.spec.memory_bytes is None:
            return None
        return self.memory(state) <= usable_bytes(state.spec.memory_bytes)

    def predict(self, state: State) -> Prediction | None:
        return self.context(state).base

    # -- steps -------------------------------------------------------------------------------
    def add(self, rec: Recommendation, before: State, state: State, *,
            gain: float | None = None, alternatives: list[dict] | None = None) -> None:
        """Append ``rec`` as the next step, taking the plan from ``before`` to ``state``; its
        memory effect is the difference of the two (negative: it costs memory)."""
        step_gain = rec.predicted_speedup if gain is None else gain
        memory_saving = self.memory(before) - self.memory(state)
        self.cumulative *= step_gain if step_gain else 1.0
        extra = {**rec.extra, "step": len(self.steps) + 1,
                 "speedup_cumulative": round(self.cumulative, 4),
                 "memory_per_device_bytes": int(self.memory(state)), "fits": self.fits(state)}
        if alternatives:
            extra["alternatives"] = alternatives
        changes: dict[str, Any] = {"extra": extra}
        if gain is not None:
            changes.update(predicted_speedup=round(gain, 4), speedup_low=None,
                           speedup_high=None)
        changes["memory_saving_bytes"] = int(memory_saving) if abs(memory_saving) >= 1 else None
        self.steps.append(dataclasses.replace(rec, **changes))

    def keeps(self, rec: Recommendation, state: State) -> bool:
        """Noise filter: a step gains >= MIN_SPEEDUP or saves a real share of memory."""
        if rec.predicted_speedup is not None and rec.predicted_speedup >= MIN_SPEEDUP:
            return True
        saving = rec.memory_saving_bytes or 0
        if saving > 0 and saving >= MIN_MEMORY_SHARE * max(1.0, self.memory(state)):
            return True
        figure = ("no predicted speedup" if rec.predicted_speedup is None
                  else f"predicted {rec.predicted_speedup:.3f}x")
        memo = f", saves {fmt_bytes(saving)}" if saving > 0 else ""
        self.skipped.append(f"{rec.title}: not offered ({figure}{memo}; a step needs "
                            f">= {MIN_SPEEDUP:.2f}x or >= {MIN_MEMORY_SHARE:.0%} of the "
                            "memory).")
        return False

    def already(self, tactic_id: str) -> bool:
        why = self.applied.get(tactic_id)
        if why:
            self.skipped.append(f"{tactic_id}: already applied ({why}).")
        return bool(why)

    def precision_step(self, state: State, *, retry: bool = False) -> State:
        """The fastest precision, as one step with the others as alternatives, ranked by what
        they do to the device's time (where eager PyTorch's host time bounds the step, every
        precision ties on the step time). A step bound by the host on a GPU may gain nothing
        from faster kernels: no precision step fires, and it is tried again right after the
        CUDA-graphs step (:meth:`tactic_steps`)."""
        ctx = self.context(state)
        fired = [rec for tid, fn in tactics.RULES if tid in PRECISION_TACTICS
                 and (rec := fn(ctx)) is not None and not self.already(tid)]
        if not fired:
            base = ctx.base
            if not retry and base is not None and base.host_bound \
                    and state.spec.kind != "cpu" and not state.spec.graph_replay:
                self.deferred_precision = True
            return state
        after = {r.id: self.predict(dataclasses.replace(state, precision=PRECISION_OF[r.id]))
                 for r in fired}
        best = max(fired, key=lambda r: (_device_speed(after[r.id]), r.predicted_speedup or 0.0))
        new = dataclasses.replace(state, precision=PRECISION_OF[best.id])
        alternatives = [{"id": r.id, "title": r.title, "predicted_speedup": r.predicted_speedup}
                        for r in fired if r is not best]
        self.add(best, state, new, alternatives=alternatives)
        return new

    def structure_steps(self, state: State) -> State:
        """From full replicas to the planner's best plan at the state's precision."""
        target, _fits = self.plan_for(state.precision)
        rules = dict(tactics.RULES)
        priced = state  # a component without its own step is priced with the next one
        for tactic_id, config in _components(state.config, target):
            state = dataclasses.replace(state, config=config)
            # the rule explains this component: the plan so far against it without
            rec = rules[tactic_id](self.context(state))
            if rec is not None and not self.already(tactic_id):
                before, after = self.predict(priced), self.predict(state)
                gain = speedup(before, after).point if before and after else None
                self.add(rec, priced, state, gain=gain)
                priced = state
        return state

    def tactic_steps(self, state: State) -> State:
        done: set[str] = set()
        for tactic_id in RULE_ORDER:
            if tactic_id in done or tactic_id not in dict(tactics.RULES):
                continue
            group = next((g for g in EXCLUSIVE if tactic_id in g), (tactic_id,))
            state = self.group_steps(state, group, done)
            if tactic_id == "cuda_graphs" and self.deferred_precision:
                # Priced on the replayed step, where faster kernels show.
                self.deferred_precision = False
                state = self.precision_step(state, retry=True)
        return state

    def group_steps(self, state: State, group: tuple[str, ...], done: set[str]) -> State:
        """The step of one :data:`EXCLUSIVE` group (or one tactic): the fastest that fires."""
        rules = dict(tactics.RULES)
        done.update(group)
        ctx = self.context(state)
        fired = [rec for tid in group if tid in rules
                 and (rec := rules[tid](ctx)) is not None and not self.already(tid)
                 and self.keeps(rec, state)]
        if not fired:
            return state
        best = max(fired, key=lambda r: r.predicted_speedup or 0.0)
        alternatives = [{"id": r.id, "title": r.title, "predicted_speedup": r.predicted_speedup}
                        for r in fired if r is not best]
        new = EFFECTS.get(best.id, _no_change)(state, best)
        self.add(best, state, new, alternatives=alternatives)
        return new


def _device_speed(pred: Prediction | None) -> float:
    """1 / the step's device time (its step with CUDA graphs where that is priced, else the
    step): the precision ranking key."""
    if pred is None:
        return 0.0
    device = pred.graphs_step_s
    t = device if device is not None and math.isfinite(device) and device > 0 \
        else pred.step_time_s
    return 1.0 / t if t and t > 0 else 0.0


def _components(start: ParallelConfig, target: ParallelConfig):
    """``(tactic_id, config)`` from ``start`` (full replicas) to ``target``, one change a step."""
    config = start
    if target.zero_stage:
        config = dataclasses.replace(config, zero_stage=target.zero_stage)
        yield ("fsdp" if target.zero_stage == 3 else "deepspeed_zero"), config
    if target.offload:
        config = dataclasses.replace(config, offload=True)
        yield "cpu_offload", config
    if target.tp_degree > 1:
        config = dataclasses.replace(config, tp_degree=target.tp_degree,
                                     dp_degree=config.num_devices // target.tp_degree)
        yield "tensor_parallel", config
    if target.pp_degree > 1:
        config = dataclasses.replace(config, pp_degree=target.pp_degree,
                                     dp_degree=target.dp_degree,
                                     num_microbatches=target.num_microbatches)
        yield "pipeline_parallel", config
    if target.ep_degree > 1:  # after tp/pp: the experts split the final data-parallel group
        config = dataclasses.replace(config, ep_degree=target.ep_degree)
        yield "expert_parallel", config
    if target.checkpointing != "none":
        config = dataclasses.replace(config, checkpointing=target.checkpointing)
        yield "activation_checkpointing", config
    if target.grad_accum_steps > 1:
        config = dataclasses.replace(config, grad_accum_steps=target.grad_accum_steps)
        yield "grad_accumulation", config


PRECISION_OF = {"tf32": "tf32", "bf16_autocast": "bf16", "fp16_autocast": "fp16"}


def _no_change(state: State, rec: Recommendation) -> State:
    return state


def _with(transform: Callable[[ModelProfile], ModelProfile], *, saves: bool = False):
    def effect(state: State, rec: Recommendation) -> State:
        saved = state.saved_bytes + (rec.memory_saving_bytes or 0 if saves else 0)
        return dataclasses.replace(state, transforms=(*state.transforms, transform),
                                   saved_bytes=saved)
    return effect


def _precision(name: str):
    def effect(state: State, rec: Recommendation) -> State:
        return dataclasses.replace(state, precision=name)
    return effect


def _graphed(state: State, rec: Recommendation) -> State:
    spec = tactics.graphed_spec(state.spec)
    return dataclasses.replace(state, spec=spec)


def _bigger_batch(state: State, rec: Recommendation) -> State:
    effect = rec.extra["effect"]
    config = dataclasses.replace(state.config, checkpointing=effect["checkpointing"])
    return dataclasses.replace(state, batch_size=effect["batch_size"], config=config)


def _embedding(state: State, rec: Recommendation) -> State:
    factor = rec.extra["effect"]["factor"]
    return _with(lambda p: transforms.embedding_bytes(p, factor=factor), saves=True)(state, rec)


def _nf4(state: State, rec: Recommendation) -> State:
    return dataclasses.replace(state, precision="nf4", config=ParallelConfig())


def _kept_gathered(state: State, rec: Recommendation) -> State:
    config = dataclasses.replace(state.config, reshard_after_forward=False)
    return dataclasses.replace(state, config=config)


EFFECTS: dict[str, Callable[[State, Recommendation], State]] = {
    "fsdp_overlap": _kept_gathered,
    "sdpa": _with(transforms.fused_attention, saves=True),
    "channels_last": _with(transforms.channels_last_convs),
    "fp8": _precision("fp8"),
    "mxfp8": _precision("mxfp8"),
    "fp4": _precision("fp4"),
    "fused_optimizer": _with(transforms.fused_optimizer),
    "torch_compile": _with(transforms.fuse_elementwise),
    "onnx_export": _with(transforms.fuse_elementwise),
    "cuda_graphs": _graphed,
    "optimizer_8bit": _with(lambda p: transforms.quantized_optimizer_state(
        p, old_state_bytes=4, new_state_bytes=1), saves=True),
    "larger_batch": _bigger_batch,
    "sparsity_24": _with(transforms.sparse_gemms),
    "dynamic_int8": _precision("int8"),
    "weight_only_int8": _precision("int8wo"),
    "weight_only_int4": _precision("int4"),
    "weight_only_nf4": _nf4,
    "embedding_int8": _embedding,
    "distill_prune": _with(lambda p: transforms.pruned(p, keep=tactics.PRUNE_KEEP)),
}


def build_plan(prof: ModelProfile, *, spec: HardwareSpec, num_devices: int, precision: str,
               names: CodeNames, predictor: Predictor, parts_for: PartsSource,
               plan_for: Callable[[str], tuple[ParallelConfig, bool]],
               applied: dict[str, str] | None = None) -> Plan:
    """The stacked plan for ``prof`` (see the module docstring).

    Parameters
    ----------
    prof : ModelProfile
        The step at the report's batch (per device).
    spec, num_devices, precision
        The target and the precision the model runs in now.
    plan_for : callable
        ``precision -> (ParallelConfig, fits)``: the planner's best plan at a precision.
    applied : dict, optional
        Tactic id -> evidence, for what the model already does (:func:`.applied.detect`).
    """
    applied = dict(applied or {})
    b = _Builder(base_prof=prof, num_devices=num_devices, names=names, predictor=predictor,
                 parts_for=parts_for, plan_for=plan_for, applied=applied)
    if precision == "fp32" and "tf32" in applied and support_level(spec, "tf32") == "full":
        precision = "tf32"  # the switch is on: the step already runs its matmuls in TF32
        b.skipped.append(f"as you run it: TF32 ({applied['tf32']}), so the plan starts in tf32.")
        del applied["tf32"]
    start = State(batch_size=prof.batch_size, precision=precision,
                  config=ParallelConfig(dp_degree=num_devices), spec=spec)
    baseline = b.predict(start)
    baseline_memory, baseline_fits = b.memory(start), b.fits(start)
    state = b.precision_step(start)
    state = b.structure_steps(state)
    b.tactic_steps(state)
    if baseline is None:
        b.steps = [dataclasses.replace(r, extra={**r.extra, "speedup_cumulative": math.nan})
                   for r in b.steps]
    return Plan(recommendations=tuple(b.steps), baseline=baseline,
                baseline_memory_bytes=baseline_memory, baseline_fits=baseline_fits,
                skipped=tuple(dict.fromkeys(b.skipped)))
