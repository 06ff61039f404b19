"""``scaled_dot_product_attention`` as the target device runs it.

The profiler records the ops of every SDPA call under a pseudo-module ``<module>.[sdpa]``
(:class:`~aiadvisor.schema.SDPAGroup`). A trace on a CPU or on meta tensors holds the kernel the
*tracing* device picked: in training (dropout, masks) usually PyTorch's math path, two batched
matmuls around a softmax and a dropout that materialise ``T x T`` scores, probabilities and a
mask. PyTorch picks its backend per call (``torch.nn.attention.SDPBackend``): on NVIDIA and AMD
GPUs a fused kernel, flash attention for FP16/BF16 and memory-efficient attention (also FP32,
and arbitrary masks); neither writes the ``T x T`` matrices to memory (Dao et al. 2022,
"FlashAttention", section 3: ``O(N^2 d^2 / M)`` HBM accesses instead of ``O(N d + N^2)``). On
CPUs and other devices the traced ops are kept.

A fused call is costed as one attention op: the FLOPs of the traced matmuls (the same
``4 B H T^2 D`` forward), the bytes of query, key, value and output (forward) or twice that
(backward reads q, k, v, o and dO and writes dq, dk, dv), plus the log-sum-exp; its efficiency is
the GEMM curve of its engine, as for every attention op.
"""

from __future__ import annotations

from dataclasses import replace

from ..schema import ModelProfile
from .ops import CUDA_VENDORS, OpArrays, op_arrays

SDPA_SUFFIX = "[sdpa]"
FUSED_VENDORS = CUDA_VENDORS


def runs_cuda_kernels(spec) -> bool:
    """Whether PyTorch runs its CUDA/ROCm kernels on ``spec`` (NVIDIA/AMD GPUs): fused
    attention, fused dropout (:mod:`.dropout`), rather than the ops a CPU or meta trace
    recorded."""
    return spec.kind == "gpu" and spec.vendor.upper() in FUSED_VENDORS


def attention_backend(spec, precision: str) -> str:
    """The SDPA backend PyTorch runs on ``spec`` at ``precision``: ``flash`` (NVIDIA/AMD GPU,
    16-bit or FP8 compute), ``mem-efficient`` (the same GPUs in FP32/TF32) or ``as traced``."""
    if runs_cuda_kernels(spec):
        return "mem-efficient" if precision in ("fp32", "tf32") else "flash"
    return "as traced"


def fused_op_arrays(prof: ModelProfile) -> OpArrays:
    """Op arrays as an NVIDIA/AMD GPU runs the step: each module's SDPA ops merged into one
    fused attention op per phase, and each training dropout call one ``native_dropout``
    (:mod:`.dropout`)."""
    from .dropout import fused_dropout_ops

    groups = {g.module: g for g in prof.sdpa}
    kept = [op for op in prof.ops if op.count > 0 and op.module not in groups]
    fused = []
    for module, group in groups.items():
        for phase in ("forward", "backward"):
            ops = [op for op in prof.ops if op.module == module and op.phase == phase
                   and op.count > 0]
            if not ops or group.calls <= 0:
                continue
            gemm = [op for op in ops if op.op_class in ("gemm", "attention")] or ops
            io = group.io_bytes * (1.0 if phase == "forward" else 2.0)
            read = 0.75 * group.io_bytes if phase == "forward" else 1.25 * group.io_bytes
            fused.append(replace(
                gemm[0], op=("aten._scaled_dot_product_flash_attention" if phase == "forward"
                             else "aten._scaled_dot_product_flash_attention_backward"),
                op_class="attention", count=float(group.calls),
                flops=float(sum(op.flops for op in ops)),
                bytes_read=float(read + (group.lse_bytes if phase == "backward" else 0.0)),
                bytes_written=float(io - read + (group.lse_bytes if phase == "forward" else 0.0)),
            ))
    return op_arrays(replace(prof, ops=tuple(fused_dropout_ops(prof, kept) + fused)))


def has_sdpa(prof: ModelProfile) -> bool:
    return bool(getattr(prof, "sdpa", ()))


def fused_memory_saving_bytes(prof: ModelProfile) -> float:
    """Saved-for-backward bytes a fused kernel does not keep: what the traced SDPA ops saved
    less what flash attention keeps (query, key, value, output and the log-sum-exp), >= 0."""
    if prof.mode != "train":
        return 0.0
    return float(sum(g.fused_saving_bytes for g in prof.sdpa))
