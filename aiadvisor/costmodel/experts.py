"""Mixture-of-experts weights a forward actually reads: only the experts its tokens are routed to.

A grouped expert GEMM reads the weights of each expert that receives at least one token. With
``T`` tokens each choosing ``k`` of ``E`` experts (a balanced router: each expert is chosen by a
token with probability ``k / E``, independently across tokens), the expected number of distinct
experts a layer touches is ``E x (1 - (1 - k / E)^T)``: ``k`` at one token (decode at batch 1)
and nearly all ``E`` from a few times ``E / k`` tokens on (large-batch decode, any prefill).
The trace on fake/meta inputs reads every expert's weights in every call, so decode at small
batch would be priced as if it read the whole model.
"""

from __future__ import annotations

from dataclasses import replace

from ..schema import ModelProfile

#: The grouped GEMM records of a profile (``profiler.opinfo.GROUPED_GEMM_PACKETS``, by name:
#: the cost model imports no torch).
_GROUPED_OPS = {"aten._grouped_mm", "aten._scaled_grouped_mm"}

_DTYPE_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1,
                "float8_e5m2": 1, "int8": 1, "uint8": 1}


def expected_experts_touched(num_experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts one MoE layer reads for ``tokens`` tokens routed top-``k``.

    >>> expected_experts_touched(8, 2, 1)    # one token: its 2 experts
    2.0
    >>> round(expected_experts_touched(8, 2, 4), 4)   # 8 x (1 - 0.75^4)
    5.4688
    """
    if tokens <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def active_expert_profile(prof: ModelProfile, *, tokens: float) -> tuple[ModelProfile, float]:
    """``prof`` with its forward grouped expert GEMMs reading only the expected experts that
    ``tokens`` tokens touch, and that number per layer (``num_experts`` for a dense profile or
    one without grouped GEMMs: unchanged).

    The experts' weights are ``expert_params`` elements of the parameter dtype over all layers;
    each grouped-GEMM record holds its share of them in proportion to the bytes it reads, and
    the untouched experts' part of that share is taken off its ``bytes_read``.
    """
    moe = prof.moe
    if moe is None:
        return prof, 0.0
    ops = [op for op in prof.ops if op.op in _GROUPED_OPS and op.phase == "forward"]
    total_read = sum(op.bytes_read for op in ops)
    if not ops or total_read <= 0:
        return prof, float(moe.num_experts)
    touched = min(float(moe.num_experts),
                  expected_experts_touched(moe.num_experts, moe.top_k, tokens))
    weight_bytes = moe.expert_params * _DTYPE_BYTES.get(prof.param_dtype, 4)
    untouched = 1.0 - touched / moe.num_experts
    new_ops = []
    for op in prof.ops:
        if op.op in _GROUPED_OPS and op.phase == "forward":
            share = min(op.bytes_read, weight_bytes * op.bytes_read / total_read)
            op = replace(op, bytes_read=op.bytes_read - share * untouched)
        new_ops.append(op)
    return replace(prof, ops=tuple(new_ops)), touched
