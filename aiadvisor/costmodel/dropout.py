"""Training dropout as the target device runs it.

``F.dropout`` in training dispatches to one fused kernel, ``native_dropout``, when the input is
on a CUDA (or ROCm, XPU, lazy) device; elsewhere ATen runs its composite: ``noise =
empty_like(x).bernoulli_(1 - p).div_(1 - p)`` then ``x * noise`` (``dropout`` and
``is_fused_kernel_acceptable`` in ATen's ``native/Dropout.cpp``). A trace on a CPU, on meta or
on fake tensors therefore holds three kernels a call that move 12 bytes per 4-byte element
(the mask is written in the input's dtype, scaled in place, read back), where a GPU runs one
kernel that reads the input and writes the output and a one-byte mask: 9 bytes per 4-byte
element, 5 per 2-byte one. The backward multiplies the gradient by that mask either way
(``native_dropout_backward`` on the GPU reads the one-byte mask instead of the scaled copy).

The profiler notes each training call (:class:`~aiadvisor.schema.DropoutGroup`: calls, input
elements and the ops the calls ran); for NVIDIA/AMD GPUs the cost model takes those ops out of
the calling module's records and prices one ``native_dropout`` per call.
"""

from __future__ import annotations

from dataclasses import replace

from ..schema import ModelProfile, OpRecord

#: The fused kernel a CUDA device runs for a training ``F.dropout`` call, and its backward.
NATIVE_DROPOUT = "aten.native_dropout"
#: Bytes per element of the mask ``native_dropout`` writes (``torch.bool``).
MASK_BYTES = 1


def has_dropout(prof: ModelProfile) -> bool:
    return bool(getattr(prof, "dropout", ()))


def fused_dropout_ops(prof: ModelProfile, ops: list[OpRecord]) -> list[OpRecord]:
    """``ops`` with each traced dropout call's forward ops replaced by one ``native_dropout``
    and its backward mask read at one byte per element. A group whose traced ops are no longer
    all there (a recommendation transform removed them, e.g. fused attention's) is left as
    is."""
    index = {(op.module, op.phase, op.op): i for i, op in enumerate(ops)}
    out = list(ops)
    fused: list[OpRecord] = []
    for group in prof.dropout:
        found = [(index.get((group.module, "forward", name)), count, read, written)
                 for name, count, read, written in group.ops]
        if not found or any(i is None or out[i].count < count * (1 - 1e-6)
                            for i, count, _, _ in found):
            continue
        template = None
        for i, count, read, written in found:
            op = out[i]
            template = template or op
            if op.op.startswith("aten.mul"):
                template = op
            out[i] = replace(op, count=max(op.count - count, 0.0),
                             bytes_read=max(op.bytes_read - read, 0.0),
                             bytes_written=max(op.bytes_written - written, 0.0))
        data = group.elements * group.element_bytes
        fused.append(replace(template, op=NATIVE_DROPOUT, count=float(group.calls), flops=0.0,
                             bytes_read=data,
                             bytes_written=data + group.elements * MASK_BYTES))
        back = index.get((group.module, "backward", "aten.mul"))
        if back is not None and group.element_bytes > MASK_BYTES:
            op = out[back]
            saved = group.elements * (group.element_bytes - MASK_BYTES)
            out[back] = replace(op, bytes_read=max(op.bytes_read - saved, 0.0))
    return [op for op in out if op.count > 0] + fused
