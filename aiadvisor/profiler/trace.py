"""One captured step: forward (+ backward for training) of the model on fake, meta or real
tensors under the :class:`Recorder`. Parameters are swapped in with ``functional_call``, so the
user's parameters, their ``.grad`` and buffers are never written."""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call
from torch.utils._pytree import tree_flatten

from . import inputs as inputs_mod
from .blocks import BlockPlan, is_block_module, truncated_copy
from .pylines import LineCounter
from .recorder import Agg, ModuleStack, Recorder, tensor_parts

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16,
                   "mxfp8": torch.bfloat16, "fp4": torch.bfloat16, "int8": torch.bfloat16,
                   "int8wo": torch.bfloat16, "int4": torch.bfloat16, "nf4": torch.bfloat16}


#: Profile note where another trace function kept the model's Python lines from being counted.
LINES_NOT_COUNTED = ("the model's own Python lines were not counted (a debugger or coverage "
                     "tool holds sys.settrace): eager host time leaves them out")


@dataclass
class TraceResult:
    aggs: dict[tuple[str, str, str], Agg]
    weights_bytes: int
    inputs_bytes: int
    activations_bytes: int
    activations_by_module: dict[str, int]
    grads_bytes: int
    peak_bytes: int
    live_after_step_bytes: int
    max_param_bytes: int
    block_activation_bytes: int = 0
    """Bytes the traced block leaves alive after the forward: saved for backward (train), its
    KV cache or other outputs that outlive it (inference)."""
    block_output_bytes: int = 0
    block_peak_bytes: int = 0
    """The memory high-water mark since the traced block started (``peak_bytes`` is the whole
    step's): the other blocks' live bytes are added only to the part of the step that runs with
    them, not to the embeddings before the first block."""
    compute_dtype: str = "float32"
    real_batch_size: int = 0
    notes: tuple[str, ...] = ()
    views: dict = dataclasses.field(default_factory=dict)
    """View ops per (module, phase) (``Recorder.views``)."""
    sparse_grads_bytes: int = 0
    """Of ``grads_bytes``, the sparse gradients' (0 on fake tensors, whose row count is not
    known)."""
    lookups: dict = dataclasses.field(default_factory=dict)
    """Rows the forward's embedding lookups gather, per module (``Recorder.lookups``)."""
    module_calls: dict = dataclasses.field(default_factory=dict)
    sdpa: dict = dataclasses.field(default_factory=dict)
    """``scaled_dot_product_attention`` calls per pseudo-module (``ModuleStack.sdpa``)."""
    dropout: dict = dataclasses.field(default_factory=dict)
    """Training ``F.dropout`` calls per calling module (``ModuleStack.dropout``)."""
    alloc_events: tuple[tuple[int, int], ...] = ()
    """Storages created and freed during the step, in order (``Recorder.events``)."""
    largest_gemm: tuple = ()
    """``(M, K, N)`` of the forward GEMM with the largest ``K x N`` (``Recorder.largest_gemm``)."""
    python_lines: dict = dataclasses.field(default_factory=dict)
    """Python lines the model's own code ran in the forward, per module (``LineCounter``; empty
    where not counted, which a note says)."""


def model_device(model: nn.Module) -> torch.device:
    for t in list(model.parameters()) + list(model.buffers()):
        return t.device
    return torch.device("cpu")


def reduce_output(out) -> torch.Tensor:
    """A scalar to call backward on: the model's own ``loss`` if it returns one, else the sum of
    its first floating-point output that requires grad (the cost of the sum is negligible)."""
    loss = getattr(out, "loss", None)
    if loss is None and isinstance(out, dict):
        loss = out.get("loss")
    if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad:
        return loss
    for t in tree_flatten(out)[0]:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad:
            return t.sum()
    raise RuntimeError("the model's output has no floating-point tensor that requires grad")


def _unique_named(model: nn.Module):
    """(name, tensor, is_param) for every parameter and buffer name, tied names included."""
    for name, p in model.named_parameters(remove_duplicate=False):
        yield name, p, True
    for name, b in model.named_buffers(remove_duplicate=False):
        yield name, b, False


def _stand_ins(model: nn.Module, *, path: str, device: torch.device, train: bool,
               float_dtype: torch.dtype | None = None):
    """Fresh tensors shaped like each parameter/buffer (ties kept), on ``device``; floating
    tensors in ``float_dtype`` when given (a model converted with ``.to(dtype)``)."""
    by_id: dict[int, torch.Tensor] = {}
    mapping: dict[str, torch.Tensor] = {}
    trainable: list[torch.Tensor] = []
    for name, t, is_param in _unique_named(model):
        new = by_id.get(id(t))
        if new is None:
            if path == "real":
                new = t.detach().clone()
                if float_dtype is not None and new.is_floating_point():
                    new = new.to(float_dtype)
            else:
                dtype = float_dtype if float_dtype is not None and t.is_floating_point() \
                    else t.dtype
                new = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=dtype,
                                          device=device)
            if is_param and train and t.requires_grad:
                new.requires_grad_(True)
                trainable.append(new)
            by_id[id(t)] = new
        mapping[name] = new
    return mapping, trainable, list(by_id.values())


@contextlib.contextmanager
def _modes(model: nn.Module, train: bool):
    """Set train/eval for the trace and restore every module's own flag afterwards."""
    flags = [(m, m.training) for m in model.modules()]
    try:
        yield
    finally:
        for m, flag in flags:
            m.training = flag


def run_trace(model: nn.Module, spec: inputs_mod.InputSpec, *, path: str, mode: str,
              precision: str, batch_size: int, seq_len: int | None,
              plan: BlockPlan | None, count_lines: bool = True) -> TraceResult:
    """Trace one step. ``path``: fake (FakeTensorMode), meta (meta device) or real.
    ``count_lines``: count the model's Python lines in the forward (:mod:`.pylines`)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    train = mode == "train"
    root = truncated_copy(model, plan) if plan is not None else model
    home = model_device(model)
    device = torch.device("cpu") if home.type == "meta" and path == "fake" else home
    if path == "meta":
        device = torch.device("meta")
    fake_mode = FakeTensorMode() if path == "fake" else contextlib.nullcontext()
    half = AUTOCAST_DTYPES.get(precision)
    # Training in 16 bits is mixed precision: FP32 weights under autocast. Inference stores the
    # model itself in 16 bits (``model.to(dtype)``); 8/4-bit weight formats compute in 16 bits
    # too, and their smaller weights are accounted for by the caller.
    autocast_dtype = half if train else None
    float_dtype = None if train else half
    autocast = contextlib.nullcontext()
    if (autocast_dtype is not None and path != "meta"
            and device.type in ("cpu", "cuda", "xpu", "mps")):
        autocast = torch.autocast(device_type=device.type, dtype=autocast_dtype)
    tracker = ModuleStack(root)
    recorder = Recorder(tracker)
    recorder.fake_kernels = path != "real"
    block = _first_block(root, plan)
    block_out: list[int] = []
    pre_block_peak: list[int] = []

    def pre_fw(module, _inputs):
        if block is not None and module is block and not pre_block_peak:
            # From here on, the high-water mark of the step since the block started.
            pre_block_peak.append(recorder.memory.peak)
            recorder.memory.peak = recorder.memory.total

    def post_fw(module, _inputs, output):
        if block is not None and module is block and not block_out:
            block_out.append(sum(t.numel() * t.element_size() for t in tree_flatten(output)[0]
                                 if isinstance(t, torch.Tensor)))

    tracker.pre_forward = pre_fw
    tracker.post_forward = post_fw
    with _modes(model, train), fake_mode:
        root.train(train)
        mapping, trainable, tensors = _stand_ins(root, path=path, device=device, train=train,
                                                 float_dtype=float_dtype)
        if path == "real":
            args, kwargs = _real_inputs(spec, device, batch_size, float_dtype)
        else:
            args, kwargs = inputs_mod.build(spec, batch_size=batch_size, seq_len=seq_len,
                                            device=device, float_dtype=float_dtype)
        recorder.param_names = {id(t.untyped_storage()): name for name, t in mapping.items()
                                if isinstance(t, torch.Tensor) and t.layout == torch.strided}
        for t in tensors:
            recorder.track(t, "weights")
        for t in tree_flatten((args, kwargs))[0]:
            if isinstance(t, torch.Tensor):
                recorder.track(t, "inputs")
        weights_bytes = recorder.memory.live["weights"]
        inputs_bytes = recorder.memory.live["inputs"]
        grad_ctx = contextlib.nullcontext() if train else torch.no_grad()
        lines = LineCounter(tracker)
        with tracker, recorder, autocast, grad_ctx:
            recorder.phase = "forward"
            with lines if count_lines else contextlib.nullcontext():
                out = functional_call(root, mapping, args, kwargs, tie_weights=True,
                                      strict=False)
            if train:
                loss = reduce_output(out)
        if not lines.available:
            recorder.notes.add(LINES_NOT_COUNTED)
        # What each module's forward left alive: saved for backward (train); in inference, the
        # outputs that outlive the forward, e.g. every layer's KV cache (``use_cache``).
        by_module = _fwd_by_module(recorder)
        if train:
            saved = recorder.live_by(0)
            activations_bytes = saved.get("fwd", 0)
            with tracker, recorder:
                recorder.phase = "backward"
                grads = torch.autograd.grad(loss, trainable, allow_unused=True)
            grads_bytes = _unique_bytes(g for g in grads if g is not None)
            # Sparse gradients (embeddings with sparse=True): on fake tensors their row count is
            # unknown (0); the profile sizes them from the lookups instead.
            sparse_grads_bytes = _unique_bytes(
                g for g in grads if g is not None and g.layout != torch.strided)
        else:
            # Inference keeps nothing for backward: what counts is the largest live set.
            activations_bytes = (max([recorder.memory.peak, *pre_block_peak]) - weights_bytes
                                 - inputs_bytes)
            grads_bytes = sparse_grads_bytes = 0
        live_after = recorder.memory.total
        block_peak = recorder.memory.peak if pre_block_peak else 0
        peak = max([recorder.memory.peak, *pre_block_peak])
        max_param = max((t.numel() * t.element_size() for t in trainable), default=0)
        del out
        recorder.detach_all()
    block_act = sum(v for k, v in by_module.items() if is_block_module(k, plan))
    if not train:
        by_module = {}
    traced_dtype = float_dtype or (autocast_dtype if path != "meta" else None)
    compute_dtype = str(traced_dtype or _param_dtype(model)).removeprefix("torch.")
    return TraceResult(
        aggs=recorder.aggs, weights_bytes=weights_bytes, inputs_bytes=inputs_bytes,
        activations_bytes=int(activations_bytes), activations_by_module=by_module,
        grads_bytes=grads_bytes, sparse_grads_bytes=sparse_grads_bytes, peak_bytes=peak,
        live_after_step_bytes=live_after,
        max_param_bytes=max_param, block_activation_bytes=block_act,
        block_output_bytes=block_out[0] if block_out else 0,
        block_peak_bytes=block_peak,
        compute_dtype=compute_dtype, notes=tuple(sorted(recorder.notes)),
        alloc_events=tuple(recorder.events), largest_gemm=tuple(recorder.largest_gemm),
        views=dict(recorder.views), lookups=dict(recorder.lookups),
        module_calls=dict(tracker.calls), sdpa={k: dict(v) for k, v in tracker.sdpa.items()},
        dropout={k: {**v, "ops": {op: list(t) for op, t in v["ops"].items()}}
                 for k, v in tracker.dropout.items()},
        python_lines=dict(lines.lines),
    )


def _first_block(root: nn.Module, plan: BlockPlan | None) -> nn.Module | None:
    if plan is None:
        return None
    return root.get_submodule(f"{plan.path}.{plan.start}" if plan.path else str(plan.start))


def _param_dtype(model: nn.Module) -> torch.dtype:
    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.float32


def _fwd_by_module(recorder: Recorder) -> dict[str, int]:
    out: dict[str, int] = {}
    for category, nbytes, module, _phase in recorder.live_entries():
        if category == "fwd":
            out[module] = out.get(module, 0) + nbytes
    return out


def _unique_bytes(tensors) -> int:
    seen: set[int] = set()
    total = 0
    for part in (p for t in tensors for p in tensor_parts(t)):
        st = part.untyped_storage()
        if id(st) not in seen:
            seen.add(id(st))
            total += st.nbytes()
    return total


def _real_inputs(spec: inputs_mod.InputSpec, device: torch.device, batch_size: int,
                 float_dtype: torch.dtype | None = None):
    """The first ``batch_size`` samples of the user's own inputs, copied (never the user's
    tensors)."""
    from torch.utils._pytree import tree_map

    def one(x):
        if isinstance(x, torch.Tensor):
            y = x[:batch_size] if x.dim() > 0 and x.shape[0] == spec.batch_size else x
            if y.is_meta:  # meta inputs hold no values: zeros of their shape (valid token ids)
                y = torch.zeros(y.shape, dtype=y.dtype, device=device)
            y = y.detach().clone().to(device)
            return y.to(float_dtype) if float_dtype is not None and y.is_floating_point() else y
        return x

    return tree_map(one, (spec.args, spec.kwargs))


def _real_inputs_full(spec: inputs_mod.InputSpec, device: torch.device,
                      float_dtype: torch.dtype | None = None):
    """Copies of the user's inputs, whole batch, on ``device``."""
    return _real_inputs(spec, device, spec.batch_size, float_dtype)
