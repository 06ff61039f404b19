"""Convolution layouts as cuDNN runs them: NCHW tensors on tensor cores are transposed.

PyTorch keeps image tensors NCHW unless the model and its input are converted with
``.to(memory_format=torch.channels_last)``. NVIDIA's tensor-core convolutions work in NHWC:
for an NCHW convolution cuDNN transposes the operands to NHWC, runs the NHWC kernel and
transposes the result back, in every call, forward and backward (NVIDIA's Deep Learning
Performance guide; MosaicML's Composer "Channels Last" method card: about 30 % on ResNet-50
training on V100 and A100). :func:`layout_transpose_ops` prices that as one more read and
write of every operand of each NCHW convolution record (weights included: they are converted
every call), a memory-bound op (:data:`LAYOUT_TRANSPOSE_OP`) beside the convolution. FP32
convolutions on CUDA cores (``precision="fp32"``) run NCHW natively and pay none of it. AMD's
MIOpen has NCHW kernels of its own for its matrix cores: AMD GPUs are priced as traced (the
channels_last recommendation there still estimates the copies it could save).

Checked against timm's published NCHW and NHWC runs of the same models (pytorch-image-models
``results/benchmark-*-amp-{nchw,nhwc}-*.csv``, not fitted): AMP on an RTX 3090 with PyTorch 1.12
(cuDNN 8.3), NCHW over NHWC time, predicted vs measured: ResNet-50 inference 1.35 vs 1.35,
ResNet-18 inference 1.24 vs 1.20, ResNet-50 training 1.33 vs 1.47, ResNet-18 training 1.22 vs
1.26. With PyTorch 2.4 (cuDNN 9.1) on an RTX 4090 ResNet-18 inference is 1.33 vs 1.35 but
ResNet-50 1.41 vs 1.21: newer cuDNN runs some NCHW 1x1 convolutions without the transposes, so
NCHW bottleneck networks can be priced up to ~15 % slow there.
"""

from __future__ import annotations

import dataclasses

from ..hardware.calibrate import CHANNELS_LAST_SUFFIX
from ..schema import ModelProfile, OpRecord

#: Name of the op record of a convolution's layout transposes.
LAYOUT_TRANSPOSE_OP = "layout.transpose"


def transposes_nchw_convs(spec, precision: str) -> bool:
    """Whether ``spec`` transposes NCHW convolutions at ``precision``: NVIDIA GPUs whose
    convolutions run on the tensor cores (every precision but fp32)."""
    return spec.kind == "gpu" and spec.vendor.upper() == "NVIDIA" and precision != "fp32"


def nchw_convs(prof: ModelProfile) -> list[OpRecord]:
    """The convolution records (forward and backward) whose tensors are NCHW: without the
    ``[channels_last]`` suffix the profiler gives one whose input or weight is channels_last
    (:func:`aiadvisor.profiler.opinfo.record_suffix`)."""
    return [op for op in prof.ops if op.op_class == "conv" and op.count > 0
            and not op.op.endswith(CHANNELS_LAST_SUFFIX)]


def layout_transpose_ops(prof: ModelProfile) -> list[OpRecord]:
    """One memory-bound record per NCHW convolution record: its operands read and written
    once more (module doc), as many calls as the convolution."""
    return [dataclasses.replace(op, op=LAYOUT_TRANSPOSE_OP, op_class="memory", flops=0.0,
                                bytes_read=op.bytes_total, bytes_written=op.bytes_total)
            for op in nchw_convs(prof)]


def transposed_bytes(prof: ModelProfile, precision: str) -> float:
    """Bytes the transposes of :func:`layout_transpose_ops` move a step at ``precision`` (the
    traced bytes converted as the cost model prices them)."""
    from .ops import byte_factors, op_arrays

    extra = layout_transpose_ops(prof)
    if not extra:
        return 0.0
    ops = op_arrays(dataclasses.replace(prof, ops=tuple(extra)))
    return float((ops.bytes_total * byte_factors(prof, ops, precision)).sum())


def with_layout_transposes(prof: ModelProfile) -> ModelProfile:
    """``prof`` with :func:`layout_transpose_ops` appended (itself when it has none)."""
    extra = layout_transpose_ops(prof)
    return dataclasses.replace(prof, ops=(*prof.ops, *extra)) if extra else prof
