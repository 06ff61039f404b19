"""Host-side cost of eager PyTorch, measured on the attached CPU: what one op costs the Python
thread beyond its kernel (dispatch), what autograd adds to a forward op (recording the node)
and to the backward (running the node), and what an ``nn.Module`` call adds; also the loop
of the default optimizer step, the page faults of fresh outputs, and the cache refill the
small ops pay after a weight-streaming GEMM.

Each per-op figure is the median over a few repetitions of ``num_ops`` calls on a one-element
tensor, whose kernel time is negligible, so the time is the host's. Measured once per process
(about 0.5 s on the development CPU, more in a process whose first torch ops these are) and
kept; :func:`host_costs` returns the kept figures.
"""

from __future__ import annotations

import functools
import statistics
import time
from dataclasses import dataclass

#: Outputs of at least this many bytes land on fresh pages every call: glibc serves a request
#: above its mmap threshold (at most 32 MiB on 64-bit Linux, ``DEFAULT_MMAP_THRESHOLD_MAX``)
#: with a new mapping (malloc(3), mallopt(3)), and a fresh page faults and is zero-filled on
#: first touch. Measured with ``getrusage`` minor faults on the development CPU (glibc 2.36,
#: steady steps after three warm-up steps): a 33 MiB clone in a loop faulted on every call; a
#: decoder's 64 MiB logits 64 MiB per inference step; the 8-24 MiB outputs of BERT, ViT, a conv
#: net, an LSTM and an MLP about 0 (freed heap chunks hold them once the threshold has risen).
FRESH_OUTPUT_BYTES = 32 * 2**20

#: A line of a model's own Python (:attr:`HostCosts.python_line_us`) in ``nn.Module`` calls:
#: both are the interpreter's work, so one scales with the other from CPU to CPU. Fitted on the
#: development CPU (AMD EPYC Zen 5, Python 3.11, transformers 5.x) to two Hugging Face decoders
#: at 64 wide, 8 layers, where a decode step is all host work: the time a step took beyond its
#: price without the lines, per counted line, was 0.291 (LlamaForCausalLM, 2,589 lines) and
#: 0.307 (GPT2LMHeadModel, 2,880) module calls. Five other families measured the same way
#: (not fitted: OPT, GPT-NeoX, Phi, Qwen2, Gemma) read 0.29-0.37.
PYTHON_LINE_MODULE_CALLS = 0.30

#: Timed (copy, clone) pairs of :func:`_fresh_output_us_per_mib`. The first reading of a
#: process is what :func:`host_costs` keeps for all its predictions, and on a VM it was the
#: least steady: five copies then five clones (the earlier protocol) read 1.5 ms per MiB, and
#: 0.28-0.32 ms in four of six later tries, right after a measured training step in a process
#: holding eleven models, where every later reading of the same process read 0.15-0.19 ms
#: (2-core Xeon VM with AMX, 2026-12-06). Clones timed one by one there showed why: single
#: clones of 0.6-1.5 ms per MiB among 0.15-0.2 ms ones (guest memory the hypervisor had taken
#: back, faulted in again), and a first clone at 0.02-0.04 ms (pages the process still held).
#: A step of a running loop reuses pages the step before freed. Pairs timed in turn, after an
#: untimed one, and their median ride out both. With the reading at 1.5 ms an unbenchmarked CPU
#: priced a small decoder's training step (``tiny-gpt``, 8 x 256) at 643 ms, at 0.18 ms 380 ms;
#: measured 355 ms.
FRESH_PAIRS = 9

#: Weight sizes (MiB) of the GEMVs after which :func:`_refill` times a block's small ops.
REFILL_MIB = (1, 2, 4, 8, 16, 32)


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
    python_line_us: float = 0.0
    """A line of a model's own Python outside ``torch`` (:mod:`aiadvisor.profiler.pylines`):
    :data:`PYTHON_LINE_MODULE_CALLS` times :attr:`module_us`."""
    source: str = ""
    optimizer_tensor_us: tuple[tuple[str, float], ...] = ()
    """Per parameter tensor, what one ``step()`` of PyTorch's default (for-loop) implementation
    costs beyond its kernels' bytes, by optimizer name (``"adamw"``, ``"sgd_momentum"``,
    ``"sgd"``): the Python loop and the dispatch of its update ops."""

    fresh_us_per_mib: float = 0.0
    """Per MiB of a fresh output of at least :data:`FRESH_OUTPUT_BYTES`: what writing it costs
    beyond writing a reused buffer (the allocator maps new pages for it, and the kernel
    zero-fills each on first touch)."""

    refill_us: tuple[tuple[float, float], ...] = ()
    """(MiB of weights a GEMV streamed, extra microseconds): what the small ops of one
    transformer block (:attr:`refill_block_us` when hot) cost beyond their hot time when they
    run right after a GEMV that streamed that many MiB through the caches. The stream evicts
    the host's own working set (Python, dispatcher and kernel code, tensor metadata), and the
    ops that follow fetch it back. Empty when not measured."""
    refill_block_us: float = 0.0
    """The hot time of the block :attr:`refill_us` was timed on."""

    def refill_seconds(self, streamed_bytes, following_s):
        """Seconds the host work that follows a weight-streaming op pays to refill the caches:
        :attr:`refill_us` interpolated at ``streamed_bytes`` (0 at 0, flat beyond the largest
        size timed), times ``sqrt(following_s / refill_block_us)`` up to 1: less host work
        after the stream than the timed block refills less of it, but not in proportion (the
        first op back pays most). The square root is fitted on the development CPU, 16 MiB
        streamed: 1, 2, 4, 8, 16 different one-token ops (hot 4.9, 6.1, 21, 27, 46 us) paid
        +16, +20, +37, +46, +59 us, and the square root of their hot time over the block's
        (45 us, +60) gives +20, +22, +41, +46, +60. Arrays broadcast."""
        import numpy as np

        if not self.refill_us or self.refill_block_us <= 0:
            return np.zeros(np.broadcast(streamed_bytes, following_s).shape)
        mib, us = zip(*((0.0, 0.0), *self.refill_us))
        extra = np.interp(np.asarray(streamed_bytes, float) / 2**20, mib, us)
        share = np.sqrt(np.minimum(np.asarray(following_s, float)
                                   / (self.refill_block_us * 1e-6), 1.0))
        return extra * 1e-6 * share

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
                     module_us=module, view_us=view,
                     python_line_us=PYTHON_LINE_MODULE_CALLS * module,
                     optimizer_tensor_us=_optimizer_loop_us(),
                     fresh_us_per_mib=_fresh_output_us_per_mib(),
                     **_refill(),
                     source=f"measured on this CPU (torch {torch.__version__}, {num_ops} "
                            "one-element ops, medians of 7-15 repetitions)")


def _fresh_output_us_per_mib(mib: int = 128, pairs: int = FRESH_PAIRS) -> float:
    """Per MiB, ``copy_`` of a ``mib`` MiB tensor into new pages
    (:func:`~aiadvisor.hardware.calibrate.write_fresh`, as a fresh output above glibc's mmap
    threshold gets them) less ``copy_`` into a reused one: the median over ``pairs`` of the two
    timed in turn, after one untimed pair (about 0.35 s). Measured on the development CPU
    (2-core Xeon VM, glibc 2.36): 0.18 ms per MiB at 33 and 64 MiB, 0.14 at 256 MiB, 0 at
    1-31 MiB. A ``clone()`` stood for the fresh output until 2026-12-07: late in a long test
    run 2 of 6 runs read under 1 us per MiB (its output came from memory the process already
    held; a new mapping cannot). See :data:`FRESH_PAIRS` for why pairs and a median."""
    import torch

    from .calibrate import write_fresh

    n = mib * 2**20 // 4
    src, dst = torch.ones(n), torch.empty(n)

    def fresh_copy() -> None:
        write_fresh(torch, n * 4, lambda out: out.copy_(src))

    dst.copy_(src)
    fresh_copy()
    diffs = []
    for _ in range(pairs):
        start = time.perf_counter()
        dst.copy_(src)
        copied = time.perf_counter()
        fresh_copy()
        diffs.append((time.perf_counter() - copied) - (copied - start))
    return max(statistics.median(diffs), 0.0) * 1e6 / mib


def _refill(hidden: int = 256, repeats: int = 15) -> dict:
    """:attr:`HostCosts.refill_us` and :attr:`HostCosts.refill_block_us`: the small ops of a
    decoder block at one token (a ``LayerNorm`` and a ``GELU`` module, an add, a view and a
    transpose, a ``cat`` onto a 16-token key/value cache, SDPA, a ``Dropout`` module, a reshape;
    ``hidden`` wide, no GEMM), timed hot (right after themselves) and right after a GEMV over
    each of :data:`REFILL_MIB` MiB of weights (two weight tensors taken in turn, so each GEMV
    streams its weights afresh, as a decoder's layers do): the fastest of ``repeats`` (another
    process on the cores only adds time; medians read up to 14 ms on a loaded 2-core machine),
    about 0.1 s and 64 MiB. Measured on the development CPU (2-core Xeon VM, 2 threads): hot
    42-46 us; after 1, 2, 4, 8, 16, 32 MiB +0-3, +9-10, +30-33, +48-58, +58-65, +60-67 us
    (five runs). A whole decoder block at one token (64 wide, 4 heads, a 16-token cache; hot
    115 us) paid +5-10, +18-25, +48-51, +72-78, +83-87, +86-91 us. One op kind repeated
    refills less (+9 us for 1 to 32 ``neg`` calls after 16 MiB); more distinct ops refill more
    (+16, +37, +59 us for 1, 4, 16 different ops)."""
    import torch
    import torch.nn.functional as F

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(hidden)
            self.act = torch.nn.GELU()
            self.drop = torch.nn.Dropout(0.0)

        def forward(self, x, cache):
            h = self.act(self.norm(x)) + x
            q = h.view(1, 1, 4, hidden // 4).transpose(1, 2)
            kv = torch.cat([cache, q], dim=2)
            out = F.scaled_dot_product_attention(q, kv, kv)
            return self.drop(out.transpose(1, 2).reshape(1, 1, hidden))

    block = Block().eval()
    # Constant tensors: no draw from the global RNG (the user's random state stays as it was).
    x, vec = torch.full((1, 1, hidden), 0.5), torch.full((hidden,), 0.5)
    cache = torch.full((1, 4, 16, hidden // 4), 0.25)

    def run():
        block(x, cache)

    def timed_after(before) -> float:
        times = []
        for _ in range(repeats):
            before()
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        return min(times) * 1e6

    with torch.no_grad():
        run()
        hot = timed_after(run)
        points = []
        for mib in REFILL_MIB:
            weights = [torch.full((mib * 2**20 // 4 // hidden, hidden), 0.5) for _ in range(2)]
            turn = iter(range(10**9))

            def gemv(weights=weights, turn=turn):
                torch.mv(weights[next(turn) % 2], vec)

            gemv()
            points.append((float(mib), max(timed_after(gemv) - hot, 0.0)))
            del weights
    # A larger stream never refills less: a dip is noise.
    points = [(m, max(us for _, us in points[:i + 1])) for i, (m, _) in enumerate(points)]
    return {"refill_us": tuple(points), "refill_block_us": hot}


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
