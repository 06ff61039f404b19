"""Memory as the process shows it, beside the allocator-level peak (pure formulas, no torch).

The profile's ``peak_bytes`` is the high-water mark of live tensor bytes: what PyTorch's
allocators hand out. The operating system sees more:

* **CPU, resident set (RSS).** PyTorch's CPU allocator calls glibc ``malloc`` (via
  ``posix_memalign``). glibc serves a request from a free heap chunk if one fits, else from the
  top of the heap, else, at or above the *mmap threshold*, with its own ``mmap`` that ``free``
  returns to the system. The threshold starts at 128 KiB and rises to the size of every mmapped
  chunk that is freed, up to 32 MiB (glibc ``malloc/malloc.c``: ``DEFAULT_MMAP_THRESHOLD_MIN``,
  ``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit, "dynamic mmap threshold"; ``mallopt(3)``). From the
  second step on, activations under 32 MiB therefore live in the heap, whose freed chunks stay
  resident (only the free top beyond the trim threshold, twice the mmap threshold, is given
  back), and a heap fragmented by tensors of many sizes holds more than the live bytes.
  :class:`GlibcHeap` replays the step's allocations and frees through that policy (best fit,
  coalescing, top trimming; one arena) to find the resident high-water mark; on Linux with
  glibc the profile replays the same requests through glibc itself, in a child process
  (:mod:`aiadvisor.profiler.heap_replay`), and the model is the fallback. On the
  development machine, ResNet-50 inference (batch 8) peaks 169 MB above its allocator-level
  increment with glibc's defaults and 13 MB above it with ``MALLOC_MMAP_THRESHOLD_=131072``
  (a fixed threshold, every large tensor mmapped): the retained heap is the difference.
  The replay also carries what is not a PyTorch tensor but takes the same heap: oneDNN's
  reorder buffers around each convolution (``("native", ...)`` events, see
  :func:`aiadvisor.profiler.recorder.native_transients`) and the optimizer's state and update
  temporaries, allocated while the gradients are still live. What the BLAS and oneDNN libraries
  keep after their first call (MKL's packing buffers, code pages) is measured at profile time
  by running the model's largest GEMM once (``library_bytes``,
  :func:`aiadvisor.profiler.process._library_probe`). Not modelled: how glibc's bins, thread
  cache and "last remainder" place chunks (not best fit). On the development CPU, ResNet-50
  inference (batch 8) grew the brk heap by up to 220 MiB over two steps (strace) with 87 MiB
  live; replaying that process's own malloc stream, every size, recorded by an LD_PRELOAD
  interposer, through :class:`GlibcHeap` peaks at 123 MiB, as the traced stream does. With a
  fixed mmap threshold the same steps peak 21 MiB above the live bytes in training, so the
  gap is placement in the heap, not allocations the trace misses.
* **CUDA, ``torch.cuda.max_memory_reserved()``.** The caching allocator
  (``c10/cuda/CUDACachingAllocator.cpp``) rounds every request up to 512 bytes; requests up to
  1 MiB share 2 MiB segments, requests up to 10 MiB are cut from 20 MiB segments, larger ones
  get their own segment rounded up to 2 MiB; a cached free block serves the smallest request
  it fits and is split when enough remains, so segments hold holes that later requests may not
  fit; freed blocks are cached, never returned during a run. :class:`CudaCachingAllocator`
  replays that policy (:func:`replay_cuda_steps`: the weights, then three steps). nvidia-smi
  shows the CUDA context on top (not part of ``max_memory_reserved``):
  :data:`CUDA_CONTEXT_BYTES`.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

KiB, MiB = 1024, 1024**2

#: glibc malloc defaults on 64-bit Linux (malloc/malloc.c).
MMAP_THRESHOLD_MIN = 128 * KiB
MMAP_THRESHOLD_MAX = 32 * MiB
#: glibc chunk header and alignment: a request of n bytes takes n + 8 rounded up to 16.
_CHUNK_OVERHEAD, _CHUNK_ALIGN, _PAGE = 8, 16, 4096
#: PyTorch's CPU allocator asks ``posix_memalign`` for 64-byte alignment (c10/core/alignment.h
#: ``gAlignment``). glibc's ``_int_memalign`` (malloc/malloc.c, 2.36 as on the development
#: machine) then asks ``_int_malloc`` for ``nb + alignment + MINSIZE`` bytes, cuts the aligned
#: chunk out and frees the leading and trailing pieces. So a freed chunk is too small for the
#: next request of the same size (it needs 96 bytes more): the heap grows past the hole instead
#: of reusing it. Measured on the development CPU: ``F.linear`` of (512, 768) by (16000, 768)
#: three times grew the main arena by 62 MiB (two 31 MiB outputs left as holes) while the live
#: bytes stayed the same.
_ALIGNMENT, _MINSIZE = 64, 32

#: CUDA caching allocator constants (c10/cuda/CUDACachingAllocator.cpp: kMinBlockSize,
#: kSmallSize, kSmallBuffer, kMinLargeAlloc, kLargeBuffer, kRoundLarge).
CUDA_MIN_BLOCK = 512
CUDA_SMALL_SIZE = 1 * MiB
CUDA_SMALL_BUFFER = 2 * MiB
CUDA_MIN_LARGE_ALLOC = 10 * MiB
CUDA_LARGE_BUFFER = 20 * MiB
CUDA_ROUND_LARGE = 2 * MiB
#: CUDA context and the kernels loaded with it, outside the caching allocator: "x =
#: th.randn(1).cuda() ... goes from zero to 723 MiB" (discuss.pytorch.org, "What is the reason
#: for pytorch's GPU memory floor?"); 300-600 MiB is the range usually quoted for recent
#: drivers with lazy module loading (CUDA_MODULE_LOADING=LAZY, default since CUDA 11.7).
#: Estimated, not measured here.
CUDA_CONTEXT_BYTES = 500 * MiB
#: cuBLAS workspace PyTorch allocates through the caching allocator on the first GEMM of each
#: stream: ``CUBLAS_WORKSPACE_CONFIG`` default ":4096:8" on Hopper and newer (8 x 4 MiB) and
#: ":4096:2:16:8" elsewhere (2 x 4 MiB + 8 x 16 KiB); aten/src/ATen/cuda/CublasHandlePool.cpp.
CUBLAS_WORKSPACE_BYTES = {"hopper+": 32 * MiB, "other": 8 * MiB + 128 * KiB}

#: Resident bytes the first real step adds beyond its tensors (thread pools and their stacks,
#: oneDNN/MKL code and scratch pages, the autograd engine): measured on the development CPU on a
#: model that is not one of bench/profile_memory.py's (Linear(64, 64), ReLU, Linear(64, 64) at
#: batch 4; VmHWM over two steps minus the resident set before them, less the step's 0.002 and
#: 0.13 MiB of tensors): 1.96 MiB in inference, 5.69 MiB in training, the same in two runs.
#: Bigger GEMMs and convolutions touch more library scratch than this: an underestimate there.
FIRST_STEP_RESIDENT_BYTES = {"infer": 2 * MiB, "train": 6 * MiB}
#: How far the resident set of the same step moves from one fresh process to the next, either
#: way: half the range over the middle of six fresh processes running ResNet-50 inference on
#: the development CPU (623 to 696 MiB: +-5.5 %; where each chunk lands depends on what the
#: heap held before, see :mod:`aiadvisor.profiler.heap_replay`). The P10-P90 band of the CPU
#: resident set reaches at least this far each side of the prediction: the heap's own band
#: (the live tensors alone to a second copy of them) is a few per cent wide where the step's
#: tensors are small beside the process (a ViT-Base inference on a 2-core Zen 4 VM: 743-783
#: MiB, measured 790).
PROCESS_RSS_SPREAD = 0.055


def _chunk(nbytes: int) -> int:
    return max(32, -(-(nbytes + _CHUNK_OVERHEAD) // _CHUNK_ALIGN) * _CHUNK_ALIGN)


@dataclass
class GlibcHeap:
    """glibc ``malloc`` of one arena, reduced to what decides the resident set (module doc).

    ``alloc(key, n)`` / ``free(key)``; ``resident`` is the heap's extent plus live mmapped
    chunks, ``peak`` its high-water mark. Freed heap chunks are reused best-fit and coalesced
    with free neighbours; a free top longer than the trim threshold is given back.

    >>> h = GlibcHeap()
    >>> h.alloc("a", 2**20); h.free("a")   # 1 MiB: mmapped; freeing it raises the threshold
    >>> h.threshold > 2**20, h.resident
    (True, 0)
    >>> h.alloc("b", 2**20); h.free("b")   # the same request now comes from the heap...
    >>> h.resident > 2**20                 # ...and stays resident (shorter than the trim)
    True
    """

    threshold: int = MMAP_THRESHOLD_MIN
    heap_end: int = 0
    mmapped: int = 0
    peak: int = 0
    _free: list = field(default_factory=list)
    """Free heap chunks as sorted ``[address, size]`` (the top chunk is not among them)."""
    _live: dict = field(default_factory=dict)
    """key -> (address or -1 for mmapped, chunk size)."""

    @property
    def trim_threshold(self) -> int:
        return 2 * self.threshold

    @property
    def resident(self) -> int:
        return self.heap_end + self.mmapped

    def alloc(self, key, nbytes: int) -> None:
        """``posix_memalign(64, nbytes)``: a free chunk or the top must hold ``nb + 96``."""
        nb = _chunk(int(nbytes))
        request = nb + _ALIGNMENT + _MINSIZE
        best = None
        for i, (_, free_size) in enumerate(self._free):
            if free_size >= request and (best is None or free_size < self._free[best][1]):
                best = i
        if best is not None:
            addr, free_size = self._free.pop(best)
            self._carve(key, addr, free_size, nb)
        elif request >= self.threshold:
            size = -(-(request + _CHUNK_OVERHEAD) // _PAGE) * _PAGE   # whole pages
            self.mmapped += size
            self._live[key] = (-1, size)
        else:   # from the top chunk (a free tail is part of it), extended as needed
            addr = self.heap_end
            if self._free and sum(self._free[-1]) == self.heap_end:
                addr = self._free.pop()[0]
            self.heap_end = max(self.heap_end, addr + request)
            self._carve(key, addr, request, nb)
        self.peak = max(self.peak, self.resident)

    def _carve(self, key, addr: int, region: int, nb: int) -> None:
        """Place an ``nb`` chunk whose user pointer (chunk + 16) is 64-byte aligned in the
        region ``[addr, addr + region)``; give the leading and trailing pieces back (glibc
        frees them; coalescing them at once is a simplification: small ones go to the thread
        cache first)."""
        start = addr
        if (start + 16) % _ALIGNMENT:
            start = addr + (-(addr + 16) % _ALIGNMENT)
            if start - addr < _MINSIZE:
                start += _ALIGNMENT
        end = start + nb
        if addr + region - end < _MINSIZE:   # too small to split off: part of the chunk
            end = addr + region
        self._live[key] = (start, end - start)
        if start > addr:
            self._release(addr, start - addr)
        if addr + region > end:
            self._release(end, addr + region - end)

    def free(self, key) -> None:
        entry = self._live.pop(key, None)
        if entry is None:
            return
        addr, size = entry
        if addr < 0:
            self.mmapped -= size
            if self.threshold < size <= MMAP_THRESHOLD_MAX:
                self.threshold = size  # glibc's dynamic threshold (trim threshold = 2x)
            return
        self._release(addr, size)

    def _release(self, addr: int, size: int) -> None:
        """Return ``[addr, addr + size)`` to the free list, coalesced with free neighbours; a
        free top longer than the trim threshold is given back to the system."""
        i = bisect.bisect_left(self._free, [addr, 0])
        if i < len(self._free) and self._free[i][0] == addr + size:    # merge the next one
            size += self._free.pop(i)[1]
        if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == addr:  # and the previous
            addr, size = self._free[i - 1][0], self._free[i - 1][1] + size
            self._free.pop(i - 1)
            i -= 1
        if addr + size == self.heap_end and size >= self.trim_threshold:
            self.heap_end = addr   # joins the top: trimmed past the threshold
            return
        self._free.insert(i, [addr, size])


def replay_steps(events, *, num_steps: int = 2, persistent_after_first=(),
                 update_temporaries=()) -> tuple[int, int]:
    """(resident peak, live-bytes peak) of ``num_steps`` steps of ``events`` through a fresh
    :class:`GlibcHeap`.

    ``events``: one step's ``(key, nbytes)`` in order, ``nbytes > 0`` an allocation and
    ``nbytes <= 0`` the free of ``key``. Keys ``("native", ...)`` are a native library's own
    buffers (:func:`aiadvisor.profiler.recorder.native_transients`): they take heap but are not
    among the live tensor bytes. After the step's events comes the optimizer, while the
    gradients are still live: in the first step it allocates ``persistent_after_first`` (its
    state, kept), then in every step each parameter's update makes the temporaries of one tuple
    of ``update_temporaries`` and frees them (Adam's ``exp_avg_sq.sqrt() / bias_correction``:
    two of the parameter's size). Whatever is still live at the end of a step is freed then
    (outputs, gradients at ``zero_grad``)."""
    run = _cpu_steps(GlibcHeap(), events, num_steps, persistent_after_first,
                     update_temporaries)
    return run.heap.peak, run.peak_live


def allocation_stream(events, *, num_steps: int = 2, persistent_after_first=(),
                      update_temporaries=()) -> tuple[list[int], int]:
    """The requests :func:`replay_steps` makes, for a real allocator to replay
    (:mod:`aiadvisor.profiler.heap_replay`): ``[id, nbytes, id, nbytes, ...]`` in order, each
    allocation ``nbytes > 0`` under a small integer ``id``, each free ``nbytes == 0``; and the
    live-bytes peak of the same steps.

    >>> allocation_stream([("a", 100), ("b", 200), ("a", 0)], num_steps=1)
    ([0, 100, 1, 200, 0, 0, 1, 0], 300)
    """
    run = _cpu_steps(AllocationLog(), events, num_steps, persistent_after_first,
                     update_temporaries)
    return run.heap.stream, run.peak_live


@dataclass
class AllocationLog:
    """An allocator that only writes down its requests (see :func:`allocation_stream`)."""

    stream: list = field(default_factory=list)
    _ids: dict = field(default_factory=dict)
    _next: int = 0

    def alloc(self, key, nbytes: int) -> None:
        self._ids[key] = self._next
        self.stream += [self._next, int(nbytes)]
        self._next += 1

    def free(self, key) -> None:
        self.stream += [self._ids.pop(key), 0]


def _cpu_steps(heap, events, num_steps: int, persistent_after_first, update_temporaries
               ) -> _Replay:
    """:func:`replay_steps`'s steps through ``heap``: the events, the first step's optimizer
    state, each parameter's update temporaries, then what the step left live is freed."""
    run = _Replay(heap)
    for step in range(num_steps):
        run.step_events(step, events, native="uncounted")
        if step == 0:
            for i, nbytes in enumerate(persistent_after_first):
                run.alloc(("state", i), nbytes)
        for i, group in enumerate(update_temporaries):
            run.transient([((step, "update", i, j), n) for j, n in enumerate(group)])
        run.end_step(step)
    return run


def _is_native(key) -> bool:
    return isinstance(key, tuple) and key[:1] == ("native",)


class _Replay:
    """A step's allocations and frees through an allocator model (``heap``: ``alloc(key, n)``,
    ``free(key)``), with the live bytes beside it, whose peak is the ratio's denominator."""

    def __init__(self, heap) -> None:
        self.heap = heap
        self.live = self.peak_live = 0
        self.sizes: dict = {}

    def alloc(self, key, nbytes: int, counted: bool = True) -> None:
        self.heap.alloc(key, nbytes)
        self.sizes[key] = nbytes if counted else 0
        self.live += self.sizes[key]
        self.peak_live = max(self.peak_live, self.live)

    def free(self, key) -> None:
        self.heap.free(key)
        self.live -= self.sizes.pop(key)

    def step_events(self, step: int, events, *, native: str) -> None:
        """One step's ``events`` (keys made ``(step, key)``). A native library's buffers are
        allocated but not counted live (``native="uncounted"``: they take the CPU heap) or
        left out (``"skip"``: not on a GPU)."""
        for key, nbytes in events:
            if native == "skip" and _is_native(key):
                continue
            k = (step, key)
            if nbytes > 0:
                self.alloc(k, nbytes, counted=not _is_native(key))
            elif k in self.sizes:
                self.free(k)

    def transient(self, items) -> None:
        """Allocate ``(key, nbytes)`` items together, then free them."""
        for key, nbytes in items:
            self.alloc(key, nbytes)
        for key, _ in items:
            self.free(key)

    def end_step(self, step: int) -> None:
        """Free what the step left live (outputs, gradients at ``zero_grad``)."""
        for key in [k for k in self.sizes if k[0] == step]:
            self.free(key)


def cuda_request_bytes(nbytes: int) -> int:
    """A request of ``nbytes`` as the caching allocator sizes it (``round_size``): at least
    512 B, rounded up to a multiple of 512 B.

    >>> cuda_request_bytes(1), cuda_request_bytes(513), cuda_request_bytes(2**20)
    (512, 1024, 1048576)
    """
    return -(-max(int(nbytes), 1) // CUDA_MIN_BLOCK) * CUDA_MIN_BLOCK


def cuda_segment_bytes(block: int) -> int:
    """Bytes of the segment ``cudaMalloc`` gets for a block of ``block`` bytes that no cached
    block holds (``get_allocation_size``): 2 MiB for the small pool (blocks up to 1 MiB),
    20 MiB for blocks under 10 MiB, else the block rounded up to 2 MiB.

    >>> [cuda_segment_bytes(b) // MiB for b in (512, 3 * MiB, 11 * MiB + 512)]
    [2, 20, 12]
    """
    if block <= CUDA_SMALL_SIZE:
        return CUDA_SMALL_BUFFER
    if block < CUDA_MIN_LARGE_ALLOC:
        return CUDA_LARGE_BUFFER
    return -(-block // CUDA_ROUND_LARGE) * CUDA_ROUND_LARGE


@dataclass
class CudaCachingAllocator:
    """PyTorch's CUDA caching allocator (``c10/cuda/CUDACachingAllocator.cpp``, default
    configuration, one stream) reduced to what decides ``torch.cuda.max_memory_reserved()``.

    A request is rounded up to 512 B (:func:`cuda_request_bytes`). It takes the smallest cached
    free block of its pool (small: up to 1 MiB; large: the rest) that fits
    (``get_free_block``), else a new segment (:func:`cuda_segment_bytes`). A block larger
    than the request is split when what remains is at least 512 B (small pool) or more than
    1 MiB (large pool; ``should_split``), the rest staying a free block of the same segment; a
    freed block merges with free neighbours of its segment. Segments are never given back (no
    ``empty_cache``): ``reserved`` only grows.

    Three 9 MiB requests take two 20 MiB segments (two share one, the 2 MiB left is a free
    block); freeing the first two merges them back into the segment's 20 MiB:

    >>> a = CudaCachingAllocator()
    >>> for k in "xyz":
    ...     a.alloc(k, 9 * MiB)
    >>> a.reserved // MiB, a.allocated // MiB
    (40, 27)
    >>> a.free("x"); a.free("y"); a.alloc("w", 18 * MiB)   # fits the merged 20 MiB
    >>> a.reserved // MiB
    40
    """

    reserved: int = 0
    peak_reserved: int = 0
    allocated: int = 0
    _next_segment: int = 0
    _free: dict = field(default_factory=lambda: {"small": [], "large": []})
    """Per pool, cached free blocks as sorted ``(size, segment, offset)``."""
    _segments: dict = field(default_factory=dict)
    """segment -> {offset: [size, free]}; offsets kept sorted in ``_offsets``."""
    _offsets: dict = field(default_factory=dict)
    _live: dict = field(default_factory=dict)
    """key -> (pool, segment, offset)."""

    @staticmethod
    def _pool(size: int) -> str:
        return "small" if size <= CUDA_SMALL_SIZE else "large"

    @staticmethod
    def _splits(pool: str, remaining: int) -> bool:
        return remaining >= CUDA_MIN_BLOCK if pool == "small" else remaining > CUDA_SMALL_SIZE

    def alloc(self, key, nbytes: int) -> None:
        size = cuda_request_bytes(nbytes)
        pool = self._pool(size)
        free = self._free[pool]
        i = bisect.bisect_left(free, (size, -1, -1))
        if i < len(free):
            block_size, seg, off = free.pop(i)
        else:
            seg, off, block_size = self._next_segment, 0, cuda_segment_bytes(size)
            self._next_segment += 1
            self._segments[seg] = {0: [block_size, True]}
            self._offsets[seg] = [0]
            self.reserved += block_size
            self.peak_reserved = max(self.peak_reserved, self.reserved)
        blocks = self._segments[seg]
        if self._splits(pool, block_size - size):
            blocks[off] = [size, False]
            rest = off + size
            blocks[rest] = [block_size - size, True]
            bisect.insort(self._offsets[seg], rest)
            bisect.insort(free, (block_size - size, seg, rest))
        else:
            blocks[off][1] = False
            size = block_size
        self._live[key] = (pool, seg, off)
        self.allocated += size

    def free(self, key) -> None:
        pool, seg, off = self._live.pop(key)
        blocks, offsets, free = self._segments[seg], self._offsets[seg], self._free[pool]
        size = blocks[off][0]
        self.allocated -= size
        i = bisect.bisect_left(offsets, off)
        if i + 1 < len(offsets) and blocks[offsets[i + 1]][1]:   # merge the next free block
            nxt = offsets.pop(i + 1)
            free.remove((blocks[nxt][0], seg, nxt))
            size += blocks.pop(nxt)[0]
        if i > 0 and blocks[offsets[i - 1]][1]:                  # and the previous one
            prev = offsets[i - 1]
            free.remove((blocks[prev][0], seg, prev))
            size += blocks[prev][0]
            blocks.pop(offsets.pop(i))
            off = prev
        blocks[off] = [size, True]
        bisect.insort(free, (size, seg, off))


def replay_cuda_steps(events, *, weights=(), num_steps: int = 3, persistent_after_first=(),
                      step_temporaries=()) -> tuple[int, int]:
    """(peak reserved, peak live bytes) of ``num_steps`` steps of ``events`` through a fresh
    :class:`CudaCachingAllocator`, after ``weights`` (each parameter and buffer, in order: the
    model moved to the device). Per step: the events (as :func:`replay_steps` takes them;
    native CPU library buffers are skipped), then the first step's optimizer state
    (``persistent_after_first``, kept), then ``step_temporaries`` all at once and freed
    together (the foreach update's list), then whatever the step left live is freed (outputs,
    gradients at ``zero_grad``)."""
    run = _Replay(CudaCachingAllocator())
    for i, nbytes in enumerate(weights):
        if nbytes > 0:
            run.alloc(("weight", i), nbytes)
    for step in range(num_steps):
        run.step_events(step, events, native="skip")
        if step == 0:
            for i, nbytes in enumerate(persistent_after_first):
                run.alloc(("state", i), nbytes)
        run.transient([((step, "update", i), n) for i, n in enumerate(step_temporaries)])
        run.end_step(step)
    return run.heap.peak_reserved, run.peak_live


@dataclass(frozen=True)
class ProcessEstimate:
    """What the process shows at the step's peak (see the module doc); ``None`` where unknown."""

    process_bytes: int | None
    label: str
    cuda_reserved_bytes: int
    process_low_bytes: int | None = None
    process_high_bytes: int | None = None
    """P10-P90 band of ``process_bytes`` (CPU): from a heap that keeps nothing beyond the live
    tensors to one that also keeps a second copy of the step's other tensors (native library
    workspaces and thread arenas are not replayed)."""


def process_estimate(facts: dict, *, mode: str, peak_bytes: int, weights_bytes: int,
                     inputs_bytes: int, fused_attention_saving_bytes: int = 0,
                     cuda_peak_bytes: int | None = None) -> ProcessEstimate:
    """From the profile-time facts (:func:`aiadvisor.profiler.process.facts`) and the
    allocator-level peak: the CPU resident set, or for a model on a CUDA device
    ``torch.cuda.max_memory_reserved()``; and the reserved figure of the same step on a GPU.

    CPU: the resident set now, less the model's own tensors already in it, plus weights and
    inputs, plus the step's other tensors times the replayed heap's resident-to-live ratio,
    plus :data:`FIRST_STEP_RESIDENT_BYTES`. CUDA: the peak times the reserved-to-live ratio of
    :func:`replay_cuda_steps` (``cuda_reserved_ratio``: block rounding, segment slack and
    fragmentation) and, with GEMMs, the cuBLAS workspace; a CUDA
    device runs ``scaled_dot_product_attention`` as a fused kernel, so the ``T x T`` tensors a
    CPU or meta trace's math path saved for backward (``fused_attention_saving_bytes``) are
    not in its peak. ``cuda_peak_bytes``, where given, is that CUDA peak already (the profile's,
    with the foreach optimizer's temporaries).

    >>> f = {"device": "cpu", "rss_bytes": 500 * MiB, "resident_model_bytes": 100 * MiB,
    ...      "heap_ratio": 1.5, "cuda_reserved_ratio": 1.0, "cuda_gemms": False}
    >>> e = process_estimate(f, mode="infer", peak_bytes=300 * MiB, weights_bytes=100 * MiB,
    ...                      inputs_bytes=0)
    >>> e.process_bytes // MiB    # 500 - 100 + 100 + 200 x 1.5 + 2
    802
    """
    cuda_peak = cuda_peak_bytes if cuda_peak_bytes is not None else max(
        peak_bytes - fused_attention_saving_bytes, 0)
    reserved = int(cuda_peak * facts.get("cuda_reserved_ratio", 1.0))
    if facts.get("cuda_gemms"):
        reserved += CUBLAS_WORKSPACE_BYTES["other"]
    device = str(facts.get("device", "cpu"))
    if device.startswith("cuda"):
        return ProcessEstimate(
            process_bytes=reserved,
            label=("torch.cuda.max_memory_reserved() over the step (estimated): the peak "
                   "times the reserved-to-live ratio of three steps replayed through the caching "
                   "allocator's policy (block rounding, 2/20 MiB segments, best fit, splitting; "
                   "one traced block stands for all), plus the cuBLAS workspace. nvidia-smi shows "
                   f"about {CUDA_CONTEXT_BYTES // MiB} MiB more (CUDA context, published "
                   "figures)."),
            cuda_reserved_bytes=reserved)
    rss = facts.get("rss_bytes")
    if rss is None or device != "cpu":
        return ProcessEstimate(process_bytes=None, label="", cuda_reserved_bytes=reserved)
    base = rss - facts.get("resident_model_bytes", 0)
    transient = max(0, peak_bytes - weights_bytes - inputs_bytes)
    ratio = facts.get("heap_ratio", 1.0)
    first = FIRST_STEP_RESIDENT_BYTES["train" if mode == "train" else "infer"]
    library = facts.get("library_bytes") or 0
    fixed = base + weights_bytes + inputs_bytes
    total = fixed + transient * ratio + first + library
    label = (f"CPU resident set (RSS) at the step's peak (estimated), not allocator bytes: "
             f"{base / MiB:.0f} MiB the process held without the model's tensors when profiled "
             f"(measured), weights and inputs, the step's other tensors x {ratio:.2f} (the glibc "
             "heap they and oneDNN's reorder buffers leave resident, "
             + ("replayed through this machine's glibc malloc in a child process), "
                if facts.get("heap_replay") == "glibc"
                else "replayed through a model of glibc's policy), ")
             + f"{library / MiB:.0f} MiB that the BLAS/oneDNN libraries added when this process "
             "ran the model's largest GEMM once (measured at profile time), and the first "
             f"step's runtime pages ({first / MiB:.0f} MiB, measured once on the development "
             "CPU); assumes no optimizer state is resident yet.")
    low = min(fixed + transient + (first + library) / 2, total * (1 - PROCESS_RSS_SPREAD))
    high = max(fixed + transient * (ratio + 1) + first + library,
               total * (1 + PROCESS_RSS_SPREAD))
    return ProcessEstimate(
        process_bytes=int(total), label=label, cuda_reserved_bytes=reserved,
        process_low_bytes=int(low), process_high_bytes=int(high))
