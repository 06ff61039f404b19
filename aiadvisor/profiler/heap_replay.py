"""The step's CPU allocations replayed through this machine's own ``malloc`` (glibc on Linux).

How much of a freed heap stays resident depends on where glibc places each chunk: its bins,
thread cache, "last remainder" and the dynamic mmap threshold.
:class:`~aiadvisor.estimate.process_memory.GlibcHeap` models the policy (best fit, coalescing,
top trimming); the library itself is on the machine, so where it can, the profile asks it. A
child process (a bare Python: no torch, nothing of the user's process touched) makes the same
requests in the same order, ``posix_memalign(64, n)`` as PyTorch's CPU allocator does, and
reads glibc's own account after each allocation (``mallinfo2``: the main arena's extent plus
the mmapped chunks). A kernel writes every byte of its output, so every page of that extent
has been touched: it is what the resident set holds of the heap (on the development CPU the
same replay writing every byte and reading ``/proc/self/statm`` gave the same figure).

Where each chunk lands also depends on what the heap holds before the step, which no profile
can know: the same stream peaked anywhere from 110 to 288 MiB (ResNet-50 inference at batch 8,
86 MiB live) depending on a few small chunks already allocated, and fresh processes running the
real step differ as much (bench/profile_memory.py: 623 to 696 MiB in six of them). So the child
replays the stream from :data:`REPLAYS` starting states, each holding a seeded random number
(0 to 39) of chunks of 16 B to 128 KiB, one forked process each, and the profile takes the
mean peak (the peaks take a few discrete values: a median of 16 to 64 of them jumped between
1.71 and 2.00 times the live bytes for ResNet-50 inference, the mean stayed at 1.95-1.99 from
32 on). On the development CPU, against the same measured resident sets, this moved 11 of the
12 cases of ``bench/profile_memory.py --rss`` toward them (ResNet-50 inference -7.1 % ->
+1.5 %, training -13.1 % -> -10.2 %; LSTM training, held out, +7.3 % -> +8.5 %). Still short:
training steps. In a recorded malloc stream of ResNet-50 training (``scripts/heap_trace``),
about 4,600 requests under 1 KiB a step (1.3 MB in all: autograd's bookkeeping and the like,
each living for a quarter to most of a step) pin holes between the activations: replayed
without them, the heap peaks 205 MiB lower. Adding 26 such requests to each traced forward
op, freed last-in first-out over the backward, did not reproduce it (-0.9 % in the replay).

Elsewhere (macOS, musl, Windows, a glibc older than 2.33 without ``mallinfo2``), for a stream
whose live bytes exceed the machine's memory, or when the child fails, the profile falls back
to the model.
"""

from __future__ import annotations

import array
import os
import platform
import statistics
import subprocess
import sys

#: Starting states the stream is replayed from (forked children of one process).
REPLAYS = 32
#: Seconds the child may take for all of them (ResNet-50's training stream: 0.3 s here).
REPLAY_TIMEOUT_S = 60.0

_CHILD = r"""
import array, ctypes, os, random, sys
libc = ctypes.CDLL("libc.so.6")
memalign = libc.posix_memalign
memalign.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_size_t]
free = libc.free
free.argtypes = [ctypes.c_void_p]
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]
libc.mallinfo2.restype = MallInfo2
def extent():
    info = libc.mallinfo2()
    return info.arena + info.hblkhd
stream = array.array("q")
stream.frombytes(sys.stdin.buffer.read())
def replay(seed):
    rng = random.Random(seed)
    ptr = ctypes.c_void_p()
    for _ in range(rng.randrange(40)):
        size = rng.choice((rng.randrange(16, 1024), rng.randrange(1024, 131072)))
        if memalign(ctypes.byref(ptr), 64, size):
            return -1
    base = peak = extent()
    live = {}
    for i in range(0, len(stream), 2):
        key, nbytes = stream[i], stream[i + 1]
        if nbytes > 0:
            if memalign(ctypes.byref(ptr), 64, nbytes):
                return -1
            live[key] = ptr.value
            peak = max(peak, extent())
        else:
            free(live.pop(key))
    return peak - base
for seed in range(int(sys.argv[1])):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.write(write, str(replay(seed)).encode())
        os._exit(0)
    os.close(write)
    print(int(os.read(read, 64) or b"-1"), flush=True)
    os.close(read)
    os.waitpid(pid, 0)
"""


def glibc_available() -> bool:
    """Whether this process runs on Linux with glibc 2.33 or newer (``mallinfo2``)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    lib, version = platform.libc_ver()
    try:
        return lib == "glibc" and tuple(int(v) for v in version.split(".")[:2]) >= (2, 33)
    except ValueError:
        return False


def _memory_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # noqa: BLE001 - no psutil: no limit from it
        return None


def glibc_replays(stream: list[int], live_peak: int, *, replays: int = REPLAYS
                  ) -> list[int] | None:
    """Heap high-water marks (bytes above each replay's start, sorted) of ``stream``
    (:func:`~aiadvisor.estimate.process_memory.allocation_stream`) through glibc ``malloc``
    from ``replays`` starting states; None where it cannot run (module doc)."""
    memory = _memory_bytes()
    if not stream or not sys.executable or not glibc_available() \
            or (memory is not None and live_peak > memory):
        return None
    try:
        done = subprocess.run([sys.executable, "-S", "-c", _CHILD, str(replays)],
                              input=array.array("q", stream).tobytes(), capture_output=True,
                              timeout=REPLAY_TIMEOUT_S, check=True)
        peaks = sorted(int(line) for line in done.stdout.split())
    except Exception:  # noqa: BLE001 - any failure of the child: the profile uses the model
        return None
    return peaks if len(peaks) == replays and peaks[0] >= 0 else None


def glibc_replay(stream: list[int], live_peak: int) -> int | None:
    """The mean of :func:`glibc_replays` (None where it cannot run)."""
    peaks = glibc_replays(stream, live_peak)
    return None if peaks is None else int(statistics.fmean(peaks))
