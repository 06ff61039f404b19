"""The CPU heap replayed through this machine's glibc (aiadvisor.profiler.heap_replay)."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa
from aiadvisor.estimate import process_memory as pm
from aiadvisor.profiler import heap_replay, process

MiB = 2**20

needs_glibc = pytest.mark.skipif(not heap_replay.glibc_available(),
                                 reason="replays through glibc >= 2.33 on Linux only")


def test_allocation_stream_is_the_model_replays_requests_in_order():
    # Step 0: the activation (id 0), the optimizer state after it (id 1, kept), the step's
    # end frees the activation; step 1: the activation again (id 2), freed at its end.
    stream, live = pm.allocation_stream([("x", 100), ], persistent_after_first=[50])
    assert stream == [0, 100, 1, 50, 0, 0, 2, 100, 2, 0]
    assert live == 150


@needs_glibc
def test_two_8_mib_activations_peak_at_16_mib_through_glibc():
    # Step 0 mmaps both (>= the 128 KiB threshold: 8 MiB + a page each); freeing them raises
    # the threshold to that size, so step 1 takes them from the heap, which sbrk extends by
    # the requests (+ 112 B each for posix_memalign) and glibc's 128 KiB top pad. Either way
    # the peak is 16 MiB plus at most a few pages and the pad, from every starting state.
    events = [(1, 8 * MiB), (2, 8 * MiB), (1, 0), (2, 0)]
    stream, live = pm.allocation_stream(events)
    peaks = heap_replay.glibc_replays(stream, live, replays=4)
    assert peaks is not None and len(peaks) == 4
    assert all(16 * MiB <= p <= 16 * MiB + 160 * 1024 for p in peaks), peaks


def test_no_replay_off_glibc_or_beyond_the_machines_memory(monkeypatch):
    monkeypatch.setattr(heap_replay, "glibc_available", lambda: False)
    assert heap_replay.glibc_replays([0, 100, 0, 0], 100) is None
    monkeypatch.setattr(heap_replay, "glibc_available", lambda: True)
    monkeypatch.setattr(heap_replay, "_memory_bytes", lambda: 1000)
    assert heap_replay.glibc_replays([0, 2000, 0, 0], 2000) is None


def _small_cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(16 * 32 * 32, 10))


@needs_glibc
def test_a_cpu_profile_says_its_heap_was_replayed_through_glibc():
    prof = aa.profile(_small_cnn(), torch.randn(4, 3, 32, 32), mode="train", optimizer="adamw")
    assert "replayed through this machine's glibc malloc" in prof.memory.process_label


def test_the_model_replays_the_heap_where_glibc_cannot(monkeypatch):
    monkeypatch.setattr(process, "glibc_replay", lambda stream, live: None)
    model, x = _small_cnn(), torch.randn(4, 3, 32, 32)
    prof = aa.profile(model, x, mode="train", optimizer="adamw")
    assert "replayed through a model of glibc's policy" in prof.memory.process_label
    assert prof.memory.process_bytes > prof.memory.peak_bytes


def test_a_failing_child_leaves_the_replay_to_the_model(monkeypatch):
    # Whatever goes wrong in the child (no interpreter to start, a crash, garbage output),
    # the profile must not fail: glibc_replays answers None and the model replays the heap.
    def broken(*args, **kwargs):
        raise RuntimeError("no child today")

    monkeypatch.setattr(heap_replay.subprocess, "run", broken)
    monkeypatch.setattr(heap_replay, "glibc_available", lambda: True)
    assert heap_replay.glibc_replays([0, 100, 0, 0], 100) is None
    monkeypatch.setattr(heap_replay.sys, "executable", "")
    assert heap_replay.glibc_replays([0, 100, 0, 0], 100) is None
