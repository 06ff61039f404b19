"""Repeated identical blocks (transformer layers): find them, and build a shallow copy of the
model that keeps only the first one, so a deep model is traced once per block type, not per layer.

The copy shares every submodule and tensor with the user's model; only the ``_modules`` dicts on
the path to the block list are new, so the user's model is never changed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from torch import nn


@dataclass(frozen=True)
class BlockPlan:
    path: str
    """Qualified name of the ModuleList / Sequential holding the blocks, e.g. ``model.layers``."""
    num_blocks: int
    block_type: str
    block_param_bytes: int
    start: int = 0
    """Index of the first repeated block: the container's first ``start`` children differ
    (DeepSeek-V3's first dense layers before its MoE layers) and are traced as they are."""


def _signature(module: nn.Module) -> tuple:
    params = tuple((n, tuple(p.shape), p.dtype, p.requires_grad)
                   for n, p in module.named_parameters())
    buffers = tuple((n, tuple(b.shape), b.dtype) for n, b in module.named_buffers())
    return (type(module), params, buffers)


def find_repeated_blocks(model: nn.Module, *, min_blocks: int = 3) -> BlockPlan | None:
    """The container with the most parameters in a run of >= ``min_blocks`` children of one type
    with identical parameter shapes that ends the container (a few different leading blocks, such
    as dense layers before mixture-of-experts ones, are allowed), or None."""
    best: BlockPlan | None = None
    best_bytes = 0
    for name, module in model.named_modules():
        if not isinstance(module, (nn.ModuleList, nn.Sequential)) or len(module) < min_blocks:
            continue
        children = list(module)
        start = _run_start(children)
        if len(children) - start < min_blocks or not _signature(children[start])[1]:
            continue
        # Tied or shared blocks (the same module object twice) cannot be truncated safely.
        if len({id(c) for c in children}) != len(children):
            continue
        block_bytes = sum(p.numel() * p.element_size() for p in children[start].parameters())
        total = block_bytes * (len(children) - start)
        if total > best_bytes:
            best_bytes = total
            best = BlockPlan(path=name, num_blocks=len(children) - start,
                             block_type=type(children[start]).__name__,
                             block_param_bytes=block_bytes, start=start)
    return best


def _run_start(children: list[nn.Module]) -> int:
    """Index where the run of blocks identical to the last one begins."""
    sig = _signature(children[-1])
    start = len(children) - 1
    while start > 0 and _signature(children[start - 1]) == sig:
        start -= 1
    return start


def truncated_copy(model: nn.Module, plan: BlockPlan, keep: int = 1) -> nn.Module:
    """A shallow copy of ``model`` whose block container holds only its leading blocks and the
    first ``keep`` repeated ones."""
    parts = plan.path.split(".") if plan.path else []
    root = _shallow(model)
    parent = root
    for part in parts[:-1]:
        child = _shallow(parent._modules[part])
        parent._modules[part] = child
        parent = child
    container = parent._modules[parts[-1]] if parts else root
    short = _shallow(container)
    short._modules = {k: v for i, (k, v) in enumerate(container._modules.items())
                      if i < plan.start + keep}
    if parts:
        parent._modules[parts[-1]] = short
        return root
    return short


def _shallow(module: nn.Module) -> nn.Module:
    new = copy.copy(module)
    new._modules = dict(module._modules)
    # Our own parameter/buffer dicts, so that functional_call's swaps touch the copy's dicts
    # for tensors owned directly by copied modules, never the user's.
    new._parameters = dict(module._parameters)
    new._buffers = dict(module._buffers)
    return new


def _block_prefix(plan: BlockPlan) -> str:
    return f"{plan.path}.{plan.start}" if plan.path else str(plan.start)


def is_block_module(name: str, plan: BlockPlan | None) -> bool:
    if plan is None:
        return False
    prefix = _block_prefix(plan)
    return name == prefix or name.startswith(prefix + ".")


def starred(name: str, plan: BlockPlan | None) -> str:
    """``model.layers.0.mlp`` -> ``model.layers.*.mlp`` for names inside the traced block."""
    if not is_block_module(name, plan):
        return name
    prefix = _block_prefix(plan)
    star = plan.path + ".*" if plan.path else "*"
    return star + name[len(prefix):]
