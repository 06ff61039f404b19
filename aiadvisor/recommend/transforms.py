"""What-if profiles: the same step after a tactic, for the cost model to price.

Each function returns a new :class:`~aiadvisor.schema.ModelProfile` whose ops describe what the
tactic changes (fewer bytes, fewer launches, fewer FLOPs); the predicted gain of the tactic is the
cost model's step time on the original over its step time on the transformed profile. The
assumption behind each transform is in its docstring and in the recommendation's rationale.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..costmodel.fusion import fuse_elementwise
from ..schema import ModelProfile, OpRecord
from ..units import FUSED_SUFFIX

__all__ = ["fuse_elementwise"]  # re-exported: the torch.compile tactic's transform

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
