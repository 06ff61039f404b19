"""What the user's setup already does, so that the plan does not recommend it again.

Each check reads the live objects (never changes them) or the traced profile and returns the
evidence it found, keyed by the tactic id it makes redundant (:mod:`.tactics`). torch is
imported only where a live model, optimizer or DataLoader is inspected.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgumentError
from ..schema import ModelProfile

#: torch.optim classes the cost model has an update rule for, by the name ``advise`` takes.
OPTIMIZER_NAMES = {"AdamW": "adamw", "Adam": "adam", "SGD": "sgd"}
#: Attention implementations of Hugging Face models that run a fused attention kernel.
FUSED_ATTENTION = ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")


def detect(model: Any = None, *, optimizer: Any = None, dataloader: Any = None,
           profile: ModelProfile | None = None) -> dict[str, str]:
    """Tactic id -> the evidence that it is already applied.

    Parameters
    ----------
    model : torch.nn.Module, optional
        The live model: compiled (``torch.compile`` / ``model.compile()``), channels_last
        weights, Hugging Face gradient checkpointing or attention implementation.
    optimizer : torch.optim.Optimizer, optional
        ``fused`` / ``foreach`` in its defaults or param groups.
    dataloader : torch.utils.data.DataLoader, optional
        ``pin_memory`` and ``num_workers``.
    profile : ModelProfile, optional
        The traced step: fused attention kernels. (The precision the model runs in is the
        report's ``precision`` option: the precision step starts from it.)

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Linear(4, 4)
    >>> detect(net, optimizer=torch.optim.AdamW(net.parameters(), fused=False, foreach=True))
    {'fused_optimizer': 'the optimizer has foreach=True'}
    """
    found: dict[str, str] = {}
    if profile is not None:
        found.update(_from_profile(profile))
    if hasattr(model, "named_parameters"):  # a live module, not a captured profile
        found.update(_from_model(model))
    if optimizer is not None and not isinstance(optimizer, str):
        found.update(_from_optimizer(optimizer))
    if dataloader is not None:
        found.update(_from_loader(dataloader))
    found.update(_tf32_switch())
    return found


def _from_profile(prof: ModelProfile) -> dict[str, str]:
    found = {}
    calls = sum(op.count for op in prof.ops if op.op_class == "attention")
    if calls:
        found["sdpa"] = (f"the traced step runs {calls:.0f} fused scaled-dot-product attention "
                         "calls")
    return found


def _from_model(model: Any) -> dict[str, str]:
    import torch

    found = {}
    compiled = getattr(torch, "_dynamo", None) and isinstance(
        model, torch._dynamo.eval_frame.OptimizedModule)
    if compiled or getattr(model, "_compiled_call_impl", None) is not None:
        found["torch_compile"] = "the model is compiled (torch.compile)"
        found["onnx_export"] = found["torch_compile"]
    attn = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if isinstance(attn, str) and attn in FUSED_ATTENTION:
        found["sdpa"] = f"the model's config sets attn_implementation={attn!r}"
    # transformers 5 renames is_gradient_checkpointing (deprecated, warns) to
    # is_activation_checkpointing; read the new name where the class has it.
    for attr in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), attr):
            if getattr(model, attr) is True:
                found["activation_checkpointing"] = f"model.{attr} is True"
            break
    for name, param in model.named_parameters():
        if param.dim() == 4 and param.shape[1] > 1 and not param.is_contiguous() and \
                param.is_contiguous(memory_format=torch.channels_last):
            found["channels_last"] = f"parameter {name!r} is in channels_last memory format"
            break
    return found


def _from_optimizer(optimizer: Any) -> dict[str, str]:
    groups = [getattr(optimizer, "defaults", {}), *getattr(optimizer, "param_groups", [])]
    for flag in ("fused", "foreach"):
        if any(group.get(flag) is True for group in groups):
            return {"fused_optimizer": f"the optimizer has {flag}=True"}
    return {}


def _from_loader(loader: Any) -> dict[str, str]:
    pinned, workers = getattr(loader, "pin_memory", False), getattr(loader, "num_workers", 0)
    if pinned and workers:
        return {"dataloader": f"the DataLoader has pin_memory=True and num_workers={workers}"}
    return {}


def _tf32_switch() -> dict[str, str]:
    import torch

    if torch.backends.cuda.matmul.allow_tf32:
        return {"tf32": "torch.backends.cuda.matmul.allow_tf32 is True"}
    if torch.get_float32_matmul_precision() != "highest":
        return {"tf32": "torch.get_float32_matmul_precision() is "
                        f"{torch.get_float32_matmul_precision()!r}"}
    return {}


def optimizer_name(optimizer: Any) -> str | None:
    """The ``optimizer=`` name for a torch.optim optimizer (or the string itself, or None).

    >>> import torch
    >>> optimizer_name(torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1, momentum=0.9))
    'sgd_momentum'
    """
    if optimizer is None or isinstance(optimizer, str):
        return optimizer
    cls = type(optimizer).__name__
    name = OPTIMIZER_NAMES.get(cls)
    if name is None:
        raise InvalidArgumentError(
            f"optimizer={cls} instance is not supported: expected a name (adamw, adam, sgd, "
            f"sgd_momentum, none) or a torch.optim {', '.join(OPTIMIZER_NAMES)} instance; pass "
            "the name of the closest update rule, e.g. optimizer='adamw'.")
    if name == "sgd" and optimizer.defaults.get("momentum"):
        return "sgd_momentum"
    return name
