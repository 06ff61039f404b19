"""Tactics: rules that fire from the profiled numbers, priced by the cost model, with code.

Each rule looks at one or two numbers of the profile, the plan or the prediction (a FLOP share,
a memory figure, an overhead share) and fires only when they say the tactic applies. Its
predicted speedup is the cost model's step time before over after (on a what-if profile, another
precision or another plan, see :mod:`.transforms`), never a constant; its code is a template
filled with the user's names (:mod:`aiadvisor.codegen`).

The tactics come from the seed articles (TF32, mixed precision, FP8, channels_last,
torch.compile, CUDA graphs, fused attention, activation checkpointing, FSDP vs DDP, ZeRO,
Megatron 3D parallelism, 8-bit optimizers and embeddings, DataLoader prefetch and pinned memory,
dynamic batching, GPTQ/AWQ/NF4, 2:4 sparsity, distillation and pruning, ONNX Runtime/TensorRT
export, vLLM/TGI serving) and the issue's additions (FSDP resharding and prefetch, expert
parallel, CPU thread settings, FP8 / W8A8 int8 / fp16 inference on GPUs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..codegen import SNIPPETS, CodeNames, snippet
from ..costmodel.layout import layout_transpose_ops, transposed_bytes, transposes_nchw_convs
from ..errors import AIAdvisorError
from ..estimate import bubble_fraction
from ..hardware.threads import ThreadSettings, is_local_cpu, thread_settings
from ..schema import HardwareSpec, ModelProfile, ParallelConfig, Prediction, Recommendation
from ..units import (
    OPTIMIZER_TRAFFIC,
    UNFUSED_OPTIMIZER_TENSORS,
    WEIGHT_BYTES,
    fmt_bytes,
    fmt_seconds,
)
from . import transforms
from .memory import ActivationParts, PartsSource, device_memory, dtype_bytes, usable_bytes
from .precision import support_level
from .predictor import Predictor, Speedup, layout, speedup, throughput_gain

#: A speed tactic is recommended only when the cost model predicts at least this gain.
MIN_SPEEDUP = 1.03
#: A memory-only step that the plan does not need to fit is offered when it saves at least this
#: share of the device's usable memory (the memory counterpart of :data:`MIN_SPEEDUP`).
MIN_MEMORY_SHARE = 0.01
#: Host-to-device copy bandwidth: PCIe 4.0 x16 is 32 GB/s per direction; about 25 GB/s is
#: what pinned-memory copies reach (NVIDIA bandwidthTest sample on A100 PCIe hosts).
PCIE_COPY_GBS = 25.0

def plan_memory(prof: ModelProfile, config: ParallelConfig, *, precision: str,
                parts: ActivationParts, micro_batch: int | None = None):
    """:func:`~.memory.device_memory`, or with ``ep_degree`` > 1 the experts split over the
    expert-parallel group (:func:`~.expert_parallel.expert_parallel_memory`)."""
    if config.ep_degree > 1:
        from .expert_parallel import expert_parallel_memory

        return expert_parallel_memory(prof, dataclasses.replace(config, ep_degree=1),
                                      config.ep_degree, precision=precision, parts=parts,
                                      micro_batch=micro_batch)
    return device_memory(prof, config, precision=precision, parts=parts,
                         micro_batch=micro_batch)


Rule = Callable[["Context"], "Recommendation | None"]
RULES: list[tuple[str, Rule]] = []


def rule(tactic_id: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        RULES.append((tactic_id, fn))
        return fn

    return register


@dataclass
class Context:
    """Everything a rule may look at; predictions are cached in ``predictor``."""

    prof: ModelProfile
    spec: HardwareSpec
    precision: str
    num_devices: int
    config: ParallelConfig
    """The recommended plan (the best row of the parallel table)."""
    plan_fits: bool
    parts: ActivationParts
    names: CodeNames
    predictor: Predictor
    parts_for: PartsSource | None = None
    """Activation parts per precision (other precisions than ``precision``)."""
    transforms: tuple[Callable[[ModelProfile], ModelProfile], ...] = ()
    """What-if rewrites of the whole-step profile made by earlier steps of a plan (fusion,
    fused attention, ...): every prediction of this context includes them, so a rule prices
    its tactic on top of those steps (:mod:`.plan`)."""
    threads: ThreadSettings | None = None
    """The attached CPU's thread pools (read from this process when None and the spec is the
    attached CPU, :func:`aiadvisor.hardware.threads.thread_settings`)."""
    _base: Prediction | None = None
    _steps: dict = dataclasses.field(default_factory=dict)
    """Transformed step profiles by (profile, plan, transforms); a plan shares one across its
    contexts, so that the predictor's identity-keyed cache answers repeated questions."""

    # -- predictions -------------------------------------------------------------------------
    def predict(self, prof: ModelProfile | None = None, *, precision: str | None = None,
                parallel: ParallelConfig | None = None) -> Prediction | None:
        """The cost model when each data-parallel replica runs ``prof`` (default: ours)."""
        prof, parallel = prof or self.prof, parallel or self.config
        precision = precision or self.precision
        if not self.transforms:
            return self.predictor(prof, self.spec, precision=precision, parallel=parallel)
        if parallel.ep_degree > 1:
            base = dataclasses.replace(parallel, ep_degree=1)
            return self._with_ep(self.predict(prof, precision=precision, parallel=base),
                                 prof, precision, parallel)
        try:
            step = self.step_of(prof, parallel)
        except AIAdvisorError:
            return None
        return self.predictor.outcome(step, self.spec, precision=precision,
                                      parallel=parallel).prediction

    def step_of(self, prof: ModelProfile, parallel: ParallelConfig) -> ModelProfile:
        """The whole step of ``parallel`` when each device runs ``prof``, with this context's
        transforms applied (memoised: the predictor's cache matches profiles by identity)."""
        key = (id(prof), parallel, *map(id, self.transforms))
        hit = self._steps.get(key)
        if hit is None or hit[0] is not prof or hit[1] != self.transforms:
            step = self.predictor.step_profile(prof, parallel)
            for transform in self.transforms:
                step = transform(step)
            hit = self._steps[key] = (prof, self.transforms, step)
        return hit[2]

    @property
    def step_prof(self) -> ModelProfile:
        """The whole step of the chosen plan (global batch), what transforms rewrite."""
        return self.step_of(self.prof, self.config)

    def predict_step(self, step_prof: ModelProfile) -> Prediction | None:
        """The cost model on a (transformed) whole-step profile under the chosen plan."""
        if self.config.ep_degree > 1:
            base = dataclasses.replace(self.config, ep_degree=1)
            pred = self.predictor.outcome(step_prof, self.spec, precision=self.precision,
                                          parallel=base).prediction
            return self._with_ep(pred, self.prof, self.precision, self.config)
        return self.predictor.outcome(step_prof, self.spec, precision=self.precision,
                                      parallel=self.config).prediction

    def _with_ep(self, pred: Prediction | None, prof: ModelProfile, precision: str,
                 parallel: ParallelConfig) -> Prediction | None:
        """``pred`` (a what-if of the plan without EP) plus what EP adds to that plan on the
        untransformed profile: its all-to-alls, expert-gradient reduction and imbalance
        (:mod:`.expert_parallel`), taken as unchanged by kernel-level rewrites."""
        with_ep = self.predictor(prof, self.spec, precision=precision, parallel=parallel)
        without = self.predictor(prof, self.spec, precision=precision,
                                 parallel=dataclasses.replace(parallel, ep_degree=1))
        if pred is None or with_ep is None or without is None:
            return None
        return _shifted(pred, with_ep.step_time_s - without.step_time_s)

    @property
    def base(self) -> Prediction | None:
        if self._base is None:
            self._base = self.predict()
        return self._base

    # -- facts -------------------------------------------------------------------------------
    @property
    def train(self) -> bool:
        return self.prof.mode == "train"

    @property
    def is_cuda_gpu(self) -> bool:
        return self.spec.kind in ("gpu", "edge") and self.spec.vendor in ("NVIDIA", "AMD")

    @property
    def device_type(self) -> str:
        """``torch.autocast`` device type for this hardware."""
        if self.spec.kind == "cpu":
            return "cpu"
        if self.spec.vendor == "Apple":
            return "mps"
        if self.spec.kind == "tpu":
            return "xla"
        if self.spec.vendor == "Intel":
            return "hpu" if self.spec.kind == "npu" else "xpu"
        return "cuda"

    def flops_share(self, *classes: str) -> float:
        total = sum(op.flops for op in self.prof.ops)
        part = sum(op.flops for op in self.prof.ops if op.op_class in classes)
        return part / total if total else 0.0

    def memory(self, config: ParallelConfig | None = None, *, precision: str | None = None):
        precision = precision or self.precision
        parts = self.parts
        if precision != self.precision:
            source = self.parts_for or PartsSource(self.prof)
            parts = source(precision)
        return plan_memory(self.prof, config or self.config, precision=precision, parts=parts)

    @property
    def usable_bytes(self) -> float | None:
        return None if self.spec.memory_bytes is None else usable_bytes(self.spec.memory_bytes)

    def render(self, snippet_id: str, **values: Any) -> str:
        return snippet(snippet_id, names=self.names, **values)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _make(ctx: Context, *, tactic_id: str, title: str, category: str, rationale: str,
          snippet_id: str, values: dict[str, Any] | None = None, gain: Speedup | None = None,
          memory_saving_bytes: float | None = None, trigger: dict[str, Any] | None = None,
          effect: dict[str, Any] | None = None) -> Recommendation:
    meta = SNIPPETS[snippet_id]
    code = ctx.render(snippet_id, **(values or {}))
    extra = {"snippet": snippet_id, "requires": list(meta.requires), "launcher": meta.launcher,
             "needs_cuda": meta.needs_cuda, "trigger": trigger or {}}
    if effect:
        extra["effect"] = effect  # what a plan applies for the steps after it (.plan)
    return Recommendation(
        id=tactic_id, title=title, category=category, rationale=rationale, code=code,
        predicted_speedup=None if gain is None else round(gain.point, 4),
        speedup_low=None if gain is None or gain.low is None else round(gain.low, 4),
        speedup_high=None if gain is None or gain.high is None else round(gain.high, 4),
        memory_saving_bytes=None if memory_saving_bytes is None else int(memory_saving_bytes),
        extra=extra,
    )


def _gain(ctx: Context, new: Prediction | None, base: Prediction | None = None) -> Speedup | None:
    base = base or ctx.base
    if base is None or new is None:
        return None
    return speedup(base, new)


def _gain_of(ctx: Context, what_if: ModelProfile) -> Speedup | None:
    """Gain of a what-if version of the whole-step profile (see :mod:`.transforms`)."""
    return _gain(ctx, ctx.predict_step(what_if))


def _shifted(pred: Prediction, delta_s: float) -> Prediction:
    """``pred`` with ``delta_s`` added to its step time (and bounds); same samples per step."""
    samples = pred.throughput * pred.step_time_s
    step = max(1e-12, pred.step_time_s + delta_s)
    return dataclasses.replace(pred, step_time_s=step, throughput=samples / step,
                               low_s=max(1e-12, pred.low_s + delta_s),
                               high_s=max(1e-12, pred.high_s + delta_s))


# -- precision ------------------------------------------------------------------------------

@rule("tf32")
def tf32(ctx: Context) -> Recommendation | None:
    if ctx.precision != "fp32" or support_level(ctx.spec, "tf32") != "full":
        return None
    share = ctx.flops_share("gemm", "conv", "attention")
    gain = _gain(ctx, ctx.predict(precision="tf32"))
    if gain is None or gain.point < MIN_SPEEDUP:
        return None
    return _make(
        ctx, tactic_id="tf32", title="Turn on TF32 tensor cores", category="precision",
        rationale=_tf32_rationale(ctx.spec, share), snippet_id="tf32", gain=gain,
        trigger={"matmul_flops_share": share},
    )


def _tf32_rationale(spec: HardwareSpec, share: float) -> str:
    """Why TF32: the matmul share and the TF32 peak, against the FP32 one where it is known."""
    fp32 = (f" vs {spec.fp32_tflops:g} in fp32" if spec.fp32_tflops
            else " (the catalog has no FP32 figure for it to compare with)")
    return (f"The step runs in fp32 and {_pct(share)} of its FLOPs are matmuls/convolutions; "
            f"{spec.name} runs them at {spec.tf32_tflops:g} TFLOPS in TF32{fp32}. "
            "Two lines, no other change.")


def _autocast(ctx: Context, target: str, *, tactic_id: str, title: str) -> Recommendation | None:
    if ctx.precision not in ("fp32", "tf32") or support_level(ctx.spec, target) != "full":
        return None
    gain = _gain(ctx, ctx.predict(precision=target))
    if gain is None or gain.point < MIN_SPEEDUP:
        return None
    saving = ctx.memory().total_bytes - ctx.memory(precision=target).total_bytes
    peak = getattr(ctx.spec, f"{target}_tflops")
    dtype = {"bf16": "bfloat16", "fp16": "float16"}[target]
    if not ctx.train:
        risk = ("fp16 keeps 3 more mantissa bits than bf16 but overflows above 65504: check "
                "the outputs" if target == "fp16" else "bf16 keeps fp32's range")
        from ..costmodel.ops import autocast_upcasts

        if autocast_upcasts(ctx.spec):
            risk += ("; on this GPU autocast keeps softmax and norms in fp32, with a cast "
                     "kernel on each side (priced in the gain)")
    elif target == "fp16":
        risk = "fp16 needs loss scaling (GradScaler, included)"
    else:
        risk = "bf16 keeps fp32's range, so no loss scaling"
    return _make(
        ctx, tactic_id=tactic_id, title=title, category="precision",
        rationale=(f"The step runs in {ctx.precision}; {ctx.spec.name} has {peak:.4g} dense "
                   f"{target} TFLOPS{_peak_source(ctx.spec, target)}. Autocast runs matmuls in "
                   f"{target} and halves activation "
                   f"memory; {risk}."),
        snippet_id="autocast_train" if ctx.train else "autocast_infer",
        values={"dtype": dtype, "device_type": ctx.device_type}, gain=gain,
        memory_saving_bytes=max(0.0, saving), trigger={"precision": ctx.precision},
    )


def _peak_source(spec: HardwareSpec, target: str) -> str:
    """What a 16-bit peak in a rationale is for the attached CPU: timed by the device benchmark,
    or worked out from its ISA flags and clock, scaled by a quick matmul where one was timed
    (:func:`~aiadvisor.hardware.detection.anchored_cpu_spec`; a peak its matmuls reach about
    half of). Empty
    for a catalog row: a datasheet figure, its source in the catalog."""
    from ..hardware.detection import ANCHOR_MARK, BF16_ESTIMATE_MARK

    if spec.kind != "cpu":
        return ""
    scaled = ", scaled by a quick matmul" if spec.notes.startswith(ANCHOR_MARK) else ""
    estimated = f" (estimated from its ISA flags and clock{scaled}, a peak: not measured)"
    if target == "bf16" and BF16_ESTIMATE_MARK in spec.notes:
        return estimated
    if spec.measured:
        return " (the best matmul measured on it)"
    return estimated if spec.source.startswith("detected") else ""


@rule("bf16_autocast")
def bf16_autocast(ctx: Context) -> Recommendation | None:
    return _autocast(ctx, "bf16", tactic_id="bf16_autocast",
                     title="Mixed precision: bf16 autocast")


@rule("fp16_autocast")
def fp16_autocast(ctx: Context) -> Recommendation | None:
    if ctx.train and support_level(ctx.spec, "bf16") == "full":
        return None  # bf16 is the safer choice for training where it exists (no loss scaling)
    title = ("Mixed precision: fp16 autocast with loss scaling" if ctx.train
             else "Half precision: fp16 weights and autocast")
    return _autocast(ctx, "fp16", tactic_id="fp16_autocast", title=title)


def _gemm_format_gain(ctx: Context, precision: str):
    """(share of the FLOPs in Linear-layer GEMMs, the step's gain at ``precision``); the gain
    is None where GEMMs are under half the FLOPs or it is under :data:`MIN_SPEEDUP`."""
    share = ctx.flops_share("gemm")
    if share < 0.5:
        return share, None
    gain = _gain(ctx, ctx.predict(precision=precision))
    return share, gain if gain is not None and gain.point >= MIN_SPEEDUP else None


@rule("fp8")
def fp8(ctx: Context) -> Recommendation | None:
    if ctx.precision not in ("bf16", "fp16") or support_level(ctx.spec, "fp8") != "full":
        return None
    share, gain = _gemm_format_gain(ctx, "fp8")
    if gain is None:
        return None
    peaks = (f"{_pct(share)} of the FLOPs are Linear-layer GEMMs and {ctx.spec.name} runs FP8 "
             f"at {ctx.spec.fp8_tflops:g} vs {ctx.spec.bf16_tflops:g} TFLOPS bf16")
    if not ctx.train:
        return _make(
            ctx, tactic_id="fp8", title="FP8 weights and activations (torchao)",
            category="precision",
            rationale=(f"{peaks}; FP8 weights are half the bf16 bytes. Per-row scales "
                       "(included); check accuracy on your data."),
            snippet_id="fp8_infer", gain=gain, trigger={"gemm_flops_share": share},
        )
    return _make(
        ctx, tactic_id="fp8", title="FP8 matmuls (torchao / Transformer Engine)",
        category="precision",
        rationale=f"{peaks}; needs scaling recipes (included) and a check of the loss curve.",
        snippet_id="fp8", values={"recipe": "tensorwise", "min_features": 1024}, gain=gain,
        trigger={"gemm_flops_share": share},
    )


@rule("mxfp8")
def mxfp8(ctx: Context) -> Recommendation | None:
    """FP8 training with MX block scales, on devices with block-scaled tensor cores (NVIDIA
    Blackwell, AMD CDNA4, AWS Trainium3): the fp8 step's alternative recipe there."""
    if not ctx.train or ctx.precision not in ("bf16", "fp16") \
            or support_level(ctx.spec, "mxfp8") != "full":
        return None
    share, gain = _gemm_format_gain(ctx, "mxfp8")
    if gain is None:
        return None
    return _make(
        ctx, tactic_id="mxfp8", title="MXFP8 matmuls: FP8 with block scales (Transformer Engine)",
        category="precision",
        rationale=(f"{_pct(share)} of the FLOPs are Linear-layer GEMMs and {ctx.spec.name} has "
                   f"block-scaled tensor cores: MXFP8 runs at the FP8 peak "
                   f"({ctx.spec.fp8_tflops:g} vs {ctx.spec.bf16_tflops:g} TFLOPS bf16) with one "
                   "power-of-two scale per 32 values, computed on the fly: no amax history, and "
                   f"an outlier only coarsens its own block ({WEIGHT_BYTES['mxfp8'] * 8:g} bits "
                   "per value). Transformer Engine's recipe for Blackwell; check the loss curve."),
        snippet_id="mxfp8", values={"min_features": 1024}, gain=gain,
        trigger={"gemm_flops_share": share},
    )


@rule("fp4")
def fp4(ctx: Context) -> Recommendation | None:
    """W4A4 NVFP4 inference (torchao) where the device runs NVFP4 at full rate."""
    from ..hardware.support import fp4_bits, fp4_format

    if ctx.train or ctx.precision not in ("bf16", "fp16") \
            or support_level(ctx.spec, "fp4") != "full" or fp4_format(ctx.spec) != "nvfp4":
        return None
    share, gain = _gemm_format_gain(ctx, "fp4")
    if gain is None:
        return None
    vs_fp8 = (f" (FP8: {ctx.spec.fp8_tflops:g})" if ctx.spec.fp8_tflops else "")
    return _make(
        ctx, tactic_id="fp4", title="NVFP4 weights and activations (torchao, W4A4)",
        category="precision",
        rationale=(f"{_pct(share)} of the FLOPs are Linear-layer GEMMs and {ctx.spec.name} runs "
                   f"NVFP4 at {ctx.spec.fp4_tflops:g} dense TFLOPS{vs_fp8}; weights take "
                   f"{fp4_bits(ctx.spec):g} bits (E2M1 + an E4M3 scale per 16), "
                   f"{fp4_bits(ctx.spec) / 16:.0%} of bf16. Attention and norms stay 16-bit. "
                   "4-bit activations cost accuracy: evaluate on your data (or serve a "
                   "calibrated NVFP4 checkpoint)."),
        snippet_id="fp4_infer", gain=gain, trigger={"gemm_flops_share": share},
    )


# -- kernels and compilation ----------------------------------------------------------------

def _timed_channels_last(ctx: Context) -> bool:
    """Whether ``ctx``'s device is a benchmarked CPU whose grid timed channels_last
    convolutions in the dtype its convolutions run in."""
    if ctx.spec.kind != "cpu" or not ctx.spec.measured:
        return False
    from ..costmodel import measured_calibration

    cal = measured_calibration(ctx.spec, ctx.precision)
    dtype = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(ctx.precision)
    return cal is not None and dtype is not None and cal.times_channels_last(dtype)


@rule("channels_last")
def channels_last(ctx: Context) -> Recommendation | None:
    share = ctx.flops_share("conv")
    # GPUs: tensor-core convolutions (bf16/fp16/tf32) want NHWC. CPUs: oneDNN's convolutions
    # reorder NCHW tensors to their blocked/NHWC layouts in every precision.
    gpu = ctx.is_cuda_gpu and ctx.precision != "fp32"
    if share < 0.3 or not (gpu or ctx.spec.kind == "cpu"):
        return None
    moved = transposed_bytes(ctx.step_prof, ctx.precision)
    timed = _timed_channels_last(ctx)
    if timed or transposes_nchw_convs(ctx.spec, ctx.precision):
        # This CPU's benchmark timed its convolutions in both layouts, or the GPU's step is
        # priced with the NCHW transposes (costmodel.layout): the channels_last profile is
        # priced without them.
        gain = _gain_of(ctx, transforms.channels_last_convs(ctx.step_prof))
    else:  # a CPU without channels_last timings, an AMD GPU: the copies on top of the step
        gain = _gain(ctx, ctx.base, ctx.predict_step(
            transforms.with_extra_ops(ctx.step_prof, layout_transpose_ops(ctx.step_prof))))
    if gain is None or gain.point < MIN_SPEEDUP:
        return None
    how = ("this CPU's benchmark timed its convolutions in both layouts, and the NHWC ones "
           "price the step" if timed else
           f"NHWC tensors skip that (priced as {fmt_bytes(moved)} of copies per step)")
    return _make(
        ctx, tactic_id="channels_last", title="channels_last memory format for convolutions",
        category="speed",
        rationale=(f"Convolutions are {_pct(share)} of the FLOPs. In NCHW, "
                   + ("oneDNN's CPU" if ctx.spec.kind == "cpu" else "tensor-core")
                   + f" convolutions reorder their operands; {how}."),
        snippet_id="channels_last", gain=gain, trigger={"conv_flops_share": share},
    )


@rule("torch_compile")
def torch_compile(ctx: Context) -> Recommendation | None:
    memory_ops = [op for op in ctx.prof.ops if op.op_class == "memory"]
    if len(memory_ops) < 3:
        return None
    if ctx.train and ctx.spec.kind == "cpu":
        # Not offered: compiling a training step on a CPU measured no gain where fusing its
        # memory-bound ops was priced at 1.09-1.32x. Development CPU (2-core Xeon VM, torch
        # 2.13, median of 10 steps, eager -> compiled): a small ResNet 37.5 -> 41.1 ms (0.91x),
        # BERT-4L 132 -> 130 ms in FP32 (1.02x), 89.6 -> 81.3 ms under bf16 autocast (1.10x);
        # 1.00-1.02x in `bench/plan_cpu.py --mode train`. Inference is (BERT-4L: 1.18-1.22x).
        return None
    gain = _gain_of(ctx, transforms.fuse_elementwise(ctx.step_prof,
                                                     keep_rng=ctx.spec.kind == "cpu"))
    if gain is None or gain.point < MIN_SPEEDUP:
        return None
    moved = sum(op.bytes_total for op in memory_ops)
    # After the CUDA-graphs step (graphs only, backend="cudagraphs") the same module gets
    # Inductor with its graphs: one compile call, which replaces the earlier one.
    graphed = ctx.spec.graph_replay
    return _make(
        ctx, tactic_id="torch_compile", title="torch.compile: fuse memory-bound ops",
        category="speed",
        rationale=(f"{sum(op.count for op in memory_ops):.0f} memory-bound op calls move "
                   f"{fmt_bytes(moved)} per step for each device's batch; TorchInductor fuses "
                   "chains of them into single kernels."
                   + (" mode=\"reduce-overhead\" keeps the CUDA graphs of the step before "
                      "(this call replaces its backend=\"cudagraphs\" one)." if graphed else "")),
        snippet_id="torch_compile",
        values={"mode": "reduce-overhead" if graphed else "default"}, gain=gain,
        trigger={"memory_bound_bytes": moved},
    )


def graphed_spec(spec):
    """``spec`` replaying CUDA graphs: no host work per kernel, and each kernel's fixed GPU cost
    less the 0.4 us a graph saves on its launch (:data:`aiadvisor.costmodel.generation.
    GRAPH_SAVING_S`, NVIDIA's "Getting Started with CUDA Graphs"); the rest of it (launch
    processing on the GPU, ramp-up, tail) stays, as measured kernel times show."""
    from ..costmodel.devices import launch_s
    from ..costmodel.generation import GRAPH_SAVING_S

    launch = launch_s(spec)
    return dataclasses.replace(spec, launch_overhead_us=max(launch - GRAPH_SAVING_S, 0.0) * 1e6,
                               graph_replay=True)


@rule("cuda_graphs")
def cuda_graphs(ctx: Context) -> Recommendation | None:
    base = ctx.base
    if base is None or not ctx.is_cuda_gpu or base.overhead_s <= 0:
        return None
    share = base.overhead_s / base.step_time_s
    if share < 0.1:
        return None
    graphed = graphed_spec(ctx.spec)
    after = ctx.predictor.outcome(ctx.step_prof, graphed, precision=ctx.precision,
                                  parallel=ctx.config).prediction
    gain = _gain(ctx, after)
    if gain is None or gain.point < MIN_SPEEDUP:
        return None
    host = (f" Issuing the kernels from Python takes {fmt_seconds(base.host_s)}, longer than "
            "the device needs, so the GPU idles." if base.host_bound else "")
    return _make(
        ctx, tactic_id="cuda_graphs", title="CUDA graphs: one launch per step",
        category="speed",
        rationale=(f"Kernel launch and host overhead is {_pct(share)} of the predicted step "
                   f"({fmt_seconds(base.overhead_s)} of {fmt_seconds(base.step_time_s)}): the "
                   f"GPU waits for the CPU.{host} Replaying a captured graph removes the host's "
                   "per-kernel work and 0.4 us of each launch (NVIDIA's CUDA graphs figure); "
                   "each kernel's own fixed time on the GPU stays."),
        snippet_id="cuda_graphs", gain=gain, trigger={"launch_overhead_share": share},
    )


@rule("sdpa")
def sdpa(ctx: Context) -> Recommendation | None:
    quad = ctx.parts.block_quadratic_bytes
    if not ctx.parts.num_blocks or quad <= 0.05 * ctx.parts.block_per_batch_bytes:
        return None
    saving = quad * ctx.parts.num_blocks / ctx.config.tp_degree
    gain = _gain_of(ctx, transforms.fused_attention(ctx.step_prof))
    return _make(
        ctx, tactic_id="sdpa", title="Fused attention (scaled_dot_product_attention)",
        category="memory",
        rationale=(f"Each block stores {fmt_bytes(quad)} of attention scores (quadratic in the "
                   f"sequence length, {_pct(quad / ctx.parts.block_per_batch_bytes)} of its "
                   "activations); a fused attention kernel never writes them."),
        snippet_id="sdpa", values={"causal": True}, gain=gain, memory_saving_bytes=saving,
        trigger={"attention_score_bytes_per_block": quad},
    )


# -- memory and parallelism -----------------------------------------------------------------

def _plan(ctx: Context, **changes: Any) -> ParallelConfig:
    return dataclasses.replace(ctx.config, **changes)


@rule("activation_checkpointing")
def activation_checkpointing(ctx: Context) -> Recommendation | None:
    if not ctx.train or not ctx.parts.num_blocks or ctx.config.checkpointing == "none":
        return None
    without = _plan(ctx, checkpointing="none")
    before = ctx.memory(without)
    after = ctx.memory()
    gain = _gain(ctx, ctx.base, ctx.predict(parallel=without))
    kind = ctx.config.checkpointing
    return _make(
        ctx, tactic_id="activation_checkpointing",
        title=f"Activation checkpointing ({kind})", category="memory",
        rationale=(f"Without it the plan needs {fmt_bytes(before.total_bytes)} per device "
                   f"({fmt_bytes(before.activations_bytes)} of activations); checkpointing "
                   f"brings activations to {fmt_bytes(after.activations_bytes)} at the cost of "
                   "recomputing the forward pass in backward."),
        snippet_id="checkpointing", values={"selective": kind == "selective"}, gain=gain,
        memory_saving_bytes=before.activations_bytes - after.activations_bytes,
        trigger={"activations_bytes": before.activations_bytes},
    )


def _ddp_baseline(ctx: Context) -> ParallelConfig:
    return ParallelConfig(dp_degree=ctx.num_devices)


@rule("fsdp")
def fsdp(ctx: Context) -> Recommendation | None:
    c = ctx.config
    if not ctx.train or ctx.num_devices < 2 or c.zero_stage != 3 or c.tp_degree > 1 \
            or c.pp_degree > 1:
        return None
    ddp = ctx.memory(_ddp_baseline(ctx))
    mine = ctx.memory()
    gain = _gain(ctx, ctx.base, ctx.predict(parallel=dataclasses.replace(
        c, zero_stage=0, offload=False)))
    strategy = "fsdp+offload" if c.offload else "fsdp"
    fits = ctx.usable_bytes is not None and ddp.total_bytes <= ctx.usable_bytes
    return _make(
        ctx, tactic_id="fsdp", title="FSDP (ZeRO-3) instead of DDP", category="parallelism",
        rationale=(
            f"DDP keeps a full copy of weights, gradients and optimizer state on every "
            f"device: {fmt_bytes(ddp.total_bytes)} per device"
            f"{'' if fits else ', more than the ' + fmt_bytes(ctx.usable_bytes or 0) + ' usable'}. "
            f"Sharding over {c.dp_degree} devices needs {fmt_bytes(mine.total_bytes)}."),
        snippet_id="distributed",
        values={"strategy": strategy, "nproc": min(ctx.num_devices, 8),
                "bf16": ctx.precision in ("bf16", "fp8"), "num_steps": 10,
                "reshard_after_forward": c.reshard_after_forward},
        gain=gain, memory_saving_bytes=ddp.total_bytes - mine.total_bytes,
        trigger={"ddp_bytes_per_device": ddp.total_bytes},
    )


@rule("fsdp_overlap")
def fsdp_overlap(ctx: Context) -> Recommendation | None:
    """FSDP without resharding after forward, where the exposed all-gathers cost >= 3 % and the
    unsharded weights fit: priced by the cost model's overlap model (one gather per unit and
    micro-batch instead of two, the same share hidden under compute)."""
    c, capacity, base = ctx.config, ctx.usable_bytes, ctx.base
    if not ctx.train or c.zero_stage != 3 or c.offload or not c.reshard_after_forward \
            or base is None or capacity is None or base.communication_s <= 0:
        return None
    kept = _plan(ctx, reshard_after_forward=False)
    before, after = ctx.memory(), ctx.memory(kept)
    if after.total_bytes > capacity:
        return None
    new = ctx.predict(parallel=kept)
    gain = _gain(ctx, new)
    if gain is None or new is None or gain.point < MIN_SPEEDUP:
        return None
    share = base.communication_s / base.step_time_s
    return _make(
        ctx, tactic_id="fsdp_overlap",
        title="FSDP: keep gathered weights from forward to backward (reshard_after_forward=False)",
        category="parallelism",
        rationale=(f"Exposed communication is {_pct(share)} of the step "
                   f"({fmt_seconds(base.communication_s)} of {fmt_seconds(base.step_time_s)}): "
                   f"FSDP gathers every block's weights twice a step, for forward and again for "
                   f"backward, and not all of it hides under compute. Keeping them gathered "
                   f"halves the all-gathers (exposed: {fmt_seconds(new.communication_s)}) and "
                   f"needs {fmt_bytes(after.total_bytes)} per device instead of "
                   f"{fmt_bytes(before.total_bytes)} ({fmt_bytes(capacity)} usable). The code "
                   "also prefetches one block ahead in both passes."),
        snippet_id="distributed",
        values={"strategy": "fsdp", "nproc": min(ctx.num_devices, 8),
                "bf16": ctx.precision in ("bf16", "fp8"), "num_steps": 10,
                "reshard_after_forward": False},
        gain=gain, memory_saving_bytes=before.total_bytes - after.total_bytes,
        trigger={"exposed_communication_share": share,
                 "bytes_per_device_unsharded": after.total_bytes},
    )


@rule("deepspeed_zero")
def deepspeed_zero(ctx: Context) -> Recommendation | None:
    c = ctx.config
    if not ctx.train or ctx.num_devices < 2 or c.zero_stage not in (1, 2) or c.offload \
            or not ctx.is_cuda_gpu:
        return None
    ddp = ctx.memory(_ddp_baseline(ctx))
    mine = ctx.memory()
    gain = _gain(ctx, ctx.base, ctx.predict(parallel=dataclasses.replace(c, zero_stage=0,
                                                                         offload=False)))
    return _make(
        ctx, tactic_id="deepspeed_zero", title=f"DeepSpeed ZeRO-{c.zero_stage}",
        category="parallelism",
        rationale=(f"Sharding the optimizer state{' and gradients' if c.zero_stage == 2 else ''} "
                   f"over {c.dp_degree} devices takes memory from {fmt_bytes(ddp.total_bytes)} "
                   f"to {fmt_bytes(mine.total_bytes)} per device while keeping the weights "
                   "replicated (no all-gather in forward)."),
        snippet_id="deepspeed",
        values={"stage": c.zero_stage, "offload": c.offload, "nproc": min(ctx.num_devices, 8),
                "micro_batch": layout(c, ctx.prof.batch_size).micro_batch,
                "accum_steps": c.grad_accum_steps, "bf16": ctx.precision in ("bf16", "fp8")},
        gain=gain, memory_saving_bytes=ddp.total_bytes - mine.total_bytes,
        trigger={"ddp_bytes_per_device": ddp.total_bytes},
    )


@rule("tensor_parallel")
def tensor_parallel(ctx: Context) -> Recommendation | None:
    c = ctx.config
    if c.tp_degree < 2:
        return None
    flat = dataclasses.replace(c, dp_degree=c.dp_degree * c.tp_degree, tp_degree=1)
    before, after = ctx.memory(flat), ctx.memory()
    gain = _gain(ctx, ctx.base, ctx.predict(parallel=flat))
    return _make(
        ctx, tactic_id="tensor_parallel", title=f"Tensor parallel over {c.tp_degree} devices",
        category="parallelism",
        rationale=(f"Splitting each block's matmuls over {c.tp_degree} devices of a node "
                   f"divides weights and activations by {c.tp_degree}: "
                   f"{fmt_bytes(after.total_bytes)} per device instead of "
                   f"{fmt_bytes(before.total_bytes)} without it."),
        snippet_id="tensor_parallel",
        values={"tp": c.tp_degree, "dp": c.dp_degree, "nproc": c.num_devices},
        gain=gain, memory_saving_bytes=before.total_bytes - after.total_bytes,
        trigger={"bytes_per_device_without_tp": before.total_bytes},
    )


def _interleave_caveat(c: ParallelConfig) -> str:
    """What the pipeline snippet does not do: it runs plain 1F1B, one chunk per device."""
    if c.virtual_stages == 1:
        return ""
    plain = bubble_fraction(c.pp_degree, c.num_microbatches)
    inter = bubble_fraction(c.pp_degree, c.num_microbatches, c.virtual_stages)
    return (f" The plan is priced with Megatron-LM's interleaved schedule ({c.virtual_stages} "
            "virtual stages per device); the code below runs plain 1F1B (one chunk per "
            f"device), whose bubble is {plain:.0%} instead of {inter:.0%}.")


@rule("pipeline_parallel")
def pipeline_parallel(ctx: Context) -> Recommendation | None:
    c = ctx.config
    if c.pp_degree < 2:
        return None
    flat = dataclasses.replace(c, dp_degree=c.dp_degree * c.pp_degree, pp_degree=1,
                               num_microbatches=1, virtual_stages=1)
    before, after = ctx.memory(flat), ctx.memory()
    return _make(
        ctx, tactic_id="pipeline_parallel", title=f"Pipeline parallel over {c.pp_degree} stages",
        category="parallelism",
        rationale=(f"Each of {c.pp_degree} stages holds 1/{c.pp_degree} of the blocks: "
                   f"{fmt_bytes(after.total_bytes)} per device instead of "
                   f"{fmt_bytes(before.total_bytes)}; {c.num_microbatches} micro-batches keep "
                   "the pipeline bubble small." + _interleave_caveat(c)),
        snippet_id="pipeline_parallel",
        values={"pp": c.pp_degree, "microbatches": c.num_microbatches},
        gain=_gain(ctx, ctx.base, ctx.predict(parallel=flat)),
        memory_saving_bytes=before.total_bytes - after.total_bytes,
        trigger={"bytes_per_device_without_pp": before.total_bytes},
    )


@rule("expert_parallel")
def expert_parallel(ctx: Context) -> Recommendation | None:
    c, moe = ctx.config, ctx.prof.moe
    if c.ep_degree < 2 or moe is None:
        return None
    without = dataclasses.replace(c, ep_degree=1)
    before, after = ctx.memory(without), ctx.memory()
    gain = _gain(ctx, ctx.base, ctx.predict(parallel=without))
    local = moe.num_experts // c.ep_degree
    caveat = ("" if c.zero_stage == 0 and c.tp_degree == c.pp_degree == 1 else
              f" The script shows the expert split alone (dense weights replicated); the "
              f"plan ({c.label}) also shards or splits the dense part as the steps above do.")
    return _make(
        ctx, tactic_id="expert_parallel",
        title=f"Expert parallel over {c.ep_degree} devices ({local} experts each)",
        category="parallelism",
        rationale=(f"{moe.num_moe_layers} MoE layers of {moe.num_experts} experts (top-"
                   f"{moe.top_k}): splitting them over {c.ep_degree} devices leaves {local} "
                   f"per device and sends each token to its experts' device and back (two "
                   f"all-to-alls per layer and pass, an estimate); "
                   f"{fmt_bytes(after.total_bytes)} per device instead of "
                   f"{fmt_bytes(before.total_bytes)}." + caveat),
        snippet_id="expert_parallel",
        values={"ep": c.ep_degree, "dp": c.dp_degree // c.ep_degree,
                "nproc": min(c.dp_degree, 8), "num_steps": 10},
        gain=gain, memory_saving_bytes=before.total_bytes - after.total_bytes,
        trigger={"num_experts": moe.num_experts,
                 "bytes_per_device_without_ep": before.total_bytes},
    )


@rule("cpu_offload")
def cpu_offload(ctx: Context) -> Recommendation | None:
    c = ctx.config
    if not c.offload:
        return None
    on_device = dataclasses.replace(c, offload=False)
    before, after = ctx.memory(on_device), ctx.memory()
    per_node = after.cpu_bytes * min(c.num_devices, 8)
    if c.zero_stage == 3:
        snippet_id, values = "distributed", {
            "strategy": "fsdp+offload", "nproc": min(ctx.num_devices, 8),
            "bf16": ctx.precision in ("bf16", "fp8"), "num_steps": 10,
            "reshard_after_forward": True}
    else:  # ZeRO-Offload: stage 2 with the optimizer on the host (DeepSpeed)
        snippet_id, values = "deepspeed", {
            "stage": c.zero_stage, "offload": True, "nproc": min(ctx.num_devices, 8),
            "micro_batch": layout(c, ctx.prof.batch_size).micro_batch,
            "accum_steps": c.grad_accum_steps, "bf16": ctx.precision in ("bf16", "fp8")}
    return _make(
        ctx, tactic_id="cpu_offload", title="CPU offload of optimizer state and weights",
        category="memory",
        rationale=(f"No plan on {ctx.num_devices} x {ctx.spec.name} fits without offload: the "
                   f"best needs {fmt_bytes(before.total_bytes)} per device. Offloading to host "
                   f"memory leaves {fmt_bytes(after.total_bytes)} on each device and needs "
                   f"{fmt_bytes(per_node)} of host memory per node; the PCIe traffic slows the "
                   "step."),
        snippet_id=snippet_id, values=values,
        gain=_gain(ctx, ctx.base, ctx.predict(parallel=on_device)),
        memory_saving_bytes=before.total_bytes - after.total_bytes,
        trigger={"bytes_per_device_without_offload": before.total_bytes},
    )


@rule("grad_accumulation")
def grad_accumulation(ctx: Context) -> Recommendation | None:
    c = ctx.config
    if not ctx.train or c.grad_accum_steps < 2:
        return None
    whole = dataclasses.replace(c, grad_accum_steps=1)
    before, after = ctx.memory(whole), ctx.memory()
    gain = _gain(ctx, ctx.base, ctx.predict(parallel=whole))
    sizes = layout(c, ctx.prof.batch_size)
    replica = sizes.replica_batch
    return _make(
        ctx, tactic_id="grad_accumulation",
        title=f"Gradient accumulation: {c.grad_accum_steps} micro-batches per step",
        category="memory",
        rationale=(f"A forward pass over all {replica} samples of a replica needs "
                   f"{fmt_bytes(before.total_bytes)} per device; {c.grad_accum_steps} "
                   f"micro-batches of {sizes.micro_batch} need {fmt_bytes(after.total_bytes)} "
                   "and give the same update."),
        snippet_id="grad_accumulation",
        values={"accum_steps": c.grad_accum_steps, "effective_batch": replica},
        gain=gain, memory_saving_bytes=before.total_bytes - after.total_bytes,
        trigger={"bytes_per_device_whole_batch": before.total_bytes},
    )


#: Batch multiples a larger-batch step tries, and the least throughput gain it is worth.
BATCH_FACTORS = (2, 4, 8, 16)
MIN_BATCH_GAIN = 1.1
#: Inference: of the batches within this share of the highest predicted throughput, the
#: smallest is offered, since each doubling doubles every request's wait for its call. The
#: dashboard's MLP (256-1024-256) at batch 512 was predicted 1.05-1.08x the requests per second
#: of batch 256 on a 2-core CPU; measured 1.03x on a Xeon VM (2026-12-06) and 0.69x on an AMD
#: EPYC VM (2026-12-07: its 2 MiB activations were faulted in afresh every call, 3.9 MiB of
#: minor faults a call against none at 256): twice the latency for nothing.
INFER_BATCH_SHARE = 0.9


def _batch_options(ctx: Context, capacity: float):
    """``(batch, config, gain, bytes)`` for each larger batch that fits, without and (training
    a model with blocks and no checkpointing yet) with activation checkpointing."""
    configs = [ctx.config]
    if ctx.train and ctx.parts.num_blocks and ctx.config.checkpointing == "none":
        configs.append(dataclasses.replace(ctx.config, checkpointing="full"))
    fixed_s = _fixed_kernel_s(ctx) if ctx.spec.kind == "cpu" else 0.0
    for config in configs:
        for factor in BATCH_FACTORS:
            batch = ctx.prof.batch_size * factor
            mem = plan_memory(ctx.prof, config, precision=ctx.precision, parts=ctx.parts,
                              micro_batch=layout(config, batch).micro_batch)
            if mem.total_bytes > capacity:
                break
            pred = ctx.predict(ctx.predictor.at(ctx.prof, batch), parallel=config)
            if pred is None:
                break
            pred = cpu_batch_floor(ctx.spec, ctx.base, pred, fixed_s=fixed_s)
            yield batch, config, throughput_gain(ctx.base, pred), mem.total_bytes


def cpu_batch_floor(spec: HardwareSpec, base: Prediction, new: Prediction, *,
                    fixed_s: float = 0.0) -> Prediction:
    """``new`` (a larger batch) on a CPU with its kernel time per sample no lower than
    ``base``'s: only the fixed costs per step (per-op overhead, host work, and the ``fixed_s``
    of kernel time that does not grow with the batch: the optimizer step and autocast's weight
    casts, :func:`_fixed_kernel_s`) are amortised.

    A CPU runs the kernels on the host's own cores, already busy at small batches; the
    calibration's per-size curves are timed in loops on buffers hot in cache, so they reward
    the larger calls, while in a real step a larger batch's activations fall out of the cache.
    Measured by ``bench/plan_cpu.py`` on the 2-core development CPU (aa.verify_plan, in turns):
    the larger batch ran 0.61x (conv net, batch 16 -> 32) and 1.18x (BERT, 8 -> 16) where the
    cost model's size curves had predicted 1.10x and 1.61x. The optimizer step updates the
    same parameters whatever the batch, so its kernel time (``fixed_s``, part of ``base``'s
    and ``new``'s) is kept once per step, not scaled: training the dashboard's small MLP
    (256-1024-256, AdamW) measured 1.70x at batch 64 over 32 on that CPU. Elsewhere ``new`` is
    returned as it is."""
    if spec.kind != "cpu":
        return new
    scale = (new.throughput * new.step_time_s) / (base.throughput * base.step_time_s)
    fixed_s = min(max(fixed_s, 0.0), base.compute_s + base.memory_s)
    floor_s = (base.compute_s + base.memory_s - fixed_s) * scale + fixed_s
    body_s = new.compute_s + new.memory_s
    return new if body_s >= floor_s else _shifted(new, floor_s - body_s)


def _fixed_kernel_s(ctx: Context) -> float:
    """Kernel time per step that does not grow with the batch: the optimizer step and
    autocast's weight casts (each forward casts every weight to 16 bit: on the development CPU
    a 4096 x 4096 FP32 weight took 8.5 ms to cast, a bf16 GEMM on 256 rows with it 4.4 ms)."""
    from ..costmodel.ops import weight_cast_share

    base = ctx.base
    casts = base.amp_cast_s * weight_cast_share(ctx.prof) if base is not None else 0.0
    return _optimizer_kernel_s(ctx) + casts


def _optimizer_kernel_s(ctx: Context) -> float:
    """Kernel time (compute + memory) of the step's optimizer ops alone under the chosen plan;
    0 when not training or the cost model cannot price them apart."""
    if not ctx.train or not any(op.phase == "optimizer" for op in ctx.prof.ops):
        return 0.0
    only = transforms.map_ops(ctx.prof, lambda op: op if op.phase == "optimizer" else None)
    try:
        pred = ctx.predict(only)
    except AIAdvisorError:
        return 0.0
    return 0.0 if pred is None else pred.compute_s + pred.memory_s


@rule("larger_batch")
def larger_batch(ctx: Context) -> Recommendation | None:
    """The batch (and checkpointing, where it lets a larger batch fit) of highest throughput
    within memory; a smaller batch is kept unless the larger one gains 5 % more. Inference
    takes the smallest batch within :data:`INFER_BATCH_SHARE` of the highest throughput."""
    base, capacity = ctx.base, ctx.usable_bytes
    if base is None or capacity is None or ctx.config.grad_accum_steps > 1 or not ctx.plan_fits:
        return None
    best = None
    options = sorted(_batch_options(ctx, capacity), key=lambda o: o[0])
    for option in options:
        if option[2].point >= MIN_BATCH_GAIN and (
                best is None or option[2].point >= 1.05 * best[2].point):
            best = option
    if best is None:
        return None
    if not ctx.train:
        top = max(o[2].point for o in options)
        batch, _, gain, mem = min(
            (o for o in options
             if o[2].point >= max(MIN_BATCH_GAIN, INFER_BATCH_SHARE * top)),
            key=lambda o: o[0])
        return _larger_inference_batch(ctx, batch, gain, mem, capacity)
    batch, config, gain, mem = best
    ckpt = config.checkpointing != ctx.config.checkpointing
    rec = _make(
        ctx, tactic_id="larger_batch",
        title=f"Larger batch: {batch} per device"
              + (" with activation checkpointing" if ckpt else ""),
        category="speed",
        rationale=(f"At batch {ctx.prof.batch_size} the step uses "
                   f"{fmt_bytes(ctx.memory().total_bytes)} of {fmt_bytes(capacity)} usable; "
                   f"batch {batch} "
                   + ("fits with activation checkpointing " if ckpt else "still fits ")
                   + f"({fmt_bytes(mem)}) and keeps the device busier; of the batches that "
                   "fit, it has the highest predicted throughput (gain shown"
                   + (", net of the recomputation" if ckpt else "")
                   + "; retune the learning rate)."),
        snippet_id="larger_batch", values={"batch_size": batch,
                                           "old_batch_size": ctx.prof.batch_size},
        gain=gain, trigger={"free_bytes": capacity - ctx.memory().total_bytes},
        effect={"batch_size": batch, "checkpointing": config.checkpointing},
    )
    if ckpt:
        rec = dataclasses.replace(rec, code=ctx.render("checkpointing", selective=False)
                                  + "\n" + rec.code)
    return rec


def _larger_inference_batch(ctx: Context, batch: int, gain: Speedup, mem: float,
                            capacity: float) -> Recommendation:
    """Inference: more requests per call is a throughput-for-latency trade; say both."""
    base = ctx.base
    new = ctx.predict(ctx.predictor.at(ctx.prof, batch))
    if new is not None:
        new = cpu_batch_floor(ctx.spec, base, new)
    call_s = new.step_time_s if new is not None else base.step_time_s * batch / gain.point
    return _make(
        ctx, tactic_id="larger_batch",
        title=f"Throughput serving: {batch} requests per call (latency rises)",
        category="speed",
        rationale=(f"At batch {ctx.prof.batch_size} a call takes "
                   f"{fmt_seconds(base.step_time_s)} and the device is underused; "
                   f"{batch} requests per call take {fmt_seconds(call_s)}: "
                   f"{gain.point:.2f}x the requests per second, but each request waits for "
                   f"the longer call and for its batch to fill (a latency-for-throughput "
                   f"trade; keep batch {ctx.prof.batch_size} where latency matters). "
                   f"{fmt_bytes(mem)} of {fmt_bytes(capacity)} usable."),
        snippet_id="larger_batch_infer",
        values={"batch_size": batch, "old_batch_size": ctx.prof.batch_size}, gain=gain,
        trigger={"free_bytes": capacity - ctx.memory().total_bytes,
                 "call_s": base.step_time_s},
        effect={"batch_size": batch, "checkpointing": ctx.config.checkpointing},
    )


@rule("optimizer_8bit")
def optimizer_8bit(ctx: Context) -> Recommendation | None:
    if not ctx.train or ctx.prof.optimizer not in ("adam", "adamw") or not ctx.is_cuda_gpu:
        return None
    mem = ctx.memory()
    if mem.optimizer_bytes < 0.25 * mem.total_bytes:
        return None
    # Adam moments: 8 bytes per parameter -> 2 (the fp32 master copy stays).
    moments_share = 8 / 12 if ctx.precision in ("bf16", "fp16", "fp8") else 1.0
    saving = mem.optimizer_bytes * moments_share * (1 - 2 / 8)
    gain = _gain_of(ctx, transforms.quantized_optimizer_state(ctx.step_prof,
                                                              old_state_bytes=4,
                                                              new_state_bytes=1))
    class_name = "AdamW8bit" if ctx.prof.optimizer == "adamw" else "Adam8bit"
    return _make(
        ctx, tactic_id="optimizer_8bit", title="8-bit optimizer state (bitsandbytes)",
        category="memory",
        rationale=(f"Optimizer state is {fmt_bytes(mem.optimizer_bytes)} of "
                   f"{fmt_bytes(mem.total_bytes)} per device "
                   f"({_pct(mem.optimizer_bytes / mem.total_bytes)}); 8-bit moments with "
                   "block-wise scales use a quarter of the space."),
        snippet_id="optimizer_8bit", values={"class_name": class_name}, gain=gain,
        memory_saving_bytes=saving, trigger={"optimizer_bytes": mem.optimizer_bytes},
    )


@rule("fused_optimizer")
def fused_optimizer(ctx: Context) -> Recommendation | None:
    if not ctx.train or ctx.prof.optimizer == "none":
        return None
    steps = [op for op in ctx.step_prof.ops if op.phase == "optimizer"]
    launches = sum(op.count for op in steps)
    cpu = ctx.spec.kind == "cpu"
    # On a GPU the gain is the launches saved; on a CPU the default step is a Python loop of
    # update ops that each stream whole tensors, which a fused step reads and writes once.
    if launches < 20 and not cpu:
        return None
    gain = _gain_of(ctx, transforms.fused_optimizer(ctx.step_prof))
    if gain is None or gain.point < 1.01:
        return None
    flag = "fused" if ctx.prof.optimizer in ("adam", "adamw", "sgd", "sgd_momentum") else "foreach"
    passes = UNFUSED_OPTIMIZER_TENSORS.get(ctx.prof.optimizer)
    fused_passes = OPTIMIZER_TRAFFIC.get(ctx.prof.optimizer, (None,))[0]
    why = (f"PyTorch's default step on a CPU loops over the {launches:.0f} parameter tensors, "
           f"running each update op over whole tensors ({passes} tensor passes per element, "
           f"where a fused step, one kernel for all of them, makes {fused_passes})."
           if cpu else
           f"The optimizer step launches kernels for {launches:.0f} parameter tensors "
           "one by one; a fused step updates them all in one kernel.")
    return _make(
        ctx, tactic_id="fused_optimizer", title=f"{flag.capitalize()} optimizer step",
        category="speed",
        rationale=why,
        snippet_id="fused_optimizer" if flag == "fused" else "foreach_optimizer", gain=gain,
        trigger={"optimizer_launches": launches},
    )


@rule("dataloader")
def dataloader(ctx: Context) -> Recommendation | None:
    base = ctx.base
    if base is None or ctx.spec.kind in ("cpu",) or ctx.spec.vendor == "Apple":
        return None
    copy_s = ctx.prof.memory.inputs_bytes / (PCIE_COPY_GBS * 1e9)
    share = copy_s / base.step_time_s
    if share < 0.02:
        return None
    after, before = base, _shifted(base, copy_s)
    return _make(
        ctx, tactic_id="dataloader",
        title="DataLoader workers, pinned memory and prefetching", category="data",
        rationale=(f"Each step copies {fmt_bytes(ctx.prof.memory.inputs_bytes)} of inputs to the "
                   f"device: about {fmt_seconds(copy_s)} over PCIe, {_pct(share)} of the "
                   "predicted step if it is not overlapped with compute."),
        snippet_id="dataloader",
        values={"num_workers": 8, "batch_size": ctx.prof.batch_size, "prefetch": 4},
        gain=speedup(before, after), trigger={"input_copy_share": share},
    )


@rule("cpu_threads")
def cpu_threads(ctx: Context) -> Recommendation | None:
    """More intra-op threads when PyTorch uses fewer than the cores the process may use.

    Priced on the cost model's own breakdown (Amdahl): the compute-bound part of the step
    (``compute_s``) is split over the threads, so it shrinks by ``threads now / cores``; the
    memory-bound part (DRAM bandwidth saturates with a few cores) and the host's Python work
    are kept as they are, so the gain is a lower bound. More threads than cores (a container
    quota below the host's CPU count) is not priced: the calibration measured it as it is.
    The cost model's CPU figures are taken as those of the current thread count (a benchmark
    cached at another thread count is not rescaled).
    """
    if ctx.spec.kind != "cpu":
        return None
    settings = ctx.threads
    if settings is None:
        if not is_local_cpu(ctx.spec):
            return None
        settings = thread_settings()
    base = ctx.base
    now, cores = settings.intra_op_threads, settings.usable_cores
    if base is None or now >= cores or base.compute_s <= 0:
        return None
    saved = base.compute_s * (1 - now / cores)
    gain = _gain(ctx, _shifted(base, -saved))
    if gain is None or gain.point < MIN_SPEEDUP:
        return None
    return _make(
        ctx, tactic_id="cpu_threads", title=f"CPU threads: {cores} intra-op threads, not {now}",
        category="speed",
        rationale=(f"PyTorch splits each op over {now} thread{'s' if now > 1 else ''} but the "
                   f"process can use {cores} cores ({settings.source}). The compute-bound ops "
                   f"take {fmt_seconds(base.compute_s)} of the "
                   f"{fmt_seconds(base.step_time_s)} step; over {cores} threads they take "
                   f"{fmt_seconds(base.compute_s * now / cores)} (memory-bound ops and Python "
                   "overhead priced unchanged)."),
        snippet_id="cpu_threads", values={"threads": cores, "current": now}, gain=gain,
        trigger={"intra_op_threads": now, "usable_cores": cores,
                 "compute_share": base.compute_s / base.step_time_s},
    )


# -- inference ------------------------------------------------------------------------------

@rule("dynamic_int8")
def dynamic_int8(ctx: Context) -> Recommendation | None:
    """Int8 Linear layers with activations quantized on the fly: fbgemm/oneDNN on a CPU,
    int8 tensor cores (W8A8, torchao) on an NVIDIA GPU. GPUs are limited to datacenter and
    workstation parts of Ampere or newer (a TF32 figure in the catalog), where torchao's int8
    path is used; Turing and Jetson boards are left to TensorRT (the export step)."""
    gpu = (ctx.spec.vendor == "NVIDIA" and ctx.spec.kind == "gpu"
           and ctx.spec.tf32_tflops is not None and support_level(ctx.spec, "int8") == "full")
    if ctx.train or not (ctx.spec.kind == "cpu" or gpu) \
            or WEIGHT_BYTES[ctx.precision] <= WEIGHT_BYTES["int8"]:
        return None
    share = ctx.flops_share("gemm")
    if share < 0.5:
        return None
    gain = _gain(ctx, ctx.predict(precision="int8"))
    if gain is None or gain.point < MIN_SPEEDUP:
        return None
    # The saving is against the weights as the model runs now: 4 -> 1 byte from fp32, 2 -> 1
    # from bf16/fp16 (units.WEIGHT_BYTES, through the planner's weight memory).
    before = ctx.memory().weights_bytes
    after = ctx.memory(precision="int8").weights_bytes
    if gpu:
        return _make(
            ctx, tactic_id="dynamic_int8", title="Int8 weights and activations (W8A8, torchao)",
            category="precision",
            rationale=(f"Linear layers are {_pct(share)} of the FLOPs and {ctx.spec.name} has "
                       f"{ctx.spec.int8_tops:g} dense int8 TOPS; int8 weights take "
                       f"{fmt_bytes(after)} instead of {fmt_bytes(before)} in {ctx.precision}."),
            snippet_id="int8_gpu", gain=gain, memory_saving_bytes=before - after,
            trigger={"gemm_flops_share": share},
        )
    return _make(
        ctx, tactic_id="dynamic_int8", title="Dynamic int8 quantization on the CPU",
        category="precision",
        rationale=(f"Linear layers are {_pct(share)} of the FLOPs and the CPU has int8 dot-"
                   f"product instructions; int8 weights take {WEIGHT_BYTES['int8']:g} byte each "
                   f"instead of {WEIGHT_BYTES[ctx.precision]:g} in {ctx.precision} "
                   f"({fmt_bytes(after)} instead of {fmt_bytes(before)})."),
        snippet_id="dynamic_int8", gain=gain, memory_saving_bytes=before - after,
        trigger={"gemm_flops_share": share},
    )


def _weight_only(ctx: Context, precision: str, *, tactic_id: str, title: str, weights: str,
                 values: dict | None = None) -> Recommendation | None:
    """A weight-only format (weights stored in ``precision``, computed in 16 bit) where the
    device work is memory-bound: what it gains is the weight bytes it no longer reads."""
    base = ctx.base
    if ctx.train or base is None or not ctx.is_cuda_gpu or base.memory_s <= base.compute_s \
            or WEIGHT_BYTES[ctx.precision] <= WEIGHT_BYTES[precision]:
        return None
    gain = _gain(ctx, ctx.predict(precision=precision))
    if gain is None or gain.point < MIN_SPEEDUP:
        return None
    before = ctx.memory().weights_bytes
    after = ctx.memory(precision=precision).weights_bytes
    return _make(
        ctx, tactic_id=tactic_id, title=title, category="precision",
        rationale=(f"The device work is memory-bound ({fmt_seconds(base.memory_s)} moving data "
                   f"vs {fmt_seconds(base.compute_s)} computing); {weights} read "
                   f"{fmt_bytes(after)} instead of {fmt_bytes(before)}."),
        snippet_id=tactic_id, values=values, gain=gain, memory_saving_bytes=before - after,
        trigger={"memory_s": base.memory_s, "compute_s": base.compute_s},
    )


@rule("weight_only_int8")
def weight_only_int8(ctx: Context) -> Recommendation | None:
    """int8 weights computed in 16 bit (W8A16): per-channel scales, no calibration data."""
    return _weight_only(ctx, "int8wo", tactic_id="weight_only_int8",
                        title="8-bit weight-only quantization (W8A16)",
                        weights="int8 weights with one scale per output channel (less accuracy "
                                "risk than 4 bits, no calibration data)")


@rule("weight_only_int4")
def weight_only_int4(ctx: Context) -> Recommendation | None:
    return _weight_only(ctx, "int4", tactic_id="weight_only_int4",
                        title="4-bit weight-only quantization (GPTQ/AWQ)",
                        weights="4-bit weights", values={"group_size": 128})


@rule("weight_only_nf4")
def weight_only_nf4(ctx: Context) -> Recommendation | None:
    capacity = ctx.usable_bytes
    if ctx.train or capacity is None or not ctx.is_cuda_gpu:
        return None
    single = ParallelConfig()
    now = ctx.memory(single)
    nf4 = ctx.memory(single, precision="nf4")
    if now.total_bytes <= capacity or nf4.total_bytes > capacity:
        return None
    gain = _gain(ctx, ctx.predict(precision="nf4", parallel=single), ctx.predict(parallel=single))
    return _make(
        ctx, tactic_id="weight_only_nf4", title="NF4 weights: fit the model on one device",
        category="memory",
        rationale=(f"In {ctx.precision} the model needs {fmt_bytes(now.total_bytes)}, more than "
                   f"one {ctx.spec.name} ({fmt_bytes(capacity)} usable); with NF4 weights it "
                   f"needs {fmt_bytes(nf4.total_bytes)}."),
        snippet_id="weight_only_nf4", gain=gain,
        memory_saving_bytes=now.total_bytes - nf4.total_bytes,
        trigger={"bytes_on_one_device": now.total_bytes},
    )


@rule("sparsity_24")
def sparsity_24(ctx: Context) -> Recommendation | None:
    base = ctx.base
    ampere_or_newer = ctx.spec.vendor == "NVIDIA" and ctx.spec.tf32_tflops is not None
    if ctx.train or base is None or not ampere_or_newer or base.compute_s <= base.memory_s:
        return None
    total = sum(op.flops for op in ctx.step_prof.ops)
    share = sum(op.flops for op in ctx.step_prof.ops
                if transforms.sparse_qualifies(op)) / total if total else 0.0
    if share < 0.5:
        return None
    gain = _gain_of(ctx, transforms.sparse_gemms(ctx.step_prof))
    if gain is None or gain.point < MIN_SPEEDUP:
        return None
    return _make(
        ctx, tactic_id="sparsity_24", title="2:4 structured sparsity", category="model",
        rationale=(f"The device work is compute-bound ({fmt_seconds(base.compute_s)} computing vs "
                   f"{fmt_seconds(base.memory_s)} moving data) and {_pct(share)} of its FLOPs "
                   "are Linear GEMMs large enough for the sparse kernels; they are priced at "
                   f"the measured {transforms.SPARSE_GEMM_SPEEDUP:g}x (1.1-1.3x in published "
                   f"measurements), not 2x. Pruning costs accuracy: fine-tune afterwards and "
                   "measure."),
        snippet_id="sparsity_24", values={"dtype": "float16"}, gain=gain,
        trigger={"qualifying_gemm_flops_share": share, "compute_s": base.compute_s},
    )


@rule("serving")
def serving(ctx: Context) -> Recommendation | None:
    base = ctx.base
    p = ctx.prof
    if ctx.train or base is None or not p.num_blocks or not p.seq_len or p.batch_size > 8 \
            or not ctx.is_cuda_gpu:
        return None
    pred = ctx.predict(ctx.predictor.at(p, p.batch_size * 8))
    if pred is None:
        return None
    gain = throughput_gain(base, pred)
    if gain.point < 1.2:
        return None
    # KV cache per sequence, upper bound without grouped-query attention: keys and values of
    # width d_model per layer, 2 bytes each: 2 * L * d * s * 2.
    d_model = p.block_output_bytes / (p.batch_size * p.seq_len * dtype_bytes(p.compute_dtype))
    kv_bytes = 2 * p.num_blocks * d_model * p.seq_len * 2
    free = (ctx.usable_bytes or 0) - ctx.memory().weights_bytes
    max_seqs = int(max(1, min(256, free // kv_bytes))) if kv_bytes else 64
    return _make(
        ctx, tactic_id="serving", title="Serve with continuous batching (vLLM / TGI)",
        category="serving",
        rationale=(f"At batch {p.batch_size} the device is underused: the cost model predicts "
                   f"{gain.point:.1f}x the throughput at batch {p.batch_size * 8}. A serving "
                   "engine batches concurrent requests and pages the KV cache "
                   f"(up to {fmt_bytes(kv_bytes)} per {p.seq_len}-token sequence)."),
        snippet_id="serving",
        values={"seq_len": p.seq_len, "kv_cache_gib": round(kv_bytes / 2**30, 3),
                "max_num_seqs": max_seqs, "max_tokens": 256},
        gain=gain, trigger={"batch_size": p.batch_size},
    )


@rule("onnx_export")
def onnx_export(ctx: Context) -> Recommendation | None:
    if ctx.train:
        return None
    gain = _gain_of(ctx, transforms.fuse_elementwise(ctx.step_prof,
                                                     keep_rng=ctx.spec.kind == "cpu"))
    if gain is None or gain.point < MIN_SPEEDUP:
        return None
    return _make(
        ctx, tactic_id="onnx_export", title="Export to ONNX Runtime / TensorRT",
        category="export",
        rationale=("For deployment, an inference engine fuses the memory-bound ops and drops "
                   "Python overhead; the cost model prices the fusion alone."),
        snippet_id="onnx_export", gain=gain, trigger={"mode": "infer"},
    )


#: The seed article's pruning recipe: keep the 80 % most important channels.
PRUNE_KEEP = 0.8


@rule("distill_prune")
def distill_prune(ctx: Context) -> Recommendation | None:
    if ctx.train or ctx.spec.kind != "edge":
        return None
    keep = PRUNE_KEEP
    gain = _gain_of(ctx, transforms.pruned(ctx.step_prof, keep=keep))
    weights = ctx.memory().weights_bytes
    return _make(
        ctx, tactic_id="distill_prune", title="Prune channels and distil for the edge device",
        category="model",
        rationale=(f"{ctx.spec.name} is an edge device; keeping {_pct(keep)} of each layer's "
                   f"channels cuts FLOPs to {_pct(keep * keep)}; distillation recovers accuracy."),
        snippet_id="distill_prune",
        values={"prune_percent": round(100 * (1 - keep)), "amount": round(1 - keep, 2),
                "temperature": 2.0},
        gain=gain, memory_saving_bytes=weights * (1 - keep * keep),
        trigger={"kind": ctx.spec.kind},
    )


@rule("embedding_int8")
def embedding_int8(ctx: Context) -> Recommendation | None:
    if ctx.train:
        return None
    emb_params = sum(m.num_params for m in ctx.prof.modules if m.type == "Embedding")
    if not ctx.prof.num_params or emb_params < 0.2 * ctx.prof.num_params:
        return None
    bytes_now = ctx.memory().weights_bytes / ctx.prof.num_params
    factor = 1 / bytes_now if bytes_now > 1 else 1.0
    if factor >= 1:
        return None
    saving = emb_params * (bytes_now - 1)
    capacity = ctx.usable_bytes
    if capacity and saving < MIN_MEMORY_SHARE * capacity:
        return None  # noise: the step fits either way and the lookups get slower
    gain = _gain_of(ctx, transforms.embedding_bytes(ctx.step_prof, factor=factor))
    return _make(
        ctx, tactic_id="embedding_int8", title="8-bit embedding tables", category="memory",
        rationale=(f"Embeddings hold {_pct(emb_params / ctx.prof.num_params)} of the "
                   f"parameters; 8-bit rows with per-row scales save {fmt_bytes(saving)}"
                   + (f" ({_pct(saving / capacity)} of the {fmt_bytes(capacity)} usable)"
                      if capacity else "")
                   + ". Each lookup dequantises its rows, so lookups get slower (on the "
                   "development CPU 60 us instead of 13 us for BERT's tables)."),
        snippet_id="embedding_int8", gain=gain,
        memory_saving_bytes=emb_params * (bytes_now - 1),
        trigger={"embedding_params": emb_params}, effect={"factor": factor},
    )


def recommend(ctx: Context) -> list[Recommendation]:
    """Every rule that fires, fit-enabling memory tactics first, then by predicted speedup."""
    out = []
    for _, fn in RULES:
        rec = fn(ctx)
        if rec is not None:
            out.append(rec)
    # What makes the step fit comes first, in this order; then the rest by predicted speedup.
    enabling = ["cpu_offload", "weight_only_nf4", "fsdp", "deepspeed_zero", "tensor_parallel",
                "pipeline_parallel", "activation_checkpointing", "grad_accumulation"]

    def order(rec: Recommendation) -> tuple:
        if rec.id in enabling:
            return (0, enabling.index(rec.id), 0.0)
        return (1, 0, -(rec.predicted_speedup or 0.0))

    return sorted(out, key=order)
