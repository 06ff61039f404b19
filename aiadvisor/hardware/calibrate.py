"""Op-level calibration of the attached device: time a fixed grid of the ops models spend their
non-GEMM time in (elementwise, activations, random masks, normalisations, reductions, pooling,
embeddings, copies, CPU attention kernels), linear-layer GEMMs (on a CPU) and optimizer steps, at
several sizes, in FP32 and in each 16-bit type the device runs natively.

Why: on a CPU the square-matmul benchmark and one streaming bandwidth say little about
``gelu_backward`` (transcendental maths, ~5x slower per byte than a copy), ``bernoulli_``
(dropout masks: random-number generation, ~50x slower per byte), ``max_pool2d_with_indices`` or
a per-tensor AdamW step (nine small kernels per parameter). Timing those ops themselves, on a
grid of sizes chosen independently of any model, gives a per-op time-vs-size curve the cost
model reads for every op of the same name (or, failing that, of the same family).

Each point's work (bytes read + written, FLOPs) is counted by the profiler's own recorder on the
same call, so a calibration point and a profiled op of the same size are measured in the same
units. On a CPU a few of the memory-bound ops are timed once more on cold inputs
(:func:`cold_points`): the cost model reads them as a slowdown over the hot curves. Ops a
device cannot run (e.g. the CPU attention kernel on a GPU) are skipped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Elements per (main) tensor of the memory-bound grid: 16 K to 8 M floats (64 KiB - 32 MiB),
#: spanning L2-resident to DRAM-streaming sizes on a CPU.
CPU_ELEMENTS = (2**14, 2**17, 2**20, 2**23)
GPU_ELEMENTS = (2**16, 2**20, 2**24, 2**26)
#: Sequence lengths of the CPU attention grid (batch x heads = 16, head dim 64).
ATTENTION_SEQ = (64, 256, 1024)
#: Linear-layer GEMMs (tokens M, in K, out N), 34 MFLOP - 2.1 GFLOP a forward call: the forward
#: ``x @ w.T + b`` and the backward pair (input and weight gradients, with whatever copies the
#: library makes for transposed operands) are timed apart; models' GEMMs are rarely square.
LINEAR_SHAPES = ((256, 256, 256), (128, 512, 2048), (1024, 256, 1024), (512, 1024, 1024),
                 (2048, 1024, 256), (4096, 512, 512))
#: Linear-layer GEMMs with large weights (tokens M, in K, out N; forward only, family
#: ``gemm-forward-wide``): 8 M and 16 M weight elements, where :data:`LINEAR_SHAPES` have at most
#: 1 M. Measured on the 2-core development CPU (bf16, inference): at 8.6 GFLOP a call, 3.2 ms
#: with a 1 M-element weight and 4.4 ms with a 16 M-element one; at the 4096 x 4096 weight,
#: 2.0 ms at M = 64 and 27.4 ms at M = 2048, about 1.2 ms a call beyond M times the per-row
#: time: a fixed cost per call, in proportion to the weight's elements (as if the library
#: repacked the right-hand operand on every call; a large activation operand, 16384 x 512,
#: cost nothing extra); FP32 about 2.8 ms, 10 % of its 26 ms call. Timed
#: cycling :data:`WIDE_CYCLE_BYTES` of weights, as the skinny grid. The cost model fits seconds
#: per weight element from these over the linear grid's curve at the same FLOPs: there, about
#: 120 ps in bf16 (60 ps looping over one matrix), 170 ps in FP32, 13 ps in FP16 (whose slow
#: kernels run near the curve). 3.5 s of the calibration on that machine (three dtypes).
WIDE_SHAPES = ((256, 2048, 4096), (256, 4096, 4096))
#: Skinny linear-layer GEMMs (forward only), M x K x N with M = the tokens of one decode step
#: (batch x 1): a CPU runs them far below the square-matmul rate at the same FLOPs (measured on
#: the 2-core development machine: M=8 of 768 x 2304 at 33 GFLOP/s where a square n=241 of the
#: same FLOPs ran at 135), and faster than their weights over the DRAM bandwidth when the weights
#: sit in cache. K = N = 2048 (16 MB of FP32 weights, beyond a core's L2) like an LLM layer.
SKINNY_SHAPES = tuple((m, 2048, 2048) for m in (1, 2, 4, 8, 16, 32, 64))
#: The skinny grid again at K = 512 (a few rows): at one row the rate grows with K, the length
#: of each dot product. Measured on the 2026-12-06 development CPU (2-core AMD EPYC VM, FP32,
#: weights cycled through 512 MiB): M = 1 at 13.1, 15.3, 16.9, 18.0 and 20.8 GB/s for K =
#: 256, 512, 768, 1024 and 2048 (22.6 at 4096); M = 8 at 13-15 GB/s whatever K. A decoder
#: 512 wide decoded 25 % slower than the K = 2048 rates predicted. The same rows as the skinny
#: grid: a library's kernel choice changes with M (that CPU ran M = 2 at half M = 1's bytes
#: per second at K = 2048), and the two grids are compared row count by row count.
SKINNY_NARROW_SHAPES = tuple((m, 512, 8192) for m in (1, 2, 4, 8, 16, 32, 64))
#: Skinny forward GEMMs on one small weight matrix, looped over (family ``gemm-skinny-hot``): a
#: recurrent layer's hidden-to-hidden GEMM (:data:`STEP_SUFFIX`) multiplies the same matrix
#: at every time step, so it stays in cache, where the skinny grid times weights from DRAM.
#: 256 x 1024 (1 MiB in FP32; an LSTM's four or a GRU's three gates of a 256-wide hidden state
#: are 1024 and 768 wide). Measured on a 2-core Zen 4 EPYC VM (FP32): a GRU tagger's 16 x 256 x
#: 768 step GEMM ran at 61-65 us a call (103 GFLOP/s) where the skinny grid's M = 16 rate
#: priced it at 98 us, and the square linear grid's curve at its FLOPs at 32 us.
SKINNY_HOT_SHAPES = tuple((m, 256, 1024) for m in (1, 4, 16, 64))
#: Bytes of weight matrices each skinny timing cycles through: a decode step streams every
#: weight once, from DRAM. Measured on the 2-core development CPU (480 MB of L3 reported,
#: shared by its VM host): M=1 of 2048 x 2048 at 42 GB/s cycling 128 MB, 31-33 GB/s cycling
#: 256 MB or more; M=8 at 14.8 and 11.3 GB/s. The former 128 MB cycle timed a half-hot cache,
#: and GPT-2's 500 MB decode step ran 20-30 % slower than it predicted. Even the small Llama's
#: 140 MB decode step ran at the DRAM rates (7.1-7.7 ms at batch 1, 5.0 ms predicted from
#: rates timed cycling 32 MB), so the grid is not timed on cached weights.
SKINNY_CYCLE_BYTES = 512 * 2**20
#: The skinny grid's square shapes at four row counts timed once more cycling only
#: :data:`SKINNY_WARM_CYCLE_BYTES` of weights (family ``gemm-skinny-warm``): a model whose
#: weights all fit in a CPU's last-level cache finds them there at the next decode step, where
#: the skinny grid reads them from DRAM. On the 2-core Xeon VM with AMX a 5 M-parameter
#: decoder's batch-8 decode step (20 MB of weights) ran its 24 linear GEMMs in 0.59 ms where
#: the DRAM rates priced 1.33; a 140 MB one ran at the DRAM rates (above). Where the cache
#: does not hold the cycle, this grid reads as the skinny one and nothing changes.
SKINNY_WARM_SHAPES = tuple((m, 2048, 2048) for m in (1, 4, 16, 64))
SKINNY_WARM_CYCLE_BYTES = 32 * 2**20
#: Bytes of weight matrices each large-weight timing (:data:`WIDE_SHAPES`) cycles through, for
#: the same reason: a step reads each layer's weights once, after the other layers' (measured
#: on the development CPU, bf16 MLP 1024-4096-4096-1024 at batch 256: 7.8 ms a step run in a
#: loop, 9.7 ms run in turns with its FP32 copy, 9.2 ms after streaming 256 MiB of other data).
WIDE_CYCLE_BYTES = 256 * 2**20
#: Convolutions (batch, in channels, side, out channels, kernel), 2-D, stride 1, "same"
#: padding, 57 MFLOP - 1.2 GFLOP a forward call: a 3-channel stem, 3x3 layers of 32-256
#: channels, a 1x1 projection. A CPU runs them well below the square-matmul rate at the same
#: FLOPs (im2col/oneDNN reorders, narrow channel counts), and their backward (input and weight
#: gradients in one ``convolution_backward``) at yet another rate; timed apart.
#: The last shape repeats the 256-channel 3x3 layer at a quarter of its output positions: the
#: pair, same weights and a quarter of the work, separates a cost per weight element from the
#: work rate (:func:`aiadvisor.costmodel.local.fit_conv_weight`). On the development CPU a BF16
#: channels_last 3x3 convolution on a 4x4 output took 403 us where the intensity rate said
#: 151 us: oneDNN reorders the weights into its blocked layout on every eager call (about
#: 0.5 ns an element forward, 2-3 ns backward), which the deep, narrow layers of a conv net
#: pay in full.
CONV_SHAPES = ((8, 3, 64, 32, 3), (8, 32, 32, 32, 3), (8, 64, 32, 64, 3), (16, 128, 16, 128, 3),
               (16, 256, 8, 256, 3), (8, 64, 32, 256, 1), (16, 256, 4, 256, 3))
#: Recurrent layers (batch, hidden) of a one-layer LSTM (input = hidden) over
#: :data:`RECURRENT_STEPS` steps: each step is a few small GEMMs and gate maths, far below the
#: square-matmul rate of the same FLOPs. Recorded per step (FLOPs and seconds / steps).
RECURRENT_SHAPES = ((8, 128), (16, 256), (16, 512), (64, 512))
RECURRENT_STEPS = 32
#: Cached lengths of the decode-cache grid (batch 1, 16 heads of 64: 0.25-4 M elements per
#: key or value tensor), and the bytes of live caches each timing cycles through (beyond any
#: CPU cache, as after a decode step's weights have streamed through it).
CACHE_CONTEXTS = (256, 1024, 4096)
CACHE_CYCLE_BYTES = 128 * 2**20
#: Suffix of the ops on a decode step's cache (appending the new token, attending over it):
#: timed, and looked up, apart from the same ops on hot, reused buffers.
CACHE_SUFFIX = "[cache]"
#: Elements per main tensor of the cold-input grid (1 - 16 MiB in FP32), and the bytes of
#: distinct inputs each of its timings cycles through: in a real step an elementwise op reads
#: what an earlier op wrote long before (evicted from the core's cache) into a fresh output,
#: where the hot grid reuses one input in a loop. Measured on the 2-core development CPU at
#: 1 M elements: ``gelu_backward`` 0.35 ms hot, 0.79 ms cold; ``add`` 0.22 ms hot, 0.33 ms cold.
COLD_ELEMENTS = (2**18, 2**20, 2**22)
COLD_CYCLE_BYTES = 256 * 2**20
#: Suffix of the ops timed on cold inputs (:func:`cold_points`): kept apart from the hot grid;
#: the cost model reads them as a slowdown of memory-bound ops over the hot curves.
COLD_SUFFIX = "[cold]"
#: Suffix of a convolution or max pool record whose input is channels_last (NHWC; the
#: profiler's :func:`~aiadvisor.profiler.opinfo.record_suffix` and the channels_last plan
#: step name them so); the grid times each convolution in both layouts, the NHWC ones under
#: families ``conv-forward-cl`` / ``conv-backward-cl``.
CHANNELS_LAST_SUFFIX = "[channels_last]"
#: Suffix of a batch norm forward record in eval mode (running statistics).
EVAL_SUFFIX = "[eval]"
#: Suffix of a recurrent layer's hidden-to-hidden GEMM (its ``weight_hh_*`` times the hidden
#: state), run once per time step. On a CPU, PyTorch's GRU and plain RNN (LSTM runs oneDNN's
#: fused layer instead) multiply the whole sequence's inputs by ``weight_ih`` in one GEMM and
#: then one small GEMM a step; both are ``addmm`` calls of the same module, and one record of
#: both priced them all at their mean size. In the GRU tagger of ``bench/costmodel_local_cpu.py``
#: (2 layers, 256 wide, bidirectional, 16 x 48 tokens) that mean was 12.5 MFLOP a call, where
#: 192 step GEMMs were 6.3 MFLOP (16 x 256 x 768) and 2 input GEMMs 604 MFLOP.
STEP_SUFFIX = "[step]"
#: The forward max pool, whose records may name a window (``[3x3]``) and a layout.
MAX_POOL_OP = "aten.max_pool2d_with_indices"


def base_op(name: str) -> str:
    """An op record's aten name without its suffixes (``[cache]``, ``[3x3]``,
    ``[channels_last]``)."""
    return name.split("[", 1)[0]
#: Bytes of the buffer the first-touch timing maps afresh per call (:func:`write_fresh`: new
#: pages from the kernel, faulted in when first written). Measured on the 2-core development
#: CPU: 13 ms more to fill a fresh 64 MiB buffer than a reused one (0.8 us per 4 KiB page,
#: 5 GB/s); GPT-2's 103-411 MB prompt logits at batch 4-8 faulted in every page that way. The
#: buffer is mapped, filled and unmapped twice before the timing: in a new process on this VM
#: the first 128 MiB cost 1.2-1.5 ms per MiB (guest memory the hypervisor had not yet backed),
#: 0.14-0.20 ms from then on (four calibrations), which is what the steps of a running process
#: pay. It was a ``torch.empty`` until 2026-12-07, which glibc can serve from freed memory the
#: calling process still holds (a 64 MiB buffer timed at the end of a calibration read 0.7 ms);
#: a calibration cached on the 2-core Xeon VM read 7.6 us per MiB where a new process reads
#: 182-200 (freeing 320-768 MiB of heap first did not reproduce it, so the process state that
#: did is not known), and the demo's training step, priced with that, read 21 % fast. A new
#: mapping is new pages whatever the process holds.
FIRST_TOUCH_BYTES = 128 * 2**20
#: Optimizer grid: (number of tensors, elements per tensor); the step time is fitted as
#: ``a * tensors + b * elements`` (per-tensor dispatch + per-element traffic) over the tensors
#: of up to 1 MiB, and the larger ones give the per-element cost at their size
#: (:func:`aiadvisor.costmodel.local.fit_optimizer_rates`): 4 and 16 MiB, below the 32 MiB at
#: which the step's temporaries land on fresh pages (priced apart).
OPTIMIZER_GRID = ((64, 2**12), (8, 2**20), (32, 2**18), (2, 2**22))


@dataclass(frozen=True, kw_only=True)
class OpPoint:
    """One timed call: ``op`` (aten name as the profiler records it, e.g. ``aten.gelu``) of
    ``family``, moving ``num_bytes`` and doing ``flops`` in ``seconds`` (median)."""

    op: str
    family: str
    num_bytes: float
    flops: float
    seconds: float
    dtype: str = "float32"
    """Element type of the op's tensors (the grid runs in FP32 and, where the device runs them
    natively, in 16 bit)."""
    cycle_bytes: float = 0.0
    """Bytes of distinct operands the timing cycled through (skinny GEMMs), 0 where it reused
    one set."""
    weight_elements: float = 0.0
    """Elements of a linear GEMM's weight (its right-hand operand, ``K x N``) or of a
    convolution's weight (``out x in x kh x kw``); 0 elsewhere."""
    inner: float = 0.0
    """``K`` of a skinny GEMM (the length of its dot products); 0 where not recorded."""
    faulted_bytes: float = 0.0
    """Bytes of new pages a call faulted in (:func:`faulted_bytes`, op grid on a CPU): their
    page faults are in ``seconds``. 0 where none, or not counted."""


@dataclass(frozen=True, kw_only=True)
class OptimizerPoint:
    """One optimizer step over ``num_tensors`` tensors of ``elements`` elements in total."""

    optimizer: str
    num_tensors: int
    elements: int
    seconds: float


def _memory_cases(torch: Any, n: int, dev: str, f: Any) -> list[tuple]:
    """(family, thunk) pairs at about ``n`` elements per main tensor of dtype ``f``. Max
    pools are timed in two windows (2 x 2 / stride 2 and ResNet's 3 x 3 / stride 2 / pad 1:
    the cost model reads other windows off the two) and two layouts (a
    channels_last pool is another kernel: on the development CPU 1.7 ms where NCHW took 17 ms,
    16 x 32 x 112 x 112 FP32; the recorder names the window and the layout). Batch norm is
    timed in training and eval mode and in both layouts (backward: both layouts): on the
    development CPU, 16 x 32 x 56 x 56 FP32, training-mode forward 1.2 ms NCHW, 0.9 ms
    channels_last; eval mode 0.23 and 0.36 ms; backward 0.40 and 1.04 ms (BF16: 0.34 / 0.44,
    0.18 / 0.22 and 0.39 / 0.81 ms)."""
    aten = torch.ops.aten
    a, b = torch.randn(n, device=dev, dtype=f), torch.randn(n, device=dev, dtype=f)
    rows = torch.randn(max(n // 512, 1), 512, device=dev, dtype=f)
    hidden = rows.shape[1]
    ln_w = torch.ones(hidden, device=dev, dtype=f)
    ln_b = torch.zeros(hidden, device=dev, dtype=f)
    _, mean, rstd = aten.native_layer_norm(rows, [hidden], ln_w, ln_b, 1e-5)
    soft = aten._softmax(rows, -1, False)
    side = max(int((n // 64) ** 0.5) // 2 * 2, 2)
    img = torch.randn(1, 64, side, side, device=dev, dtype=f)
    bn_w, bn_b = torch.ones(64, device=dev, dtype=f), torch.zeros(64, device=dev, dtype=f)
    bn_rm, bn_rv = torch.zeros(64, device=dev, dtype=f), torch.ones(64, device=dev, dtype=f)
    _, bn_mean, bn_invstd = aten.native_batch_norm(img, bn_w, bn_b, bn_rm.clone(), bn_rv.clone(),
                                                   True, 0.1, 1e-5)
    pooled, idx = aten.max_pool2d_with_indices(img, [2, 2], [2, 2])
    img_cl = img.contiguous(memory_format=torch.channels_last)
    vocab = 8192
    table = torch.randn(vocab, 256, device=dev, dtype=f)
    ids = torch.randint(0, vocab, (max(n // 256, 1),), device=dev)
    emb_grad = torch.randn(ids.numel(), 256, device=dev, dtype=f)
    mask = a.clone()
    return [
        ("elementwise", lambda: aten.add(a, b)),
        ("elementwise", lambda: aten.mul(a, b)),
        ("elementwise", lambda: aten.relu(a)),
        ("elementwise", lambda: aten.threshold_backward(b, a, 0.0)),
        ("copy", lambda: aten.clone(a)),
        ("copy", lambda: aten.cat([a, b])),
        ("activation", lambda: aten.gelu(a)),
        ("activation", lambda: aten.gelu_backward(b, a)),
        ("activation", lambda: aten.silu(a)),
        ("activation", lambda: aten.silu_backward(b, a)),
        ("activation", lambda: aten.tanh(a)),
        ("rng", lambda: aten.bernoulli_(mask, 0.9)),
        ("norm", lambda: aten.native_layer_norm(rows, [hidden], ln_w, ln_b, 1e-5)),
        ("norm", lambda: aten.native_layer_norm_backward(rows, rows, [hidden], mean, rstd, ln_w,
                                                         ln_b, [True, True, True])),
        ("norm", lambda: aten._softmax(rows, -1, False)),
        ("norm", lambda: aten._softmax_backward_data(rows, soft, -1, f)),
        ("norm", lambda: aten.native_batch_norm(img, bn_w, bn_b, bn_rm, bn_rv, True, 0.1, 1e-5)),
        ("norm", lambda: aten.native_batch_norm_backward(img, img, bn_w, bn_rm, bn_rv, bn_mean,
                                                         bn_invstd, True, 1e-5,
                                                         [True, True, True])),
        # Batch norm in eval mode (running statistics: one pass, no reduction) and in
        # channels_last, forward and backward: other kernels (see the docstring).
        ("norm", lambda: aten.native_batch_norm(img, bn_w, bn_b, bn_rm, bn_rv, False, 0.1, 1e-5)),
        ("norm", lambda: aten.native_batch_norm(img_cl, bn_w, bn_b, bn_rm, bn_rv, True, 0.1,
                                                1e-5)),
        ("norm", lambda: aten.native_batch_norm(img_cl, bn_w, bn_b, bn_rm, bn_rv, False, 0.1,
                                                1e-5)),
        ("norm", lambda: aten.native_batch_norm_backward(img_cl, img_cl, bn_w, bn_rm, bn_rv,
                                                         bn_mean, bn_invstd, True, 1e-5,
                                                         [True, True, True])),
        ("reduce", lambda: aten.sum(rows, [0])),
        ("pool", lambda: aten.max_pool2d_with_indices(img, [2, 2], [2, 2])),
        ("pool", lambda: aten.max_pool2d_with_indices(img, [3, 3], [2, 2], [1, 1])),
        ("pool", lambda: aten.max_pool2d_with_indices(img_cl, [2, 2], [2, 2])),
        ("pool", lambda: aten.max_pool2d_with_indices(img_cl, [3, 3], [2, 2], [1, 1])),
        ("pool", lambda: aten.max_pool2d_with_indices_backward(pooled, img, [2, 2], [2, 2],
                                                               [0, 0], [1, 1], False, idx)),
        ("embedding", lambda: aten.embedding(table, ids)),
        ("embedding", lambda: aten.embedding_dense_backward(emb_grad, ids, vocab, -1, False)),
    ]


def _attention_cases(torch: Any, seq: int, dev: str, f: Any) -> list[tuple[str, Callable[[], Any]]]:
    """PyTorch's CPU flash-attention kernels (forward and backward) at one sequence length."""
    if dev != "cpu":
        return []
    aten = torch.ops.aten
    q, k, v = (torch.randn(1, 16, seq, 64, device=dev, dtype=f) for _ in range(3))
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
    grad = torch.randn_like(out)
    return [
        ("attention", lambda: aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)),
        ("attention", lambda: aten._scaled_dot_product_flash_attention_for_cpu_backward(
            grad, q, k, v, out, lse, 0.0, False)),
    ]


def linear_points(torch: Any, *, dev: str, sync: Callable[[], None],
                  time_op: Callable[..., float], min_time_s: float,
                  step: Callable[[str], None], shapes=LINEAR_SHAPES, skinny=SKINNY_SHAPES,
                  wide=WIDE_SHAPES, narrow=SKINNY_NARROW_SHAPES, hot=SKINNY_HOT_SHAPES,
                  warm=SKINNY_WARM_SHAPES,
                  dtypes: tuple[str, ...] = ("float32",)) -> list[OpPoint]:
    """Forward and backward GEMMs of linear layers, forward GEMMs of ones with large weights
    (family ``gemm-forward-wide``), of skinny ones (family ``gemm-skinny``), of skinny ones
    cycling weights a last-level cache may hold (family ``gemm-skinny-warm``) and of skinny ones
    on one weight matrix in cache (family ``gemm-skinny-hot``). A backward point
    stands for one of its two GEMM calls (2 M K N FLOPs, half the measured time), as the
    profiler records them."""
    points = []
    for dtype in dtypes:
        f = getattr(torch, dtype)
        size = torch.finfo(f).bits // 8
        for m, k, n in shapes:
            step(f"linear {dtype} {m}x{k}x{n}")
            x = torch.randn(m, k, device=dev, dtype=f, requires_grad=True)
            w = torch.randn(n, k, device=dev, dtype=f, requires_grad=True)
            b = torch.randn(n, device=dev, dtype=f, requires_grad=True)
            flops = 2.0 * m * k * n
            with torch.no_grad():
                fwd = time_op(functools.partial(torch.nn.functional.linear, x, w, b), sync=sync,
                              min_time_s=min_time_s)
            points.append(OpPoint(op="aten.addmm", family="gemm-forward",
                                  num_bytes=size * (m * k + k * n + n + m * n), flops=flops,
                                  seconds=fwd, dtype=dtype, weight_elements=float(k * n)))
            y = torch.nn.functional.linear(x, w)
            g = torch.randn_like(y)
            bwd = time_op(functools.partial(torch.autograd.grad, y, (x, w), g, retain_graph=True),
                          sync=sync, min_time_s=min_time_s)
            points.append(OpPoint(op="aten.mm", family="gemm-backward",
                                  num_bytes=size * (m * n + n * k + m * k), flops=flops,
                                  seconds=bwd / 2, dtype=dtype))
        points += skinny_points(torch, dev=dev, sync=sync, time_op=time_op,
                                min_time_s=min_time_s, step=step, shapes=wide, dtype=dtype,
                                cycle_bytes=WIDE_CYCLE_BYTES, family="gemm-forward-wide")
        points += skinny_points(torch, dev=dev, sync=sync, time_op=time_op,
                                min_time_s=min_time_s, step=step, shapes=(*skinny, *narrow),
                                dtype=dtype)
        points += skinny_points(torch, dev=dev, sync=sync, time_op=time_op,
                                min_time_s=min_time_s, step=step, shapes=warm, dtype=dtype,
                                cycle_bytes=SKINNY_WARM_CYCLE_BYTES, family="gemm-skinny-warm")
        for m, k, n in hot:
            step(f"linear {dtype} {m}x{k}x{n} one weight")
            x, w = torch.randn(m, k, device=dev, dtype=f), torch.randn(n, k, device=dev, dtype=f)
            b = torch.randn(n, device=dev, dtype=f)
            with torch.no_grad():
                fwd = time_op(functools.partial(torch.nn.functional.linear, x, w, b),
                              sync=sync, min_time_s=min_time_s)
            points.append(OpPoint(op="aten.addmm", family="gemm-skinny-hot",
                                  num_bytes=size * (m * k + k * n + n + m * n),
                                  flops=2.0 * m * k * n, seconds=fwd, dtype=dtype,
                                  weight_elements=float(k * n), inner=float(k)))
    return points


def skinny_points(torch: Any, *, dev: str, sync: Callable[[], None],
                  time_op: Callable[..., float], min_time_s: float,
                  step: Callable[[str], None], shapes=SKINNY_SHAPES, dtype: str = "float32",
                  cycle_bytes: int = SKINNY_CYCLE_BYTES, family: str = "gemm-skinny"
                  ) -> list[OpPoint]:
    """Skinny forward GEMMs (family ``gemm-skinny``; or the large-weight ones, ``family=
    "gemm-forward-wide"``) as a step runs them: each timing cycles through ``cycle_bytes`` of
    distinct weight matrices (as a step reads each layer's once, from DRAM) so that no call
    finds its weights in a cache, as a loop over one matrix would; ``cycle_bytes`` records
    the cycle."""
    f = getattr(torch, dtype)
    size = torch.finfo(f).bits // 8
    points = []
    for m, k, n in shapes:
        step(f"linear {dtype} {m}x{k}x{n} cycling {cycle_bytes / 2**20:.0f} MiB")
        count = max(int(cycle_bytes // (size * k * n)), 2)
        first = torch.randn(n, k, device=dev, dtype=f)
        ws = [first] + [first.clone() for _ in range(count - 1)]  # clones: faster than randn
        x = torch.randn(m, k, device=dev, dtype=f)
        b = torch.randn(n, device=dev, dtype=f)

        def cycle(x=x, ws=ws, b=b):
            for w in ws:
                torch.nn.functional.linear(x, w, b)

        with torch.no_grad():
            fwd = time_op(cycle, sync=sync, min_time_s=min_time_s) / count
        points.append(OpPoint(op="aten.addmm", family=family,
                              num_bytes=size * (m * k + k * n + n + m * n),
                              flops=2.0 * m * k * n, seconds=fwd, dtype=dtype,
                              cycle_bytes=float(count * size * k * n),
                              weight_elements=float(k * n), inner=float(k)))
        del ws, first
    return points


def conv_points(torch: Any, *, dev: str, sync: Callable[[], None],
                time_op: Callable[..., float], min_time_s: float, step: Callable[[str], None],
                shapes=CONV_SHAPES, dtypes: tuple[str, ...] = ("float32",)) -> list[OpPoint]:
    """Forward (``aten.convolution``) and backward (``aten.convolution_backward``: input and
    weight gradients) of 2-D convolutions, family ``conv-forward`` / ``conv-backward``, work
    counted by the profiler's recorder on the same call; each again with input and weight in
    channels_last (families ``conv-forward-cl`` / ``conv-backward-cl``; on the development CPU
    NHWC ran 1.15-2.85x faster in FP32 and 1.3-1.9x in bf16)."""
    points = []
    for dtype, layout in ((d, cl) for d in dtypes for cl in (False, True)):
        f = getattr(torch, dtype)
        suffix = "-cl" if layout else ""
        fmt = torch.channels_last if layout else torch.contiguous_format
        for n, cin, side, cout, k in shapes:
            step(f"conv {dtype} {n}x{cin}x{side}x{side} -> {cout} k{k}"
                 + (" channels_last" if layout else ""))
            x = torch.randn(n, cin, side, side, device=dev, dtype=f).contiguous(
                memory_format=fmt).requires_grad_(True)
            w = torch.randn(cout, cin, k, k, device=dev, dtype=f).contiguous(
                memory_format=fmt).requires_grad_(True)
            fwd = functools.partial(torch.nn.functional.conv2d, x, w, padding=k // 2)
            try:
                with torch.no_grad():
                    op, num_bytes, flops = _count(torch, fwd)
                    seconds = time_op(fwd, sync=sync, min_time_s=min_time_s)
                points.append(OpPoint(op=op, family="conv-forward" + suffix,
                                      num_bytes=float(num_bytes), flops=float(flops),
                                      seconds=seconds, dtype=dtype,
                                      weight_elements=float(w.numel())))
                y = fwd()
                g = torch.randn_like(y)
                bwd = functools.partial(torch.autograd.grad, y, (x, w), g, retain_graph=True)
                op, num_bytes, flops = _count_named(torch, bwd, "aten.convolution_backward")
                seconds = time_op(bwd, sync=sync, min_time_s=min_time_s)
            except (RuntimeError, NotImplementedError):
                continue  # a dtype the convolution kernels lack on this device
            points.append(OpPoint(op=op, family="conv-backward" + suffix,
                                  num_bytes=float(num_bytes), flops=float(flops),
                                  seconds=seconds, dtype=dtype,
                                  weight_elements=float(w.numel())))
        points += _conv_call_points(torch, dev=dev, sync=sync, time_op=time_op,
                                    min_time_s=min_time_s, dtype=dtype, fmt=fmt, suffix=suffix)
    return points


#: Family suffix of a convolution's per-call time (:func:`_conv_call_points`).
CONV_CALL_SUFFIX = "-call"


def _conv_call_points(torch: Any, *, dev: str, sync: Callable[[], None],
                      time_op: Callable[..., float], min_time_s: float, dtype: str, fmt: Any,
                      suffix: str) -> list[OpPoint]:
    """What one convolution call costs whatever its size: a 1 x 8 x 4 x 4 -> 8, 1 x 1
    convolution (1,024 multiply-adds) forward and backward, families
    ``conv-forward<suffix>-call`` and ``conv-backward<suffix>-call``. On the development CPU
    (oneDNN, torch 2.13) this timing read 57 us forward in BF16 NCHW, 38 us in channels_last,
    4 us in FP32 (backward 140, 104 and 24-27 us); a loop of 50 such calls, 89, 55-58 and
    4-8 us. A small convolution's time is mostly this."""
    f = getattr(torch, dtype)
    x = torch.randn(1, 8, 4, 4, device=dev, dtype=f).contiguous(memory_format=fmt)
    w = torch.randn(8, 8, 1, 1, device=dev, dtype=f).contiguous(memory_format=fmt)
    x.requires_grad_(True)
    w.requires_grad_(True)
    fwd = functools.partial(torch.nn.functional.conv2d, x, w)
    try:
        with torch.no_grad():
            op, num_bytes, flops = _count(torch, fwd)
            forward = time_op(fwd, sync=sync, min_time_s=min_time_s)
        y = fwd()
        bwd = functools.partial(torch.autograd.grad, y, (x, w), torch.randn_like(y),
                                retain_graph=True)
        bop, bbytes, bflops = _count_named(torch, bwd, "aten.convolution_backward")
        backward = time_op(bwd, sync=sync, min_time_s=min_time_s)
    except (RuntimeError, NotImplementedError):
        return []
    return [OpPoint(op=op, family="conv-forward" + suffix + CONV_CALL_SUFFIX,
                    num_bytes=float(num_bytes), flops=float(flops), seconds=forward, dtype=dtype),
            OpPoint(op=bop, family="conv-backward" + suffix + CONV_CALL_SUFFIX,
                    num_bytes=float(bbytes), flops=float(bflops), seconds=backward,
                    dtype=dtype)]


def recurrent_points(torch: Any, *, dev: str, sync: Callable[[], None],
                     time_op: Callable[..., float], min_time_s: float,
                     step: Callable[[str], None], shapes=RECURRENT_SHAPES,
                     steps: int = RECURRENT_STEPS, dtypes: tuple[str, ...] = ("float32",)
                     ) -> list[OpPoint]:
    """One LSTM layer forward and backward (family ``recurrent``), under the aten name its
    kernel records (e.g. ``aten.mkldnn_rnn_layer`` on a CPU), per step: FLOPs, bytes and
    seconds of the whole call over ``steps``, as the cost model prices a recurrent op at its
    per-step size."""
    points = []
    for dtype in dtypes:
        f = getattr(torch, dtype)
        for batch, hidden in shapes:
            step(f"recurrent {dtype} lstm {batch}x{hidden}")
            lstm = torch.nn.LSTM(hidden, hidden, batch_first=True).to(device=dev, dtype=f)
            x = torch.randn(batch, steps, hidden, device=dev, dtype=f, requires_grad=True)
            try:
                with torch.no_grad():
                    fwd = functools.partial(lstm, x)
                    fwd_op = _main_op(torch, fwd)
                    op, num_bytes, flops = _count_named(torch, fwd, fwd_op)
                    seconds = time_op(fwd, sync=sync, min_time_s=min_time_s)
                points.append(OpPoint(op=op, family="recurrent", num_bytes=num_bytes / steps,
                                      flops=flops / steps, seconds=seconds / steps,
                                      dtype=dtype))
                y = lstm(x)[0]
                g = torch.randn_like(y)
                bwd = functools.partial(torch.autograd.grad, y, (x, *lstm.parameters()), g,
                                        retain_graph=True)
                op, num_bytes, flops = _count_named(torch, bwd, _main_op(torch, bwd))
                seconds = time_op(bwd, sync=sync, min_time_s=min_time_s)
            except (RuntimeError, NotImplementedError):
                continue
            points.append(OpPoint(op=op, family="recurrent", num_bytes=num_bytes / steps,
                                  flops=flops / steps, seconds=seconds / steps, dtype=dtype))
    return points


def _recorded(torch: Any, fn: Callable[[], Any]) -> dict:
    from ..profiler.recorder import ModuleStack, Recorder

    root = torch.nn.Module()
    with ModuleStack(root) as stack, Recorder(stack) as rec:
        fn()
    rec.detach_all()
    return {k[2]: agg for k, agg in rec.aggs.items()}


def _main_op(torch: Any, fn: Callable[[], Any]) -> str:
    """The recorded op of ``fn`` with the most FLOPs."""
    aggs = _recorded(torch, fn)
    return max(aggs, key=lambda op: aggs[op].flops)


def _count_named(torch: Any, fn: Callable[[], Any], op: str) -> tuple[str, float, float]:
    """(recorded name, bytes, FLOPs) of aten op ``op`` among the ops ``fn`` records, as the
    profiler counts; the name keeps the record's suffixes (e.g. ``[channels_last]``)."""
    aggs = _recorded(torch, fn)
    named = [name for name in aggs if base_op(name) == op]
    if len(named) != 1:
        raise RuntimeError(f"expected one {op}, recorded {sorted(aggs)}")
    agg = aggs[named[0]]
    return named[0], agg.bytes_read + agg.bytes_written, agg.flops


def cache_points(torch: Any, *, dev: str, sync: Callable[[], None],
                 time_op: Callable[..., float], min_time_s: float,
                 step: Callable[[str], None], contexts=CACHE_CONTEXTS,
                 dtypes: tuple[str, ...] = ("float32",),
                 cycle_bytes: int = CACHE_CYCLE_BYTES) -> list[OpPoint]:
    """The two ops a decode step runs on each layer's cache, timed as a step runs them: the
    cache appended by ``torch.cat`` (family ``copy``: it reads the whole cache, cold in DRAM,
    into a freshly allocated tensor; the old ones are freed after the last layer's) and the new
    token's attention over it (family ``attention-cache``, keyed on bytes: a one-row query
    reads every cached key and value once). Each timing cycles through ``cycle_bytes``
    (:data:`CACHE_CYCLE_BYTES`) of live caches, so no call finds its cache in a CPU cache and no
    buffer is reused hot, as a loop over one tensor would. Op names carry
    :data:`CACHE_SUFFIX`."""
    aten = torch.ops.aten
    points = []
    for dtype in dtypes:
        f = getattr(torch, dtype)
        size = torch.finfo(f).bits // 8
        for ctx in contexts:
            step(f"decode cache {dtype} context={ctx}")
            shape = (1, 16, ctx, 64)
            layers = max(cycle_bytes // (2 * size * 16 * ctx * 64), 2)
            keys = [torch.randn(shape, device=dev, dtype=f) for _ in range(layers)]
            values = [torch.randn(shape, device=dev, dtype=f) for _ in range(layers)]
            new = torch.randn(1, 16, 1, 64, device=dev, dtype=f)
            q = torch.randn(1, 16, 1, 64, device=dev, dtype=f)

            def append(keys=keys, values=values, new=new):
                # Each grown cache is cut back to ``ctx`` tokens (a view) for the next call, so
                # every call allocates at a constant size. As in a decode step, the old caches
                # are freed only once every layer has its new one (when the model returns).
                grown = [[aten.cat([t, new], 2)[:, :, 1:] for t in cache]
                         for cache in (keys, values)]
                keys[:], values[:] = grown

            def attend(keys=keys, values=values, q=q):
                for k, v in zip(keys, values):
                    aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)

            with torch.no_grad():
                k0, v0 = keys[0], values[0]
                timed = [("copy", append, 2 * layers,
                          functools.partial(aten.cat, [k0, new], 2))]
                if dev == "cpu":
                    timed.append(("attention-cache", attend, layers, functools.partial(
                        aten._scaled_dot_product_flash_attention_for_cpu, q, k0, v0)))
                for family, cycle, calls, one in timed:
                    op, num_bytes, flops = _count(torch, one)  # as the profiler counts it
                    seconds = time_op(cycle, sync=sync, min_time_s=min_time_s) / calls
                    points.append(OpPoint(op=op + CACHE_SUFFIX, family=family,
                                          num_bytes=float(num_bytes), flops=float(flops),
                                          seconds=seconds, dtype=dtype))
            del keys, values, k0, v0, timed
    return points


def cold_points(torch: Any, *, dev: str, sync: Callable[[], None],
                time_op: Callable[..., float], min_time_s: float,
                step: Callable[[str], None], elements=COLD_ELEMENTS,
                cycle_bytes: int = COLD_CYCLE_BYTES) -> list[OpPoint]:
    """A few memory-bound ops (``add``, ``relu``, ``gelu_backward``, ``native_layer_norm``) in
    FP32 timed on cold inputs: each timing cycles through ``cycle_bytes`` of distinct inputs
    (so no call finds its inputs in a core's cache) and every call allocates its output, as in
    a real step. Op names carry :data:`COLD_SUFFIX`; family as in the hot grid."""
    aten = torch.ops.aten
    points = []
    hidden = 512
    w, b = torch.ones(hidden, device=dev), torch.zeros(hidden, device=dev)
    for n in elements:
        step(f"cold inputs elements={n}")
        count = max(cycle_bytes // (8 * n), 2)
        xs = [torch.randn(n, device=dev) for _ in range(count)]
        gs = [torch.randn(n, device=dev) for _ in range(count)]
        cases = [
            ("elementwise", lambda x, g: aten.add(x, g)),
            ("elementwise", lambda x, g: aten.relu(x)),
            ("activation", lambda x, g: aten.gelu_backward(g, x)),
            ("norm", lambda x, g: aten.native_layer_norm(x.view(-1, hidden), [hidden], w, b,
                                                         1e-5)),
        ]
        with torch.no_grad():
            for family, op in cases:
                def cycle(op=op, xs=xs, gs=gs):
                    for x, g in zip(xs, gs):
                        op(x, g)

                name, num_bytes, flops = _count(torch, functools.partial(op, xs[0], gs[0]))
                seconds = time_op(cycle, sync=sync, min_time_s=min_time_s) / count
                points.append(OpPoint(op=name + COLD_SUFFIX, family=family,
                                      num_bytes=float(num_bytes), flops=float(flops),
                                      seconds=seconds, dtype="float32"))
        del xs, gs
    return points


def write_fresh(torch: Any, num_bytes: int, write: Callable[[Any], Any]) -> None:
    """``write(t)`` on an FP32 CPU tensor ``t`` over ``num_bytes`` of memory just mapped from
    the kernel (anonymous private ``mmap``, never touched), as glibc gives a step's allocation of
    at least its mmap threshold, whatever this process's heap holds; then unmaps it, as freeing
    such an allocation does. ``write`` must not keep ``t``."""
    import mmap

    # Private, as malloc maps: a shared anonymous mapping is shared memory, whose faults cost
    # more (300 us a MiB on the 2-core Xeon VM where private pages took 190).
    private = getattr(mmap, "MAP_PRIVATE", None)
    mapping = mmap.mmap(-1, num_bytes) if private is None else \
        mmap.mmap(-1, num_bytes, flags=private | mmap.MAP_ANONYMOUS)
    t = torch.frombuffer(mapping, dtype=torch.float32)
    write(t)
    del t
    mapping.close()


def _fill(t: Any) -> None:
    t.fill_(1.0)


def faulted_bytes(fn: Callable[[], Any]) -> float:
    """Bytes of new pages one call of ``fn`` faulted in: the process's minor page faults during
    the call times the page size (``getrusage``; 0 where the platform has no ``resource``
    module). Counted on a call after the timing, so it says whether the timed calls paid page
    faults (a grid op whose output is above glibc's mmap threshold does, every call). Where
    transparent huge pages are on for every mapping (``[always]``), one fault maps 2 MiB and
    this undercounts: the faults then mostly stay in the point's time, as before it was
    counted."""
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    return float(max(after - before, 0) * resource.getpagesize())


def first_touch_points(torch: Any, *, dev: str, sync: Callable[[], None],
                       time_op: Callable[..., float], min_time_s: float,
                       step: Callable[[str], None],
                       num_bytes: int = FIRST_TOUCH_BYTES) -> list[OpPoint]:
    """What writing a buffer of ``num_bytes`` on new pages (:func:`write_fresh`) costs beyond
    writing a reused one (``fill_`` of each): the page faults of new memory, mapping and
    unmapping included. One point, family ``first-touch``, seconds = the difference (never
    below 0). CPU only."""
    step(f"first touch of {num_bytes / 2**20:.0f} MiB")
    for _ in range(2):   # guest pages the process has never had cost several times more
        write_fresh(torch, num_bytes, _fill)
    kept = torch.empty(num_bytes // 4, device=dev)
    fresh = time_op(functools.partial(write_fresh, torch, num_bytes, _fill), sync=sync,
                    min_time_s=min_time_s)
    reused = time_op(functools.partial(kept.fill_, 1.0), sync=sync, min_time_s=min_time_s)
    del kept
    return [OpPoint(op="alloc.first_touch", family="first-touch", num_bytes=float(num_bytes),
                    flops=0.0, seconds=max(fresh - reused, 0.0))]


#: Elements of the tensor :func:`zero_sqrt_points` takes the square root of (4 MiB in FP32,
#: an embedding table's size in the development CPU's DLRM-style case).
ZERO_SQRT_ELEMENTS = 2**20


def zero_sqrt_points(torch: Any, *, dev: str, sync: Callable[[], None],
                     time_op: Callable[..., float], min_time_s: float,
                     step: Callable[[str], None],
                     elements: int = ZERO_SQRT_ELEMENTS) -> list[OpPoint]:
    """What ``torch.sqrt`` of zeros costs beyond the square root of ordinary values (ones),
    into a kept output: Adam's step takes the square root of its second moment, which stays
    exactly zero in every embedding row no batch has looked up yet. On the development CPU
    (AMD EPYC, PyTorch's AVX-512 kernels) zeros took 1.1-2.2 ms a 1.28 M-element tensor against
    0.23-0.29 ms (denormals 7.4 ms); an AdamW step over eight 20,000 x 64 tables took 16.7-19.6
    ms with zero or 95 %-zero-row gradients against 11.7-12.1 ms with dense ones. One point,
    family ``sqrt-zero``, seconds = the difference over ``elements`` (never below 0)."""
    step(f"square root of {elements / 2**20:.0f} M zeros")
    out = torch.empty(elements, device=dev)
    zeros = torch.zeros(elements, device=dev)
    ones = torch.ones(elements, device=dev)
    slow = time_op(functools.partial(torch.sqrt, zeros, out=out), sync=sync,
                   min_time_s=min_time_s)
    fast = time_op(functools.partial(torch.sqrt, ones, out=out), sync=sync,
                   min_time_s=min_time_s)
    return [OpPoint(op="aten.sqrt[zeros]", family="sqrt-zero", num_bytes=4.0 * elements, flops=0.0,
                    seconds=max(slow - fast, 0.0))]


def _count(torch: Any, fn: Callable[[], Any]) -> tuple[str, float, float]:
    """(aten name, bytes, FLOPs) of the single recorded op of ``fn``, as the profiler counts."""
    from ..profiler.recorder import ModuleStack, Recorder

    root = torch.nn.Module()
    with ModuleStack(root) as stack, Recorder(stack) as rec:
        fn()
    rec.detach_all()
    if len(rec.aggs) != 1:
        raise RuntimeError(f"expected one op, recorded {sorted(k[2] for k in rec.aggs)}")
    (_, _, op), agg = next(iter(rec.aggs.items()))
    return op, agg.bytes_read + agg.bytes_written, agg.flops


def op_points(torch: Any, *, dev: str, sync: Callable[[], None], time_op: Callable[..., float],
              elements: tuple[int, ...], attention_seq: tuple[int, ...], min_time_s: float,
              step: Callable[[str], None], dtypes: tuple[str, ...] = ("float32",)
              ) -> tuple[list[OpPoint], dict[str, str]]:
    """Time the op grid in each of ``dtypes``; returns the points and the ops skipped (with the
    reason)."""
    points: list[OpPoint] = []
    skipped: dict[str, str] = {}
    for dtype in dtypes:
        f = getattr(torch, dtype)
        grids = [(f"{dtype} elements={n}", functools.partial(_memory_cases, torch, n, dev, f))
                 for n in elements]
        grids += [(f"{dtype} attention seq={s}",
                   functools.partial(_attention_cases, torch, s, dev, f)) for s in attention_seq]
        for label, build in grids:
            step(f"ops {label}")
            with torch.no_grad():
                try:
                    cases = build()
                except (RuntimeError, NotImplementedError) as exc:
                    skipped[label] = f"{type(exc).__name__}: {exc}"[:200]
                    continue
                for family, fn in cases:
                    try:
                        op, num_bytes, flops = _count(torch, fn)
                        seconds = time_op(fn, sync=sync, min_time_s=min_time_s)
                        faulted = faulted_bytes(fn) if dev == "cpu" else 0.0
                    except (RuntimeError, NotImplementedError) as exc:
                        skipped[f"{family} ({label})"] = f"{type(exc).__name__}: {exc}"[:200]
                        continue
                    points.append(OpPoint(op=op, family=family, num_bytes=float(num_bytes),
                                          flops=float(flops), seconds=seconds, dtype=dtype,
                                          faulted_bytes=faulted))
    return points, skipped


def optimizer_points(torch: Any, *, dev: str, sync: Callable[[], None],
                     time_op: Callable[..., float], min_time_s: float,
                     step: Callable[[str], None], grid=OPTIMIZER_GRID) -> list[OptimizerPoint]:
    """Time one ``torch.optim`` step of AdamW, SGD with momentum and plain SGD (PyTorch's default
    implementation for the device) over synthetic parameters with gradients.

    On a CPU each timing cycles through copies of the parameters, gradients and optimizer
    states, :data:`COLD_CYCLE_BYTES` of them, stepping each copy in turn: in a training step the
    optimizer follows a forward and a backward that evicted its states from the caches, where a
    loop over one optimizer finds them there on a CPU whose last-level cache holds them."""
    from ..profiler.measure import OPTIMIZER_CLASSES

    points = []
    for name in ("adamw", "sgd_momentum", "sgd"):
        for num_tensors, per_tensor in grid:
            step(f"optimizer {name} {num_tensors}x{per_tensor}")
            state_bytes = 4 * 4 * num_tensors * per_tensor   # FP32 weight, grad, two moments
            copies = max(COLD_CYCLE_BYTES // state_bytes, 1) if dev == "cpu" else 1
            opts = []
            for _ in range(copies):
                params = [torch.nn.Parameter(torch.randn(per_tensor, device=dev))
                          for _ in range(num_tensors)]
                for p in params:
                    p.grad = torch.randn_like(p)
                opts.append(OPTIMIZER_CLASSES[name](params))

            def cycle(opts=opts):
                for opt in opts:
                    opt.step()

            seconds = time_op(cycle, sync=sync, min_time_s=min_time_s) / copies
            del opts
            points.append(OptimizerPoint(optimizer=name, num_tensors=num_tensors,
                                         elements=num_tensors * per_tensor, seconds=seconds))
    return points
