"""Memory as the process shows it: glibc heap replay, CUDA block sizes, ``memory.process_bytes``."""

from __future__ import annotations

import torch

import aiadvisor as aa
from aiadvisor.estimate import process_memory as pm

MiB = 2**20


def test_large_tensors_are_mmapped_until_a_free_raises_the_threshold():
    heap = pm.GlibcHeap()
    heap.alloc("a", 4 * MiB)                  # >= 128 KiB: its own mmap
    assert heap.heap_end == 0 and heap.mmapped == 4 * MiB + 4096   # 4 MiB + header, in pages
    heap.free("a")                            # returned; threshold := that chunk's size
    assert heap.resident == 0 and heap.threshold == 4 * MiB + 4096
    heap.alloc("b", 4 * MiB)                  # now below the threshold: from the heap
    # posix_memalign(64, 4 MiB) asks for the chunk (4 MiB + 16) + 64 + 32 from the top.
    assert heap.mmapped == 0 and heap.heap_end == 4 * MiB + 112
    heap.free("b")                            # 4 MiB free top < trim threshold (8 MiB): kept
    assert heap.resident == 4 * MiB + 112


def test_threshold_never_rises_past_32_mib():
    heap = pm.GlibcHeap()
    heap.alloc("big", 64 * MiB)
    heap.free("big")
    assert heap.threshold == pm.MMAP_THRESHOLD_MIN    # 64 MiB > DEFAULT_MMAP_THRESHOLD_MAX
    heap.alloc("again", 64 * MiB)
    assert heap.mmapped > 64 * MiB and heap.heap_end == 0


def test_freed_heap_chunks_are_reused_best_fit_and_coalesced():
    heap = pm.GlibcHeap(threshold=32 * MiB)
    for key in "abc":
        heap.alloc(key, MiB)                  # three 1 MiB chunks (+16 B header each)
    # Each from the top: a 48-byte leader puts the user pointer (chunk + 16) on 64 bytes, then
    # the 1 MiB + 16 chunk; the next request starts at the 48-byte tail the previous one left.
    extent = 3 * (MiB + 16 + 48) + 48
    assert heap.heap_end == extent
    heap.free("a")
    heap.free("b")          # a, b and the pieces around them merge: a hole of 2 MiB + 176
    heap.alloc("d", 2 * MiB)  # needs 2 MiB + 16 + 96 = 2 MiB + 112: fits, the heap stays
    assert heap.heap_end == extent and heap.peak == extent


def test_replay_of_two_steps_keeps_the_second_steps_activations_in_the_heap():
    # One step: two 8 MiB activations alive together, then freed. Step 1 mmaps both (peak
    # 16 MiB + pages) and frees them, raising the threshold to 8 MiB + a page; step 2 takes
    # them from the heap, which keeps them: the resident peak is the same 16 MiB, the heap
    # now holds it after the step (the trim threshold is twice 8 MiB + a page).
    events = [(1, 8 * MiB), (2, 8 * MiB), (1, 0), (2, 0)]
    peak, live = pm.replay_steps(events)
    assert live == 16 * MiB
    assert 16 * MiB <= peak <= 16 * MiB + 2 * 4096


def test_cuda_blocks_round_to_512_bytes_and_large_segments_to_2_mib():
    def one(nbytes):
        a = pm.CudaCachingAllocator()
        a.alloc("x", nbytes)
        return a.allocated, a.reserved

    assert one(4) == (512, 2 * MiB)                        # small pool: a 2 MiB segment
    assert one(1000) == (1024, 2 * MiB)
    assert one(5 * MiB + 1) == (5 * MiB + 512, 20 * MiB)   # cut from a 20 MiB segment
    # Its own segment in 2 MiB steps (12 MiB); the 2 MiB - 512 B left is split off (> 1 MiB).
    assert one(10 * MiB + 1) == (10 * MiB + 512, 12 * MiB)
    # 11 MiB + 1: 12 MiB segment, 1 MiB - 512 B left is not split: the block is the segment.
    assert one(11 * MiB + 1) == (12 * MiB, 12 * MiB)


def test_cuda_caching_allocator_by_hand():
    # Small pool: 1,000-byte requests take 1,024-byte blocks, 2,048 to a 2 MiB segment.
    a = pm.CudaCachingAllocator()
    for i in range(2049):
        a.alloc(i, 1000)
    assert a.reserved == 4 * MiB and a.allocated == 2049 * 1024
    # Large pool: 12 MiB gets its own segment; 4 MiB is cut from a 20 MiB segment (16 MiB left,
    # split off); 15 MiB takes that 16 MiB block whole (1 MiB would remain: not split).
    b = pm.CudaCachingAllocator()
    b.alloc("big", 12 * MiB)
    b.alloc("x", 4 * MiB)
    b.alloc("y", 15 * MiB)
    assert b.reserved == 32 * MiB and b.allocated == 32 * MiB
    b.free("big")
    b.free("x")
    # Best fit: 3 MiB takes the cached 4 MiB block (not the 12 MiB one), again whole.
    b.alloc("r", 3 * MiB)
    assert b.allocated == 20 * MiB and b.reserved == 32 * MiB


def test_cuda_replay_of_a_training_loop_by_hand():
    # Three 9 MiB weights: two share a 20 MiB segment, the third opens another (11 MiB left).
    # Step 1: gradients (reverse order) take that 11 MiB hole, then a new segment (two there);
    # Adam's six state tensors three segments; the foreach list of three square roots two more:
    # 8 segments, 160 MiB, against 27 + 27 + 54 + 27 = 135 MiB live at the update. Steps 2
    # and 3 reuse the cached blocks of the gradients and the list: nothing more.
    grads = [(("grad", i), 9 * MiB) for i in (2, 1, 0)]
    reserved, live = pm.replay_cuda_steps(grads, weights=[9 * MiB] * 3,
                                          persistent_after_first=[9 * MiB] * 6,
                                          step_temporaries=[9 * MiB] * 3)
    assert (reserved, live) == (160 * MiB, 135 * MiB)


def test_process_estimate_arithmetic():
    facts = {"device": "cpu", "rss_bytes": 400 * MiB, "resident_model_bytes": 40 * MiB,
             "heap_ratio": 2.0, "cuda_reserved_ratio": 1.25, "cuda_gemms": True,
             "library_bytes": 10 * MiB}
    e = pm.process_estimate(facts, mode="train", peak_bytes=200 * MiB, weights_bytes=40 * MiB,
                            inputs_bytes=0)
    # 400 - 40 (model already resident) + 40 (weights) + 160 x 2.0 + 6 (first training step)
    # + 10 (what the libraries' probe added)
    assert e.process_bytes == 736 * MiB
    # Band: a heap keeping only the live tensors, half the first-step and library pages
    # (400 + 160 + 8), to one keeping a second copy of them (400 + 160 x 3 + 6 + 10).
    assert (e.process_low_bytes, e.process_high_bytes) == (568 * MiB, 896 * MiB)
    # A step whose tensors are small beside the process (20 MiB beside 500): the heap's band
    # would be 521-542 MiB (500 + 20 + 1 to 500 + 40 + 2); fresh processes move +-5.5 %, so
    # the band is 522 x 0.945 = 493.29 to 522 x 1.055 = 550.71 MiB.
    small = pm.process_estimate({**facts, "heap_ratio": 1.0, "library_bytes": 0,
                                 "rss_bytes": 500 * MiB, "resident_model_bytes": 100 * MiB},
                                mode="infer", peak_bytes=120 * MiB, weights_bytes=100 * MiB,
                                inputs_bytes=0)
    assert small.process_bytes == 522 * MiB
    assert small.process_low_bytes == int(522 * MiB * 0.945)
    assert small.process_high_bytes == int(522 * MiB * 1.055)
    assert "RSS" in e.label
    # Reserved: 200 x 1.25 (the replayed reserved-to-live ratio) + 8.125 MiB cuBLAS workspace
    # (non-Hopper)
    assert e.cuda_reserved_bytes == int(250 * MiB + 8 * MiB + 128 * 1024)
    on_gpu = pm.process_estimate({**facts, "device": "cuda:0"}, mode="train",
                                 peak_bytes=200 * MiB, weights_bytes=40 * MiB, inputs_bytes=0)
    assert on_gpu.process_bytes == e.cuda_reserved_bytes
    assert "max_memory_reserved" in on_gpu.label


def test_profile_reports_process_memory_beside_the_allocator_peak():
    import psutil

    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(),
                                torch.nn.Linear(1024, 256))
    x = torch.randn(64, 256)
    rss_before = psutil.Process().memory_info().rss
    prof = aa.profile(model, x, mode="train")
    mem = prof.memory
    assert mem.process_label.startswith("CPU resident set")
    # The process already holds the interpreter and torch (hundreds of MiB): the resident set
    # at the peak is at least what it holds now plus the step's new tensors.
    new_tensors = mem.peak_bytes - mem.weights_bytes - mem.inputs_bytes
    assert mem.process_bytes >= 0.9 * rss_before + new_tensors
    assert mem.cuda_reserved_bytes >= mem.peak_bytes
    # prof.at keeps the figure in step with the peak it is computed from.
    # 64 more samples add 64 x (256 + 1024 + ...) x 4 bytes of activations at least.
    bigger = prof.at(batch_size=128).memory
    assert bigger.process_bytes - mem.process_bytes >= bigger.peak_bytes - mem.peak_bytes > 0


def test_the_profile_shows_memory_as_the_process_sees_it(monkeypatch):
    from aiadvisor.profiler.summary import process_memory_text, profile_text
    from aiadvisor.units import fmt_bytes
    from aiadvisor.widgets.views import _summary_html

    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(),
                                torch.nn.Linear(1024, 256))
    prof = aa.profile(model, torch.randn(64, 256), mode="train")
    mem = prof.memory
    # On the CPU: the resident set and its band, beside the allocator-level peak.
    text = process_memory_text(prof)
    assert text.startswith(f"{fmt_bytes(mem.process_bytes)} resident set, what ps and top show")
    assert f"P10-P90 {fmt_bytes(mem.process_low_bytes)} to " in text
    assert f"process memory    {text}" in profile_text(prof)
    assert "as the process shows it" in _summary_html(prof)
    # A meta trace (meant for a GPU) shows what torch.cuda.max_memory_reserved() would read.
    with torch.device("meta"):
        big = torch.nn.Linear(4096, 4096)
    meta = aa.profile(big, torch.randn(8, 4096, device="meta"), mode="infer", scaling=False)
    assert process_memory_text(meta) == (
        f"on a CUDA device: {fmt_bytes(meta.memory.cuda_reserved_bytes)} "
        "torch.cuda.max_memory_reserved() (estimated; nvidia-smi shows about 500 MiB more, the "
        "CUDA context)")


def test_meta_model_has_no_resident_set_but_a_reserved_figure():
    with torch.device("meta"):
        model = torch.nn.Linear(4096, 4096)
    prof = aa.profile(model, torch.randn(8, 4096, device="meta"), mode="infer", scaling=False)
    # A meta model runs nowhere yet: no process figure, but the CUDA reserved estimate holds
    # its 64 MiB of weights (one block of 64 MiB, already a multiple of 2 MiB) and more.
    assert prof.memory.process_bytes is None and prof.memory.process_label == ""
    assert prof.memory.cuda_reserved_bytes >= prof.memory.peak_bytes >= 64 * MiB


def test_onednn_convolutions_reorder_source_and_destination_outside_the_allocator():
    from aiadvisor.profiler.recorder import native_transients

    aten = torch.ops.aten
    x, w = torch.zeros(8, 3, 32, 32), torch.zeros(16, 3, 3, 3)
    out = torch.zeros(8, 16, 32, 32)
    # Source 8 x 3 x 32 x 32 x 4 B = 96 KiB, blocked destination 8 x 16 x 32 x 32 x 4 B = 512 KiB.
    assert native_transients(aten.convolution, (x, w), [out]) == [98304, 524288]
    # Backward: grad_output and input in, grad_input out (grad_weight is not activation-sized).
    grads = [torch.zeros_like(x), torch.zeros_like(w)]
    assert native_transients(aten.convolution_backward, (out, x, w), grads) == [
        524288, 98304, 98304]
    # Channels-last tensors are oneDNN's plain NHWC: no reorder; other ops: nothing.
    nhwc = x.contiguous(memory_format=torch.channels_last)
    assert native_transients(aten.convolution, (nhwc, w), [out]) == []
    assert native_transients(aten.mm, (x, w), [out]) == []


def test_native_buffers_take_heap_but_are_not_live_tensor_bytes():
    # A 1 MiB tensor, then a 4 MiB native buffer freed before the tensor: the live-tensor peak
    # stays 1 MiB, the replayed resident peak holds both (mmapped: 1 MiB + 4 MiB + 2 pages).
    events = [(1, MiB), (("native", 0, 0), 4 * MiB), (("native", 0, 0), 0), (1, 0)]
    peak, live = pm.replay_steps(events, num_steps=1)
    assert live == MiB
    assert peak == 5 * MiB + 2 * 4096


def test_cpu_profile_measures_what_the_libraries_add_for_its_largest_gemm():
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 128))
    from aiadvisor.profiler import inputs, process, trace

    x = torch.randn(32, 256)
    prof = aa.profile(model, x, mode="infer", scaling=False)
    assert "BLAS/oneDNN" in prof.memory.process_label
    # The forward GEMM with the largest K x N is the first layer's: (32 rows, 256, 512).
    result = trace.run_trace(model, inputs.normalize(x), path="fake", mode="infer",
                             precision="fp32", batch_size=32, seq_len=None, plan=None)
    assert result.largest_gemm == (32, 256, 512)
    # A second probe in this process finds the libraries warm: nothing new beyond a page or so.
    first = process._library_probe((32, 256, 512), False)
    again = process._library_probe((32, 256, 512), False)
    assert isinstance(first, int) and first >= 0 and again <= max(first, 1 * MiB)


def test_optimizer_state_lands_while_the_gradients_are_still_live():
    # One step: a 1 MiB gradient created and kept to the step's end (zero_grad). Threshold 128
    # KiB, so step 1 mmaps it: 1 MiB + 16 + 96 bytes in whole pages = 1 MiB + 4096. The
    # optimizer then allocates its 1 MiB state (also mmapped: the gradient is not freed yet, so
    # the threshold is still 128 KiB) and one update temporary pair of 1 MiB each, both mmapped:
    # 4 x (1 MiB + 4096) resident at once. Freeing the temporaries raises the threshold to their
    # chunk (1 MiB + 4096); step 2's gradient and temporaries then come from the heap.
    events = [(1, MiB)]
    peak, live = pm.replay_steps(events, persistent_after_first=[MiB],
                                 update_temporaries=[(MiB, MiB)])
    assert live == 4 * MiB
    assert peak == 4 * (MiB + 4096)
