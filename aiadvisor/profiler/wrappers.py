"""Models handed over in a wrapper: ``torch.compile``'s ``OptimizedModule`` and TorchScript.

A notebook user often profiles the object they train, and that is often ``torch.compile(model)``.
Its ``_orig_mod`` is the eager module with the same parameters and buffers; the profiler traces
that one (the compiled wrapper re-enters Dynamo under the tracer's fake tensors) and says so.
A TorchScript module (``torch.jit.script``/``trace``) runs in the TorchScript interpreter, which
the stateless API that swaps fake parameters in cannot drive: it is refused with the fix.
"""

from __future__ import annotations

from ..errors import InvalidModelError


def eager_module(model, *, what: str = "model"):
    """(the eager ``nn.Module`` to trace, a note or None) for ``model`` (already checked to be an
    ``nn.Module``); raises :class:`InvalidModelError` for a TorchScript module."""
    import torch

    if isinstance(model, torch.jit.ScriptModule):
        raise InvalidModelError(
            f"{what} of type {type(model).__name__} is a TorchScript module (torch.jit.script or "
            "torch.jit.trace): it is not valid here, aiadvisor traces eager modules. Expected "
            "the torch.nn.Module it was made from: profile that one (the same weights, the same "
            "ops).")
    inner = getattr(model, "_orig_mod", None)
    if inner is not None and type(model).__name__ == "OptimizedModule" \
            and isinstance(inner, torch.nn.Module):
        return inner, ("The model is wrapped by torch.compile: its eager module (model._orig_mod,"
                       " the same weights) was traced. Predictions price eager PyTorch and "
                       "say what CUDA graphs (mode=\"reduce-overhead\") would take.")
    return model, None
