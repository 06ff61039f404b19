"""Turn traces into a :class:`~aiadvisor.schema.ModelProfile` (no torch here).

A trace yields a flat dict of *dynamic* quantities (depend on batch and sequence length); the
model yields *static* facts (parameters, optimizer state). ``build_profile`` combines the two, so
the same code serves the first profile and every ``prof.at(...)``.
"""

from __future__ import annotations

from typing import Any

from ..estimate.process_memory import CUBLAS_WORKSPACE_BYTES, process_estimate
from ..schema import (
    DropoutGroup,
    MemoryBreakdown,
    ModuleRecord,
    MoERouting,
    OpRecord,
    SDPAGroup,
)
from .scaling import TracedProfile, is_position_table

SEP = "|"
#: Pseudo-module of the ops of one scaled_dot_product_attention call (profiler.recorder).
SDPA_SUFFIX = "[sdpa]"
OP_FIELDS = ("count", "flops", "bytes_read", "bytes_written")
#: The fields recorded for the ops inside a dropout call (they have no FLOPs).
OP_FIELDS_NO_FLOPS = ("count", "bytes_read", "bytes_written")


def op_key(module: str, phase: str, op: str, field: str) -> str:
    return SEP.join(("op", module, phase, op, field))


def optimizer_bytes(optimizer: str, trainable_bytes: int) -> int:
    """Optimizer state: Adam/AdamW keep two moments (exp_avg, exp_avg_sq) per parameter, SGD
    with momentum one buffer, plain SGD none; each in the parameter's dtype (torch.optim)."""
    per = {"adamw": 2, "adam": 2, "sgd_momentum": 1, "sgd": 0, "none": 0}[optimizer]
    return per * trainable_bytes


def optimizer_temporaries(optimizer: str, *, trainable_bytes: int, max_param_bytes: int,
                          foreach: bool) -> int:
    """Short-lived tensors inside ``step()``. Adam's update computes ``exp_avg_sq.sqrt() /
    bias_correction2_sqrt`` out of place: per parameter (for-loop implementation, PyTorch's default
    on CPU) two temporaries the size of that parameter; the foreach implementation (default on
    CUDA) builds the square-root list for all parameters at once."""
    if optimizer not in ("adam", "adamw"):
        return 0
    return trainable_bytes if foreach else 2 * max_param_bytes


def nf4_dequant_bytes(static: dict[str, Any], *, tokens: int) -> int:
    """The 16-bit copy of the largest NF4 weight that bitsandbytes writes for a GEMM of more
    than one token (:func:`aiadvisor.costmodel.ops.nf4_dequantizes`), alive during that GEMM:
    part of an NF4 inference peak; 0 otherwise."""
    if static.get("precision") != "nf4" or static.get("mode") != "infer" or tokens <= 1:
        return 0
    return 2 * int(static.get("largest_quantizable_params", 0))


def untouched_table_elements(static: dict[str, Any], dyn: dict[str, float], *,
                             seq_len: int | None) -> int:
    """Elements of the dense-gradient embedding tables (``static["embedding_tables"]``) in
    rows the step's lookups (``dyn``) are not expected to reach: for ``n`` indices drawn
    uniformly from ``R`` rows, a row is missed with probability ``(1 - 1/R) ** n``. A learned
    position table (named like one: :func:`~aiadvisor.profiler.scaling.is_position_table`)
    reaches its first ``seq_len`` rows, whatever the batch."""
    total = 0.0
    for module, (rows, dim) in static.get("embedding_tables", {}).items():
        lookups = dyn.get(SEP.join(("lookups", module)), 0.0)
        if lookups <= 0:
            continue
        if is_position_table(module) and seq_len:
            total += max(rows - seq_len, 0) * dim
        else:
            total += rows * dim * (1.0 - 1.0 / rows) ** lookups
    return int(round(total))


#: Bytes of one index of a sparse COO gradient (int64, one sparse dimension).
SPARSE_INDEX_BYTES = 8


def sparse_gradients(static: dict[str, Any], lookups: dict[str, float]) -> tuple[float, float]:
    """(bytes, elements) of the gradients of the tables with ``sparse=True``
    (``static["sparse_tables"]``, left out of ``grads_bytes``), and how many more elements
    (negative: fewer) their optimizer update touches than a dense one: each gradient holds one
    row per lookup of the step (``lookups``: by module; ``embedding_bag``'s and
    ``embedding``'s sparse backward do not coalesce them) with its int64 index, and the update
    touches those rows."""
    nbytes = elements = 0.0
    for module, (rows, dim, elem) in static.get("sparse_tables", {}).items():
        n = lookups.get(module, 0.0)
        nbytes += n * (dim * elem + SPARSE_INDEX_BYTES)
        elements += (n - rows) * dim
    return nbytes, elements


def _lookups(dyn: dict[str, float]) -> dict[str, float]:
    """Lookups per embedding module (``dyn`` keys ``lookups|<module>``)."""
    head = "lookups" + SEP
    return {k.removeprefix(head): v for k, v in dyn.items() if k.startswith(head)}


def _sparse_optimizer_op(static: dict[str, Any], elements: float) -> dict[str, Any] | None:
    """The optimizer record with ``elements`` more (or fewer) elements updated."""
    op = static.get("optimizer_op")
    total = static.get("num_trainable_params", 0)
    if op is None or not elements or total <= 0:
        return op
    scale = max(total + elements, 0.0) / total
    return {**op, **{k: op[k] * scale for k in ("flops", "bytes_read", "bytes_written")}}


def build_profile(static: dict[str, Any], dyn: dict[str, float], *, batch_size: int,
                  seq_len: int | None) -> TracedProfile:
    sparse_bytes, sparse_elements = sparse_gradients(static, _lookups(dyn))
    if sparse_elements:
        static = {**static, "optimizer_op": _sparse_optimizer_op(static, sparse_elements)}
    ops, flops_by_phase = _ops(static, dyn)
    train = static["mode"] == "train"
    weights = static["weights_bytes"]
    grads = static["grads_bytes"]
    opt = static["optimizer_bytes"]
    if train and sparse_bytes:
        grads += int(sparse_bytes)
        if static.get("optimizer") == "sgd_momentum":   # the buffer is as sparse as the gradient
            opt += int(sparse_bytes)
    inputs = int(dyn.get("inputs_bytes", 0))
    activations = int(dyn.get("activations_bytes", 0))
    peak_fwd_bwd = int(dyn.get("peak_bytes", 0)) + nf4_dequant_bytes(
        static, tokens=batch_size * (seq_len or 1))
    live_after = int(dyn.get("live_after_step_bytes", 0))
    opt_temp = static["optimizer_temporaries_bytes"]
    stepping = train and static["optimizer"] != "none"
    peak_opt = live_after + opt + opt_temp if stepping else 0
    # A training loop's steady state: from the second step on, the optimizer state allocated
    # by the first step() is resident during forward and backward too (gradients are freed by
    # zero_grad(set_to_none=True), PyTorch's default).
    peak = max(peak_fwd_bwd + (opt if train else 0), peak_opt, weights + inputs)
    # On a CUDA device the step runs torch.optim's foreach implementation (its default there):
    # Adam's square-root list for every parameter at once.
    opt_temp_cuda = static.get("optimizer_temporaries_cuda_bytes", opt_temp)
    cuda_step_peak = max(peak_fwd_bwd + (opt if train else 0),
                         live_after + opt + opt_temp_cuda if stepping else 0, weights + inputs)
    temporaries = max(0, peak - weights - grads - opt - activations - inputs) if train else max(
        0, peak - weights - activations - inputs)
    sdpa = _sdpa_groups(static, dyn)
    dropout = _dropout_groups(static, dyn)
    # A CUDA trace ran the fused kernels already; a CPU or meta trace's math path saved T x T
    # tensors a GPU's fused kernel does not keep, and its composite dropout saved each mask in
    # the input's dtype where CUDA's native_dropout saves one byte an element (the CUDA figure
    # leaves both out).
    traced_on_cuda = str(static.get("device", "")).startswith("cuda")
    fused_saving = sum(g.fused_saving_bytes for g in sdpa) \
        if train and not traced_on_cuda else 0.0
    mask_saving = sum(g.elements * max(g.element_bytes - 1, 0) for g in dropout) \
        if train and not traced_on_cuda else 0.0
    cuda_peak = int(max(cuda_step_peak - fused_saving - mask_saving, 0))
    facts = static.get("process", {})
    process = process_estimate(facts, mode=static["mode"],
                               peak_bytes=peak, weights_bytes=weights, inputs_bytes=inputs,
                               fused_attention_saving_bytes=int(fused_saving),
                               cuda_peak_bytes=cuda_peak)
    # PyTorch (2.0 on) takes the cuBLAS workspace from the caching allocator at the first GEMM,
    # so torch.cuda.max_memory_allocated() counts it too (pytorch/pytorch#95668: 8,519,680
    # bytes after one Linear on an A10G).
    if facts.get("cuda_gemms"):
        cuda_peak += CUBLAS_WORKSPACE_BYTES["other"]
    memory = MemoryBreakdown(
        weights_bytes=weights, grads_bytes=grads if train else 0,
        optimizer_bytes=opt if train else 0,
        activations_bytes=max(0, activations), inputs_bytes=inputs, peak_bytes=peak,
        temporaries_bytes=temporaries, process_bytes=process.process_bytes,
        process_label=process.label, cuda_reserved_bytes=process.cuda_reserved_bytes,
        process_low_bytes=process.process_low_bytes,
        process_high_bytes=process.process_high_bytes,
        cuda_peak_bytes=cuda_peak,
    )
    flops_opt = flops_by_phase.get("optimizer", 0.0)
    return TracedProfile(
        model_name=static["model_name"], model_type=static["model_type"], mode=static["mode"],
        precision=static["precision"], optimizer=static["optimizer"], batch_size=batch_size,
        seq_len=seq_len, num_params=static["num_params"],
        num_trainable_params=static["num_trainable_params"],
        num_quantizable_params=static.get("num_quantizable_params"),
        largest_quantizable_params=static.get("largest_quantizable_params", 0),
        flops_forward=flops_by_phase.get("forward", 0.0),
        flops_backward=flops_by_phase.get("backward", 0.0), flops_optimizer=flops_opt,
        memory=memory, ops=tuple(ops), modules=tuple(_modules(static, dyn)), path=static["path"],
        device=static["device"], param_dtype=static["param_dtype"],
        compute_dtype=static["compute_dtype"], num_blocks=static["num_blocks"],
        block_param_bytes=static["block_param_bytes"],
        block_activation_bytes=int(dyn.get("block_activation_bytes", 0)),
        block_output_bytes=int(dyn.get("block_output_bytes", 0)),
        measured_step_time_s=static.get("measured_step_time_s"),
        measured_peak_bytes=static.get("measured_peak_bytes"),
        max_seq_len=static.get("max_seq_len"),
        max_seq_len_source=static.get("max_seq_len_source", ""),
        notes=tuple(static["notes"]),
        num_active_params=static.get("num_active_params"),
        moe=_moe_routing(static.get("moe"), batch_size=batch_size, seq_len=seq_len),
        sdpa=sdpa,
        dropout=dropout,
        num_module_calls=round(dyn.get(SEP.join(("host", "modules")), 0.0)),
        num_view_ops_forward=round(dyn.get(SEP.join(("host", "views", "forward")), 0.0)),
        num_view_ops_backward=round(dyn.get(SEP.join(("host", "views", "backward")), 0.0)),
        num_python_lines=int(static.get("python_lines", 0)),
        large_param_bytes=tuple(static.get("large_param_bytes", ())),
        untouched_table_elements=untouched_table_elements(static, dyn, seq_len=seq_len),
    )


def _sdpa_groups(static: dict[str, Any], dyn: dict[str, float]) -> tuple[SDPAGroup, ...]:
    """The profile's ``scaled_dot_product_attention`` calls, one group per calling module."""
    fields: dict[str, dict[str, float]] = {}
    for key, value in dyn.items():
        if key.startswith("sdpa" + SEP):
            _, module, field = key.split(SEP)
            fields.setdefault(module, {})[field] = value
    dropout = static.get("sdpa_dropout", set())
    return tuple(
        SDPAGroup(module=module, calls=round(f.get("calls", 0.0)),
                  io_bytes=f.get("io_bytes", 0.0), lse_bytes=f.get("lse_bytes", 0.0),
                  dropout=module in dropout,
                  saved_bytes=dyn.get(SEP.join(("act", module)), 0.0))
        for module, f in sorted(fields.items()))


def _dropout_groups(static: dict[str, Any], dyn: dict[str, float]) -> tuple[DropoutGroup, ...]:
    """The profile's training ``F.dropout`` calls, one group per calling module."""
    fields: dict[str, dict[str, float]] = {}
    ops: dict[str, dict[str, dict[str, float]]] = {}
    for key, value in dyn.items():
        if not key.startswith("dropout" + SEP):
            continue
        parts = key.split(SEP)
        if len(parts) == 3:
            fields.setdefault(parts[1], {})[parts[2]] = value
        else:
            ops.setdefault(parts[1], {}).setdefault(parts[2], {})[parts[3]] = value
    sizes = static.get("dropout_element_bytes", {})
    return tuple(
        DropoutGroup(module=module, calls=round(f.get("calls", 0.0)),
                     elements=f.get("elements", 0.0), element_bytes=int(sizes.get(module, 4)),
                     ops=tuple((op, v.get("count", 0.0), v.get("bytes_read", 0.0),
                                v.get("bytes_written", 0.0))
                               for op, v in sorted(ops.get(module, {}).items())))
        for module, f in sorted(fields.items()) if f.get("calls", 0.0) > 0)


def _moe_routing(moe: dict[str, Any] | None, *, batch_size: int,
                 seq_len: int | None) -> MoERouting | None:
    """Balanced routing sends ``tokens x top_k / num_experts`` tokens to each expert."""
    if moe is None:
        return None
    tokens = batch_size * (seq_len or 1)
    return MoERouting(tokens_per_expert=tokens * moe["top_k"] / moe["num_experts"], **moe)


def _ops(static: dict[str, Any], dyn: dict[str, float]):
    grouped: dict[tuple[str, str, str], dict[str, float]] = {}
    for key, value in dyn.items():
        if not key.startswith("op" + SEP):
            continue
        _, module, phase, op, field = key.split(SEP)
        grouped.setdefault((module, phase, op), {})[field] = value
    ops = []
    flops_by_phase: dict[str, float] = {}
    for (module, phase, op), fields in sorted(grouped.items()):
        info = static["op_info"][SEP.join((module, phase, op))]
        count = round(fields.get("count", 0.0))
        if count <= 0:
            continue
        rec = OpRecord(op=op, op_class=info["op_class"], phase=phase, module=module,
                       dtype=info["dtype"], count=count, flops=fields.get("flops", 0.0),
                       bytes_read=fields.get("bytes_read", 0.0),
                       bytes_written=fields.get("bytes_written", 0.0), repeat=info["repeat"])
        ops.append(rec)
        flops_by_phase[phase] = flops_by_phase.get(phase, 0.0) + rec.flops
    opt = static.get("optimizer_op")
    if opt is not None:
        ops.append(OpRecord(**opt))
        flops_by_phase["optimizer"] = opt["flops"]
    return ops, flops_by_phase


def _modules(static: dict[str, Any], dyn: dict[str, float]) -> list[ModuleRecord]:
    """Per-module totals; a module inside the traced block stands for every block (``*``)."""
    totals: dict[str, dict[str, float]] = {}
    for key, value in dyn.items():
        parts = key.split(SEP)
        if parts[0] in ("op", "act"):  # an SDPA call's ops count for the module calling it
            parts[1] = parts[1].removesuffix("." + SDPA_SUFFIX).removesuffix(SDPA_SUFFIX)
        if parts[0] == "op" and parts[4] in ("flops", "bytes_read", "bytes_written"):
            module, phase = parts[1], parts[2]
            field = "flops" if parts[4] == "flops" else "bytes"
            t = totals.setdefault(module, {})
            t[f"{field}_{phase}"] = t.get(f"{field}_{phase}", 0.0) + value
        elif parts[0] == "act":
            t = totals.setdefault(parts[1], {})
            t["act"] = t.get("act", 0.0) + value
    rows = []
    num_blocks = max(1, static["num_blocks"])
    for info in static["module_info"]:
        name = info["name"]
        t = totals.get(name, {})
        # Op totals of a starred module cover all blocks; the table shows one block's row.
        per = num_blocks if "*" in name else 1
        rows.append(ModuleRecord(
            name=name, type=info["type"], depth=info["depth"], num_params=info["num_params"],
            param_bytes=info["param_bytes"],
            flops_forward=t.get("flops_forward", 0.0) / per,
            flops_backward=t.get("flops_backward", 0.0) / per,
            bytes_forward=t.get("bytes_forward", 0.0) / per,
            bytes_backward=t.get("bytes_backward", 0.0) / per,
            activation_bytes=int(t.get("act", 0.0) / per), repeat=per,
        ))
    return rows
