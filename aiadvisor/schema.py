"""Frozen, keyword-only dataclasses of plain values exchanged between the layers.

Nothing here imports torch, IPython, ipywidgets or altair. ``pandas`` is imported lazily by the
few properties that return DataFrames.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidArgumentError
from .units import PRECISION_COLUMN, PRECISION_REQUIRES, PRECISIONS

OP_CLASSES = ("gemm", "conv", "attention", "memory", "embedding", "collective", "optimizer",
              "other")
PHASES = ("forward", "backward", "optimizer")
PROFILE_PATHS = ("fake", "meta", "real")


def _check_nonneg(obj: Any, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if value is not None and (not math.isfinite(value) or value < 0):
            raise InvalidArgumentError(
                f"{type(obj).__name__}.{name}={value!r} is not valid: "
                "expected a finite number >= 0."
            )


@dataclass(frozen=True, kw_only=True)
class OpRecord:
    """Aten ops of one kind, in one module and one phase, summed over one step.

    FLOPs and bytes are totals over ``count`` calls for the whole batch. ``flops_per_call`` and
    ``bytes_per_call`` (means) are what a cost model keys its efficiency on.
    """

    op: str
    """Aten overload packet, e.g. ``"aten.mm"``."""
    op_class: str
    """One of :data:`OP_CLASSES`."""
    phase: str
    """One of :data:`PHASES`."""
    module: str
    """Fully qualified owning module ("" for the root)."""
    dtype: str
    """Dtype of the first tensor output (e.g. ``"float32"``, ``"bfloat16"``)."""
    count: float
    flops: float
    bytes_read: float
    bytes_written: float
    repeat: int = 1
    """How many identical blocks this record stands for (already included in the totals)."""

    def __post_init__(self) -> None:
        _check_nonneg(self, "count", "flops", "bytes_read", "bytes_written")

    @property
    def bytes_total(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def flops_per_call(self) -> float:
        return self.flops / self.count if self.count else 0.0

    @property
    def bytes_per_call(self) -> float:
        return self.bytes_total / self.count if self.count else 0.0


@dataclass(frozen=True, kw_only=True)
class MemoryBreakdown:
    """Bytes held during one step. ``peak_bytes`` is the high-water mark of all live tensors."""

    weights_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    """Tensors saved by forward for backward (train) or the largest live set of intermediate
    tensors (infer), excluding weights and inputs."""
    inputs_bytes: int
    peak_bytes: int
    temporaries_bytes: int = 0
    """Peak minus everything persistent at that moment: short-lived workspaces."""
    process_bytes: int | None = None
    """What the process shows at the step's peak, beyond the allocator-level ``peak_bytes``:
    the CPU resident set (RSS) for a model on the CPU, ``torch.cuda.max_memory_reserved()`` for
    one on a CUDA device; ``process_label`` says which and how it was estimated. None when it
    cannot be estimated (no psutil, another device)."""
    process_label: str = ""
    process_low_bytes: int | None = None
    process_high_bytes: int | None = None
    """P10-P90 band of ``process_bytes`` where it is estimated (CPU resident set)."""
    cuda_reserved_bytes: int = 0
    """``torch.cuda.max_memory_reserved()`` the same step would show on a CUDA device
    (estimated: the step replayed through the caching allocator's policy, blocks, segments and
    the holes between them, plus the cuBLAS workspace)."""
    cuda_peak_bytes: int | None = None
    """``torch.cuda.max_memory_allocated()`` the same step would show on a CUDA device: the
    peak without the ``T x T`` tensors a CPU or meta trace's attention math path saved, which
    a GPU's fused kernel does not keep, with training dropout masks at one byte an element
    (``native_dropout``; a CPU trace's composite keeps them in the input's dtype), and with the
    optimizer step as CUDA runs it (Adam's foreach update: one parameter-sized temporary list;
    a CPU's for-loop holds two of one parameter's size), and with the cuBLAS workspace PyTorch
    takes from the caching allocator when the step has GEMMs (None: as ``peak_bytes``)."""

    def __post_init__(self) -> None:
        _check_nonneg(
            self, "weights_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes",
            "inputs_bytes", "peak_bytes", "temporaries_bytes", "process_bytes",
            "process_low_bytes", "process_high_bytes", "cuda_reserved_bytes",
            "cuda_peak_bytes",
        )

    @property
    def persistent_bytes(self) -> int:
        """Weights + gradients + optimizer state: what stays between steps."""
        return self.weights_bytes + self.grads_bytes + self.optimizer_bytes

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class ModuleRecord:
    """Per-module totals (own ops only, not children) for the ``layers`` table."""

    name: str
    type: str
    depth: int
    num_params: int
    param_bytes: int
    flops_forward: float
    flops_backward: float
    bytes_forward: float
    bytes_backward: float
    activation_bytes: int
    """Bytes of tensors created in this module's forward and saved for backward."""
    repeat: int = 1
    """How many identical blocks share this row (``model.layers.*.mlp``): values are per block."""


@dataclass(frozen=True, kw_only=True)
class HardwareSpec:
    """One accelerator or CPU. Every throughput figure is *dense* (never 2:4-sparse)."""

    name: str
    vendor: str
    kind: str
    """gpu, tpu, npu, cpu or edge."""
    memory_gb: float | None = None
    """Device memory as the vendor states it ("80 GB"). Accelerator memory comes in binary sizes
    (an H100's five 16 GiB HBM3 stacks are its "80 GB"; CUDA reports 79.6 GiB of it), so
    :attr:`memory_bytes` reads the figure as GiB."""
    memory_bw_gbs: float | None = None
    fp32_tflops: float | None = None
    tf32_tflops: float | None = None
    bf16_tflops: float | None = None
    fp16_tflops: float | None = None
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    int4_tops: float | None = None
    tdp_w: float | None = None
    interconnect: str | None = None
    interconnect_bw_gbs: float | None = None
    """Per-device bandwidth to its peers, GB/s, as the vendor states it (see ``notes``)."""
    usd_per_hour: float | None = None
    """On-demand rental list price of one device for one hour (USD), where it can be rented."""
    usd_purchase: float | None = None
    """List or street purchase price of one device (USD), where it can be bought; see
    :func:`aiadvisor.hardware.pricing.hourly_cost` for the amortised $/hour."""
    price_kind: str | None = None
    """rent, buy or both: which of the two prices are given."""
    price_source: str | None = None
    """Where the price was read (page title or URL)."""
    price_date: str | None = None
    """When the price was read (YYYY-MM or YYYY-MM-DD); prices move."""
    year: int | None = None
    source: str = ""
    notes: str = ""
    aliases: tuple[str, ...] = ()
    measured: bool = False
    """True when the figures come from benchmarking the attached device
    (``detect(benchmark=True)``)."""
    launch_overhead_us: float | None = None
    fp4_tflops: float | None = None
    """Dense FP4 (NVFP4/MXFP4) tensor peak where the hardware has one (Blackwell, CDNA4)."""
    segment: str | None = None
    """Who buys it: datacenter, workstation, consumer or edge (a buyer's filter; ``kind`` says
    what the chip is)."""
    inference_only: bool = False
    """The vendor's software runs inference only on it (AWS Inferentia2: torch-neuronx trains
    on Trainium; Qualcomm Cloud AI 100; on-device NPUs): a training step is not priced there
    (catalog column ``inference_only``, its source in ``notes``)."""
    graph_replay: bool = False
    """A what-if, never a catalog column: the step is replayed from a captured CUDA graph
    (``torch.compile(mode="reduce-overhead")``), so eager PyTorch's host work no longer bounds
    it (the plan's CUDA-graphs step sets it)."""

    def __post_init__(self) -> None:
        _check_nonneg(
            self, "memory_gb", "memory_bw_gbs", "fp32_tflops", "tf32_tflops", "bf16_tflops",
            "fp16_tflops", "fp8_tflops", "int8_tops", "int4_tops", "tdp_w",
            "interconnect_bw_gbs", "usd_per_hour", "usd_purchase", "launch_overhead_us",
            "fp4_tflops",
        )

    @property
    def memory_bytes(self) -> int | None:
        return None if self.memory_gb is None else int(self.memory_gb * 1024**3)

    def peak_tflops(self, precision: str) -> float | None:
        """Dense peak for ``precision`` (TFLOP/s, or TOP/s for integer formats); None if the
        device has no full-rate engine for it. int8wo/int4/nf4 weight-only formats compute in 16
        bit; mxfp8 runs at the FP8 peak where the device has block-scaled (MX) tensor cores."""
        if precision not in PRECISIONS:
            raise InvalidArgumentError(
                f"precision={precision!r} is not valid: expected one of {', '.join(PRECISIONS)}."
            )
        required = PRECISION_REQUIRES.get(precision)
        if required is not None and getattr(self, required) is None:
            return None
        # NF4 and INT8WO have no column of their own: their GEMMs run in BF16 on dequantised
        # weights.
        column = PRECISION_COLUMN[precision] or PRECISION_COLUMN["bf16"]
        return getattr(self, column)


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """Predicted time of one step of a profile on ``num_devices`` of ``hardware``."""

    hardware: str
    precision: str
    num_devices: int
    step_time_s: float
    throughput: float
    """Samples per second over all devices."""
    low_s: float
    high_s: float
    bound: str
    """compute, memory, communication or overhead: the largest share of the step."""
    confidence: str
    """high, medium or low; low when the vendor or precision has no measured training data."""
    compute_s: float = 0.0
    memory_s: float = 0.0
    communication_s: float = 0.0
    overhead_s: float = 0.0
    mfu: float | None = None
    """Model FLOPs utilisation: FLOPs per step / (step time x dense peak x devices)."""
    notes: tuple[str, ...] = ()
    network: str | None = None
    """The network the communication assumes (fabric, node size, GB/s per device), or None on
    one device."""
    host_s: float = 0.0
    """Host time of the step in eager PyTorch (Python, dispatcher, autograd, kernel launches):
    on a CPU part of the step, on an accelerator overlapped with the device."""
    host_bound: bool = False
    """True when issuing the kernels takes longer than running them (the device idles)."""
    graphs_step_s: float | None = None
    """The step with CUDA graphs / ``torch.compile(mode="reduce-overhead")``, which remove the
    per-kernel host work; None where not applicable (CPU, graph-compiled devices)."""
    stack: str = "eager PyTorch (as you run it)"
    """The software stack the prediction assumes."""
    attention_backend: str = "none"
    """The ``scaled_dot_product_attention`` backend assumed: ``flash``, ``mem-efficient``,
    ``as traced`` (the trace's own kernels) or ``none`` (the model makes no SDPA call)."""
    correction: float | None = None
    """The factor measurements of this device in the local store multiplied every time by
    (:mod:`aiadvisor.costmodel.correction`), or None when none was applied."""
    correction_records: int = 0
    """How many measurements that factor comes from."""
    amp_cast_s: float = 0.0
    """Of ``compute_s + memory_s``: the casts autocast adds to a training step traced in FP32
    (each forward GEMM's operands cast to 16 bit, the gradients cast back); 0 when none."""

    @property
    def uncorrected_step_time_s(self) -> float:
        """The cost model's step time before the measured correction."""
        return self.step_time_s / (self.correction or 1.0)


@dataclass(frozen=True, kw_only=True)
class Recommendation:
    """One piece of advice with the number that triggered it and code to apply it."""

    id: str
    title: str
    category: str
    """hardware, precision, parallelism, memory, speed, data, serving, export or model."""
    rationale: str
    code: str
    predicted_speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    memory_saving_bytes: int | None = None
    estimated: bool = True
    """Figures are predictions of the cost model, not measurements."""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class MoERouting:
    """How the tokens of one step are routed to the experts of each mixture-of-experts layer.

    Fake and meta inputs route every token to the same experts, so the profile assumes the
    load of a trained, balanced router unless a measured imbalance is given.
    """

    num_experts: int
    """Routed experts per layer (shared experts not included)."""
    top_k: int
    """Experts each token is sent to."""
    num_moe_layers: int
    expert_params: int
    """Parameters of all routed experts of all layers."""
    tokens_per_expert: float
    """Mean tokens per expert per layer in one step: ``tokens x top_k / num_experts``."""
    imbalance: float = 1.0
    """Most loaded expert's tokens over the mean, in [1, num_experts]; 1 is balanced."""
    hidden_size: int | None = None
    """Width of the token vectors sent to and back from an expert (what EP's all-to-all
    moves); None when it could not be read from the expert weights."""

    def __post_init__(self) -> None:
        if not 1.0 <= self.imbalance <= self.num_experts:
            raise InvalidArgumentError(
                f"imbalance={self.imbalance!r} is not valid: expected a number in "
                f"[1, {self.num_experts}] (the number of experts).")

    @property
    def max_tokens_per_expert(self) -> float:
        """Tokens of the most loaded expert per layer in one step."""
        return self.tokens_per_expert * self.imbalance


@dataclass(frozen=True, kw_only=True)
class SDPAGroup:
    """The ``scaled_dot_product_attention`` calls of one module in one step.

    The trace records the kernel the tracing device chose (on a CPU or meta trace often the math
    path: two matmuls, softmax and dropout, with ``T x T`` scores) under the pseudo-module
    ``module``; the cost model re-costs the group as the target device runs it.
    """

    module: str
    """Pseudo-module of the calls' ops, ``<calling module>.[sdpa]``."""
    calls: int
    io_bytes: float
    """Bytes of query, key, value and output over all calls (what a fused kernel moves)."""
    lse_bytes: float
    """Bytes of the row-wise log-sum-exp a flash kernel keeps for backward (FP32)."""
    dropout: bool
    saved_bytes: float = 0.0
    """Bytes the traced kernels saved for backward (training): for the math path, the ``T x T``
    probabilities and dropout mask among them."""

    @property
    def fused_saving_bytes(self) -> float:
        """Saved-for-backward bytes a fused kernel does not keep: what the traced calls saved
        less what flash attention keeps (query, key, value, output and the log-sum-exp), >= 0."""
        return max(self.saved_bytes - self.io_bytes - self.lse_bytes, 0.0)


@dataclass(frozen=True, kw_only=True)
class DropoutGroup:
    """The training ``F.dropout`` calls of one module in one step.

    A CPU, meta or fake trace records ATen's composite dropout (``empty_like``, ``bernoulli_``,
    ``div_``, ``mul``) among the module's own ops; a CUDA device runs each call as one
    ``native_dropout`` kernel that writes a one-byte mask. ``ops`` lists what the traced calls
    ran, so the cost model can take it out and price the fused kernel instead.
    """

    module: str
    """The module that called ``F.dropout`` (its ops are recorded there)."""
    calls: int
    elements: float
    """Input elements over all calls."""
    element_bytes: int
    """Bytes per element of the input."""
    ops: tuple[tuple[str, float, float, float], ...] = ()
    """``(op, count, bytes_read, bytes_written)`` the traced calls ran, forward."""


@dataclass(frozen=True, kw_only=True)
class ModelProfile:
    """What one step of a model costs: FLOPs, bytes and memory, per op and per module.

    Built by :func:`aiadvisor.profile`. All counts are per step for the whole batch. Other batch
    sizes and sequence lengths are answered from the captured traces, without re-tracing, by
    :func:`aiadvisor.profiler.rescale`; the profiles :func:`aiadvisor.profile` returns are
    :class:`aiadvisor.profiler.TracedProfile`, which adds the shorthand ``prof.at(...)``. (The
    method lives in the profiler layer so that this module, which every layer imports, imports
    no layer above it.)
    """

    model_name: str
    model_type: str
    """Class name of the profiled module."""
    mode: str
    precision: str
    optimizer: str
    batch_size: int
    seq_len: int | None
    """Length of dimension 1 of the token/sequence inputs; None when the inputs have none."""
    num_params: int
    num_trainable_params: int
    flops_forward: float
    flops_backward: float
    flops_optimizer: float
    memory: MemoryBreakdown
    ops: tuple[OpRecord, ...]
    modules: tuple[ModuleRecord, ...] = ()
    path: str = "fake"
    """How the step was captured: ``fake`` (FakeTensorMode), ``meta`` (meta device) or ``real``
    (a real batch of one, scaled)."""
    device: str = "cpu"
    """Device the user's model lives on."""
    param_dtype: str = "float32"
    compute_dtype: str = "float32"
    """Dtype the GEMMs ran in during the trace (autocast dtype for bf16/fp16)."""
    num_blocks: int = 0
    """Number of repeated identical blocks (transformer layers), 0 if none were found."""
    block_param_bytes: int = 0
    block_activation_bytes: int = 0
    """What one block leaves alive after the forward, at this batch and sequence length: its
    saved-for-backward bytes (train); its KV cache and any other outputs that outlive it
    (inference, e.g. with ``use_cache``)."""
    block_output_bytes: int = 0
    """Bytes of one block's output tensor: the message size of tensor/pipeline parallel."""
    measured_step_time_s: float | None = None
    measured_peak_bytes: int | None = None
    notes: tuple[str, ...] = ()
    max_seq_len: int | None = None
    """Longest sequence the model accepts (its position limit), None when it has none (rotary
    positions without a maximum, CNNs); ``at(seq_len=...)`` beyond it raises."""
    max_seq_len_source: str = ""
    """Where ``max_seq_len`` was read, e.g. ``"GPT2Config.n_positions"``."""
    scaling: Any = None
    """Private: per-quantity polynomial coefficients in (batch, seq) used by
    :func:`aiadvisor.profiler.rescale`."""
    num_active_params: int | None = None
    """Parameters one token goes through: ``num_params`` less the routed experts it is not sent
    to; equal to ``num_params`` for a dense model (the default when not given)."""
    moe: MoERouting | None = None
    """Expert routing of a mixture-of-experts model, None for a dense model."""
    sdpa: tuple[SDPAGroup, ...] = ()
    """``scaled_dot_product_attention`` calls, per calling module."""
    dropout: tuple[DropoutGroup, ...] = ()
    """Training ``F.dropout`` calls, per calling module."""
    num_module_calls: int = 0
    """``nn.Module`` forward calls in one step (each costs host time in eager PyTorch)."""
    num_view_ops_forward: int = 0
    """View ops (reshape, transpose, ...) in the forward: no kernel, but host dispatch."""
    num_view_ops_backward: int = 0
    num_python_lines: int = 0
    """Python lines the model's own code runs in one forward, outside ``torch`` (masks, caches,
    argument checks, output objects: :mod:`aiadvisor.profiler.pylines`); host time in eager
    PyTorch beyond the ops, module calls and views. 0 where not counted."""
    large_param_bytes: tuple[int, ...] = ()
    """Bytes of each trainable tensor of at least 1 MiB, largest first (training profiles; the
    optimizer's per-tensor temporaries of that size land on fresh pages on a CPU)."""
    untouched_table_elements: int = 0
    """Elements of the trainable embedding tables (not tied to another layer) in rows a step's
    lookups are not expected to reach: their gradient rows are zero, so an Adam step leaves
    their second moment at exactly zero, whose square root some CPUs take several times
    slower. Expected for indices drawn uniformly: ``rows * dim * (1 - 1/rows) ** lookups`` a
    table; a learned position table reaches ``seq_len`` rows. Training profiles; 0 otherwise."""
    num_quantizable_params: int | None = None
    """Parameters an 8- or 4-bit inference format stores at its width: floating weight
    matrices (rank >= 2) other than embedding tables, which torchao's ``quantize_``,
    bitsandbytes and TransformerEngine leave in 16 bit, as they leave biases and norms.
    ``num_params`` when not given (profiles saved before it was recorded)."""
    largest_quantizable_params: int = 0
    """Elements of the largest of those matrices: bitsandbytes' NF4 GEMM of more than one
    token writes it in 16 bit before multiplying (``dequantize_4bit``), one layer at a time.
    0 where not recorded."""

    def __post_init__(self) -> None:
        if self.num_active_params is None:
            object.__setattr__(self, "num_active_params", self.num_params)
        if self.num_quantizable_params is None:
            object.__setattr__(self, "num_quantizable_params", self.num_params)
        if self.path not in PROFILE_PATHS:
            raise InvalidArgumentError(
                f"path={self.path!r} is not valid: expected one of {', '.join(PROFILE_PATHS)}."
            )
        if self.max_seq_len is not None and (
                not isinstance(self.max_seq_len, int) or self.max_seq_len < 1):
            raise InvalidArgumentError(
                f"max_seq_len={self.max_seq_len!r} is not valid: expected an integer >= 1 or "
                "None (no position limit).")

    @property
    def flops_per_step(self) -> float:
        return self.flops_forward + self.flops_backward + self.flops_optimizer

    @property
    def bytes_per_step(self) -> float:
        return sum(op.bytes_total for op in self.ops)

    @property
    def layers(self):
        """One row per module: parameters, FLOPs, bytes and saved activations (pandas)."""
        import pandas as pd

        columns = [f.name for f in dataclasses.fields(ModuleRecord)]
        return pd.DataFrame([dataclasses.asdict(m) for m in self.modules], columns=columns)

    @property
    def ops_table(self):
        """One row per op record (pandas)."""
        import pandas as pd

        rows = []
        for op in self.ops:
            row = dataclasses.asdict(op)
            row["bytes_total"] = op.bytes_total
            rows.append(row)
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("scaling")
        return d


CHECKPOINTING = ("none", "selective", "full")


@dataclass(frozen=True, kw_only=True)
class ParallelConfig:
    """How a training (or inference) step is spread over devices.

    ``dp_degree * tp_degree * pp_degree`` is the number of devices. ``zero_stage`` 0 is plain
    data parallel (DDP); 1/2/3 shard optimizer state / + gradients / + parameters (3 = FSDP).
    ``ep_degree`` splits a mixture-of-experts model's routed experts over that many devices of
    the data-parallel group, so it divides ``dp_degree`` and adds no devices.
    """

    dp_degree: int = 1
    tp_degree: int = 1
    pp_degree: int = 1
    zero_stage: int = 0
    offload: bool = False
    """Optimizer state (and, with zero_stage 3, parameters) kept in CPU memory."""
    checkpointing: str = "none"
    """Activation checkpointing: none, selective (attention only) or full (every block)."""
    grad_accum_steps: int = 1
    num_microbatches: int = 1
    """Pipeline micro-batches per step (bubble fraction = (pp-1)/(v*m+pp-1))."""
    ep_degree: int = 1
    """Expert parallel: each MoE layer's experts split over this many data-parallel devices
    (1: none). Only mixture-of-experts profiles can use more than 1."""
    virtual_stages: int = 1
    """Interleaved pipeline: model chunks per device (Megatron-LM's virtual pipeline stages,
    Narayanan et al. 2021, sec. 2.2.2). ``v`` chunks of ``L / (pp * v)`` layers each shrink the
    bubble to ``(pp-1)/(v*m)`` of the ideal step and multiply the stage-to-stage sends by ``v``;
    ``num_microbatches`` must then be a multiple of ``pp_degree`` (Megatron's rule)."""
    sequence_parallel: bool = True
    """With tensor parallel: the ops on the residual stream between the attention and MLP
    sub-layers (normalisations, residual adds, hidden dropout) split over the ``tp`` ranks along
    the sequence (Megatron-LM's sequence parallelism, Korthikanti et al. 2022; PyTorch's
    ``SequenceParallel`` style). ``False``: every TP rank runs them on the whole sequence, as
    Megatron did before 2022 and plain column/row-parallel layers do. No effect without TP."""
    overlap_grad_reduce: bool = True
    """Data-parallel gradient reduction overlapped with the last micro-batch's backward (DDP's
    buckets; Megatron's ``--overlap-grad-reduce``). ``False``: reduced after the backward ends
    (DeepSpeed's pipeline engine, Megatron before 2023)."""

    reshard_after_forward: bool = True
    """FSDP / ZeRO-3 only: free each unit's gathered weights after its forward and gather them
    again for its backward (FSDP's default). False keeps them from forward to backward
    (``fully_shard(..., reshard_after_forward=False)``): one all-gather per unit and step
    instead of two, at the cost of holding the unsharded weights through the step."""

    def __post_init__(self) -> None:
        for name in ("sequence_parallel", "overlap_grad_reduce"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise InvalidArgumentError(
                    f"ParallelConfig.{name}={value!r} is not valid: expected True or False."
                )
        for name in ("dp_degree", "tp_degree", "pp_degree", "grad_accum_steps",
                     "num_microbatches", "ep_degree", "virtual_stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidArgumentError(
                    f"ParallelConfig.{name}={value!r} is not valid: expected an integer >= 1."
                )
        if self.virtual_stages > 1 and self.pp_degree == 1:
            raise InvalidArgumentError(
                f"ParallelConfig.virtual_stages={self.virtual_stages!r} needs a pipeline: "
                "pp_degree is 1. Set pp_degree > 1 or virtual_stages=1."
            )
        if self.virtual_stages > 1 and self.num_microbatches % self.pp_degree:
            raise InvalidArgumentError(
                f"ParallelConfig.num_microbatches={self.num_microbatches!r} is not valid with "
                f"virtual_stages={self.virtual_stages}: the interleaved schedule expects a "
                f"multiple of pp_degree={self.pp_degree} (e.g. "
                f"{self.pp_degree * max(1, self.num_microbatches // self.pp_degree)})."
            )
        if not isinstance(self.reshard_after_forward, bool):
            raise InvalidArgumentError(
                f"ParallelConfig.reshard_after_forward={self.reshard_after_forward!r} is not "
                "valid: expected True or False."
            )
        if not self.reshard_after_forward and self.zero_stage != 3:
            raise InvalidArgumentError(
                f"ParallelConfig.reshard_after_forward=False is not valid with zero_stage="
                f"{self.zero_stage}: only FSDP / ZeRO-3 (zero_stage=3) reshards weights. "
                "Set zero_stage=3 or leave reshard_after_forward=True."
            )
        if self.zero_stage not in (0, 1, 2, 3):
            raise InvalidArgumentError(
                f"ParallelConfig.zero_stage={self.zero_stage!r} is not valid: "
                "expected 0, 1, 2 or 3."
            )
        if self.checkpointing not in CHECKPOINTING:
            raise InvalidArgumentError(
                f"ParallelConfig.checkpointing={self.checkpointing!r} is not valid: "
                "expected one of "
                f"{', '.join(CHECKPOINTING)}."
            )
        if self.dp_degree % self.ep_degree:
            choices = [d for d in range(1, self.dp_degree + 1) if self.dp_degree % d == 0]
            raise InvalidArgumentError(
                f"ParallelConfig.ep_degree={self.ep_degree!r} is not valid with "
                f"dp_degree={self.dp_degree}: expert-parallel ranks are a split of the "
                f"data-parallel group, so ep_degree must divide dp_degree (one of "
                f"{', '.join(map(str, choices))})."
            )

    @property
    def num_devices(self) -> int:
        return self.dp_degree * self.tp_degree * self.pp_degree

    @property
    def label(self) -> str:
        """Short lowercase label, e.g. ``ddp``, ``fsdp``, ``zero2``, ``fsdp+offload``, ``tp8``,
        ``fsdp4+tp2``, ``ddp+ckpt``, ``fsdp+ep8+ckpt``."""
        parts = []
        if self.dp_degree > 1 or (self.tp_degree == 1 and self.pp_degree == 1):
            base = {0: "ddp", 1: "zero1", 2: "zero2", 3: "fsdp"}[self.zero_stage]
            if self.dp_degree > 1 and (self.tp_degree > 1 or self.pp_degree > 1):
                base += str(self.dp_degree)
            parts.append(base)
        if self.tp_degree > 1:
            parts.append(f"tp{self.tp_degree}")
        if self.pp_degree > 1:
            virtual = f"v{self.virtual_stages}" if self.virtual_stages > 1 else ""
            parts.append(f"pp{self.pp_degree}{virtual}")
        if self.ep_degree > 1:
            parts.append(f"ep{self.ep_degree}")
        if self.offload:
            parts.append("offload")
        if not self.reshard_after_forward:
            parts.append("noreshard")
        if self.checkpointing != "none":
            parts.append("ckpt" if self.checkpointing == "full" else "sel-ckpt")
        if self.grad_accum_steps > 1:
            parts.append(f"accum{self.grad_accum_steps}")
        if self.tp_degree > 1 and not self.sequence_parallel:
            parts.append("no-sp")
        return "+".join(parts)


# --- LLM generation (prefill + decode) -------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class KVCacheLayout:
    """What one token adds to a causal LM's key/value cache, read from a traced cache.

    ``elements_per_token`` counts keys and values of every layer for one sequence, so
    ``bytes_per_token(p) = elements_per_token x bytes(p)``; for a standard cache that is
    ``2 x layers x kv_heads x head_dim`` (grouped-query and multi-query attention keep fewer
    key/value heads than query heads, and the cache is that much smaller).
    """

    num_layers: int
    """Layers that hold a cache (each one key and one value tensor)."""
    kv_heads: int | None
    """Key/value heads per layer where every layer's cache is ``(batch, heads, tokens, dim)``."""
    head_dim: int | None
    elements_per_token: int
    dtype: str
    """The dtype the cache was traced in."""
    source: str
    """Where the figures come from, e.g. ``traced cache (DynamicCache)``."""

    def __post_init__(self) -> None:
        if not isinstance(self.num_layers, int) or self.num_layers < 1:
            raise InvalidArgumentError(
                f"KVCacheLayout.num_layers={self.num_layers!r} is not valid: expected an "
                "integer >= 1.")
        if not isinstance(self.elements_per_token, int) or self.elements_per_token < 1:
            raise InvalidArgumentError(
                f"KVCacheLayout.elements_per_token={self.elements_per_token!r} is not valid: "
                "expected an integer >= 1.")
        for name in ("kv_heads", "head_dim"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise InvalidArgumentError(
                    f"KVCacheLayout.{name}={value!r} is not valid: expected an integer >= 1 "
                    "or None.")

    @classmethod
    def from_shape(cls, *, num_layers: int, kv_heads: int, head_dim: int,
                   dtype: str = "bfloat16") -> KVCacheLayout:
        """A layout described by hand, for models whose forward returns no cache."""
        return cls(num_layers=num_layers, kv_heads=kv_heads, head_dim=head_dim,
                   elements_per_token=2 * num_layers * kv_heads * head_dim, dtype=dtype,
                   source="given by the caller")


@dataclass(frozen=True, kw_only=True)
class DecodeOp:
    """One op record of a traced decode step (one new token per sequence against a cache), as
    ``k0 + kB B + kC C + kBC B C`` of batch ``B`` and cached context ``C`` per quantity: GEMMs
    grow with B, a cache appended by concatenation and the attention over it with B x C, a
    causal mask built per step with C alone."""

    op: str
    op_class: str
    module: str
    dtype: str
    count: tuple[float, float, float, float]
    flops: tuple[float, float, float, float]
    bytes_read: tuple[float, float, float, float]
    bytes_written: tuple[float, float, float, float]
    repeat: int = 1
    """Blocks the record stands for (a traced layer's op: the model's layers), as
    :attr:`OpRecord.repeat`: its count is summed over them, so a layer's GEMM is
    ``count / repeat`` calls of its own weight, not ``count`` calls of a ``1 / repeat``
    share of it."""

    @property
    def on_cache(self) -> bool:
        """Whether the op reads the cache: its bytes grow with batch x context."""
        return self.bytes_read[3] > 0

    def at(self, batch: float, context: float) -> OpRecord:
        """The record at ``batch`` sequences of ``context`` cached tokens (never negative)."""
        def value(k):
            return max(k[0] + k[1] * batch + k[2] * context + k[3] * batch * context, 0.0)

        return OpRecord(op=self.op, op_class=self.op_class, phase="forward", module=self.module,
                        dtype=self.dtype, count=value(self.count), flops=value(self.flops),
                        bytes_read=value(self.bytes_read),
                        bytes_written=value(self.bytes_written), repeat=self.repeat)


@dataclass(frozen=True, kw_only=True)
class DecodeStep:
    """A causal LM's decode step as its own forward runs it (``model(new_ids,
    past_key_values=cache)`` and the greedy ``argmax``), traced on fake tensors at two batch
    sizes and two context lengths: what the cache handling costs per step (e.g. a
    ``torch.cat`` re-copying each layer's cache, the mask) is in its op records."""

    ops: tuple[DecodeOp, ...]
    num_module_calls: int
    num_view_ops: tuple[float, float, float, float]
    contexts: tuple[int, int]
    """The cached lengths traced (the fit is exact for the linear growth between them)."""
    num_python_lines: int | None = 0
    """Python lines the model's own code runs in one step outside ``torch``
    (:mod:`aiadvisor.profiler.pylines`); None where another trace function kept them from
    being counted."""

    def records(self, batch: float, context: float) -> tuple[OpRecord, ...]:
        return tuple(op.at(batch, context) for op in self.ops)

    def view_ops(self, batch: float, context: float) -> int:
        k = self.num_view_ops
        return int(round(max(k[0] + k[1] * batch + k[2] * context + k[3] * batch * context,
                             0.0)))


@dataclass(frozen=True, kw_only=True)
class GenerationProfile:
    """A causal LM captured for generation: an inference profile of the prompt forward (which
    answers any prompt length and batch without re-tracing) and the KV cache it builds."""

    model_name: str
    model_type: str
    prefill: ModelProfile
    kv: KVCacheLayout
    max_positions: int | None
    """Longest sequence the model's positions allow; None when it sets no limit."""
    positions_source: str
    quantizable_params: int
    """Parameters in linear layers other than the vocabulary head: what GPTQ/AWQ/bitsandbytes
    quantise. Embeddings, norms and the head stay in 16 bit."""
    head_params: int
    """Parameters of the vocabulary head (0 when it is tied to the input embedding)."""
    largest_quantizable_params: int = 0
    """Elements of the largest weight among ``quantizable_params``: bitsandbytes' NF4 GEMM of a
    prompt writes it in 16 bit before multiplying, one layer at a time (0 where unknown)."""
    attention_flops_per_context_token: float
    """Attention FLOPs of one new token per token already in the cache, all layers
    (``4 x query_heads x head_dim x layers``), from the traced prompt forward."""
    decode: DecodeStep | None = None
    """The decode step as the model's own forward runs it with a cache (None where it could
    not be traced: then a decode step is priced as the prompt forward at one token plus the
    attention over the cache)."""
    vocab_size: int | None = None
    """Width of the vocabulary (the head's output features): identifies the head's GEMM in the
    prompt forward, whose logits a serving engine computes for the last prompt token only
    (None where unknown: the head is then priced over every prompt token)."""
    logits_to_keep: bool = False
    """The model's forward takes ``logits_to_keep`` (transformers causal LMs since 4.50):
    transformers ``generate`` passes 1, so plain ``generate`` too computes the prompt's logits
    for its last token only."""


@dataclass(frozen=True, kw_only=True)
class GenerationPrediction:
    """Serving figures of one configuration: memory, time to first token, time per output
    token and throughput. All times are estimated."""

    hardware: str
    num_devices: int
    tp: int
    weight_precision: str
    kv_precision: str
    prompt_len: int
    output_len: int
    batch_size: int
    weights_bytes: int
    """The whole model's weights at ``weight_precision`` (split over ``tp`` devices)."""
    kv_bytes_per_token: int
    kv_bytes: int
    """The cache of ``batch_size`` sequences of ``prompt_len + output_len`` tokens."""
    working_bytes: int
    """Activations of one prompt's forward, held beside the weights and the cache."""
    usable_bytes_per_device: int
    max_batch: int
    """Concurrent sequences of ``prompt_len + output_len`` tokens that fit (per replica)."""
    fits: bool
    ttft_s: float
    ttft_low_s: float
    ttft_high_s: float
    tpot_s: float
    """One decode step at this batch, averaged over the output (the cache read grows)."""
    tpot_low_s: float
    tpot_high_s: float
    tokens_per_s: float
    """Output tokens per second over all replicas, prefill included."""
    tokens_per_s_per_user: float
    bound: str
    confidence: str
    notes: tuple[str, ...] = ()

    @property
    def replicas(self) -> int:
        return self.num_devices // self.tp
