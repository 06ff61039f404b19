"""A profile's op records as numpy arrays, converted to a precision and split over devices."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hardware.calibrate import EVAL_SUFFIX, base_op
from ..schema import ModelProfile, ParallelConfig
from ..units import WEIGHT_BYTES
from .precision import (
    ATTENTION_ACT_BYTES,
    AUTOCAST_FP32_OPS,
    DTYPE_BYTES,
    GEMM_ACT_BYTES,
    MEMORY_ACT_BYTES,
)

GEMM_LIKE = ("gemm", "conv", "attention")
RECURRENT_MARKERS = ("rnn", "lstm", "gru")
#: Forward ops that selective recompute repeats when the model has no fused attention op:
#: the attention core (scores, softmax, weighted sum), Korthikanti et al. 2022, section 4.
ATTENTION_CORE_OPS = frozenset({"aten.bmm", "aten.baddbmm", "aten._softmax", "aten._safe_softmax"})


@dataclass(frozen=True)
class OpArrays:
    """One entry per op record of a profile (totals per step for the whole batch)."""

    name: np.ndarray
    op_class: np.ndarray
    phase: np.ndarray
    count: np.ndarray
    flops: np.ndarray
    bytes_total: np.ndarray
    bytes_read: np.ndarray
    trace_bytes_per_element: np.ndarray
    """Element size of the traced dtype; 0 for integer/bool outputs (never converted)."""
    gemm_like: np.ndarray
    norm: np.ndarray
    """Normalisations, softmax and reductions (their own efficiency table)."""
    autocast_fp32: np.ndarray
    recurrent: np.ndarray
    attention_core: np.ndarray
    stage: np.ndarray
    """Where a pipeline puts the op, Megatron-LM's partition: ``"block"`` (inside the repeated
    blocks, spread equally over the stages), ``"first"`` (embedding modules: the first stage)
    or ``"last"`` (everything else outside the blocks: final norm, LM head, loss)."""
    residual: np.ndarray
    """Memory-bound ops on the residual stream of a repeated block: the block's own ops
    (residual adds, hidden dropout) and its normalisation modules'. Tensor parallel splits them
    over its ranks only with sequence parallelism (:attr:`ParallelConfig.sequence_parallel`)."""
    weight_elements: np.ndarray | None = None
    """Weight elements per call of a forward 2-D GEMM or of a convolution, forward or
    backward (:func:`gemm_weight_elements`), 0 for other ops."""

    def __len__(self) -> int:
        return len(self.name)


#: Memory-bound ops that reduce along a dimension (two passes or a tree reduction): they reach
#: ~0.35-0.65 of the bandwidth where elementwise ops reach ~0.9 (opdata: NeuSight LayerNorm and
#: softmax, Vidur RMSNorm).
NORM_OPS = frozenset({
    "aten.mean", "aten.sum", "aten.var", "aten.var_mean", "aten.std", "aten.std_mean",
    "aten.amax", "aten.amin", "aten.max", "aten.min", "aten.argmax", "aten.argmin",
    "aten.logsumexp", "aten.cumsum", "aten.nll_loss_forward", "aten.nll_loss_backward",
    "aten.nll_loss2d_forward", "aten.nll_loss2d_backward",
})


def is_norm(op_name: str) -> bool:
    """Normalisation, softmax or reduction (by aten name). A batch norm forward in eval mode
    (the ``[eval]`` record) is not one: it scales and shifts each channel by its running
    statistics, a single elementwise pass with no reduction."""
    if EVAL_SUFFIX in op_name:
        return False
    name = op_name.lower()
    return op_name in NORM_OPS or "norm" in name or "softmax" in name


def op_arrays(prof: ModelProfile) -> OpArrays:
    """Extract the op records of ``prof`` (records with no calls are dropped)."""
    ops = [op for op in prof.ops if op.count > 0]
    embeddings = frozenset(m.name for m in prof.modules if m.type == "Embedding")
    norms = frozenset(m.name for m in prof.modules
                      if any(k in m.type.lower() for k in NORM_MODULE_MARKERS))
    name = np.array([op.op for op in ops], dtype=object)
    op_class = np.array([op.op_class for op in ops], dtype=object)
    return OpArrays(
        name=name,
        op_class=op_class,
        phase=np.array([op.phase for op in ops], dtype=object),
        count=np.array([op.count for op in ops], float),
        flops=np.array([op.flops for op in ops], float),
        bytes_total=np.array([op.bytes_total for op in ops], float),
        bytes_read=np.array([op.bytes_read for op in ops], float),
        trace_bytes_per_element=np.array([DTYPE_BYTES.get(op.dtype, 0.0) for op in ops], float),
        gemm_like=np.isin(op_class, GEMM_LIKE),
        norm=np.array([is_norm(op.op) for op in ops], bool),
        autocast_fp32=np.isin([base_op(n) for n in name], list(AUTOCAST_FP32_OPS)),
        recurrent=np.array([any(m in op.op.lower() for m in RECURRENT_MARKERS) for op in ops],
                           bool),
        attention_core=np.array([op.op_class == "attention" or op.op in ATTENTION_CORE_OPS
                                 for op in ops], bool),
        stage=np.array([_stage_of(op, embeddings) for op in ops], dtype=object),
        residual=np.array([_on_residual_stream(op, norms) for op in ops], bool),
        weight_elements=gemm_weight_elements(prof, ops),
    )


#: GEMMs whose right-hand operand is a module's weight in a forward (``nn.Linear``, HF Conv1D).
WEIGHT_GEMMS = ("aten.mm", "aten.addmm")
#: Convolutions (any layout suffix), whose weight is their module's in both phases.
WEIGHT_CONVS = ("aten.convolution", "aten.convolution_backward")


def _weight_op(op) -> bool:
    if op.phase == "forward" and base_op(op.op) in WEIGHT_GEMMS:
        return True
    return base_op(op.op) in WEIGHT_CONVS and op.phase in ("forward", "backward")


def gemm_weight_elements(prof: ModelProfile, ops) -> np.ndarray:
    """Weight elements per call of each forward 2-D GEMM (:data:`WEIGHT_GEMMS`) and each
    convolution, forward or backward (:data:`WEIGHT_CONVS`): its module's own parameters over
    its calls per block (a linear layer: its weight and bias, once a step), at most the
    elements the call reads; 0 for other ops and for GEMMs of modules with no parameters of
    their own (e.g. attention scores). A layer applied twice in a step counts half its weight
    a call (an underestimate; rare)."""
    params = {m.name: m.num_params for m in prof.modules}
    out = np.zeros(len(ops))
    for i, op in enumerate(ops):
        own = params.get(op.module, 0)
        size = DTYPE_BYTES.get(op.dtype, 0.0)
        if not _weight_op(op) or own <= 0 or size <= 0:
            continue
        calls_per_block = max(op.count / max(op.repeat, 1), 1.0)
        out[i] = min(own / calls_per_block, op.bytes_read / op.count / size)
    return out


#: Module types whose ops are normalisations of the residual stream.
NORM_MODULE_MARKERS = ("norm",)


def _on_residual_stream(op, norms: frozenset[str]) -> bool:
    """True for a memory-bound op of a repeated block that runs on the block's residual
    stream: an op of the block module itself (``layers.*``: residual adds, dropout) or of one
    of its normalisation modules (``layers.*.norm1``)."""
    if op.op_class in GEMM_LIKE or op.op_class in ("embedding", "optimizer"):
        return False
    if not ("*" in op.module or op.repeat > 1):
        return False
    return op.module.endswith("*") or op.module in norms


def _stage_of(op, embeddings: frozenset[str]) -> str:
    """Pipeline placement of one op record (see :attr:`OpArrays.stage`)."""
    if op.repeat > 1 or "*" in op.module:
        return "block"
    if op.op_class == "embedding" or op.module in embeddings:
        return "first"
    return "last"


def weight_cast_share(prof: ModelProfile) -> float:
    """Share of autocast's casts (:func:`amp_cast_bytes`, proportional to the forward GEMMs'
    reads) that casts weights: the traced weights over those reads, at most 1. The weight
    casts are the same at every batch; the activation casts grow with it."""
    ops = op_arrays(prof)
    fwd = ops.gemm_like & (ops.phase == "forward")
    reads = float(ops.bytes_read[fwd].sum())
    if reads <= 0:
        return 0.0
    return min(1.0, prof.num_params * DTYPE_BYTES.get(prof.compute_dtype, 4.0) / reads)


def _forward_weight_share(prof: ModelProfile, ops: OpArrays) -> float:
    """Share of forward GEMM bytes that are weight reads (each weight is read once per
    forward), capped at 90 %; what weight-only formats shrink.

    The weights are counted in the traced dtype, as the GEMMs read them: ``num_params`` x its
    element size, not ``memory.weights_bytes``, which a profile taken at an 8- or 4-bit
    precision already stores quantized (counting those would shrink the weights twice).
    """
    fwd_gemm = ops.gemm_like & (ops.phase == "forward")
    gemm_bytes = float(ops.bytes_total[fwd_gemm].sum())
    if gemm_bytes <= 0:
        return 0.0
    traced_weight_bytes = prof.num_params * DTYPE_BYTES.get(prof.compute_dtype, 4.0)
    return min(0.9, traced_weight_bytes / gemm_bytes)


def traced_in_16_bit(prof: ModelProfile) -> bool:
    return prof.compute_dtype in ("bfloat16", "float16")


#: Bytes a bitsandbytes NF4 dequantisation moves per weight: the 4-bit weight with its block
#: scales read (``WEIGHT_BYTES["nf4"]``, 4.13 bits) and the same weight written in 16 bit.
NF4_DEQUANT_BYTES = WEIGHT_BYTES["nf4"] + 2.0
#: Name of the appended dequantisation op (one kernel per forward GEMM with a weight).
NF4_DEQUANT_OP = "bnb.dequantize_4bit"


def nf4_dequantizes(prof: ModelProfile, precision: str) -> bool:
    """Whether NF4 GEMMs of ``prof`` dequantise their weights to 16 bit first.

    NF4 is bitsandbytes' format, and its ``matmul_4bit`` (bitsandbytes/autograd/_functions.py,
    0.41 to 0.45) runs the fused 4-bit kernel (``gemv_4bit``) only when the input has one row
    (``A.numel() == A.shape[-1]``: one token, e.g. a batch-1 decode step); any other call goes
    through ``MatMul4Bit``: ``dequantize_4bit`` writes the weight in 16 bit, then
    ``torch.nn.functional.linear`` multiplies with it. So a forward of more than one token
    (a prompt, a decode step at batch > 1, an encoder) reads each NF4 weight at 4 bits, writes
    and reads it again at 16 bits, and launches one more kernel per linear layer. Training
    (QLoRA) dequantises likewise but is not priced in NF4 here.
    """
    return precision == "nf4" and prof.mode == "infer" \
        and prof.batch_size * (prof.seq_len or 1) > 1


def byte_factors(prof: ModelProfile, ops: OpArrays, precision: str) -> np.ndarray:
    """Per-op multiplier from traced bytes to bytes at ``precision`` (the rules are in the
    docstring of :mod:`aiadvisor.costmodel.precision`)."""
    trace = np.where(ops.trace_bytes_per_element > 0, ops.trace_bytes_per_element, 1.0)
    attention = ops.gemm_like & ops.attention_core
    gemm = np.where(attention, ATTENTION_ACT_BYTES[precision], GEMM_ACT_BYTES[precision]) / trace
    if traced_in_16_bit(prof):
        # The trace already ran under autocast: its FP32 ops (norms, residual stream, casts)
        # stay as traced for any 16-bit-or-narrower target; an FP32 target widens the 16-bit
        # ops and needs no casts.
        if MEMORY_ACT_BYTES[precision] >= 4.0:
            memory = np.where(ops.name == "aten._to_copy", 0.0, 4.0 / trace)
        else:
            memory = np.ones(len(ops))
            gemm = np.where(trace == 2.0, gemm, 1.0)
    else:
        memory = np.full(len(ops), MEMORY_ACT_BYTES[precision]) / trace
        if MEMORY_ACT_BYTES[precision] < 4.0 and prof.mode == "train":
            # Autocast FP32 ops read 16-bit inputs and write FP32 outputs: ~3 bytes per element.
            memory = np.where(ops.autocast_fp32, np.maximum(memory, 3.0 / trace), memory)
    factor = np.where(ops.gemm_like, gemm, memory)
    if prof.mode == "infer" and WEIGHT_BYTES[precision] < GEMM_ACT_BYTES[precision] \
            and not nf4_dequantizes(prof, precision):
        # Weight-only / 8-bit formats: the weight part of forward GEMM bytes shrinks further
        # (not where NF4 dequantises first: its GEMM reads the 16-bit copy).
        share = _forward_weight_share(prof, ops)
        mixed = ((1 - share) * GEMM_ACT_BYTES[precision] + share * WEIGHT_BYTES[precision]) / trace
        factor = np.where(ops.gemm_like & (ops.phase == "forward"), mixed, factor)
    indices = pool_index_bytes(ops)
    if indices.any():
        # A forward max pool's int64 indices keep their size at any precision: only the rest
        # of its bytes scale.
        total = np.maximum(ops.bytes_total, 1.0)
        factor = np.where(indices > 0, (factor * (ops.bytes_total - indices) + indices) / total,
                          factor)
    factor = np.where(ops.phase == "optimizer", 1.0, factor)
    return np.where(ops.trace_bytes_per_element > 0, factor, 1.0)


def pool_index_bytes(ops: OpArrays) -> np.ndarray:
    """Per op, the bytes of a forward max pool's second output, its int64 indices (8 bytes
    per output element beside the output's own ``trace_bytes_per_element``); 0 elsewhere."""
    from ..hardware.calibrate import MAX_POOL_OP, base_op

    pool = np.array([base_op(str(n)) == MAX_POOL_OP for n in ops.name], dtype=bool) \
        & (ops.trace_bytes_per_element > 0)
    trace = np.where(ops.trace_bytes_per_element > 0, ops.trace_bytes_per_element, 1.0)
    return np.where(pool, (ops.bytes_total - ops.bytes_read) * 8.0 / (8.0 + trace), 0.0)


#: Extra memory traffic of autocast training per byte of forward-GEMM operands in an FP32 trace:
#: each operand is cast to 16 bit before its GEMM (read 4 + write 2 bytes per element = 1.5x its
#: FP32 bytes) and the 16-bit gradients are cast back for the FP32 residual stream and master
#: weights (another 1.5x). Bf16 traces of GPT-2, BERT-base and HF GPT-2 (eager attention) moved
#: 2.7, 2.7 and 4.2x those bytes more than half their FP32 memory-bound traffic.
AMP_CAST_FACTOR = 3.0


def amp_cast_bytes(prof: ModelProfile, ops: OpArrays, precision: str) -> float:
    """Bytes of the casts autocast adds to an FP32-traced training step in 16 bit (or 8 bit);
    a profile traced under autocast already contains them."""
    if prof.mode != "train" or traced_in_16_bit(prof) or MEMORY_ACT_BYTES[precision] >= 4.0:
        return 0.0
    fwd = ops.gemm_like & (ops.phase == "forward") & (ops.trace_bytes_per_element == 4.0)
    return AMP_CAST_FACTOR * float(ops.bytes_read[fwd].sum())


#: Precisions whose recommended inference code is 16-bit weights under ``torch.autocast``
#: (the ``autocast_infer`` snippet): the ones :func:`autocast_islands` prices.
AUTOCAST_INFER_PRECISIONS = ("bf16", "fp16")
#: Name of the appended op for the autocast islands' extra traffic and cast kernels.
AUTOCAST_ISLAND_OP = "amp.island"
#: Traced forward ops that CUDA autocast runs in FP32 (its ``fp32`` cast policy in
#: ``aten/src/ATen/autocast_mode.cpp``: ``softmax``, ``log_softmax``, ``layer_norm``,
#: ``group_norm``, ``nll_loss``, ``mse_loss``, ``norm``, ``linalg_vector_norm``). Batch norm is
#: not on that list (cuDNN runs it in the input's dtype), unlike :data:`AUTOCAST_FP32_OPS`'s
#: training byte rule.
AUTOCAST_ISLAND_OPS = frozenset({
    "aten.native_layer_norm", "aten.layer_norm", "aten.native_group_norm", "aten._softmax",
    "aten._safe_softmax", "aten._log_softmax", "aten.nll_loss_forward", "aten.mse_loss",
    "aten.norm", "aten.linalg_vector_norm",
})


def autocast_islands(prof: ModelProfile, ops: OpArrays, precision: str) -> tuple[float, float]:
    """(bytes, kernel calls) per step that CUDA autocast adds to an inference step of a model
    stored in FP32 run as the recommended code runs it: weights converted to 16 bit once, the
    forward under ``torch.autocast``. Autocast's FP32 list (``softmax``, ``log_softmax``,
    ``layer_norm``, ``group_norm``, the losses, ``norm``: ``aten/src/ATen/autocast_mode.cpp``,
    the CUDA kernels) casts each such op's 16-bit input up to FP32 (a kernel: 2 bytes read, 4
    written an element), runs it in FP32 (4 + 4 instead of 2 + 2) and the 16-bit op after it
    casts its output back (4 read, 2 written): 20 bytes an element instead of 4, two kernels
    more per call (:data:`AUTOCAST_ISLAND_OPS`). Returned as the bytes beyond the 16-bit op's
    own (``8 / traced element size`` times its traced bytes) and two calls per op call; zero
    for a model stored in 16 bit (it runs as stored: ``model.half()`` without autocast), for
    training (priced by :func:`amp_cast_bytes`) and for other precisions. CPU autocast keeps
    these ops in the lower precision, so only CUDA/ROCm devices pay them
    (:func:`autocast_upcasts`).

    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> prof = SimpleNamespace(mode="infer", param_dtype="float32")
    >>> ops = SimpleNamespace(name=np.array(["aten._softmax", "aten.native_batch_norm"]),
    ...                       phase=np.array(["forward", "forward"]),
    ...                       bytes_total=np.array([8e6, 4e6]), count=np.array([3.0, 5.0]),
    ...                       trace_bytes_per_element=np.array([4.0, 4.0]))
    >>> autocast_islands(prof, ops, "bf16")   # 1e6 elements in and out: 16 MB more, 6 kernels
    (16000000.0, 6.0)
    """
    if prof.mode != "infer" or precision not in AUTOCAST_INFER_PRECISIONS \
            or DTYPE_BYTES.get(prof.param_dtype, 4.0) < 4.0:
        return 0.0, 0.0
    named = np.array([base_op(str(n)) in AUTOCAST_ISLAND_OPS for n in ops.name], dtype=bool)
    islands = named & (ops.phase == "forward") & (ops.trace_bytes_per_element > 0)
    if not islands.any():
        return 0.0, 0.0
    traced = ops.trace_bytes_per_element[islands]
    return (float((ops.bytes_total[islands] * 8.0 / traced).sum()),
            float(2.0 * ops.count[islands].sum()))


#: Vendors whose GPUs PyTorch drives through CUDA (NVIDIA) or ROCm/HIP (AMD): the CUDA kernels
#: (fused attention, autocast's op lists) run there.
CUDA_VENDORS = ("NVIDIA", "AMD")


def autocast_upcasts(spec) -> bool:
    """Whether ``torch.autocast`` on ``spec`` runs softmax and norms in FP32: CUDA and ROCm
    GPUs (NVIDIA's and AMD's, Jetson boards included). CPU autocast keeps them in bf16/fp16;
    other backends' lists are not modelled (no islands)."""
    return spec.kind in ("gpu", "edge") and spec.vendor.upper() in CUDA_VENDORS


@dataclass(frozen=True)
class DeviceWork:
    """One device's op work after a parallel split: per-call sizes, call counts and flags."""

    name: np.ndarray
    """Aten name of each op (``"amp.cast"`` for the appended AMP casts)."""
    flops_per_call: np.ndarray
    bytes_per_call: np.ndarray
    count: np.ndarray
    feature_divisor: np.ndarray
    """Recurrent layers run ``seq_len`` small steps per call: their efficiency is looked up at
    the per-step size, ``flops_per_call / divisor``."""
    op_class: np.ndarray
    phase: np.ndarray
    attention_core: np.ndarray
    norm: np.ndarray
    written_per_call: np.ndarray | None = None
    """Bytes each call writes (its outputs), as ``bytes_per_call`` is split and converted."""
    weight_per_call: np.ndarray | None = None
    """Weight elements per call of a forward GEMM (:attr:`OpArrays.weight_elements`, split over
    tensor parallel ranks), 0 for other ops."""
    optimizer_large_elements: tuple[float, ...] = ()
    """Elements of each parameter tensor of at least 1 MiB (the profile's ``large_param_bytes``)
    as one device's optimizer updates it: split over tensor parallel ranks, and over data
    parallel ranks with ZeRO >= 1."""


def device_work(prof: ModelProfile, ops: OpArrays, factors: np.ndarray, extra_bytes: float,
                parallel: ParallelConfig, *, dequant_bytes_per_weight: float = 0.0,
                islands: tuple[float, float] = (0.0, 0.0)) -> DeviceWork:
    """Split the step's ops over ``parallel``'s devices (one device's share).

    Forward and backward work is split over data parallel ranks (batch), tensor parallel ranks
    (each GEMM, attention and MLP op is 1/tp; the residual-stream ops, :attr:`OpArrays.
    residual`, only with sequence parallelism, else every TP rank runs them whole),
    micro-batches and gradient-accumulation steps (smaller calls, more of them), and pipeline
    stages (1/pp of the calls). Optimizer work is split over tp x pp, and over dp with ZeRO >=
    1. ``extra_bytes`` (the AMP weight casts) is appended as forward memory ops, one per
    forward GEMM call, and the gradient accumulation pass (:func:`grad_accumulation`) as a
    backward memory op. ``dequant_bytes_per_weight`` > 0 appends a dequantisation before each
    forward GEMM that has a weight (:func:`nf4_dequantizes`), the output module after the
    repeated blocks excepted: that many bytes per weight element of the call, one kernel per
    call. ``islands`` (bytes, calls: :func:`autocast_islands`) is appended as one forward
    memory op, :data:`AUTOCAST_ISLAND_OP`.
    """
    dp, tp, pp = parallel.dp_degree, parallel.tp_degree, parallel.pp_degree
    micro = parallel.num_microbatches * parallel.grad_accum_steps
    opt = ops.phase == "optimizer"
    count = np.where(opt, ops.count, ops.count * micro / pp)
    tp_split = np.where(ops.residual & (not parallel.sequence_parallel), 1, tp)
    size_split = np.where(opt, tp * pp * (dp if parallel.zero_stage >= 1 else 1),
                          dp * tp_split * micro)
    safe_count = np.maximum(ops.count, 1e-30)
    flops_pc = ops.flops / safe_count / size_split
    bytes_pc = ops.bytes_total * factors / safe_count / size_split
    written_pc = (ops.bytes_total - ops.bytes_read) * factors / safe_count / size_split
    divisor = np.where(ops.recurrent, max(float(prof.seq_len or 1), 1.0), 1.0)
    weight_pc = (ops.weight_elements if ops.weight_elements is not None
                 else np.zeros(len(ops))) / tp_split
    name, op_class, phase, attn, norm = (ops.name, ops.op_class, ops.phase, ops.attention_core,
                                         ops.norm)
    appended = []
    if extra_bytes > 0:
        calls = max(float(ops.count[ops.gemm_like & (ops.phase == "forward")].sum()), 1.0)
        appended.append(("amp.cast", extra_bytes / calls / (dp * tp * micro), calls * micro / pp,
                         "forward"))
    if dequant_bytes_per_weight > 0:
        # The output module after the repeated blocks (an LM head, a classifier) stays in 16
        # bit: transformers' bitsandbytes integration leaves the last module unconverted
        # (get_keys_to_not_convert), as the serving weights do (costmodel.generation).
        weighted = ops.gemm_like & (ops.phase == "forward") & (weight_pc > 0)
        if (ops.stage == "block").any():
            weighted &= ops.stage != "last"
        calls = float(count[weighted].sum())
        if calls > 0:
            total = float((weight_pc[weighted] * count[weighted]).sum())
            appended.append((NF4_DEQUANT_OP, total * dequant_bytes_per_weight / calls, calls,
                             "forward"))
    if islands[1] > 0:
        appended.append((AUTOCAST_ISLAND_OP, islands[0] / islands[1] / (dp * tp * micro),
                         islands[1] * micro / pp, "forward"))
    accum_bytes, accum_calls = grad_accumulation(prof, ops, parallel)
    if accum_calls > 0:
        appended.append(("grad.accumulate", accum_bytes / accum_calls, accum_calls, "backward"))
    for op_name, per_call, calls, op_phase in appended:
        flops_pc = np.append(flops_pc, 0.0)
        bytes_pc = np.append(bytes_pc, per_call)
        # A cast reads 4 bytes an element and writes 2 (or the reverse): a third is written;
        # the islands' casts and FP32 outputs write half of their bytes. A dequantisation
        # writes 2 of its NF4_DEQUANT_BYTES per weight. Accumulating into .grad writes in place.
        written_pc = np.append(written_pc, per_call / 3 if op_name == "amp.cast" else
                               per_call / 2 if op_name == AUTOCAST_ISLAND_OP else
                               per_call * 2.0 / NF4_DEQUANT_BYTES if op_name == NF4_DEQUANT_OP
                               else 0.0)
        weight_pc = np.append(weight_pc, 0.0)
        count = np.append(count, calls)
        divisor = np.append(divisor, 1.0)
        name = np.append(name, op_name)
        op_class = np.append(op_class, "memory")
        phase = np.append(phase, op_phase)
        attn = np.append(attn, False)
        norm = np.append(norm, False)
    shard = tp * (dp if parallel.zero_stage >= 1 else 1)
    elem = DTYPE_BYTES.get(prof.param_dtype, 4.0)
    large = tuple(b / elem / shard for b in prof.large_param_bytes) if opt.any() else ()
    return DeviceWork(name, flops_pc, bytes_pc, count, divisor, op_class, phase, attn, norm,
                      written_per_call=written_pc, weight_per_call=weight_pc,
                      optimizer_large_elements=large)


def grad_accumulation(prof: ModelProfile, ops: OpArrays,
                      parallel: ParallelConfig) -> tuple[float, float]:
    """(bytes, kernel calls) per device per step of accumulating gradients over micro-batches.

    A traced backward's first pass hands each parameter its gradient without a kernel; every
    further micro-batch (``num_microbatches x grad_accum_steps`` in all) adds its gradient
    into ``.grad`` in place: read the new gradient, read and write the sum, 3 x the gradient's
    element size per parameter (PyTorch's AccumulateGrad; Megatron-style fp32 ``main_grad``
    buffers do the same pass). One call per parameter tensor (the optimizer record's count;
    without one, one per block). A device holds ``1/(tp pp)`` of
    the parameters (``1/dp`` of that with ZeRO-2/3, which accumulate the reduced shard).
    E.g. 1e9 fp32 parameters on one device and 4 micro-batches: 3 adds of 12 GB each.
    """
    micro = parallel.num_microbatches * parallel.grad_accum_steps
    if prof.mode != "train" or micro <= 1 or prof.num_trainable_params <= 0:
        return 0.0, 0.0
    shard = parallel.tp_degree * parallel.pp_degree * (
        parallel.dp_degree if parallel.zero_stage >= 2 else 1)
    elem = DTYPE_BYTES.get(prof.param_dtype, 4.0)
    opt = ops.phase == "optimizer"
    tensors = float(ops.count[opt].max()) if opt.any() else float(prof.num_blocks or 1)
    calls = (micro - 1) * max(tensors / parallel.pp_degree, 1.0)
    return (micro - 1) * prof.num_trainable_params / shard * 3 * elem, calls
