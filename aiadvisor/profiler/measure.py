"""``profile(..., measure=True)``: time real steps on the model's device and record the real
peak memory, on copies of the parameters, buffers and inputs, so the user's model (weights,
``.grad``, BatchNorm statistics, flags) and tensors are untouched; the RNG state is restored by
the caller."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import sys
import time

import torch
from torch.func import functional_call

from ..schema import ModelProfile
from .trace import (
    AUTOCAST_DTYPES,
    _modes,
    _real_inputs_full,
    _stand_ins,
    model_device,
    reduce_output,
)

OPTIMIZER_CLASSES = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-3),
    "sgd": lambda ps: torch.optim.SGD(ps, lr=1e-3),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=1e-3, momentum=0.9),
}


@contextlib.contextmanager
def _stderr_silenced():
    """File descriptor 2 points at /dev/null inside the block (C++ logging included)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real descriptor 2 (embedded interpreters)
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def cpu_peak_bytes(fn) -> tuple[int, object]:
    """Peak bytes allocated by PyTorch's CPU allocator while ``fn()`` runs, from the profiler's
    allocation events (each carries its signed size), and ``fn``'s result."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    prof = torch_profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    # Kineto writes a "profiler_start"/"profiler_stop" trace line to file descriptor 2 (which a
    # notebook shows under the cell); only those two calls are silenced, never ``fn``.
    with _stderr_silenced():
        prof.start()
    try:
        result = fn()
    finally:
        with _stderr_silenced():
            prof.stop()
    sizes = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.tag == _EventType.Allocation and str(node.extra_fields.device) == "cpu":
            sizes.append((node.start_time_ns, node.extra_fields.alloc_size))
    current = peak = 0
    for _, size in sorted(sizes):
        current += size
        peak = max(peak, current)
    return peak, result


def _step_fn(model, spec, *, mode: str, optimizer: str, precision: str, device: torch.device):
    """A closure running one step on fresh copies of everything; returns nothing."""
    train = mode == "train"
    half = AUTOCAST_DTYPES.get(precision)
    # As in the trace: autocast for training, the model itself in 16 bits for inference.
    dtype = half if train else None
    float_dtype = None if train else half

    def autocast():
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=dtype)

    def run_once(state):
        mapping, _trainable, args, kwargs, opt = state
        if train:
            with autocast():
                out = functional_call(model, mapping, args, kwargs, tie_weights=True, strict=False)
                loss = reduce_output(out)
            loss.backward()
            if opt is not None:
                opt.step()
                opt.zero_grad(set_to_none=True)
        else:
            with torch.no_grad(), autocast():
                functional_call(model, mapping, args, kwargs, tie_weights=True, strict=False)

    def make_state():
        mapping, trainable, _ = _stand_ins(model, path="real", device=device, train=train,
                                           float_dtype=float_dtype)
        args, kwargs = _real_inputs_full(spec, device, float_dtype)
        opt = OPTIMIZER_CLASSES[optimizer](trainable) if train and optimizer in OPTIMIZER_CLASSES \
            else None
        return mapping, trainable, args, kwargs, opt

    return make_state, run_once


def measure_step(model, spec, prof: ModelProfile, *, mode: str, optimizer: str, precision: str,
                 num_steps: int = 5) -> ModelProfile:
    """Median wall time of ``num_steps`` real steps after two warm-up steps, and the peak memory
    of a steady-state training step (copies of the weights included; the second step, when the
    optimizer state exists), on the model's own device."""
    device = model_device(model)
    if device.type == "meta":
        return dataclasses.replace(prof, notes=prof.notes + (
            "measure=True skipped: the model is on the meta device (no real weights)",))
    make_state, run_once = _step_fn(model, spec, mode=mode, optimizer=optimizer,
                                    precision=precision, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    with _modes(model, mode == "train"):
        model.train(mode == "train")
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
            state = make_state()
            run_once(state)
            run_once(state)  # the steady state: optimizer state resident from step 2 on
            sync()
            peak = torch.cuda.max_memory_allocated(device) - base
        else:
            def two_steps():  # the steady state: optimizer state resident from step 2 on
                s = make_state()
                run_once(s)
                run_once(s)
                return s

            peak, state = cpu_peak_bytes(two_steps)
        times = []
        for _ in range(max(1, num_steps)):
            sync()
            t0 = time.perf_counter()
            run_once(state)
            sync()
            times.append(time.perf_counter() - t0)
        del state
    return dataclasses.replace(prof, measured_step_time_s=statistics.median(times),
                               measured_peak_bytes=int(peak))
