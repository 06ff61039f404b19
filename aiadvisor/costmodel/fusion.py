"""Kernel fusion as compilers and serving engines do it: the memory-bound ops around the GEMMs
become one kernel per module (Inductor, TensorRT, the fused kernels of serving engines). Used to
price ``torch.compile`` (:mod:`aiadvisor.recommend.transforms`) and the decode step of a serving
engine (:mod:`aiadvisor.costmodel.generation`)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from ..schema import ModelProfile, OpRecord
from .local import op_family


def fuse_elementwise(prof: ModelProfile, *, keep_rng: bool = False) -> ModelProfile:
    """torch.compile / TensorRT fusion: the memory-bound ops of one module and phase become one
    kernel that reads its largest input and writes its largest output once (intermediates stay
    in registers), launched as often as the least-launched op of the group. Conservative: a
    fused kernel usually moves less than the largest single op.

    Fusion does not stop at ``nn.Module`` boundaries (the compiler traces through them): a
    child module that only normalises (``LayerNorm``, ``RMSNorm``, ...) the output of its
    parent's own memory-bound ops in the forward -- BERT's ``LayerNorm(hidden + residual)``,
    GPT-2's ``ln_2(attn + residual)``, Llama's ``post_attention_layernorm(hidden + residual)``
    -- joins the parent's kernel (:func:`_merge_norms`).

    ``keep_rng``: random-number ops (dropout masks) stay out of the fused kernels with their
    own cost. On a CPU generating the numbers, not moving them, is their time, and a compiled
    kernel still generates every one: dropout on 2**19 FP32 elements measured 2.7 ms eager and
    1.85 ms compiled on the development CPU (2-core Xeon VM, torch 2.13), against 0.04 ms
    for a ReLU of the same tensor."""

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
    return dataclasses.replace(prof, ops=tuple(kept + _merge_norms(fused, groups)))


def _is_normalization(module: str, ops: list[OpRecord]) -> bool:
    """A forward group that only normalises: every op a norm kernel (``native_layer_norm``),
    or a module named as a norm whose RMSNorm is written out in Python (Llama's
    ``input_layernorm``: pow, mean, rsqrt and two multiplies; the built-in decoders'
    ``norm1``/``norm2``), which an engine's fused add+RMSNorm kernel and Inductor run with the
    residual add before it."""
    if any("backward" in op.op for op in ops):
        return False
    return (all("norm" in op.op.lower() for op in ops)
            or "norm" in module.rsplit(".", 1)[-1].lower())


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
                and _is_normalization(module, groups[(module, phase)])):
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


#: Linear layers that read the same input and that serving engines (vLLM's
#: ``QKVParallelLinear`` and ``MergedColumnParallelLinear``, TensorRT-LLM's fused QKV and
#: gated-MLP weights) run as one GEMM: by their leaf-module names, as the transformers models
#: and the built-in decoders name them.
SIBLING_PROJECTIONS = (
    frozenset({"q_proj", "k_proj", "v_proj"}),
    frozenset({"query", "key", "value"}),
    frozenset({"wq", "wk", "wv"}),
    frozenset({"gate_proj", "up_proj"}),
    frozenset({"w1", "w3"}),
)


def _sibling_group(module: str) -> tuple[str, int] | None:
    parent, _, leaf = module.rpartition(".")
    for i, names in enumerate(SIBLING_PROJECTIONS):
        if leaf in names:
            return parent, i
    return None


def fuse_projections(prof: ModelProfile) -> ModelProfile:
    """The forward GEMMs of sibling projections (:data:`SIBLING_PROJECTIONS`: q/k/v, gate/up)
    as one GEMM each, as serving engines load them: one kernel reading the concatenated
    weights, launched as often as the least-launched of them. FLOPs and bytes add up (each
    projection's read of the shared input is kept: a little conservative)."""
    groups: dict[tuple, list[OpRecord]] = defaultdict(list)
    kept: list[OpRecord] = []
    for op in prof.ops:
        sib = _sibling_group(op.module) if op.op_class == "gemm" and op.phase == "forward" \
            else None
        if sib is None:
            kept.append(op)
        else:
            groups[(sib, op.op, op.dtype)].append(op)
    for ops in groups.values():
        if len(ops) == 1:
            kept.extend(ops)
            continue
        kept.append(dataclasses.replace(
            ops[0], count=min(o.count for o in ops), flops=sum(o.flops for o in ops),
            bytes_read=sum(o.bytes_read for o in ops),
            bytes_written=sum(o.bytes_written for o in ops)))
    return dataclasses.replace(prof, ops=tuple(kept))
