"""Per-device memory of a parallel plan: the ZeRO and activation-memory arithmetic.

Model states (Rajbhandari et al. 2020, "ZeRO", section 3): mixed-precision Adam keeps, per
parameter, 2 bytes of 16-bit weights, 2 bytes of 16-bit gradients and 12 bytes of optimizer state
(fp32 master weights, momentum and variance) = 16 bytes; fp32 training keeps 4 + 4 + 8. ZeRO
stage 1 shards the optimizer state over the data-parallel group, stage 2 also the gradients,
stage 3 (FSDP) also the weights. Tensor and pipeline parallelism split every state first.
Plans without ZeRO (DDP, tensor and pipeline parallel) run PyTorch's own mixed precision,
``torch.autocast``, which counts differently: fp32 weights (the master copy) 4 + fp32 gradients 4
+ Adam's moments 8, plus the 16-bit copy autocast makes of each weight and keeps for backward, 2
(reported as a working buffer) = 18 bytes at the peak.

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models"): a transformer layer saves ``s b h (34 + 5 a s / h)`` bytes in 16 bit; tensor parallel
with sequence parallelism divides all of it by ``t``; selective recomputation drops the
``5 a s^2 b`` attention-score term; full recomputation keeps only each layer's input
(``2 s b h``) plus one layer's activations while it is recomputed. Here the per-layer figures
come from the profile (``block_activation_bytes`` and ``block_output_bytes``) rather than the
formula, so any block architecture is covered; the attention-score share is the part of the block
activations that is quadratic in the sequence length, read from the profile's fitted scaling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..costmodel.precision import INFERENCE_ONLY, WEIGHT_ONLY, check_mode
from ..errors import UnsupportedPrecisionError
from ..schema import ModelProfile, ParallelConfig
from ..units import FUSED_SUFFIX, WEIGHT_BYTES

#: Fraction of device memory left free for what the profile cannot see: the CUDA context
#: (0.3-2 GiB), cuBLAS/cuDNN workspaces and allocator fragmentation (reserved/allocated is
#: typically 1.05-1.10). A plan "fits" when its total is at most 90 % of the device memory.
HEADROOM_FRACTION = 0.10

#: Devices per node: tensor parallelism stays within one node's fast links (NVLink/xGMI).
DEVICES_PER_NODE = 8

_MIXED = ("bf16", "fp16", "fp8", "mxfp8")

#: Share of a layer's sequence-linear activations that tensor parallel without sequence
#: parallelism keeps whole on every rank: 10 of 34 (Korthikanti et al. 2022, sec. 4.1).
NO_SP_WHOLE_SHARE = 10 / 34
_FULL = ("fp32", "tf32")

#: Optimizer bytes per trainable parameter: (fp32 training, mixed precision). Mixed precision
#: adds a 4-byte fp32 master copy to each (the optimizer updates the master, ZeRO section 3).
_OPTIMIZER_STATE = {"adamw": (8, 12), "adam": (8, 12), "sgd_momentum": (4, 8), "sgd": (0, 4),
                    "none": (0, 0)}

#: Bytes per weight of the 16-bit copies torch.autocast makes in forward and autograd keeps for
#: backward (until each layer's backward has run): all of them are alive at the end of forward.
AUTOCAST_COPY_BYTES = 2

_DTYPE_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1,
                "float8_e5m2": 1, "int8": 1, "uint8": 1}


def dtype_bytes(dtype: str) -> int:
    """Element size of a dtype name such as ``"float32"`` (4 when unknown)."""
    return _DTYPE_BYTES.get(str(dtype).replace("torch.", ""), 4)


def activation_element_bytes(precision: str) -> int:
    """Bytes per saved activation element: 4 for fp32/tf32; 2 otherwise (16-bit autocast; FP8
    and weight-only formats keep activations in bf16)."""
    return 4 if precision in _FULL else 2


def state_bytes_per_param(*, mode: str, precision: str,
                          optimizer: str) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per trainable parameter.

    Inference weights are sized by :data:`aiadvisor.units.WEIGHT_BYTES` (formats with their
    block scales: mxfp8 8.25 bits, fp4 4.5 bits (NVFP4; MXFP4 devices store 4.25), int4 4.25
    bits, nf4 4.127 bits per weight): the figure of a weight matrix; a model's mean, with its
    16-bit embedding tables, biases and norms, is :func:`inference_weight_bytes`. Training in
    mxfp8 is mixed precision like fp8 (16-bit weights and gradients, fp32 master weights and
    state); fp4 is not offered for training.

    >>> state_bytes_per_param(mode="train", precision="bf16", optimizer="adamw")
    (2, 2, 12)
    >>> state_bytes_per_param(mode="train", precision="fp32", optimizer="adamw")
    (4, 4, 8)
    >>> state_bytes_per_param(mode="infer", precision="nf4", optimizer="adamw")
    (0.515869140625, 0, 0)
    """
    if mode == "infer":
        return WEIGHT_BYTES[precision], 0, 0
    check_mode(mode, precision)
    if precision in INFERENCE_ONLY:
        raise UnsupportedPrecisionError(
            f"precision={precision!r} is not valid for training: {precision} is a "
            f"{'weight-only' if precision in WEIGHT_ONLY else 'W8A8'} quantized format for "
            "inference (or for the frozen base of QLoRA adapters). Train in "
            "'bf16' (or 'fp16', 'fp8'), then quantize for serving."
        )
    fp32_state, mixed_state = _OPTIMIZER_STATE[optimizer]
    if precision in _MIXED:
        return 2, 2, mixed_state
    return 4, 4, fp32_state


def inference_weight_bytes(prof: ModelProfile, precision: str) -> float:
    """Mean bytes per parameter of the model's weights stored for inference in ``precision``.

    The 8- and 4-bit formats store the weight matrices at :data:`aiadvisor.units.WEIGHT_BYTES`
    and leave the rest in 16 bit: biases, norms and embedding tables
    (``prof.num_quantizable_params``); 16- and 32-bit formats store every weight at their
    width.

    Llama-3-8B, whose 128,256 x 4,096 embedding table is 6.5 % of its 8.03 B weights, in nf4
    (4.127 bits = 0.516 bytes): 0.935 x 0.516 + 0.065 x 2 = 0.613 bytes per parameter.
    """
    per = WEIGHT_BYTES[precision]
    if per >= 2 or not prof.num_params:
        return per
    share = min(1.0, prof.num_quantizable_params / prof.num_params)
    return share * per + (1 - share) * 2.0


@dataclass(frozen=True, kw_only=True)
class ActivationParts:
    """Saved activations of one data-parallel replica, split the way the plans need them.

    Bytes are at the profile's batch size and in the plan's precision. ``*_per_batch`` parts
    grow linearly with the batch; ``*_fixed`` parts do not (position tables).
    """

    batch_size: int
    num_blocks: int
    block_per_batch_bytes: float
    """One block's saved activations for the whole batch (no weight copies)."""
    block_quadratic_bytes: float
    """The part of ``block_per_batch_bytes`` quadratic in sequence length (attention scores)."""
    block_input_bytes: float
    """One block's input (= the previous block's output): what full checkpointing keeps."""
    block_fixed_bytes: float
    other_per_batch_bytes: float
    """Activations outside the blocks (embeddings, final norm, logits, loss)."""
    other_fixed_bytes: float
    inputs_bytes: float
    temporaries_bytes: float
    mode: str = "train"
    notes: tuple[str, ...] = ()
    cuda_target: bool = False
    """The plan runs on an NVIDIA/AMD GPU (fused attention and dropout; torch.optim's foreach
    optimizer step, :func:`optimizer_step_bytes`)."""

    def at_batch(self, batch_size: int) -> ActivationParts:
        """The same parts for a (micro-)batch of ``batch_size`` samples (linear in the batch)."""
        k = batch_size / self.batch_size
        return replace(
            self, batch_size=batch_size, block_per_batch_bytes=self.block_per_batch_bytes * k,
            block_quadratic_bytes=self.block_quadratic_bytes * k,
            block_input_bytes=self.block_input_bytes * k,
            other_per_batch_bytes=self.other_per_batch_bytes * k,
            inputs_bytes=self.inputs_bytes * k, temporaries_bytes=self.temporaries_bytes * k,
        )


def block_params(prof: ModelProfile) -> float:
    """Parameters in one repeated block (0 when the profile found none)."""
    return prof.block_param_bytes / dtype_bytes(prof.param_dtype) if prof.num_blocks else 0.0


def _autocast_weight_copy_bytes(prof: ModelProfile) -> tuple[float, float]:
    """Upper bounds of the 16-bit weight copies autocast saves for backward: (one block, the
    rest of the model).

    Under ``torch.autocast`` with fp32 parameters each matmul casts its weight to 16 bit and
    saves the copy; the profile counts it as an activation that does not grow with the batch.
    The ZeRO arithmetic already counts 16-bit weights (2 bytes/param), so batch-independent
    activations up to these sizes are taken to be those copies and removed."""
    compute, param = dtype_bytes(prof.compute_dtype), dtype_bytes(prof.param_dtype)
    if prof.mode != "train" or compute >= param:
        return 0.0, 0.0
    per_block = block_params(prof)
    rest = max(0.0, prof.num_params - prof.num_blocks * per_block)
    return per_block * compute, rest * compute


def _split_batch(prof: ModelProfile) -> tuple[float, float, float, float] | None:
    """(block per-batch, block fixed, total per-batch, total fixed) from ``prof.at``: a quantity
    linear in the batch B is ``f + B g``, so ``g B = Q(2B) - Q(B)`` and ``f = 2 Q(B) - Q(2B)``."""
    if prof.scaling is None:
        return None
    double = prof.at(batch_size=2 * prof.batch_size)
    blk, blk2 = prof.block_activation_bytes, double.block_activation_bytes
    tot, tot2 = prof.memory.activations_bytes, double.memory.activations_bytes
    return blk2 - blk, max(0.0, 2 * blk - blk2), tot2 - tot, max(0.0, 2 * tot - tot2)


def _quadratic_share(prof: ModelProfile) -> float:
    """Fraction of the per-batch block activations quadratic in the sequence length.

    The per-batch part is ``P(s) = k + a s + c s^2``; three sequence lengths (s, s/2, s/4, the
    points the profiler traced) give ``c`` exactly. For eager attention ``c s^2`` is the score,
    softmax and dropout tensors (``5 a s^2 b`` bytes in Korthikanti et al.); fused attention
    (SDPA/FlashAttention) stores none, so the share is 0."""
    import numpy as np

    seq = prof.seq_len
    if prof.scaling is None or not seq or seq < 4 or not prof.num_blocks:
        return 0.0
    lengths = [seq, seq // 2, seq // 4]
    per_batch = []
    for length in lengths:
        base = prof.at(seq_len=length)
        double = base.at(batch_size=2 * prof.batch_size)
        per_batch.append(double.block_activation_bytes - base.block_activation_bytes)
    if per_batch[0] <= 0:
        return 0.0
    basis = np.array([[1.0, n / seq, (n / seq) ** 2] for n in lengths])
    _k, _a, c = np.linalg.solve(basis, np.array(per_batch, dtype=float))
    return float(min(1.0, max(0.0, c / per_batch[0])))


def activation_parts(prof: ModelProfile, *, precision: str,
                     fused_attention: bool = False) -> ActivationParts:
    """Split the profile's activations into per-block, per-batch and fixed parts (see module).

    ``fused_attention``: the target runs ``scaled_dot_product_attention`` as a fused kernel
    (NVIDIA/AMD GPUs, :func:`aiadvisor.costmodel.attention.attention_backend`) where the trace
    ran the math path (a CPU or meta trace in training, e.g. with attention dropout): the
    ``T x T`` probabilities and masks it saved for backward are not kept (the kernel keeps
    query, key, value, output and the log-sum-exp), so the blocks' quadratic part loses them
    (:func:`~aiadvisor.costmodel.attention.fused_memory_saving_bytes`). BERT-base training at
    4 x 512 tokens in FP32: 1.65 GB of its 3.3 GB of activations. Such a target also keeps
    training dropout masks in one byte an element, and its plans take torch.optim's foreach
    step (``cuda_target``, :func:`optimizer_step_bytes`)."""
    scale = activation_element_bytes(precision) / dtype_bytes(prof.compute_dtype)
    notes = []
    if scale != 1:
        notes.append(
            f"activations rescaled from the profile's {prof.compute_dtype} to {precision} "
            f"({scale:g}x): an estimate, profile with precision={precision!r} for exact figures."
        )
    if prof.mode != "train":
        return ActivationParts(
            batch_size=prof.batch_size, num_blocks=prof.num_blocks, block_per_batch_bytes=0.0,
            block_quadratic_bytes=0.0, block_input_bytes=prof.block_output_bytes * scale,
            block_fixed_bytes=0.0, other_per_batch_bytes=prof.memory.activations_bytes * scale,
            other_fixed_bytes=0.0, inputs_bytes=float(prof.memory.inputs_bytes),
            temporaries_bytes=prof.memory.temporaries_bytes * scale, mode="infer",
            notes=tuple(notes),
        )
    block_copies, other_copies = _autocast_weight_copy_bytes(prof)
    split = _split_batch(prof)
    if split is None:
        # No scaling fit: everything counts as growing with the batch (an upper bound).
        blk_batch, blk_fixed = max(0.0, prof.block_activation_bytes - block_copies), 0.0
        other = prof.memory.activations_bytes - prof.num_blocks * prof.block_activation_bytes
        other_batch, other_fixed = max(0.0, other - other_copies), 0.0
    else:
        blk_batch, blk_fixed_raw, tot_batch, tot_fixed = split
        blk_fixed = max(0.0, blk_fixed_raw - block_copies)
        other_batch = max(0.0, tot_batch - prof.num_blocks * blk_batch)
        other_fixed = max(0.0, tot_fixed - prof.num_blocks * blk_fixed_raw - other_copies)
    quad = blk_batch * _quadratic_share(prof)
    if fused_attention:
        from ..costmodel.attention import fused_memory_saving_bytes

        saving = fused_memory_saving_bytes(prof)
        if prof.num_blocks:  # the T x T tensors are the blocks' quadratic part
            cut = min(saving / prof.num_blocks, quad)
            blk_batch, quad = blk_batch - cut, quad - cut
            saving = cut * prof.num_blocks
        else:  # no repeated blocks: everything is in the rest, per batch
            saving = min(saving, other_batch)
            other_batch -= saving
        if saving > 0:
            notes.append(f"attention as a fused kernel: {saving * scale / 2**30:.2f} GiB of the "
                         "traced math path's T x T tensors not kept")
        # CUDA's native_dropout keeps a one-byte mask where the traced composite kept one in
        # the input's dtype (:mod:`aiadvisor.costmodel.dropout`).
        masks = {True: 0.0, False: 0.0}
        for g in getattr(prof, "dropout", ()):
            masks["*" in g.module] += g.elements * max(g.element_bytes - 1, 0)
        if prof.num_blocks:
            cut = min(masks[True] / prof.num_blocks, max(blk_batch - quad, 0.0))
            blk_batch -= cut
            other_cut = min(masks[False], max(other_batch, 0.0))
        else:
            cut, other_cut = 0.0, min(masks[True] + masks[False], max(other_batch, 0.0))
        other_batch -= other_cut
        if cut or other_cut:
            notes.append(f"dropout as CUDA's fused kernel: "
                         f"{(cut * prof.num_blocks + other_cut) * scale / 2**20:.3g} MiB of "
                         "masks kept in one byte an element instead of the input's dtype")
    return ActivationParts(
        batch_size=prof.batch_size, num_blocks=prof.num_blocks,
        block_per_batch_bytes=blk_batch * scale, block_quadratic_bytes=quad * scale,
        block_input_bytes=prof.block_output_bytes * scale, block_fixed_bytes=blk_fixed * scale,
        other_per_batch_bytes=other_batch * scale, other_fixed_bytes=other_fixed * scale,
        inputs_bytes=float(prof.memory.inputs_bytes),
        temporaries_bytes=prof.memory.temporaries_bytes * scale, notes=tuple(notes),
        cuda_target=fused_attention,
    )


@dataclass(frozen=True, kw_only=True)
class DeviceMemory:
    """Bytes on one device (the fullest one) under a parallel plan: with a pipeline, the
    parameters of the stage holding the most and the first stage's activations (1F1B's
    warm-up keeps the most micro-batches in flight there)."""

    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    gathered_bytes: float
    """Working copies of the weights: FSDP/ZeRO-3's unsharded block (plus the prefetched next
    one) and its unsharded gradients before the reduce-scatter; ZeRO-Offload gradient buckets;
    autocast's 16-bit weight copies in plans without ZeRO."""
    other_bytes: float
    """Inputs and short-lived temporaries; where the optimizer step's temporaries
    (:func:`optimizer_step_bytes`) outweigh the activations they replace, what makes up the
    difference."""
    cpu_bytes: float
    """Host memory per device for offloaded states."""

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.grads_bytes + self.optimizer_bytes
                + self.activations_bytes + self.gathered_bytes + self.other_bytes)


def _stage_params(prof: ModelProfile, pp: int) -> float:
    """Parameters on the fullest pipeline stage under Megatron-LM's partition: the first
    (ceil(L/pp) blocks and the embeddings) or the last (floor(L/pp) blocks, the final norm and
    the LM head, whose tied weight Megatron keeps a copy of there), whichever holds more.

    The split outside the blocks comes from the profile's module records (``Embedding``
    modules on the first stage); a profile without them takes half of the non-block
    parameters on each end."""
    if pp == 1:
        return float(prof.num_params)
    per_block = block_params(prof)
    other = max(0.0, prof.num_params - prof.num_blocks * per_block)
    outside = [m for m in prof.modules if "*" not in m.name]
    first = sum(m.num_params for m in outside if m.type == "Embedding")
    last = sum(m.num_params for m in outside if m.type != "Embedding")
    if not outside or first + last <= 0 or first + last > 2 * other:
        # no records, or records that list every block (no starred block): halves
        first = last = other / 2
    return max(math.ceil(prof.num_blocks / pp) * per_block + first,
               prof.num_blocks // pp * per_block + last)


def model_state_memory(prof: ModelProfile, config: ParallelConfig, *,
                       precision: str) -> DeviceMemory:
    """Weights, gradients, optimizer state and FSDP working buffers on one device."""
    tp, dp, stage = config.tp_degree, config.dp_degree, config.zero_stage
    params = _stage_params(prof, config.pp_degree) / tp
    trainable = params * (prof.num_trainable_params / prof.num_params if prof.num_params else 0)
    gathered, cpu = 0.0, 0.0
    if stage == 0 and precision in _MIXED and prof.mode == "train":
        # PyTorch AMP (torch.autocast; DDP, tensor and pipeline parallel plans): the parameters
        # stay fp32 and are the optimizer's master copy, gradients are fp32, and autocast's
        # 16-bit copy of every weight is saved for backward: 4 + 4 + 8 (AdamW) + 2 at the peak.
        w_b, g_b, o_b = state_bytes_per_param(mode="train", precision="fp32",
                                              optimizer=prof.optimizer)
        frozen_w = w_b
        gathered = params * AUTOCAST_COPY_BYTES
    else:
        w_b, g_b, o_b = state_bytes_per_param(mode=prof.mode, precision=precision,
                                              optimizer=prof.optimizer)
        if prof.mode != "train":
            w_b = inference_weight_bytes(prof, precision)
        frozen_w = 2 if precision in _MIXED and prof.mode == "train" else w_b
    weights = trainable * w_b + (params - trainable) * frozen_w
    grads, opt = trainable * g_b, trainable * o_b
    unit = block_params(prof) / tp if prof.num_blocks else params  # one FSDP unit
    unit_trainable = unit * (trainable / params if params else 0)
    if stage >= 1:
        opt /= dp
    if stage >= 2:
        grads /= dp
    if stage == 3:
        weights /= dp
        # current + prefetched unit's weights, and the unit's full gradients before reduce-scatter
        gathered = (2 if prof.num_blocks else 1) * unit * w_b + unit_trainable * g_b
        if not config.reshard_after_forward:
            # every unit's gathered weights are held from its forward to its backward: at the
            # start of backward the whole (unsharded) model is on the device
            gathered = params * w_b + unit_trainable * g_b
    if config.offload:
        # ZeRO-Offload (stage 2) / ZeRO-Infinity, FSDP CPUOffload (stage 3): optimizer state and
        # gradients (and with stage 3 the weight shards) live in host memory; the device keeps
        # one unit's gradients in flight.
        cpu = opt + grads + (weights if stage == 3 else 0.0)
        gathered = max(gathered, unit_trainable * g_b)
        opt, grads = 0.0, 0.0
        if stage == 3:
            weights = 0.0
    return DeviceMemory(weights_bytes=weights, grads_bytes=grads, optimizer_bytes=opt,
                        activations_bytes=0.0, gathered_bytes=gathered, other_bytes=0.0,
                        cpu_bytes=cpu)


def activation_memory(parts: ActivationParts, config: ParallelConfig, *,
                      micro_batch: int) -> tuple[float, float]:
    """(activations, inputs + temporaries) on the fullest device for one micro-batch.

    Pipeline 1F1B: the first stage holds ``min(pp, m)`` micro-batches in flight over its
    ``L / pp`` layers, as much as ``L`` layers of one micro-batch (Korthikanti et al., sec. 4.2).
    Interleaved (``v`` virtual stages): Megatron's schedule warms the first device up with
    ``2 (pp - 1) + (v - 1) pp`` chunks of ``L / (pp v)`` layers, plus the one running, so it
    holds ``((v + 1) pp - 1) / v`` stages' worth (at most all ``m v`` chunks), i.e. ``pp``
    times ``1 + (pp - 1) / (pp v)`` (Korthikanti et al. 2022, sec. 4.2.3).
    Tensor parallel with sequence parallelism divides every activation by ``tp``; without it
    (``config.sequence_parallel=False``) the residual path's share stays whole on every rank:
    10 of the 34 ``s b h`` bytes per layer that are linear in the sequence (LayerNorm inputs,
    dropout masks, residual outputs; Korthikanti et al. 2022, eq. 1 vs 2: ``s b h (10 + 24 / t
    + 5 a s / h t)``) and, under full recomputation, each layer's kept input.
    """
    p = parts.at_batch(micro_batch) if micro_batch != parts.batch_size else parts
    tp, pp, v = config.tp_degree, config.pp_degree, config.virtual_stages
    m = config.num_microbatches
    if pp == 1:
        in_flight = 1
    elif v == 1:
        in_flight = min(pp, m)
    else:
        in_flight = min((v + 1) * pp - 1, m * v) / v
    layers = math.ceil(p.num_blocks / pp) if p.num_blocks else 0
    if config.checkpointing == "full" and p.num_blocks:
        blocks = layers * in_flight * p.block_input_bytes + p.block_per_batch_bytes
    elif config.checkpointing == "selective" and p.num_blocks:
        blocks = layers * in_flight * (p.block_per_batch_bytes - p.block_quadratic_bytes)
    else:
        blocks = layers * in_flight * p.block_per_batch_bytes
    fixed = layers * p.block_fixed_bytes + p.other_fixed_bytes
    activations = (blocks + p.other_per_batch_bytes) / tp + fixed
    if tp > 1 and not config.sequence_parallel and p.num_blocks:
        linear = p.block_per_batch_bytes - p.block_quadratic_bytes
        if config.checkpointing == "full":
            whole = layers * in_flight * p.block_input_bytes + NO_SP_WHOLE_SHARE * linear
        else:
            whole = layers * in_flight * NO_SP_WHOLE_SHARE * linear
        activations += whole * (1 - 1 / tp)
    return activations, p.inputs_bytes + p.temporaries_bytes / tp


#: Bytes per trainable parameter of the temporary list torch.optim's foreach Adam/AdamW (the
#: default on CUDA devices) builds in ``step()``: ``exp_avg_sq.sqrt()`` for every parameter at
#: once, in the master weights' FP32 (``_multi_tensor_adamw``; profiled and checked in
#: ``MemoryBreakdown.cuda_peak_bytes``).
FOREACH_ADAM_TEMP_BYTES = 4


def optimizer_step_bytes(prof: ModelProfile, config: ParallelConfig) -> float:
    """Temporaries of the optimizer step on the fullest device of a GPU plan: foreach Adam/AdamW
    holds one FP32 list the size of the parameters it updates (its ZeRO shard from stage 1 on);
    none with a fused optimizer, another optimizer, or the optimizer offloaded to the host. The
    step runs after backward has freed the activations, so it raises the peak only where this
    list outweighs them (:func:`device_memory`)."""
    if prof.mode != "train" or prof.optimizer not in ("adam", "adamw") or config.offload:
        return 0.0
    if any(op.phase == "optimizer" and op.op.endswith(FUSED_SUFFIX) for op in prof.ops):
        return 0.0
    params = _stage_params(prof, config.pp_degree) / config.tp_degree
    trainable = params * (prof.num_trainable_params / prof.num_params if prof.num_params else 0)
    shard = config.dp_degree if config.zero_stage >= 1 else 1
    return trainable * FOREACH_ADAM_TEMP_BYTES / shard


def device_memory(prof: ModelProfile, config: ParallelConfig, *, precision: str,
                  parts: ActivationParts | None = None,
                  micro_batch: int | None = None) -> DeviceMemory:
    """Everything on the fullest device: model states plus the larger of backward's working set
    (activations, weight copies, inputs) and the optimizer step's temporaries.

    Parameters
    ----------
    prof : ModelProfile
        The profile; its batch is what each device contributes to a step.
    config : ParallelConfig
        The plan.
    precision : str
        Training or inference precision of the plan.
    parts : ActivationParts, optional
        Precomputed :func:`activation_parts` (saves the ``prof.at`` calls).
    micro_batch : int, optional
        Samples per forward pass of a replica (default: from the plan's layout when each device
        contributes the profile's batch, :func:`~aiadvisor.recommend.predictor.layout`).
    """
    from .predictor import layout

    parts = parts or activation_parts(prof, precision=precision)
    if micro_batch is None:
        micro_batch = layout(config, prof.batch_size).micro_batch
    states = model_state_memory(prof, config, precision=precision)
    activations, other = activation_memory(parts, config, micro_batch=micro_batch)
    # On a GPU, the optimizer step's peak (states + its temporaries) against backward's (states
    # + activations, autocast's weight copies, inputs): the larger one sets the device's peak.
    step = optimizer_step_bytes(prof, config) if parts.cuda_target else 0.0
    other = max(other, step - activations - states.gathered_bytes)
    if precision == "nf4" and prof.mode != "train" and micro_batch * (prof.seq_len or 1) > 1:
        # bitsandbytes writes each NF4 weight in 16 bit for a GEMM of more than one token
        # (costmodel.ops.nf4_dequantizes): the largest such copy, one layer at a time.
        other += 2 * prof.largest_quantizable_params / config.tp_degree
    return replace(states, activations_bytes=activations, other_bytes=other)


def usable_bytes(memory_bytes: float) -> float:
    """Device memory a plan may use: all of it minus :data:`HEADROOM_FRACTION`."""
    return memory_bytes * (1 - HEADROOM_FRACTION)


class PartsSource:
    """:func:`activation_parts` per precision for one profile, rescaled to a batch size.

    The parts are linear in the batch (``ActivationParts.at_batch``), so they are computed once
    per precision at the profile's own batch (a few ``prof.at`` calls each) and rescaled for any
    other batch: moving a batch-size slider costs no re-analysis.
    """

    def __init__(self, prof: ModelProfile, *, batch_size: int | None = None,
                 cache: dict | None = None, fused_attention: bool = False) -> None:
        self.prof = prof
        self.batch_size = batch_size or prof.batch_size
        self._cache = {} if cache is None else cache
        self.fused_attention = fused_attention
        """The target runs SDPA as a fused kernel (see :func:`activation_parts`)."""

    def for_spec(self, spec) -> PartsSource:
        """This source as ``spec`` runs attention (the same cache: keyed by the flag)."""
        from ..costmodel.attention import runs_cuda_kernels

        fused = runs_cuda_kernels(spec)
        if fused == self.fused_attention:
            return self
        return PartsSource(self.prof, batch_size=self.batch_size, cache=self._cache,
                           fused_attention=fused)

    def __call__(self, precision: str) -> ActivationParts:
        key = (precision, self.fused_attention)
        if key not in self._cache:
            self._cache[key] = activation_parts(self.prof, precision=precision,
                                                fused_attention=self.fused_attention)
        parts = self._cache[key]
        return parts if parts.batch_size == self.batch_size else parts.at_batch(self.batch_size)
