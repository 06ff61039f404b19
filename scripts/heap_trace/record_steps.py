"""Two user-style steps of one of ``bench/profile_memory.py``'s resident-set cases, with a marker
allocation before them, for ``interpose.c`` to record (see its header):

    MTRACE_FILE=trace.bin LD_PRELOAD=$PWD/interpose.so .venv/bin/python \\
        scripts/heap_trace/record_steps.py resnet50 train
    ./replay trace.bin

Prints glibc's heap extent (``mallinfo2``: arena + mmapped) and in-use bytes before and after
each step.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

MARKER_BYTES = 12345679  # replay.c's MARKER_BYTES


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _heap() -> str:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    m = libc.mallinfo2()
    return (f"extent {(m.arena + m.hblkhd) / 2**20:.1f} MiB, "
            f"in use {(m.uordblks + m.hblkhd) / 2**20:.1f} MiB")


def main() -> None:
    from profile_memory import _rss_model, first_float

    case, mode = sys.argv[1], sys.argv[2]
    model, x = _rss_model(case)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    print("before:", _heap(), flush=True)
    marker = torch.empty(MARKER_BYTES, dtype=torch.uint8)  # through posix_memalign
    del marker
    for step in range(2):
        if mode == "train":
            first_float(model(x)).sum().backward()
            opt.step()
            opt.zero_grad()
        else:
            with torch.no_grad():
                first_float(model(x))
        print(f"after step {step}:", _heap(), flush=True)


if __name__ == "__main__":
    main()
