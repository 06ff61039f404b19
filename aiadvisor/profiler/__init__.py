"""``aiadvisor.profile``: what one training or inference step of a live PyTorch model costs.

The step is captured on fake tensors (``FakeTensorMode``): no real memory is allocated, so a 70B
model profiles on a laptop. Per aten op we record FLOPs (``torch.utils.flop_counter``'s formulas
plus our own for recurrent layers), bytes read and written, phase and owning module; weak
references to storages give saved activations and the peak. Repeated identical blocks are traced
once and multiplied. When fake tensors cannot run the model (data-dependent shapes) the meta
device is tried, then a real batch of one sample (two where one cannot run, e.g. BatchNorm in
training), scaled linearly; ``profile.path`` says which ran.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from ..errors import (
    InvalidArgumentError,
    InvalidModelError,
    ModelInputError,
    ProfilingError,
    check_choice,
)
from ..schema import ModelProfile
from ..units import (
    FP4_FORMAT_BITS,
    MODES,
    MX_BLOCK_SIZE,
    NVFP4_BLOCK_SIZE,
    OPTIMIZER_TRAFFIC,
    OPTIMIZERS,
    PRECISIONS,
    QUANT_GROUP_SIZE,
    WEIGHT_BITS,
    WEIGHT_BYTES,
)
from . import assemble, quiet
from .scaling import TracedProfile, evaluate, fit, grid, position_limit, rescale

__all__ = ["TracedProfile", "profile", "rescale"]



def profile(model: Any, example_inputs: Any, *, mode: str = "train", optimizer: str = "adamw",
            precision: str = "fp32", measure: bool = False, model_name: str | None = None,
            scaling: bool = True, repeated_blocks: bool = True,
            measure_steps: int = 5, moe_imbalance: float | None = None) -> ModelProfile:
    """Profile one step of ``model`` on ``example_inputs`` without changing either.

    Parameters
    ----------
    model : torch.nn.Module
        The live model, on any device (including ``meta``).
    example_inputs : Tensor, tuple or dict
        One batch: a tensor, a tuple of positional arguments, or a dict of keyword arguments.
        Dimension 0 is the batch; dimension 1 of token-id tensors (and of rank-3 float tensors)
        is the sequence.
    mode : {"train", "infer"}
        ``train`` captures forward, backward and the optimizer step; ``infer`` one forward
        under ``torch.no_grad()``.
    optimizer : {"adamw", "adam", "sgd", "sgd_momentum", "none"}
        Optimizer whose state and step are added in training.
    precision : str
        One of fp32, tf32, bf16, fp16, fp8, mxfp8, fp4, int8, int8wo, int4, nf4.
        ``bf16``/``fp16`` trace under ``torch.autocast`` (mixed precision with FP32 master
        weights in training; half-precision weights in inference). 8- and 4-bit formats store
        weight matrices in that many bits, block scales included (inference), and trace in
        bf16; the cost model prices their GEMMs in the format.
    measure : bool
        Also time ``measure_steps`` real steps on the model's device (median after a warm-up)
        and record the real peak memory; everything touched is restored.
    scaling : bool
        Trace at a few more batch sizes / sequence lengths so ``prof.at(...)`` needs no re-trace.
    repeated_blocks : bool
        Trace one of N identical blocks and multiply (exact for identical layers); what the
        block leaves alive (saved activations, an inference KV cache) counts once per block.
    measure_steps : int
        Steps timed when ``measure`` is set.
    moe_imbalance : float, optional
        Mixture-of-experts models only: a measured load imbalance, the most loaded expert's
        tokens over the mean, in [1, number of experts]. Routing on fake/meta inputs is
        degenerate, so by default the profile assumes balanced routing (1.0); either way
        ``prof.moe`` records it and ``prof.notes`` says so.

    Returns
    -------
    TracedProfile
        A :class:`~aiadvisor.schema.ModelProfile` with ``at(batch_size=..., seq_len=...)``
        (:func:`rescale`).

    Examples
    --------
    >>> import torch, aiadvisor as aa
    >>> prof = aa.profile(torch.nn.Linear(1024, 1024), torch.randn(32, 1024))
    >>> prof.flops_forward  # 2 * 32 * 1024 * 1024
    67108864.0
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        raise InvalidModelError(
            f"model of type {type(model).__name__} is not valid: expected a torch.nn.Module "
            "(e.g. the model object you train, not its output or state_dict)."
        )
    from .wrappers import eager_module

    model, wrapper_note = eager_module(model)
    check_choice("mode", mode, MODES)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    check_choice("precision", precision, PRECISIONS)
    if mode == "train":
        _check_trainable(model)
        _check_sparse_gradients(model, optimizer)
    from . import inputs as inputs_mod
    from .blocks import find_repeated_blocks
    from .moe import check_imbalance, find_experts

    experts = find_experts(model)
    imbalance = check_imbalance(moe_imbalance, experts)
    spec = inputs_mod.normalize(example_inputs)
    plan = find_repeated_blocks(model) if repeated_blocks else None
    with _preserve_rng():
        with quiet.torch_logs_collected() as records:
            prof = _profile(model, spec, plan, mode=mode, optimizer=optimizer,
                            precision=precision, model_name=model_name, scaling=scaling,
                            experts=experts, imbalance=imbalance)
        note = quiet.summary(records)
        for extra in (wrapper_note, note):
            if extra:
                prof = dataclasses.replace(prof, notes=(*prof.notes, extra))
        if measure:
            from .measure import measure_step

            prof = measure_step(model, spec, prof, mode=mode, optimizer=optimizer,
                                precision=precision, num_steps=measure_steps)
    return prof


def _profile(model, spec, plan, *, mode, optimizer, precision, model_name, scaling,
             experts=None, imbalance=1.0):
    import dataclasses

    result, path, plan, notes = _first_trace(model, spec, mode=mode, precision=precision,
                                             plan=plan)
    static = _static(model, result, plan, path=path, mode=mode, optimizer=optimizer,
                     precision=precision, model_name=model_name, notes=notes)
    # Python lines, counted in the first trace only (the other sizes' traces skip the counter,
    # whose sys.settrace slows a trace down): what a forward runs does not follow its shapes.
    from .blocks import is_block_module

    static["python_lines"] = sum(
        c * (plan.num_blocks if plan and is_block_module(m, plan) else 1)
        for m, c in result.python_lines.items())
    _record_experts(static, experts, imbalance)
    _record_position_limit(static, model, spec.seq_len)
    from .process import facts

    static["process"] = facts(model, spec, result, mode=mode, optimizer=static["optimizer"],
                              device=static["device"])
    base = (spec.batch_size, spec.seq_len)
    dyn = _dynamic(result, plan, static)
    fitted = None
    if path == "real":
        b_real = result.real_batch_size
        samples = _real_batch_samples(dyn, b_real, static)
        fitted = fit(list(samples), list(samples.values()), batch_size=b_real, seq_len=None)
        dyn = evaluate(fitted, spec.batch_size, None)
    elif scaling:
        fitted = _scaling_fit(model, spec, {base: dyn}, static, plan, path=path, mode=mode,
                              precision=precision)
    prof = assemble.build_profile(static, dyn, batch_size=spec.batch_size, seq_len=spec.seq_len)
    if fitted is not None:
        prof = dataclasses.replace(prof, scaling={"fit": fitted, "static": static})
    return prof


def _record_experts(static: dict[str, Any], experts, imbalance: float) -> None:
    from .moe import num_active_params, routing_note

    static["num_active_params"] = num_active_params(static["num_params"], experts)
    if experts is None:
        return
    static["moe"] = {"num_experts": experts.num_experts, "top_k": experts.top_k,
                     "num_moe_layers": experts.num_moe_layers,
                     "expert_params": experts.expert_params, "imbalance": imbalance,
                     "hidden_size": experts.hidden_size}
    static["notes"].append(routing_note(experts, imbalance))


def _record_position_limit(static: dict[str, Any], model, seq_len: int | None) -> None:
    """The model's sequence-length limit, so ``prof.at(seq_len=...)`` cannot pass it."""
    limit, source = position_limit(model, seq_len=seq_len)
    static["max_seq_len"], static["max_seq_len_source"] = limit, source
    if limit is not None and seq_len > limit:
        # Fake tensors do not check index values: the trace ran, a real step would not.
        static["notes"].append(f"the example's sequence length {seq_len} is longer than the "
                               f"model accepts ({limit}, {source}): a real step would fail")


@contextlib.contextmanager
def _preserve_rng():
    import torch

    cpu_state = torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        torch.set_rng_state(cpu_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)


def _first_trace(model, spec, *, mode, precision, plan):
    """Try fake tensors, then the meta device, then a real batch of one; with the repeated-block
    shortcut first and without it if that fails."""
    from .trace import run_trace

    errors: list[str] = []
    notes: list[str] = []
    # A real batch of one sample; two where one cannot run (BatchNorm in training).
    blocks = [plan, None] if plan is not None else [None]
    attempts = [(path, p, spec.batch_size) for path in ("fake", "meta") for p in blocks]
    if not _on_meta(model):
        attempts += [("real", None, b) for b in ([1, 2] if spec.batch_size >= 2 else [1])]
    last_exc: Exception | None = None
    for path, p, batch in attempts:
        try:
            result = run_trace(model, spec, path=path, mode=mode, precision=precision,
                               batch_size=batch, seq_len=spec.seq_len, plan=p)
        except Exception as exc:  # noqa: BLE001 - every failure is reported below
            label = path + ("" if p is None else " (one block)") + (
                f" (batch {batch})" if path == "real" else "")
            errors.append(f"{label}: {type(exc).__name__}: {_first_line(exc)}")
            last_exc = exc
            continue
        if errors:
            notes.append("fell back to the " + path + " path after: " + " | ".join(errors))
        if p is not None:
            notes.append(f"traced 1 of {p.num_blocks} identical {p.block_type} blocks in "
                         f"{p.path!r} and multiplied"
                         + (f" (after {p.start} different leading blocks, traced as they "
                            "are)" if p.start else ""))
        result.real_batch_size = batch
        notes.extend(result.notes)
        return result, path, p, notes
    if _any_meta(model):
        found = _trace_random_copy(model, spec, mode=mode, precision=precision, errors=errors)
        if found is not None:
            return found
        raise ProfilingError(
            f"the model is on the meta device and could not be traced on inputs "
            f"{spec.shapes()}: " + " | ".join(errors) + ". If these inputs are right, its "
            "forward needs real values (data-dependent steps: .item(), masks computed in "
            "numpy); pass the model with real or random weights on the CPU (built outside "
            "torch.device('meta'), e.g. Model(config)) and aiadvisor profiles a real batch "
            "of one and scales it."
        ) from last_exc
    if _looks_like_input_error(last_exc):
        hint = ""
        if len(spec.args) > 1 and not spec.kwargs and "positional argument" in str(last_exc):
            hint = (" A tuple or list of example inputs is passed as separate positional "
                    "arguments, model(*x); to pass one list or tuple argument, wrap it: (x,).")
        raise ModelInputError(
            f"the model rejected the example inputs {spec.shapes()}: {type(last_exc).__name__}: "
            f"{_first_line(last_exc)}. Expected inputs the model accepts in a normal call "
            "model(*args, **kwargs)." + hint
        ) from last_exc
    raise ProfilingError(
        "no profiling path could run the model on inputs " + spec.shapes() + ": "
        + " | ".join(errors)
    ) from last_exc


#: A meta-device model whose forward needs real values is rebuilt with random weights on the
#: CPU when its parameters take at most this many bytes (wav2vec2-large: 1.3 GB in FP32).
RANDOM_COPY_MAX_BYTES = 4 * 2**30


def _random_copy(model):
    """A copy of a meta-device transformers model with random weights on the CPU, built from
    its config (so buffers such as position ids hold their real values), in the model's dtype
    and with its trainable flags; None without a config, above
    :data:`RANDOM_COPY_MAX_BYTES`, or when the class cannot be built from its config."""
    import copy as copying

    import torch

    from .trace import _param_dtype

    config = getattr(model, "config", None)
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if config is None or nbytes > RANDOM_COPY_MAX_BYTES:
        return None
    try:
        config = copying.deepcopy(config)  # the user's config is never changed
        if getattr(config, "layerdrop", 0):
            # LayerDrop skips each layer at random in training; trace every layer (the step a
            # profile is expected to describe, and the same on every run).
            config.layerdrop = 0.0
        with torch.device("cpu"):
            copy = type(model)(config)
    except Exception:  # noqa: BLE001 - not buildable from its config: the caller explains
        return None
    copy = copy.to(_param_dtype(model))
    flags = dict(model.named_parameters())
    for name, p in copy.named_parameters():
        if name in flags:
            p.requires_grad_(flags[name].requires_grad)
    return copy


def _trace_random_copy(model, spec, *, mode, precision, errors):
    """Trace a random-weight CPU copy of a meta model on a real batch of one (two where one
    cannot run), the way real-weight models fall back; None when no copy can be made or run,
    with the reason appended to ``errors``."""
    from .trace import run_trace

    copy = _random_copy(model)
    if copy is None:
        errors.append("random-weight copy: not built (no config to build the class from, or "
                      f"over {RANDOM_COPY_MAX_BYTES / 2**30:g} GiB of parameters)")
        return None
    tried = list(errors)
    for batch in ([1, 2] if spec.batch_size >= 2 else [1]):
        try:
            result = run_trace(copy, spec, path="real", mode=mode, precision=precision,
                               batch_size=batch, seq_len=spec.seq_len, plan=None)
        except Exception as exc:  # noqa: BLE001 - reported with the others
            errors.append(f"random-weight copy (batch {batch}): {type(exc).__name__}: "
                          f"{_first_line(exc)}")
            continue
        result.real_batch_size = batch
        notes = ["the model is on the meta device and its forward needs real values ("
                 + " | ".join(tried) + "): traced a copy with random weights built from its "
                 "config on the CPU (same shapes, so the same FLOPs and bytes)"
                 + (f"; its layerdrop={model.config.layerdrop:g} was set to 0 in the copy, so "
                    "every layer is counted (a training step skips each with that probability)"
                    if getattr(model.config, "layerdrop", 0) and mode == "train" else ""),
                 *result.notes]
        return result, "real", None, notes
    return None


def _looks_like_input_error(exc: Exception) -> bool:
    return not type(exc).__module__.startswith("torch._subclasses")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def _any_meta(model) -> bool:
    """Whether any parameter or buffer is on the meta device (transformers builds some, e.g.
    wav2vec2's ``masked_spec_embed``, on the CPU even under ``torch.device("meta")``)."""
    return any(t.is_meta for t in [*model.parameters(), *model.buffers()])


def _on_meta(model) -> bool:
    from .trace import model_device

    return model_device(model).type == "meta"


def _static(model, result, plan, *, path, mode, optimizer, precision, model_name, notes):
    from .blocks import starred
    from .trace import _param_dtype

    params = list(model.parameters())  # tied parameters appear once
    num_params = sum(p.numel() for p in params)
    trainable = [p for p in params if p.requires_grad]
    trainable_bytes = sum(p.numel() * p.element_size() for p in trainable)
    sparse = sparse_embedding_tables(model) if mode == "train" else []
    modules = dict(model.named_modules())
    # A sparse table's gradient (and SGD momentum buffer) is sized by the step's lookups
    # (assemble.sparse_gradients), not by the table.
    dense_grad_bytes = trainable_bytes - sum(
        modules[n].weight.numel() * modules[n].weight.element_size() for n in sparse)
    weights = _weights_bytes(model, params, mode=mode, precision=precision)
    train = mode == "train"
    opt = optimizer if train else "none"
    device = str(next(iter(params), None).device) if params else "cpu"
    max_param = max((p.numel() * p.element_size() for p in trainable), default=0)
    quantizable = _quantizable_sizes(model, params)
    static: dict[str, Any] = {
        "model_name": model_name or type(model).__name__, "model_type": type(model).__name__,
        "mode": mode, "precision": precision, "optimizer": opt, "path": path, "device": device,
        "num_params": num_params, "num_trainable_params": sum(p.numel() for p in trainable),
        "num_quantizable_params": sum(quantizable),
        "largest_quantizable_params": max(quantizable, default=0),
        "weights_bytes": weights, "traced_weights_bytes": result.weights_bytes,
        "grads_bytes": dense_grad_bytes if train else 0,
        "optimizer_bytes": assemble.optimizer_bytes(opt, dense_grad_bytes) if train else 0,
        "optimizer_temporaries_bytes": assemble.optimizer_temporaries(
            opt, trainable_bytes=trainable_bytes, max_param_bytes=max_param,
            foreach=device.startswith("cuda")),
        # On a CUDA device torch.optim's default is the foreach implementation, whatever
        # device traced the step: the CUDA view of the peak takes its temporaries.
        "optimizer_temporaries_cuda_bytes": assemble.optimizer_temporaries(
            opt, trainable_bytes=trainable_bytes, max_param_bytes=max_param, foreach=True),
        "param_dtype": str(_param_dtype(model)).removeprefix("torch."),
        "compute_dtype": result.compute_dtype,
        "num_blocks": plan.num_blocks if plan else 0,
        "block_param_bytes": plan.block_param_bytes if plan else 0,
        "notes": list(notes), "op_info": {},
        "module_info": _module_info(model, plan, starred),
        "optimizer_op": _optimizer_op(opt, trainable) if train and opt != "none" else None,
        "large_param_bytes": tuple(sorted(
            (b for p in trainable if (b := p.numel() * p.element_size()) >= 2**20),
            reverse=True)) if train else (),
        "embedding_tables": _dense_grad_tables(model) if train else {},
    }
    if sparse:
        static["sparse_tables"] = {
            n: (int(modules[n].num_embeddings), int(modules[n].embedding_dim),
                int(modules[n].weight.element_size())) for n in sparse}
        note = (f"{', '.join(repr(n) for n in sparse)}: sparse=True, so the gradient is one "
                "row per lookup (uncoalesced, with its int64 index), not the whole table, and "
                f"the {opt} update touches those rows only")
        if opt == "sgd_momentum":
            note += ("; PyTorch keeps the momentum buffer sparse and appends each step's "
                     "gradient to it uncoalesced, so it grows by one step's gradient every "
                     "step (counted here at one step's size; plain SGD or sparse=False avoid "
                     "it)")
        static["notes"].append(note)
    if mode == "infer" and precision not in ("fp32", "tf32"):
        static["notes"].append(
            f"inference weights stored in {precision} ({_WEIGHT_NOTE.get(precision, '')})")
    return static


_WEIGHT_NOTE = {
    "bf16": "2 bytes each", "fp16": "2 bytes each",
    "fp8": "weight matrices 1 byte, embedding tables and other tensors 2 bytes",
    "mxfp8": f"weight matrices {WEIGHT_BITS['mxfp8']:g} bits (FP8 + an E8M0 scale per "
             f"{MX_BLOCK_SIZE}), embedding tables and other tensors 2 bytes",
    "fp4": f"weight matrices {WEIGHT_BITS['fp4']:g} bits (NVFP4: E2M1 + an E4M3 scale per "
           f"{NVFP4_BLOCK_SIZE}; MXFP4 devices store {FP4_FORMAT_BITS['mxfp4']:g}), embedding "
           "tables and other tensors 2 bytes",
    "int8": "weight matrices 1 byte, embedding tables and other tensors 2 bytes",
    "int8wo": "weight matrices 1 byte (weight-only), embedding tables and other tensors 2 "
              "bytes",
    "int4": f"weight matrices {WEIGHT_BITS['int4']:.3g} bits (4 bits + a 16-bit scale and zero "
            f"point per group of {QUANT_GROUP_SIZE['int4']}), embedding tables and other "
            "tensors 2 bytes",
    "nf4": f"weight matrices {WEIGHT_BITS['nf4']:.3g} bits (4 bits + a double-quantized absmax "
           f"per block of {QUANT_GROUP_SIZE['nf4']}), embedding tables and other tensors 2 bytes",
}


def _embedding_modules(model):
    """``(name, module)`` of every ``nn.Embedding`` / ``nn.EmbeddingBag`` in ``model``."""
    from torch import nn

    return [(name, m) for name, m in model.named_modules()
            if isinstance(m, (nn.Embedding, nn.EmbeddingBag))]


def _embedding_tables(model) -> set[int]:
    """``id`` of every embedding table's weight (``nn.Embedding``, ``nn.EmbeddingBag``; an LM
    head tied to the input embedding is the same tensor)."""
    return {id(m.weight) for _, m in _embedding_modules(model)}


def sparse_embedding_tables(model) -> list[str]:
    """Names of the trainable ``nn.Embedding``/``EmbeddingBag`` modules with ``sparse=True``
    (their gradient is a sparse tensor of the looked-up rows)."""
    return [name for name, m in _embedding_modules(model)
            if m.sparse and m.weight.requires_grad]


def has_trainable_parameters(model) -> bool:
    """Whether any floating parameter of ``model`` requires a gradient."""
    return any(p.requires_grad and p.is_floating_point() for p in model.parameters())


def _check_trainable(model) -> None:
    """A training step needs a parameter to train."""
    if not has_trainable_parameters(model):
        total = sum(p.numel() for p in model.parameters())
        raise InvalidArgumentError(
            f"mode='train' is not valid for {type(model).__name__}: it has no trainable "
            f"parameter ({total:,} parameters, none with requires_grad=True; quantized layers "
            "such as torch.ao's keep their weights outside the parameters). Expected "
            "mode='infer', or parameters with requires_grad=True to train.")


def _check_sparse_gradients(model, optimizer: str) -> None:
    """torch.optim's Adam and AdamW refuse sparse gradients: so does a training profile."""
    sparse = sparse_embedding_tables(model) if optimizer in ("adam", "adamw") else []
    if sparse:
        raise InvalidArgumentError(
            f"optimizer={optimizer!r} cannot step the sparse gradient of "
            f"{', '.join(repr(n) for n in sparse)} (an embedding with sparse=True): "
            "torch.optim.Adam and AdamW raise 'Adam does not support sparse gradients'. "
            "Expected optimizer='sgd' or 'sgd_momentum' (both step sparse gradients), "
            "sparse=False on the table, or mode='infer'.")


def _dense_grad_tables(model) -> dict[str, tuple[int, int]]:
    """``(rows, dim)`` of each trainable embedding table by module name whose gradient is dense
    with a zero row for every row a step does not look up: ``nn.Embedding``/``EmbeddingBag``
    without ``sparse=True``, not shared with another module (an LM head tied to it gives every
    row a gradient)."""
    owners: dict[int, int] = {}
    for _, p in model.named_parameters(remove_duplicate=False):
        owners[id(p)] = owners.get(id(p), 0) + 1
    return {name: (int(m.num_embeddings), int(m.embedding_dim))
            for name, m in _embedding_modules(model)
            if not m.sparse and m.weight.requires_grad and owners.get(id(m.weight)) == 1}


def _quantized(t, tables: set[int]) -> bool:
    """Whether an 8- or 4-bit inference format stores ``t`` at its width: a floating weight
    matrix (rank >= 2) other than an embedding table (``tables``: :func:`_embedding_tables`).
    torchao's ``quantize_`` (its default filter takes ``nn.Linear`` only), bitsandbytes
    (``nn.Linear`` replaced by ``Linear4bit`` / ``Linear8bitLt``) and TransformerEngine leave
    embedding tables, biases and norms in 16 bit."""
    return t.is_floating_point() and t.dim() >= 2 and id(t) not in tables


def _quantizable_sizes(model, params) -> list[int]:
    """Elements of each parameter :func:`_quantized` keeps at the format's width: their sum is
    ``ModelProfile.num_quantizable_params``, the largest ``largest_quantizable_params``."""
    tables = _embedding_tables(model)
    return [p.numel() for p in params if _quantized(p, tables)]


def _weights_bytes(model, params, *, mode, precision) -> int:
    """Weights as stored. Training keeps the model's own dtype (FP32 masters under autocast).
    Inference in 16 bits stores every floating tensor in 2 bytes; the 8- and 4-bit formats
    store weight matrices (rank >= 2) at :data:`aiadvisor.units.WEIGHT_BYTES` (block scales
    included) and the rest (biases, norms, embedding tables) in 2 bytes, as the quantizers
    leave them (:func:`_quantized`)."""
    buffers = list(model.buffers())
    if mode == "train" or precision in ("fp32", "tf32"):
        return sum(t.numel() * t.element_size() for t in [*params, *buffers])
    per_matrix = WEIGHT_BYTES[precision]
    tables = _embedding_tables(model)
    total = 0.0
    for t in [*params, *buffers]:
        if not t.is_floating_point():
            total += t.numel() * t.element_size()
        elif _quantized(t, tables):
            total += t.numel() * per_matrix
        else:
            total += t.numel() * 2
    return int(total)


def _module_info(model, plan, starred) -> list[dict[str, Any]]:
    from .blocks import is_block_module

    rows = []
    block_prefix = (plan.path + ".") if plan and plan.path else ""
    for name, module in model.named_modules():
        if plan is not None and name.startswith(block_prefix) and name != plan.path:
            rest = name[len(block_prefix):]
            index = rest.split(".")[0]
            if index.isdigit() and int(index) > plan.start:
                continue
        shown = starred(name, plan) if is_block_module(name, plan) else name
        own = list(module.parameters(recurse=False))
        rows.append({
            "name": shown, "type": type(module).__name__,
            "depth": 0 if not name else name.count(".") + 1,
            "num_params": sum(p.numel() for p in own),
            "param_bytes": sum(p.numel() * p.element_size() for p in own),
        })
    return rows


def _optimizer_op(optimizer: str, trainable) -> dict[str, Any]:
    num_elements = sum(p.numel() for p in trainable)
    elem = trainable[0].element_size() if trainable else 4
    tensors, flops = OPTIMIZER_TRAFFIC[optimizer]
    reads = tensors - (3 if tensors == 7 else 2 if tensors == 5 else 1)
    return {"op": f"optimizer.{optimizer}", "op_class": "optimizer", "phase": "optimizer",
            "module": "", "dtype": str(trainable[0].dtype).removeprefix("torch.") if trainable
            else "float32", "count": len(trainable), "flops": float(flops * num_elements),
            "bytes_read": float(reads * num_elements * elem),
            "bytes_written": float((tensors - reads) * num_elements * elem)}


def _dynamic(result, plan, static) -> dict[str, float]:
    """Flatten a trace into named quantities, multiplying the traced block by the block count."""
    from .blocks import is_block_module, starred

    n = plan.num_blocks if plan else 1
    dyn: dict[str, float] = {}
    for (module, phase, op), agg in result.aggs.items():
        in_block = is_block_module(module, plan)
        mult = n if in_block else 1
        name = starred(module, plan)
        static["op_info"][assemble.SEP.join((name, phase, op))] = {
            "op_class": agg.op_class, "dtype": agg.dtype, "repeat": mult}
        for field in assemble.OP_FIELDS:
            key = assemble.op_key(name, phase, op, field)
            dyn[key] = dyn.get(key, 0.0) + getattr(agg, field) * mult
    for module, nbytes in result.activations_by_module.items():
        mult = n if is_block_module(module, plan) else 1
        key = "act" + assemble.SEP + starred(module, plan)
        dyn[key] = dyn.get(key, 0.0) + nbytes * mult
    for module, rows in result.lookups.items():
        if (module in static["embedding_tables"] or module in static.get("sparse_tables", {})) \
                and not is_block_module(module, plan):
            key = assemble.SEP.join(("lookups", module))
            dyn[key] = dyn.get(key, 0.0) + rows
    for (module, phase), count in result.views.items():
        key = assemble.SEP.join(("host", "views", phase))
        dyn[key] = dyn.get(key, 0.0) + count * (n if is_block_module(module, plan) else 1)
    for module, info in result.sdpa.items():
        mult = n if is_block_module(module, plan) else 1
        for field in ("calls", "io_bytes", "lse_bytes"):
            key = assemble.SEP.join(("sdpa", starred(module, plan), field))
            dyn[key] = dyn.get(key, 0.0) + info[field] * mult
        if info["dropout"]:
            static.setdefault("sdpa_dropout", set()).add(starred(module, plan))
    for module, info in result.dropout.items():
        mult = n if is_block_module(module, plan) else 1
        name = starred(module, plan)
        static.setdefault("dropout_element_bytes", {})[name] = info["element_bytes"]
        for field in ("calls", "elements"):
            key = assemble.SEP.join(("dropout", name, field))
            dyn[key] = dyn.get(key, 0.0) + info[field] * mult
        for op, values in info["ops"].items():
            for field, value in zip(assemble.OP_FIELDS_NO_FLOPS, values):
                key = assemble.SEP.join(("dropout", name, op, field))
                dyn[key] = dyn.get(key, 0.0) + value * mult
    calls = assemble.SEP.join(("host", "modules"))
    dyn[calls] = float(sum(c * (n if is_block_module(m, plan) else 1)
                           for m, c in result.module_calls.items()))
    # The other n-1 blocks each leave alive what the traced one does (saved activations in
    # training; KV cache and kept outputs in inference), from the time they run: so from the
    # traced block's start on, the live set is that much larger.
    extra_blocks = (n - 1) * result.block_activation_bytes
    # Weights not in the trace (the other n-1 blocks) and, in inference, the change of storage
    # format are static; their gradients are the traced gradients scaled the same way.
    weight_delta = static["weights_bytes"] - result.weights_bytes
    # Sparse gradients: the trace holds them where it ran on real tensors (0 on fake ones, whose
    # row count is not known); sized from the lookups like the profile's (grads_bytes leaves
    # them out).
    sparse_delta = assemble.sparse_gradients(
        static, {m: float(n) for m, n in result.lookups.items()})[0] - result.sparse_grads_bytes
    grad_delta = static["grads_bytes"] - (result.grads_bytes - result.sparse_grads_bytes) \
        + sparse_delta
    train = static["mode"] == "train"
    # Where gradients outweigh the activations (short sequences) the step peaks at the end of
    # the backward, every block's gradients alive: the traced end state plus the other blocks'
    # gradients (pythia-410m at 1 x 128 tokens, fp16: 1414 MiB from the traced block alone
    # against 1644 MiB traced whole; this bound gives the latter).
    peak = max(result.peak_bytes, result.block_peak_bytes + extra_blocks,
               result.live_after_step_bytes + grad_delta if train else 0)
    dyn["inputs_bytes"] = result.inputs_bytes
    # Inference: activations are the largest live set less weights and inputs.
    dyn["activations_bytes"] = result.activations_bytes + (
        extra_blocks if train else peak - result.peak_bytes)
    dyn["peak_bytes"] = peak + weight_delta
    dyn["live_after_step_bytes"] = result.live_after_step_bytes + weight_delta + grad_delta
    dyn["block_activation_bytes"] = result.block_activation_bytes
    dyn["block_output_bytes"] = result.block_output_bytes
    return dyn


def _scaling_fit(model, spec, samples, static, plan, *, path, mode, precision):
    from .trace import run_trace

    points = grid(spec.batch_size, spec.seq_len)
    try:
        for b, s in points:
            if (b, s) in samples:
                continue
            result = run_trace(model, spec, path=path, mode=mode, precision=precision,
                               batch_size=b, seq_len=s, plan=plan, count_lines=False)
            samples[(b, s)] = _dynamic(result, plan, static)
    except Exception as exc:  # noqa: BLE001 - the profile stays valid at its own size
        reason = f"{type(exc).__name__}: {_first_line(exc)}"
        if spec.seq_len is not None:
            batch_fit = _batch_only_fit(model, spec, samples, static, plan, path=path,
                                        mode=mode, precision=precision)
            if batch_fit is not None:
                static["notes"].append(
                    f"prof.at() changes the batch size only: tracing at another sequence "
                    f"length failed ({reason}); dimension 1 of the inputs may not be a free "
                    "sequence (e.g. Whisper's 80 mel bins x 3000 frames)")
                return batch_fit
        static["notes"].append(f"prof.at() unavailable: tracing at another size failed "
                               f"({reason})")
        return None
    return fit(points, [samples[p] for p in points], batch_size=spec.batch_size,
               seq_len=spec.seq_len)


def _batch_only_fit(model, spec, samples, static, plan, *, path, mode, precision):
    """A fit in the batch size alone, at the inputs' own sequence length (None if even that
    fails): what ``prof.at(batch_size=...)`` needs when the sequence cannot change."""
    from .trace import run_trace

    b0, s0 = spec.batch_size, spec.seq_len
    try:
        result = run_trace(model, spec, path=path, mode=mode, precision=precision,
                           batch_size=2 * b0, seq_len=s0, plan=plan, count_lines=False)
    except Exception:  # noqa: BLE001 - no scaling at all then
        return None
    points = [(b0, None), (2 * b0, None)]
    fitted = fit(points, [samples[(b0, s0)], _dynamic(result, plan, static)], batch_size=b0,
                 seq_len=None)
    fitted["fixed_seq_len"] = s0
    return fitted


def _real_batch_samples(dyn: dict[str, float], b_real: int, static) -> dict:
    """A real batch of ``b_real`` samples, scaled linearly: per-sample quantities x B / b_real,
    call counts and weights unchanged."""
    static["notes"].append(
        f"captured on a real batch of {'one' if b_real == 1 else b_real} and scaled linearly to "
        "the batch size (weight reads are over-counted; prof.at cannot change the sequence "
        "length)")
    weights = static["traced_weights_bytes"]

    def scaled(b: int) -> dict[str, float]:
        ratio = b / b_real
        out = {}
        for k, v in dyn.items():
            if k.endswith(assemble.SEP + "count"):
                out[k] = v
            elif k in ("live_after_step_bytes", "peak_bytes"):
                out[k] = weights + (v - weights) * ratio
            else:
                out[k] = v * ratio
        return out

    return {(b_real, None): scaled(b_real), (2 * b_real, None): scaled(2 * b_real)}
