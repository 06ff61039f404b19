"""Example inputs: normalise them, find the batch and sequence dimensions, and rebuild them at
another batch size / sequence length (as fake, meta or real tensors) for the scaling traces."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from ..errors import InvalidArgumentError


@dataclass(frozen=True)
class InputSpec:
    args: tuple
    kwargs: dict
    batch_size: int
    seq_len: int | None

    def shapes(self) -> str:
        """Human-readable shapes, for error messages."""
        def fmt(x):
            if isinstance(x, torch.Tensor):
                return f"{x.dtype}{list(x.shape)}".replace("torch.", "")
            return (repr(x) if isinstance(x, (int, float, bool, str, type(None)))
                    else type(x).__name__)
        parts = [fmt(a) for a in self.args] + [f"{k}={fmt(v)}" for k, v in self.kwargs.items()]
        return "(" + ", ".join(parts) + ")"


def normalize(example_inputs: Any) -> InputSpec:
    """Accept a tensor, a tuple/list of positional arguments, or a dict of keyword arguments."""
    if isinstance(example_inputs, torch.Tensor):
        args, kwargs = (example_inputs,), {}
    elif isinstance(example_inputs, (tuple, list)):
        args, kwargs = tuple(example_inputs), {}
    elif isinstance(example_inputs, dict):
        args, kwargs = (), dict(example_inputs)
    else:
        raise InvalidArgumentError(
            f"example_inputs of type {type(example_inputs).__name__} is not valid: "
            "expected a tensor, "
            "a tuple of positional arguments, or a dict of keyword arguments."
        )
    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    if not tensors:
        raise InvalidArgumentError(
            "example_inputs contains no tensor: expected at least one torch.Tensor "
            "(e.g. a batch of token ids or images)."
        )
    first = tensors[0]
    if first.dim() == 0:
        raise InvalidArgumentError(
            f"example_inputs' first tensor is a scalar (shape {list(first.shape)}): expected a "
            "batch whose dimension 0 is the batch size."
        )
    batch_size = int(first.shape[0])
    return InputSpec(args=args, kwargs=kwargs, batch_size=batch_size, seq_len=_seq_len(tensors))


def _has_seq(t: torch.Tensor) -> bool:
    """Token ids and masks (integer or bool, rank >= 2) and (batch, seq, feature) floats."""
    if t.dtype in (torch.bool,) or not t.is_floating_point():
        return t.dim() >= 2
    return t.dim() == 3


def _seq_len(tensors: list[torch.Tensor]) -> int | None:
    for t in tensors:
        if _has_seq(t):
            return int(t.shape[1])
    return None


def resized_shape(t: torch.Tensor, spec: InputSpec, batch_size: int,
                  seq_len: int | None) -> list[int]:
    shape = list(t.shape)
    if shape and shape[0] == spec.batch_size:
        shape[0] = batch_size
    if spec.seq_len is not None and seq_len is not None and _has_seq(t):
        if t.is_floating_point():
            if shape[1] == spec.seq_len:
                shape[1] = seq_len
        else:
            shape = [seq_len if (i >= 1 and s == spec.seq_len) else s for i, s in enumerate(shape)]
    return shape


def build(spec: InputSpec, *, batch_size: int, seq_len: int | None, device: torch.device,
          float_dtype: torch.dtype | None = None) -> tuple[tuple, dict]:
    """Fresh tensors with the inputs' dtypes at the given sizes, created in the ambient mode
    (inside ``FakeTensorMode`` they are fake). Values are left uninitialised except for integer
    inputs, which are zero (valid token ids / indices)."""

    def make(x):
        if not isinstance(x, torch.Tensor):
            return x
        shape = resized_shape(x, spec, batch_size, seq_len)
        if x.is_floating_point():
            return torch.empty(shape, dtype=float_dtype or x.dtype, device=device)
        return torch.zeros(shape, dtype=x.dtype, device=device)

    return tree_map(make, (spec.args, spec.kwargs))
