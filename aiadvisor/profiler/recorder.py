"""A ``TorchDispatchMode`` that records, per aten op: FLOPs, bytes moved, phase and owning module,
and follows tensor lifetimes (weak references to storages) to find saved activations and the peak.

Works the same on fake, meta and real tensors: nothing here reads tensor values.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from .opinfo import EXTRA_FLOPS, METADATA_OPS, VIEW_PACKETS, op_class


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


def _storage_nbytes(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return t.numel() * t.element_size()


class Recorder(TorchDispatchMode):
    """Record FLOPs, bytes, module and phase of every aten op, and the memory high-water mark.

    ``phase`` is set by the caller ("forward" / "backward"); the owning module comes from a
    ``ModTracker`` (PyTorch's module-hierarchy tracker, as used by ``FlopCounterMode``).
    """

    def __init__(self, mod_tracker, root_name: str) -> None:
        super().__init__()
        self.mod_tracker = mod_tracker
        self.root_prefix = root_name + "."
        self.root_name = root_name
        self.phase = "forward"
        self.aggs: dict[tuple[str, str, str], Agg] = {}
        self.memory = MemoryState()
        # storage id -> (category, nbytes, module, phase); kept while the storage lives.
        self.storages: dict[int, tuple[str, int, str, str]] = {}
        self._refs: dict[int, weakref.finalize] = {}

    # -- tensor lifetimes ------------------------------------------------------------------
    def track(self, t: torch.Tensor, category: str, module: str = "") -> None:
        """Start following the storage of ``t`` (no-op if already followed)."""
        st = t.untyped_storage()
        key = id(st)
        if key in self.storages:
            return
        nbytes = _storage_nbytes(t)
        self.storages[key] = (category, nbytes, module, self.phase)
        self.memory.add(category, nbytes)
        self._refs[key] = weakref.finalize(st, self._free, key)

    def _free(self, key: int) -> None:
        entry = self.storages.pop(key, None)
        self._refs.pop(key, None)
        if entry is not None:
            self.memory.sub(entry[0], entry[1])

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
    def current_module(self) -> str:
        parents = self.mod_tracker.parents
        best = ""
        for name in parents:
            if len(name) > len(best) and (name == self.root_name or name.startswith(self.root_prefix)):
                best = name
        if best.startswith(self.root_prefix):
            return best[len(self.root_prefix):]
        return ""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in METADATA_OPS:
            return func(*args, **kwargs)
        packet = func._overloadpacket
        if packet not in flop_registry and packet not in EXTRA_FLOPS and packet not in VIEW_PACKETS:
            # Count composite ops through their decomposition, as FlopCounterMode does.
            with self:
                r = func.decompose(*args, **kwargs)
            if r is not NotImplemented:
                return r
        out = func(*args, **kwargs)
        self._record(func, packet, args, kwargs, out)
        return out

    def _record(self, func, packet, args, kwargs, out) -> None:
        flat_out, _ = tree_flatten(out)
        out_tensors = [t for t in flat_out if isinstance(t, torch.Tensor)]
        module = self.current_module()
        if packet in VIEW_PACKETS:
            return
        flat_in, _ = tree_flatten((args, kwargs))
        in_tensors = [t for t in flat_in if isinstance(t, torch.Tensor)]
        bytes_read = sum(t.numel() * t.element_size() for t in in_tensors)
        bytes_written = sum(t.numel() * t.element_size() for t in out_tensors)
        if packet in flop_registry:
            flops = flop_registry[packet](*args, **kwargs, out_val=out)
        elif packet in EXTRA_FLOPS:
            flops = EXTRA_FLOPS[packet](args, out)
        else:
            flops = 0
        dtype = str(out_tensors[0].dtype).removeprefix("torch.") if out_tensors else "none"
        key = (module, self.phase, str(packet))
        agg = self.aggs.get(key)
        if agg is None:
            agg = self.aggs[key] = Agg(op_class=op_class(packet), dtype=dtype)
        agg.count += 1
        agg.flops += float(flops)
        agg.bytes_read += bytes_read
        agg.bytes_written += bytes_written
        category = "fwd" if self.phase == "forward" else "bwd"
        for t in out_tensors:
            self.track(t, category, module)
