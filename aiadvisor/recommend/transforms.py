"""What-if profiles: the same step after a tactic, for the cost model to price.

Each function returns a new :class:`~aiadvisor.schema.ModelProfile` whose ops describe what the
tactic changes (fewer bytes, fewer launches, fewer FLOPs); the predicted gain of the tactic is the
cost model's step time on the original over its step time on the transformed profile. The
assumption behind each transform is in its docstring and in the recommendation's rationale.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable

from ..schema import ModelProfile, OpRecord
from ..units import FUSED_SUFFIX

ATTENTION_WORDS = ("attn", "attention")


def _with_ops(prof: ModelProfile, ops: list[OpRecord]) -> ModelProfile:
    return dataclasses.replace(prof, ops=tuple(ops))


def _scaled(op: OpRecord, *, flops: float = 1.0, nbytes: float = 1.0,
            count: float | None = None) -> OpRecord:
    return dataclasses.replace(op, flops=op.flops * flops, bytes_read=op.bytes_read * nbytes,
                               bytes_written=op.bytes_written * nbytes,
                               count=op.count if count is None else count)


def map_ops(prof: ModelProfile, fn: Callable[[OpRecord], OpRecord | None]) -> ModelProfile:
    """Apply ``fn`` to every op; ops it maps to None are dropped."""
    return _with_ops(prof, [new for op in prof.ops if (new := fn(op)) is not None])


def fuse_elementwise(prof: ModelProfile, *, keep_rng: bool = False) -> ModelProfile:
    """torch.compile / TensorRT fusion: the memory-bound ops of one module and phase become one
    kernel that reads its largest input and writes its largest output once (intermediates stay
    in registers), launched as often as the least-launched op of the group. Conservative: a
    fused kernel usually moves less than the largest single op.

    Fusion does not stop at ``nn.Module`` boundaries (the compiler traces through them): a
    child module that only normalises (``LayerNorm``, ``RMSNorm``, ...) the output of its
    parent's own memory-bound ops in the forward -- BERT's ``LayerNorm(hidden + residual)``,
    GPT-2's ``ln_2(attn + residual)`` -- joins the parent's kernel (:func:`_merge_norms`).

    ``keep_rng``: random-number ops (dropout masks) stay out of the fused kernels with their
    own cost. On a CPU generating the numbers, not moving them, is their time, and a compiled
    kernel still generates every one: dropout on 2**19 FP32 elements measured 2.7 ms eager and
    1.85 ms compiled on the development CPU (2-core Xeon VM, torch 2.13), against 0.04 ms
    for a ReLU of the same tensor."""
    from ..costmodel.local import op_family

    groups: dict[tuple[str, str], list[OpRecord]] = defaultdict(list)
    kept: list[OpRecord] = []
    for op in prof.ops:
        rng = keep_rng and op_family(op.op, op.op_class, op.phase) == "rng"
        if op.op_class == "memory" and not rng:
            groups[(op.module, op.phase)].append(op)
        else:
            kept.append(op)
    fused: dict[tuple[str, str], OpRecord] = {}
    for key, ops in groups.items():
        first = max(ops, key=lambda o: o.bytes_total)
        fused[key] = dataclasses.replace(
            first, op="fused." + key[1], count=min(o.count for o in ops),
            bytes_read=max(o.bytes_read for o in ops),
            bytes_written=max(o.bytes_written for o in ops), flops=sum(o.flops for o in ops),
        )
    return _with_ops(prof, kept + _merge_norms(fused, groups))


def _is_normalization(ops: list[OpRecord]) -> bool:
    return all("norm" in op.op.lower() and "backward" not in op.op for op in ops)


def _merge_norms(fused: dict[tuple[str, str], OpRecord],
                 groups: dict[tuple[str, str], list[OpRecord]]) -> list[OpRecord]:
    """Fold each forward normalisation-only child group into its parent module's group.

    The merged kernel is launched ``max(parent calls, the children's calls together)`` times
    (one add+norm kernel per residual; GPT-2's block: 24 adds and 12 + 12 norms -> 24 kernels,
    not 48). Bytes, conservatively: only the norm's read of its input (what the parent just
    wrote, ``bytes_read - bytes_written`` of the norm: the activation, leaving its weights)
    disappears; the parent's write is kept, since the sum is often the next residual (GPT-2).
    BERT-base's ``attention.output`` at 128 tokens in bf16: add (2 x 192 KiB read, 192 KiB
    written) + LayerNorm (192 KiB read, 192 KiB written), two kernels -> one kernel reading
    2 x 192 KiB and writing 2 x 192 KiB (128 x 768 x 2 bytes = 192 KiB).

    The records keep no program order, so a norm child is merged even where its parent's
    memory ops run elsewhere in the forward (GPT-2's final ``ln_f`` and the model's
    position-embedding add): one kernel and one activation read too few there."""
    merged = dict(fused)
    children: dict[tuple[str, str], list[OpRecord]] = defaultdict(list)
    for (module, phase), op in fused.items():
        parent = (module.rsplit(".", 1)[0] if "." in module else "", phase)
        if (phase == "forward" and parent != (module, phase) and parent in fused
                and _is_normalization(groups[(module, phase)])):
            children[parent].append(op)
            del merged[(module, phase)]
    for parent, norms in children.items():
        base = fused[parent]
        merged[parent] = dataclasses.replace(
            base, count=max(base.count, sum(n.count for n in norms)),
            bytes_read=base.bytes_read + sum(max(0.0, n.bytes_read - n.bytes_written)
                                             for n in norms),
            bytes_written=base.bytes_written + sum(n.bytes_written for n in norms),
            flops=base.flops + sum(n.flops for n in norms),
        )
    return list(merged.values())


def _in_attention(op: OpRecord) -> bool:
    return any(word in op.module.lower().rsplit(".", 1)[-1] for word in ATTENTION_WORDS)


def fused_attention(prof: ModelProfile) -> ModelProfile:
    """Scaled-dot-product attention (FlashAttention): the softmax, masking, scaling and dropout
    of the attention module's own ops run inside the attention kernel, so their memory traffic
    (the s x s score matrices) disappears; the two batched matmuls remain."""
    return map_ops(prof, lambda op: None if op.op_class == "memory" and _in_attention(op) else op)


def quantized_optimizer_state(prof: ModelProfile, *, old_state_bytes: float,
                              new_state_bytes: float) -> ModelProfile:
    """8-bit optimizer: per element the step reads param, grad and the moments and writes param
    and the moments; only the moments shrink. AdamW: (4 + 4 + 2 s) read + (4 + 2 s) written,
    s = bytes per moment (4 -> 1)."""
    old = (4 + 4 + 2 * old_state_bytes) + (4 + 2 * old_state_bytes)
    new = (4 + 4 + 2 * new_state_bytes) + (4 + 2 * new_state_bytes)
    return map_ops(prof, lambda op: _scaled(op, nbytes=new / old) if op.phase == "optimizer"
                   else op)


def fused_optimizer(prof: ModelProfile) -> ModelProfile:
    """A fused optimizer updates every parameter tensor in one launch instead of one launch (or
    several) per tensor, and reads and writes each tensor once: the record, renamed
    ``optimizer.<name>[fused]``, keeps the fused bytes it was profiled with (on a CPU the
    default for-loop step is priced at its own, larger, traffic:
    :data:`aiadvisor.units.UNFUSED_OPTIMIZER_TENSORS`) and is one call."""
    def fuse(op: OpRecord) -> OpRecord:
        if op.phase != "optimizer":
            return op
        name = op.op if op.op.endswith(FUSED_SUFFIX) else op.op + FUSED_SUFFIX
        return dataclasses.replace(_scaled(op, count=1), op=name)

    return map_ops(prof, fuse)


#: What 2:4 semi-structured sparsity measures on the GEMMs that qualify: 1.24x and 1.27x on the
#: two ViT-L MLP linears (torchao ``sparsity/training/README.md``, A100, fp16), about 1.3x on
#: BERT's linears in the PyTorch semi-structured sparsity tutorial (A100) -- not the 2x of
#: skipping half the FLOPs, nor the 1.5-1.7x sometimes quoted. 1.2x is used, the low side.
SPARSE_GEMM_SPEEDUP = 1.2
#: The GEMMs that qualify are large: at one token per call (decode, ``1 x 4096 x 4096``) the
#: sparse kernels are no faster (pytorch/pytorch#111339). A call qualifies from ``m*n*k >= 2**30``
#: multiply-adds (the ViT-L shapes above are 13008 x 1024 x 4096 = 5.5e10).
SPARSE_MIN_MACS_PER_CALL = 2**30


def sparse_qualifies(op: OpRecord) -> bool:
    """A Linear-layer GEMM (not attention's batched matmuls) large enough for 2:4 kernels."""
    return (op.op_class == "gemm" and not _in_attention(op) and op.count > 0
            and op.flops / op.count / 2 >= SPARSE_MIN_MACS_PER_CALL)


def sparse_gemms(prof: ModelProfile, *, gemm_speedup: float = SPARSE_GEMM_SPEEDUP
                 ) -> ModelProfile:
    """2:4 semi-structured sparsity (inference, Linear layers): the GEMMs that qualify
    (:func:`sparse_qualifies`) run ``gemm_speedup`` times faster, written as that many times
    fewer FLOPs; the others are unchanged."""
    return map_ops(prof, lambda op: _scaled(op, flops=1 / gemm_speedup)
                   if sparse_qualifies(op) else op)


def pruned(prof: ModelProfile, *, keep: float) -> ModelProfile:
    """Structured channel pruning keeping ``keep`` of each layer's output channels: a layer's
    FLOPs and weights shrink with its outputs and with the previous layer's (``keep^2``);
    activation traffic shrinks with ``keep``."""
    def shrink(op: OpRecord) -> OpRecord:
        if op.op_class in ("gemm", "conv"):
            return _scaled(op, flops=keep * keep, nbytes=keep)
        if op.op_class == "memory":
            return _scaled(op, nbytes=keep)
        return op

    return map_ops(prof, shrink)


def embedding_bytes(prof: ModelProfile, *, factor: float) -> ModelProfile:
    """Quantized embedding tables: the lookups read ``factor`` as many weight bytes."""
    return map_ops(prof, lambda op: _scaled(op, nbytes=factor) if op.op_class == "embedding"
                   else op)


def with_extra_ops(prof: ModelProfile, extra: list[OpRecord]) -> ModelProfile:
    """The profile plus ops it does not show (e.g. the layout transposes cuDNN inserts)."""
    return _with_ops(prof, [*prof.ops, *extra])


#: Ops besides convolutions whose records name a channels_last input (as the profiler names
#: them, :func:`aiadvisor.profiler.opinfo.record_suffix`): they run other CPU kernels in NHWC.
LAYOUT_OPS = ("aten.max_pool2d_with_indices", "aten.native_batch_norm",
              "aten.native_batch_norm_backward")


def channels_last_convs(prof: ModelProfile) -> ModelProfile:
    """The convolutions, forward max pools and batch norms with channels_last (NHWC)
    tensors: records renamed ``<op>[channels_last]``, which a benchmarked CPU prices from the
    ops its grid timed in that layout (elsewhere they cost what they did)."""
    from ..hardware.calibrate import CHANNELS_LAST_SUFFIX, base_op

    def to_nhwc(op: OpRecord) -> OpRecord:
        layout_op = base_op(op.op) in LAYOUT_OPS
        if not (op.op_class == "conv" or layout_op) or op.op.endswith(CHANNELS_LAST_SUFFIX):
            return op
        return dataclasses.replace(op, op=op.op + CHANNELS_LAST_SUFFIX)

    return map_ops(prof, to_nhwc)


def layout_transposes(prof: ModelProfile) -> list[OpRecord]:
    """The NCHW <-> NHWC copies cuDNN's tensor-core convolutions make when tensors are NCHW:
    each conv's operands are read and written once more (what channels_last saves; an upper
    bound, since the weights are converted once, not per call)."""
    extra = []
    for op in prof.ops:
        if op.op_class == "conv":
            extra.append(dataclasses.replace(
                op, op="layout.transpose", op_class="memory", flops=0.0,
                bytes_read=op.bytes_read + op.bytes_written,
                bytes_written=op.bytes_read + op.bytes_written,
            ))
    return extra
