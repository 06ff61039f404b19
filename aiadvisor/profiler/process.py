"""What the process will show for the profiled step (see
:mod:`aiadvisor.estimate.process_memory`): the facts measured or replayed at profile time.

Measured here, at the edge: the process's resident set now (``psutil``), and how much of it is
the model's own tensors (its CPU parameters, buffers, gradients and the example inputs, which
the step's peak counts again). Replayed: the step's allocations and frees through this
machine's glibc in a child process, or through a model of glibc's policy where that cannot
run (CPU), and through the CUDA caching allocator's policy (GPU).
:func:`~aiadvisor.estimate.process_memory.process_estimate` turns these and the profile's
allocator-level peak into ``memory.process_bytes``.
"""

from __future__ import annotations

from typing import Any

from ..estimate import process_memory as pm
from ..units import UNFUSED_OPTIMIZER_TEMPORARIES
from .heap_replay import glibc_replay

#: Optimizer state tensors per parameter (torch.optim: Adam/AdamW exp_avg and exp_avg_sq,
#: SGD with momentum its momentum buffer).
_STATE_TENSORS = {"adamw": 2, "adam": 2, "sgd_momentum": 1, "sgd": 0, "none": 0}


def _resident_rss() -> int | None:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:  # noqa: BLE001 - no psutil or no /proc: no process figure
        return None


def _cpu_bytes(tensors) -> int:
    """Bytes of the distinct real CPU storages among ``tensors`` (meta/fake ones hold none)."""
    from torch._subclasses.fake_tensor import FakeTensor

    seen, total = set(), 0
    for t in tensors:
        if t is None or t.device.type != "cpu" or isinstance(t, FakeTensor):
            continue
        st = t.untyped_storage()
        if st.data_ptr() in seen:
            continue
        seen.add(st.data_ptr())
        total += st.nbytes()
    return total


def facts(model, spec, result, *, mode: str, optimizer: str, device: str) -> dict[str, Any]:
    """Process facts of the first trace (a plain dict, kept in the profile's static part)."""
    import torch
    from torch.utils._pytree import tree_flatten

    params = list(model.parameters())
    sizes = [p.numel() * p.element_size() for p in params if p.requires_grad]
    state = [s for s in sizes for _ in range(_STATE_TENSORS.get(optimizer, 0))] \
        if mode == "train" else []
    # The for-loop step's temporaries per parameter tensor (Adam/AdamW: two of its size).
    temporaries = [(s,) * UNFUSED_OPTIMIZER_TEMPORARIES.get(optimizer, 0) for s in sizes] \
        if mode == "train" else []
    heap_peak, live_peak, heap_replay = _heap_peak(result.alloc_events, device, state,
                                                   temporaries)
    inputs = [t for t in tree_flatten((spec.args, spec.kwargs))[0] if isinstance(t, torch.Tensor)]
    resident = _cpu_bytes([*params, *model.buffers(), *inputs, *(p.grad for p in params)])
    rss = _resident_rss()   # before the probe, which adds to it what it measures
    convs = any(agg.op_class == "conv" for agg in result.aggs.values())
    library = _library_probe(result.largest_gemm, convs) if device == "cpu" and resident \
        and rss is not None else None
    # CUDA: the weights moved to the device, then three steps through the caching allocator,
    # with the foreach optimizer's list of square roots (Adam/AdamW) at each update.
    weights = [t.numel() * t.element_size() for t in [*params, *model.buffers()]]
    foreach = sizes if mode == "train" and optimizer in ("adam", "adamw") else []
    reserved, live = pm.replay_cuda_steps(result.alloc_events, weights=weights,
                                          persistent_after_first=state,
                                          step_temporaries=foreach)
    gemms = any(agg.op_class in ("gemm", "attention") for agg in result.aggs.values())
    return {
        "device": device, "rss_bytes": rss, "resident_model_bytes": resident,
        "library_bytes": library,
        "heap_ratio": heap_peak / live_peak if live_peak else 1.0, "heap_replay": heap_replay,
        "cuda_reserved_ratio": reserved / live if live else 1.0, "cuda_gemms": gemms,
        "had_grads": any(p.grad is not None for p in params),
    }


def _heap_peak(events, device: str, state, temporaries) -> tuple[int, int, str]:
    """(resident peak, live peak, how it was found) of two steps of the CPU heap: through
    this machine's glibc (:func:`~aiadvisor.profiler.heap_replay.glibc_replay`, ``"glibc"``)
    for a step on the CPU where it can run, else through the policy model
    (:func:`~aiadvisor.estimate.process_memory.replay_steps`, ``"model"``)."""
    if device == "cpu":
        stream, live_peak = pm.allocation_stream(events, persistent_after_first=state,
                                                 update_temporaries=temporaries)
        peak = glibc_replay(stream, live_peak)
        if peak is not None:
            return peak, live_peak, "glibc"
    heap_peak, live_peak = pm.replay_steps(events, persistent_after_first=state,
                                           update_temporaries=temporaries)
    return heap_peak, live_peak, "model"


#: The probe's GEMM: at most this many rows (the BLAS library's packing buffers are sized by
#: its blocking, not by M beyond a few hundred rows) and this many bytes of right-hand operand.
_PROBE_MAX_ROWS = 512
_PROBE_MAX_BYTES = 256 * pm.MiB


def _library_probe(gemm: tuple, convs: bool) -> int | None:
    """Resident bytes the native libraries add the first time this process runs the model's
    largest GEMM (and, with convolutions, a small oneDNN convolution), measured: the resident
    set before and after the call, with every tensor it touches allocated and touched before.

    What it sees: the BLAS library's packing buffers, which MKL keeps for reuse (on the
    development CPU, F.linear of 512 x 768 by 50257 x 768 left 33 MiB mapped after it returned;
    512 x 768 by 768 x 768 10 MiB), and the library code paged in (3-8 MiB). In a process that
    already ran these kernels it measures about nothing: they are in the resident set already.
    Uses no random numbers and touches no model tensor. ``None`` where it cannot measure."""
    import torch

    if _resident_rss() is None:
        return None
    grown = 0
    with torch.no_grad():
        if len(gemm) == 3:
            rows, k, n = gemm
            rows = max(1, min(rows, _PROBE_MAX_ROWS))
            n = max(1, min(n, _PROBE_MAX_BYTES // (4 * max(k, 1))))
            a, w, bias = torch.zeros(rows, k), torch.zeros(n, k), torch.zeros(n)
            before = _resident_rss()
            out = torch.nn.functional.linear(a, w, bias)   # as nn.Linear calls it (addmm)
            grown += max(0, _resident_rss() - before - out.untyped_storage().nbytes())
            del a, w, bias, out
        if convs:
            x, c = torch.zeros(1, 64, 8, 8), torch.zeros(64, 64, 3, 3)
            before = _resident_rss()
            torch.nn.functional.conv2d(x, c, padding=1)
            grown += max(0, _resident_rss() - before)
    return grown
