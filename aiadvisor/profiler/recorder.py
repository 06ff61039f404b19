"""A ``TorchDispatchMode`` that records, per aten op: FLOPs, bytes moved, phase and owning module,
and follows tensor lifetimes (weak references to storages) to find saved activations and the peak.

Works the same on fake, meta and real tensors: nothing here reads tensor values.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from .opinfo import (
    BYTES_RULES,
    EXTRA_FLOPS,
    GROUPED_GEMM_PACKETS,
    HIDDEN_BYTES,
    LOOKUP_PACKETS,
    METADATA_OPS,
    VIEW_PACKETS,
    op_class,
    record_suffix,
)

aten = torch.ops.aten


@dataclass
class Agg:
    """Running totals for one (module, phase, op) key."""

    op_class: str
    dtype: str
    count: int = 0
    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0


@dataclass
class MemoryState:
    """Live bytes by category, updated as storages are created and freed."""

    live: dict = field(default_factory=lambda: defaultdict(int))
    total: int = 0
    peak: int = 0
    peak_breakdown: dict = field(default_factory=dict)

    def add(self, category: str, nbytes: int) -> None:
        self.live[category] += nbytes
        self.total += nbytes
        if self.total > self.peak:
            self.peak = self.total
            self.peak_breakdown = dict(self.live)

    def sub(self, category: str, nbytes: int) -> None:
        self.live[category] -= nbytes
        self.total -= nbytes


_SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_bsr, torch.sparse_csc,
                   torch.sparse_bsc)


def tensor_parts(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The strided tensors that hold ``t``: itself, or a sparse tensor's indices and values
    (e.g. the gradient of ``nn.Embedding(sparse=True)``)."""
    if t.layout == torch.sparse_coo:
        return (t._indices(), t._values())
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return (t.crow_indices(), t.col_indices(), t.values())
    if t.layout in (torch.sparse_csc, torch.sparse_bsc):
        return (t.ccol_indices(), t.row_indices(), t.values())
    return (t,)


def _nbytes(t: torch.Tensor) -> int:
    """Bytes of ``t``'s elements (a sparse tensor's stored indices and values)."""
    return sum(p.numel() * p.element_size() for p in tensor_parts(t))


def _storage_nbytes(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return t.numel() * t.element_size()


def _distinct_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements a kernel reads from ``t``: a matrix broadcast over
    leading (stride-0) dims repeats the same elements, so they do not multiply them. E.g. a
    decode step's ``bmm`` against a weight expanded over the batch reads the weight once, not
    once per sequence. A tensor broadcast within its last two dims (the expanded ones of
    ``loss.sum()``'s gradient) counts whole: kernels copy it into a dense buffer first."""
    if t.layout in _SPARSE_LAYOUTS:
        return _nbytes(t)
    try:
        sizes, strides = t.shape, t.stride()
    except (RuntimeError, NotImplementedError):
        return t.numel() * t.element_size()
    if len(sizes) < 3 or 0 in (strides[-1], strides[-2]):
        return t.numel() * t.element_size()
    distinct = sizes[-1] * sizes[-2]
    for size, stride in zip(sizes[:-2], strides[:-2]):
        distinct *= size if stride != 0 else min(size, 1)
    return int(distinct) * t.element_size()


_META_KEY = "aiadvisor.module"


# Ops whose decomposition was found to contain no FLOP-counted op: not decomposed again.
_DECOMP_HAS_FLOPS: dict = {}


class _FlopsOnly(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        packet = func._overloadpacket
        if packet not in flop_registry and func not in METADATA_OPS:
            with self:
                r = func.decompose(*args, **kwargs)
            if r is not NotImplemented:
                return r
        out = func(*args, **kwargs)
        if packet in flop_registry:
            self.flops += flop_registry[packet](*args, **kwargs, out_val=out)
        return out


def _decomposed_flops(func, args, kwargs) -> int | None:
    """FLOPs inside a composite op, counted through its decomposition (as FlopCounterMode does)
    in a side run; the op itself then runs as one kernel, so its memory is that of the real
    kernel, not of the decomposition's temporaries."""
    counter = _FlopsOnly()
    with counter:
        r = func.decompose(*args, **kwargs)
    if r is NotImplemented:
        _DECOMP_HAS_FLOPS[func] = False
        return None
    if func not in _DECOMP_HAS_FLOPS:
        _DECOMP_HAS_FLOPS[func] = counter.flops > 0
    return counter.flops


class _StampNodes(TorchFunctionMode):
    """Above autograd: after each torch call, stamp the owning module on the autograd nodes it
    created (the output's ``grad_fn`` and any unstamped nodes behind it, e.g. inside composite
    functions), so backward ops can be attributed without tensor hooks."""

    def __init__(self, stack: ModuleStack) -> None:
        super().__init__()
        self.stack = stack

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.nn.functional.scaled_dot_product_attention:
            return self._sdpa(func, args, kwargs or {})
        if func is torch.nn.functional.dropout:
            return self._dropout(func, args, kwargs or {})
        out = func(*args, **(kwargs or {}))
        module = self.stack.stack[-1]
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.grad_fn is not None:
                _stamp(t.grad_fn, module)
        return out


    def _sdpa(self, func, args, kwargs):
        """One ``scaled_dot_product_attention`` call: the ops it runs (one fused kernel, or the
        math path's matmuls, softmax and dropout) are recorded under the pseudo-module
        ``<module>.[sdpa]`` (:data:`SDPA_SUFFIX`), forward and backward, and the call's
        tensors are noted (:attr:`ModuleStack.sdpa`), so the cost model can cost the call as
        the target device's kernel runs it."""
        parent = self.stack.stack[-1]
        name = f"{parent}.{SDPA_SUFFIX}" if parent else SDPA_SUFFIX
        self.stack.stack.append(name)
        try:
            out = func(*args, **kwargs)
        finally:
            self.stack.stack.pop()
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.grad_fn is not None:
                _stamp(t.grad_fn, name)
        q, k, v = (list(args) + [kwargs.get(n) for n in ("query", "key", "value")])[:3]
        io_bytes = sum(t.numel() * t.element_size() for t in (q, k, v, out)
                       if isinstance(t, torch.Tensor))
        info = self.stack.sdpa.setdefault(name, {"calls": 0, "io_bytes": 0, "dropout": False,
                                                 "lse_bytes": 0})
        info["calls"] += 1
        info["io_bytes"] += io_bytes
        # Flash kernels keep the row-wise log-sum-exp (fp32, one per query row) for backward.
        if isinstance(q, torch.Tensor):
            info["lse_bytes"] += 4 * q.numel() // max(q.shape[-1], 1)
        dropout = kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0)
        info["dropout"] = info["dropout"] or bool(dropout)
        return out

    def _dropout(self, func, args, kwargs):
        """One ``F.dropout`` call in training: its ops stay in the calling module (a CPU, meta or
        fake trace runs ATen's composite ``noise = empty_like(x).bernoulli_(1 - p).div_(1 - p);
        x * noise``), and while it runs the recorder also adds them to
        :attr:`ModuleStack.dropout` with the call's size, so the cost model can price the call
        as a CUDA device runs it: one ``native_dropout`` kernel with a one-byte mask
        (``is_fused_kernel_acceptable`` in ATen's ``Dropout.cpp``)."""
        names = ("input", "p", "training", "inplace")
        bound = dict(zip(names, args), **kwargs)
        x, p, training = bound.get("input"), bound.get("p", 0.5), bound.get("training", True)
        parent = self.stack.stack[-1]
        if not (isinstance(x, torch.Tensor) and training and 0.0 < float(p) < 1.0
                and x.numel() > 0) or self.stack.in_dropout is not None:
            out = func(*args, **kwargs)
        else:
            info = self.stack.dropout.setdefault(parent, {"calls": 0, "elements": 0,
                                                          "element_bytes": x.element_size(),
                                                          "ops": {}})
            info["calls"] += 1
            info["elements"] += x.numel()
            self.stack.in_dropout = parent
            try:
                out = func(*args, **kwargs)
            finally:
                self.stack.in_dropout = None
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.grad_fn is not None:
                _stamp(t.grad_fn, parent)
        return out


#: Suffix of the pseudo-module under which the ops of one ``scaled_dot_product_attention`` call
#: are recorded.
SDPA_SUFFIX = "[sdpa]"


def _stamp(node, module: str) -> None:
    todo = [node]
    while todo:
        n = todo.pop()
        if n is None or _META_KEY in n.metadata:
            continue
        n.metadata[_META_KEY] = module
        todo.extend(nxt for nxt, _ in n.next_functions)


class ModuleStack:
    """Which module is running. Forward: global module hooks (the user's modules keep their own
    hook dicts untouched). Backward: the module is stamped on each autograd node's ``metadata``
    during forward (:class:`_StampNodes`) and read back from the node being executed, so no
    tensor hooks are added (they would hold gradients and distort the memory timeline)."""

    def __init__(self, root: torch.nn.Module) -> None:
        self.names = {id(m): name for name, m in root.named_modules(remove_duplicate=False)}
        self.stack: list[str] = [""]
        self.pre_forward = None
        self.post_forward = None
        self._handles: list = []
        self.calls: dict[str, int] = {}
        """Forward calls per module name (host cost: each ``nn.Module.__call__``)."""
        self.sdpa: dict[str, dict] = {}
        """Per ``<module>.[sdpa]`` pseudo-module: calls, bytes of q, k, v and the output,
        bytes of a flash kernel's log-sum-exp, whether dropout was on."""
        self.dropout: dict[str, dict] = {}
        """Per module calling ``F.dropout`` in training: calls, input elements, element
        bytes, and ``ops``: the forward ops those calls ran, ``{op: [count, bytes_read,
        bytes_written]}`` (also recorded as the module's own)."""
        self.in_dropout: str | None = None
        """The module whose ``F.dropout`` call is running, else None."""

    def __enter__(self):
        from torch.nn.modules import module as module_mod

        def pre(mod, args):
            name = self.names.get(id(mod), self.stack[-1])
            self.calls[name] = self.calls.get(name, 0) + 1
            self.stack.append(name)
            if self.pre_forward is not None:
                self.pre_forward(mod, args)

        def post(mod, args, output):
            if len(self.stack) > 1:
                self.stack.pop()
            if self.post_forward is not None:
                self.post_forward(mod, args, output)

        self._handles = [module_mod.register_module_forward_pre_hook(pre),
                         module_mod.register_module_forward_hook(post, always_call=True)]
        self._stamper = _StampNodes(self)
        self._stamper.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._stamper.__exit__(*exc)
        for h in self._handles:
            h.remove()
        self._handles = []
        self.stack = [""]

    def current(self, phase: str) -> str:
        if phase == "forward":
            return self.stack[-1]
        node = torch._C._current_autograd_node()
        if node is None:
            return ""
        return node.metadata.get(_META_KEY, "")


def _broadcast_in_matrix(t) -> bool:
    """True for a tensor of more than one element broadcast (stride 0) within its last two
    dims: no BLAS layout describes it."""
    try:
        return t.dim() >= 2 and t.numel() > 1 and 0 in t.stride()[-2:]
    except (RuntimeError, NotImplementedError):
        return False


def _broadcast_copies(packet, in_tensors) -> list[int]:
    """Bytes of the dense copies a GEMM makes of operands broadcast within their matrix dims
    (PyTorch's CPU and CUDA matmuls call ``contiguous()`` on an operand whose strides no BLAS
    leading dimension can express): made inside the kernel, below the dispatcher, so no traced
    op shows them. ``model(x).sum().backward()`` gives the output layer exactly such a gradient
    (``ones`` expanded to the logits' shape). Measured on the development CPU (torch 2.13): the
    backward of a 2048 x 256 by 256 x 8192 logits layer after ``sum()`` took 72 and 66 MiB of
    page faults in its two ``mm`` calls (a 64 MiB copy each, on fresh pages)."""
    if packet not in (aten.mm, aten.addmm, aten.bmm, aten.baddbmm):
        return []
    return [t.numel() * t.element_size() for t in in_tensors if _broadcast_in_matrix(t)]


def native_transients(packet, args, out_tensors) -> list[int]:
    """Bytes a native library allocates itself (not through PyTorch's allocator, so not among
    the traced storages) while the op runs, freed when it returns.

    oneDNN convolutions on CPU (PyTorch's default for float convolutions on x86) compute in a
    blocked layout (``nChw16c``): a plain NCHW source is reordered into a buffer of its size and
    the blocked destination reordered back into the output. Measured on the development CPU
    (torch 2.13, oneDNN 3.12, no_grad): a 1x1 convolution of 8 x 256 x 56 x 56 (24.5 MiB) to 64
    channels (6.1 MiB out) raised the peak resident set by 38 MiB, 7 MiB of it library code
    pages; a 3x3 convolution 64 -> 64 on 8 x 64 x 56 x 56 by 26 MiB, 7.5 of them code pages:
    about the source plus the destination again beyond the output. The backward is assumed to
    reorder likewise (grad_output, input and grad_input); not measured separately. Channels-last
    inputs need no reorder and get nothing here.
    """
    if packet not in (aten.convolution, aten.convolution_backward) or not args:
        return []
    acts = [args[0]] if packet is aten.convolution else [args[0], args[1]]
    acts = [t for t in acts if isinstance(t, torch.Tensor)] + out_tensors[:1]
    if not acts or acts[0].device.type != "cpu" or acts[0].dim() < 4 \
            or acts[0].dtype not in (torch.float32, torch.bfloat16) \
            or (acts[0].is_contiguous(memory_format=torch.channels_last)
                and not acts[0].is_contiguous()):
        return []
    return [t.numel() * t.element_size() for t in acts if t.dim() >= 4]


class Recorder(TorchDispatchMode):
    """Record FLOPs, bytes, module and phase of every aten op, and the memory high-water mark.

    ``phase`` is set by the caller ("forward" / "backward"); the owning module comes from a
    :class:`ModuleStack`.
    """

    def __init__(self, modules: ModuleStack) -> None:
        super().__init__()
        self.modules = modules
        self.phase = "forward"
        self.fake_kernels = False
        """True on fake/meta tensors, whose kernels do not size hidden workspaces."""
        self.aggs: dict[tuple[str, str, str], Agg] = {}
        self.memory = MemoryState()
        # storage id -> (category, nbytes, module, phase); kept while the storage lives.
        self.storages: dict[int, tuple[str, int, str, str]] = {}
        self._refs: dict[int, weakref.finalize] = {}
        self.notes: set[str] = set()
        """What the trace did differently from a real step (said in ``prof.notes``)."""
        self.views: dict[tuple[str, str], int] = {}
        """View ops (no kernel, no bytes, but host dispatch) per (module, phase)."""
        self.lookups: dict[str, int] = {}
        """Rows the forward's embedding lookups gather, per module (the indices' elements)."""
        self.events: list[tuple[int, int]] = []
        """Storages created during the step (not weights or inputs), in order: ``(key,
        nbytes)`` when created, ``(key, 0)`` when freed; replayed through a model of the
        process's allocator (:mod:`aiadvisor.estimate.process_memory`). Buffers that a native
        library allocates itself, outside PyTorch's allocator, have keys ``("native", ...)``
        (:func:`native_transients`)."""
        self.largest_gemm: tuple[int, int, int] | tuple = ()
        """``(M, K, N)`` of the forward 2-D GEMM with the largest ``K x N`` (``_note_gemm``)."""
        self.param_names: dict[int, str] = {}
        """Storage id -> parameter name of the traced stand-ins (names a recurrent layer's
        per-step GEMMs, forward and the hidden state's gradient in backward,
        :func:`~aiadvisor.profiler.opinfo.record_suffix`)."""

    # -- tensor lifetimes ------------------------------------------------------------------
    def track(self, t: torch.Tensor, category: str, module: str = "",
              nbytes: int | None = None) -> None:
        """Start following the storage of ``t`` (no-op if already followed); a sparse
        tensor's, those of its indices and values."""
        parts = tensor_parts(t)
        if parts[0] is not t:
            for part in parts:
                self.track(part, category, module)
            return
        st = t.untyped_storage()
        key = id(st)
        if key in self.storages:
            return
        if nbytes is None:
            nbytes = _storage_nbytes(t)
        self.storages[key] = (category, nbytes, module, self.phase)
        self.memory.add(category, nbytes)
        if category not in ("weights", "inputs"):
            self.events.append((key, nbytes))
        self._refs[key] = weakref.finalize(st, self._free, key)

    def _note_gemm(self, a, b) -> None:
        """Keep the forward GEMM with the largest right-hand operand, ``(M, K, N)``: the one
        whose packing buffers in the BLAS library are largest (profiler.process probes it)."""
        if a.dim() != 2 or b.dim() != 2 or a.device.type != "cpu":
            return
        shape = (int(a.shape[0]), int(a.shape[1]), int(b.shape[1]))
        if not self.largest_gemm or shape[1] * shape[2] > self.largest_gemm[1] * \
                self.largest_gemm[2]:
            self.largest_gemm = shape

    def _free(self, key: int) -> None:
        entry = self.storages.pop(key, None)
        self._refs.pop(key, None)
        if entry is not None:
            self.memory.sub(entry[0], entry[1])
            if entry[0] not in ("weights", "inputs"):
                self.events.append((key, 0))

    def _record_copy(self, module: str, in_tensors, dense: list[int]) -> None:
        """The dense copies a GEMM makes of its broadcast operands (:func:`_broadcast_copies`)
        as calls of ``aten.clone`` in the GEMM's module and phase: each writes the whole
        operand (its distinct elements are the read)."""
        key = (module, self.phase, str(aten.clone))
        agg = self.aggs.get(key)
        if agg is None:
            agg = self.aggs[key] = Agg(op_class=op_class(aten.clone),
                                       dtype=str(in_tensors[0].dtype).removeprefix("torch."))
        for t, nbytes in zip([t for t in in_tensors if _broadcast_in_matrix(t)], dense):
            agg.count += 1
            agg.bytes_read += _storage_nbytes(t)
            agg.bytes_written += nbytes

    def live_by(self, index: int) -> dict:
        """Live bytes grouped by field ``index`` of the storage entries (0 category, 2 module)."""
        out: dict = defaultdict(int)
        for entry in self.storages.values():
            out[entry[index]] += entry[1]
        return out

    def live_entries(self) -> list[tuple[str, int, str, str]]:
        return list(self.storages.values())

    def detach_all(self) -> None:
        for ref in list(self._refs.values()):
            ref.detach()
        self._refs.clear()

    # -- dispatch --------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in METADATA_OPS:
            return func(*args, **kwargs)
        packet = func._overloadpacket
        inner_flops = None
        if (packet not in flop_registry and packet not in EXTRA_FLOPS
                and packet not in VIEW_PACKETS and _DECOMP_HAS_FLOPS.get(func, True)):
            inner_flops = _decomposed_flops(func, args, kwargs)
        if packet in GROUPED_GEMM_PACKETS and self.fake_kernels:
            out = self._grouped_mm_any_dtype(func, args, kwargs)
        else:
            out = func(*args, **kwargs)
        self._record(func, packet, args, kwargs, out, inner_flops)
        return out

    def _grouped_mm_any_dtype(self, func, args, kwargs):
        """PyTorch's grouped GEMM checks for BF16 inputs even on fake/meta tensors (2.13), so an
        FP32 or FP16 mixture-of-experts model cannot be traced as is: the shapes are computed in
        BF16 and the output converted back. Bytes and FLOPs are recorded from the real arguments,
        so they are those of the model's own dtype."""
        a, b = args[0], args[1]
        if a.dtype == torch.bfloat16 and b.dtype == torch.bfloat16:
            return func(*args, **kwargs)
        dtype = kwargs.get("out_dtype") or a.dtype
        cast = (a.to(torch.bfloat16), b.to(torch.bfloat16), *args[2:])
        self.notes.add(f"mixture-of-experts grouped GEMMs traced in bfloat16 (the kernel accepts "
                       f"no {a.dtype}) and counted in {dtype}")
        rest = {k: v for k, v in kwargs.items() if k != "out_dtype"}
        return func(*cast, **rest).to(dtype)

    def _record(self, func, packet, args, kwargs, out, inner_flops=None) -> None:
        flat_out, _ = tree_flatten(out)
        out_tensors = [t for t in flat_out if isinstance(t, torch.Tensor)]
        module = self.modules.current(self.phase)
        if packet in VIEW_PACKETS:
            key = (module, self.phase)
            self.views[key] = self.views.get(key, 0) + 1
            return
        if str(packet).startswith("quantized.") or packet is aten.quantized_lstm:
            self.notes.add(
                f"{packet} (torch.ao quantization, deprecated in PyTorch) is not counted: its "
                "FLOPs and packed weights are missing from this profile; profile the float "
                "model with precision='int8' (or 'int8wo', 'int4') for the quantized formats")
        if packet in LOOKUP_PACKETS and self.phase == "forward":
            self.lookups[module] = self.lookups.get(module, 0) + args[1].numel()
        flat_in, _ = tree_flatten((args, kwargs))
        in_tensors = [t for t in flat_in if isinstance(t, torch.Tensor)]
        bytes_read = sum(_distinct_bytes(t) for t in in_tensors)
        bytes_written = sum(_nbytes(t) for t in out_tensors)
        if packet in BYTES_RULES:
            bytes_read, bytes_written = BYTES_RULES[packet](args, bytes_written)
        if packet in flop_registry:
            flops = flop_registry[packet](*args, **kwargs, out_val=out)
        elif packet in EXTRA_FLOPS:
            flops = EXTRA_FLOPS[packet](args, out)
        elif inner_flops is not None:
            flops = inner_flops
        else:
            flops = 0
        dtype = str(out_tensors[0].dtype).removeprefix("torch.") if out_tensors else "none"
        key = (module, self.phase,
               str(packet) + record_suffix(packet, args, self.param_names))
        agg = self.aggs.get(key)
        if agg is None:
            agg = self.aggs[key] = Agg(op_class=op_class(packet), dtype=dtype)
        agg.count += 1
        agg.flops += float(flops)
        agg.bytes_read += bytes_read
        agg.bytes_written += bytes_written
        if self.modules.in_dropout is not None and self.phase == "forward":
            site = self.modules.dropout[self.modules.in_dropout]["ops"].setdefault(
                key[2], [0, 0.0, 0.0])
            site[0] += 1
            site[1] += bytes_read
            site[2] += bytes_written
        category = "fwd" if self.phase == "forward" else "bwd"
        hidden = HIDDEN_BYTES.get(packet)
        extra = hidden(args) if hidden is not None and self.fake_kernels else None
        if packet in (aten.mm, aten.addmm) and self.phase == "forward":
            self._note_gemm(args[-2], args[-1])
        dense = _broadcast_copies(packet, in_tensors)
        if dense:
            self._record_copy(module, in_tensors, dense)
        # A native library's own buffers (not PyTorch's allocator), and the GEMM's dense copies
        # (made by PyTorch's allocator below the dispatcher): both live while the op runs.
        native = [(("native", len(self.events), j), n)
                  for j, n in enumerate(native_transients(packet, args, out_tensors))]
        native += [(("copy", len(self.events), j), n) for j, n in enumerate(dense)]
        self.events.extend(native)
        for i, t in enumerate(out_tensors):
            if extra is not None and i == extra[0]:
                self.track(t, category, module, nbytes=extra[1])
            else:
                self.track(t, category, module)
        if dense:
            # The copies are alive with the op's outputs: the allocator's high-water mark (and
            # torch.cuda.max_memory_allocated) holds both.
            self.memory.add("transient", sum(dense))
            self.memory.sub("transient", sum(dense))
        self.events.extend((k, 0) for k, _ in native)
