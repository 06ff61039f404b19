"""Host-side cost of eager PyTorch, measured on the attached CPU: what one op costs the Python
thread beyond its kernel (dispatch), what autograd adds to a forward op (recording the node)
and to the backward (running the node), and what an ``nn.Module`` call adds.

Each figure is the median over a few repetitions of ``num_ops`` calls on a one-element tensor,
whose kernel time is negligible, so the time is the host's. Measured once per process (about a
tenth of a second) and kept; :func:`host_costs` returns the kept figures.
"""

from __future__ import annotations

import functools
import statistics
import time
from dataclasses import dataclass

#: Outputs larger than this land on fresh pages every call: glibc serves a request above its
#: mmap threshold (at most 32 MiB on 64-bit Linux, ``DEFAULT_MMAP_THRESHOLD_MAX``) with a new
#: mapping unless freed heap memory holds it, and the heap keeps at most its trim threshold
#: (twice that, 64 MiB) of freed memory (malloc(3), mallopt(3)); a fresh page faults and is
#: zero-filled on first touch. Between 32 and 64 MiB it depends on what the heap kept (a 33 MiB
#: clone in a loop faulted on every call on the development CPU).
FRESH_OUTPUT_BYTES = 64 * 2**20


@dataclass(frozen=True)
class HostCosts:
    """Microseconds of host time per event in eager PyTorch on this CPU."""

    dispatch_us: float
    """An out-of-place op from Python (``x.neg()``): argument parsing, dispatcher, allocation."""
    autograd_us: float
    """Extra per forward op when its input requires grad (the autograd node it records)."""
    backward_node_us: float
    """Per node the autograd engine runs, its op's dispatch included."""
    module_us: float
    """``nn.Module.__call__`` of a module beyond the op its forward runs."""
    view_us: float
    """A view op (``x.view(-1)``): no kernel, no allocation."""
    source: str = ""
    optimizer_tensor_us: tuple[tuple[str, float], ...] = ()
    """Per parameter tensor, what one ``step()`` of PyTorch's default (for-loop) implementation
    costs beyond its kernels' bytes, by optimizer name (``"adamw"``, ``"sgd_momentum"``,
    ``"sgd"``): the Python loop and the dispatch of its update ops."""

    fresh_us_per_mib: float = 0.0
    """Per MiB of a fresh output larger than :data:`FRESH_OUTPUT_BYTES`: what writing it costs
    beyond writing a reused buffer (the allocator maps new pages for it, and the kernel
    zero-fills each on first touch)."""

    def optimizer_us(self, name: str) -> float | None:
        """:attr:`optimizer_tensor_us` of ``name`` (Adam as AdamW); None when not measured."""
        return dict(self.optimizer_tensor_us).get("adamw" if name == "adam" else name)


def _median_us(fn, num_ops: int, repeats: int = 7) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) / num_ops * 1e6


def measure_host_costs(num_ops: int = 200) -> HostCosts:
    """Time the host events above on one-element CPU tensors (see the module doc)."""
    import torch

    x = torch.zeros(1)
    xg = torch.zeros(1, requires_grad=True)

    def plain():
        for _ in range(num_ops):
            x.neg()

    def recorded():
        for _ in range(num_ops):
            xg.neg()

    def views():
        for _ in range(num_ops):
            x.view(-1)

    class Neg(torch.nn.Module):
        def forward(self, t):
            return t.neg()

    neg = Neg()

    def modules():
        for _ in range(num_ops):
            neg(x)

    def backward():
        y = xg
        for _ in range(num_ops):
            y = y.neg()
        start = time.perf_counter()
        y.backward()
        return time.perf_counter() - start

    with torch.no_grad():
        dispatch = _median_us(plain, num_ops)
        view = _median_us(views, num_ops)
        module = max(_median_us(modules, num_ops) - dispatch, 0.0)
    with torch.enable_grad():
        autograd = max(_median_us(recorded, num_ops) - dispatch, 0.0)
        backward()
        # 15 single backward calls (each a fresh graph): a median that rides out a busy moment
        # of a shared machine (one of 7 read 35 us a node where the others read 2.3-3.8).
        node = statistics.median(backward() for _ in range(15)) / num_ops * 1e6
    return HostCosts(dispatch_us=dispatch, autograd_us=autograd, backward_node_us=node,
                     module_us=module, view_us=view, optimizer_tensor_us=_optimizer_loop_us(),
                     fresh_us_per_mib=_fresh_output_us_per_mib(),
                     source=f"measured on this CPU (torch {torch.__version__}, {num_ops} "
                            "one-element ops, medians of 7-15 repetitions)")


def _fresh_output_us_per_mib(mib: int = 128, repeats: int = 5) -> float:
    """Per MiB, ``clone()`` of a ``mib`` MiB tensor (a fresh output) less ``copy_`` into a
    reused one: medians of ``repeats`` (about 0.2 s). Measured on the development CPU (2-core
    Xeon VM, glibc 2.36): 0.18 ms per MiB at 33 and 64 MiB, 0.14 at 256 MiB, 0 at 1-31 MiB."""
    import torch

    n = mib * 2**20 // 4
    src, dst = torch.ones(n), torch.empty(n)
    reused = _median_us(lambda: dst.copy_(src), 1, repeats)
    fresh = _median_us(src.clone, 1, repeats)
    return max(fresh - reused, 0.0) / mib


def _optimizer_loop_us(num_tensors: int = 64) -> tuple[tuple[str, float], ...]:
    """Per tensor, one default ``step()`` over ``num_tensors`` one-element parameters (their
    kernels' bytes are negligible, so the time is the loop's): about 5 ms in all."""
    import torch

    from ..profiler.measure import OPTIMIZER_CLASSES

    out = []
    for name in ("adamw", "sgd_momentum", "sgd"):
        params = [torch.nn.Parameter(torch.zeros(1)) for _ in range(num_tensors)]
        for p in params:
            p.grad = torch.zeros(1)
        opt = OPTIMIZER_CLASSES[name](params)
        out.append((name, _median_us(opt.step, num_tensors)))
    return tuple(out)


@functools.lru_cache(maxsize=1)
def host_costs() -> HostCosts:
    """:func:`measure_host_costs`, once per process."""
    return measure_host_costs()
