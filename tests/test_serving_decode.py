"""The decode step as the model's own forward runs it with a cache (traced on fake tensors), the
calibration of the ops on a decode cache, and how eager decode is priced from both."""

from __future__ import annotations

import numpy as np
import pytest

import aiadvisor as aa
from aiadvisor import examples
from aiadvisor.costmodel.generation import _decode_forward
from aiadvisor.costmodel.local import LocalCalibration, op_family
from aiadvisor.hardware.bench import BenchmarkResult, MatmulPoint, OpPoint
from aiadvisor.hardware.calibrate import CACHE_SUFFIX, cache_points
from aiadvisor.profiler.generation import _bilinear, decode_step

SDPA_CPU = "aten._scaled_dot_product_flash_attention_for_cpu"


@pytest.fixture(scope="module")
def tiny_gpt():
    model, _ = examples.build("tiny-gpt")  # 4 layers, 256 wide, 4 heads of 64, vocab 8192
    return model


def test_bilinear_fit_recovers_the_coefficients_from_four_corners():
    # v = 3 + 2 B + 5 C + 7 B C at B in (1, 2), C in (8, 16):
    # v(1, 8) = 3 + 2 + 40 + 56 = 101, v(2, 8) = 3 + 4 + 40 + 112 = 159,
    # v(1, 16) = 3 + 2 + 80 + 112 = 197, v(2, 16) = 3 + 4 + 80 + 224 = 311.
    k = _bilinear(101, 159, 197, 311, (1, 2), (8, 16))
    assert k == pytest.approx((3, 2, 5, 7))


def _totals(step, batch, context):
    out = {}
    for op, rec in zip(step.ops, step.records(batch, context)):
        t = out.setdefault((rec.op, op.on_cache), [0.0, 0.0, 0.0, 0.0])
        for i, v in enumerate((rec.count, rec.flops, rec.bytes_read, rec.bytes_written)):
            t[i] += v
    return out


def test_the_builtin_decoder_re_copies_its_cache_every_step(tiny_gpt):
    # tiny-gpt's decode step at batch 2 with 100 cached tokens: every layer concatenates its
    # keys and its values with the new token (torch.cat), reading the old cache and writing a
    # new one of 101 tokens: per tensor 2 x 4 heads x 101 x 64 x 4 B = 206,848 B; 4 layers x
    # 2 tensors = 8 cats: 1,654,784 B read and as many written.
    step = decode_step(tiny_gpt)
    t = _totals(step, 2, 100)
    assert t[("aten.cat", True)] == pytest.approx([8, 0, 1_654_784, 1_654_784])
    # Attention of the new token over 101 keys and values per layer: 4 x B x heads x 101 x 64
    # FLOPs = 206,848 a layer; it reads q (2 x 256 x 4 B = 2,048), keys and values
    # (2 x 206,848) and the float mask the bool mask becomes (101 x 4 B): 416,148 a layer.
    count, flops, read, _ = t[(SDPA_CPU, True)]
    assert (count, flops, read) == pytest.approx((4, 4 * 206_848, 4 * 416_148))
    # The weights are read once per step whatever the context: the GEMMs do not grow with it.
    gemm_far = _totals(step, 2, 1000)[("aten.addmm", False)]
    assert gemm_far == pytest.approx(t[("aten.addmm", False)])
    # The causal mask is built once per layer, growing with the context but not the batch.
    assert not any(on for (name, on) in t if name in ("aten.tril", "aten.where", "aten.ones"))


def test_transformers_dynamic_cache_is_traced_too():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500,
                                  bos_token_id=0, eos_token_id=0)
    step = decode_step(transformers.GPT2LMHeadModel(cfg))
    # DynamicCache.update concatenates too: 2 layers x keys and values, B x 4 x (C+1) x 16
    # floats each; at B = 1, C = 63: 4 x 64 x 16 x 4 B = 16,384 B read per cat.
    assert _totals(step, 1, 63)[("aten.cat", True)][:3] == pytest.approx([4, 0, 4 * 16_384])


def test_eager_decode_is_the_traced_step_and_engines_keep_the_paged_cache(tiny_gpt):
    gp = aa.profile_generation(tiny_gpt, prompt_len=64)
    eager, traced = _decode_forward(gp, 2, 100, "eager")
    assert traced
    cats = [o for o in eager.ops if o.op == "aten.cat" + CACHE_SUFFIX]
    assert sum(o.bytes_read for o in cats) == pytest.approx(1_654_784)
    engine, traced = _decode_forward(gp, 2, 100, "engine")
    assert not traced and not any(o.op.startswith("aten.cat") for o in engine.ops)
    # The step is priced at the mean context: 100 cached tokens at prompt 96 + output 8 / 2.
    at_mean, _ = _decode_forward(gp, 2, 96 + 8 / 2, "eager")
    assert [o.bytes_read for o in at_mean.ops] == pytest.approx([o.bytes_read for o in eager.ops])


def _cache_benchmark():
    """A made-up CPU benchmark: cat on hot buffers 1 MB in 50 us, on a decode cache 1 MB in
    200 us and 4 MB in 800 us; the decode-cache attention 1 MB in 150 us."""
    ops = (
        OpPoint(op="aten.cat", family="copy", num_bytes=1e6, flops=0, seconds=50e-6),
        OpPoint(op="aten.cat", family="copy", num_bytes=4e6, flops=0, seconds=200e-6),
        OpPoint(op="aten.cat" + CACHE_SUFFIX, family="copy", num_bytes=1e6, flops=0,
                seconds=200e-6),
        OpPoint(op="aten.cat" + CACHE_SUFFIX, family="copy", num_bytes=4e6, flops=0,
                seconds=800e-6),
        OpPoint(op=SDPA_CPU + CACHE_SUFFIX, family="attention-cache", num_bytes=1e6,
                flops=4e5, seconds=150e-6),
        OpPoint(op=SDPA_CPU + CACHE_SUFFIX, family="attention-cache", num_bytes=4e6,
                flops=1.6e6, seconds=600e-6),
    )
    return BenchmarkResult(
        device_name="Test CPU", backend="cpu", torch_version="x", date="2026-12-03T00:00:00",
        library_versions={}, config={},
        matmul=(MatmulPoint(precision="fp32", n=1024, seconds=2 * 1024**3 / 1e11, tflops=0.1),),
        bandwidth=(), launch_overhead_us=5.0, ops=ops, optimizer=())


def test_ops_on_a_decode_cache_take_the_cache_timings():
    cal = LocalCalibration.from_benchmark(_cache_benchmark(), "fp32")
    names = np.array(["aten.cat" + CACHE_SUFFIX, "aten.cat", "aten.clone" + CACHE_SUFFIX,
                      "aten.stack", SDPA_CPU + CACHE_SUFFIX], dtype=object)
    classes = ("memory", "memory", "memory", "memory", "attention")
    families = np.array([op_family(n, c) for n, c in zip(names, classes)], dtype=object)
    assert list(families) == ["copy", "copy", "copy", "copy", "attention-cache"]
    sizes = np.array([2e6, 2e6, 2e6, 2e6, 2e6])
    seconds = cal.op_seconds(names, families, sizes, np.array([0, 0, 0, 0, 8e5]))
    # 2 MB: halfway in log size between 1 and 4 MB, so the geometric mean of the times:
    # cat on a cache sqrt(200 x 800) = 400 us; on hot buffers sqrt(50 x 200) = 100 us; an
    # untimed copy on a cache (clone) goes by the cache cat (400 us), an untimed one on hot
    # buffers (stack) by the hot cat only (100 us); the attention, keyed on its bytes, 300 us.
    assert seconds == pytest.approx([400e-6, 100e-6, 400e-6, 100e-6, 300e-6])


def test_cache_points_count_bytes_as_the_profiler_and_time_per_call():
    import torch

    steps = []

    def time_op(fn, *, sync, min_time_s):
        fn()
        return 1.0  # one cycle "takes" 1 s

    # Context 4: a key tensor is 1 x 16 x 4 x 64 floats = 16 KiB; 64 KiB of caches to cycle
    # through is 2 layers (a key and a value each).
    pts = cache_points(torch, dev="cpu", sync=lambda: None, time_op=time_op, min_time_s=0.0,
                       step=steps.append, contexts=(4,), cycle_bytes=2**16)
    cat, att = pts
    assert steps == ["decode cache float32 context=4"]
    # cat of 4 tokens and 1 new: reads 5 x 1024 floats, writes as many: 40,960 B; 4 cats per
    # cycle -> 0.25 s each.
    assert (cat.op, cat.family, cat.num_bytes, cat.seconds) == \
        ("aten.cat" + CACHE_SUFFIX, "copy", 40_960, 0.25)
    # Attention: q (1,024 floats), k and v (4,096 each), output (1,024) and its log-sum-exp
    # (16): 10,256 x 4 B = 41,024 B; 4 x 16 heads x 4 x 64 FLOPs = 16,384; 2 calls a cycle.
    assert (att.op, att.family, att.num_bytes, att.flops, att.seconds) == \
        (SDPA_CPU + CACHE_SUFFIX, "attention-cache", 41_024, 16_384, 0.5)


def test_the_cache_grid_follows_the_op_grid_size():
    from aiadvisor.hardware.bench import cache_grid
    from aiadvisor.hardware.calibrate import CACHE_CONTEXTS, CPU_ELEMENTS

    # The CPU grid's largest tensor is 2^23 elements; a 4096-token key tensor 16 x 4096 x 64
    # = 2^22: all three lengths. A 2^12-element test grid has room for none (256 x 1024).
    assert cache_grid(CPU_ELEMENTS) == CACHE_CONTEXTS == (256, 1024, 4096)
    assert cache_grid((2**12,)) == ()


def test_one_traced_block_stands_for_all_of_them():
    # The 4 identical transformer blocks of a Llama model are traced once and multiplied: the
    # same totals as tracing all four (decode at batch 3 with 77 cached tokens).
    transformers = pytest.importorskip("transformers")
    from aiadvisor.profiler import generation as gen

    cfg = transformers.LlamaConfig(num_hidden_layers=4, hidden_size=64, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=128, vocab_size=500)
    model = transformers.LlamaForCausalLM(cfg)
    whole = gen._fit_decode(gen._decode_traces(model, 500), None)
    once = decode_step(model)

    def totals(step):
        recs = step.records(3, 77)
        return (sum(r.count for r in recs), sum(r.flops for r in recs),
                sum(r.bytes_read for r in recs), sum(r.bytes_written for r in recs),
                step.num_module_calls, step.view_ops(3, 77))

    assert totals(once) == pytest.approx(totals(whole))
    assert any("layers.*" in op.module for op in once.ops)


def test_an_untraced_decode_step_says_how_it_was_priced(tiny_gpt):
    # A profile whose decode step could not be traced (decode=None) is priced the old way, and
    # eager predictions say so instead of falling back silently; traced ones say they are.
    import dataclasses

    gp = aa.profile_generation(tiny_gpt, prompt_len=64)
    untraced = dataclasses.replace(gp, decode=None)
    kw = dict(hardware="H100", weight_precision="bf16", prompt_len=64, output_len=16,
              engine="eager")
    notes = aa.predict_generation(untraced, **kw).notes
    assert any("could not be traced" in n for n in notes)
    assert not any("could not be traced" in n for n in aa.predict_generation(gp, **kw).notes)
    assert any("as traced with its cache" in n for n in aa.predict_generation(gp, **kw).notes)


def test_a_grouped_kv_copy_of_the_appended_cache_is_priced_hot_and_read_once():
    # A Llama-style decoder with 4 query heads sharing 1 key/value head (head dim 16): each
    # layer appends to its cache (cat: the first op to read the stored cache, priced as timed
    # on a cold decode cache) and repeat_interleave copies what it just appended to 4 heads
    # (priced as a copy of a hot buffer: no cache suffix). The copy reads the 1-head tensor
    # once (its 4x expansion is a stride-0 view): at batch 2, 50 cached tokens, per tensor
    # 2 x 1 x 51 x 16 x 4 B = 6,528 B read and 4 x that written; 2 layers x keys and values.
    cfg = examples.DecoderConfig(vocab_size=64, hidden_size=64, num_layers=2, num_heads=4,
                                 num_kv_heads=1, intermediate_size=96, style="llama")
    gp = aa.profile_generation(examples._build_decoder(cfg), prompt_len=16)
    step, _ = _decode_forward(gp, 2, 50, "eager")
    by_name = {}
    for o in step.ops:
        by_name.setdefault(o.op, []).append(o)
    assert "aten.cat" + CACHE_SUFFIX in by_name and "aten.cat" not in by_name
    assert "aten.clone" + CACHE_SUFFIX not in by_name
    clones = by_name["aten.clone"]  # one record per layer (two layers are not collapsed)
    totals = [sum(getattr(o, k) for o in clones) for k in ("count", "bytes_read",
                                                            "bytes_written")]
    assert totals == pytest.approx([4, 4 * 6_528, 4 * 4 * 6_528])
    assert SDPA_CPU + CACHE_SUFFIX in by_name


def test_a_broadcast_operand_is_read_once():
    import torch
    from torch import nn

    class Expanded(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(32, 16))

        def forward(self, x):  # (8, 1, 32) @ (32, 16) expanded over the batch: a bmm
            return torch.bmm(x, self.w.expand(x.shape[0], 32, 16))

    prof = aa.profile(Expanded(), torch.randn(8, 1, 32), mode="infer")
    (bmm,) = [o for o in prof.ops if o.op == "aten.bmm"]
    # x: 8 x 32 x 4 B = 1,024 B; the weight once, 32 x 16 x 4 B = 2,048 B (not 8 x that).
    assert bmm.bytes_read == 1_024 + 2_048
    assert bmm.bytes_written == 8 * 16 * 4


def test_a_gradient_broadcast_within_its_matrix_counts_whole():
    import torch
    from torch import nn

    # loss.sum()'s gradient is a scalar expanded to the output (every stride 0): the backward
    # GEMMs copy it into a dense buffer before reading it, so its bytes count in full.
    torch.manual_seed(0)
    prof = aa.profile(nn.Linear(32, 64, bias=False), torch.randn(16, 32), mode="train",
                      scaling=False)
    (mm,) = [o for o in prof.ops if o.op == "aten.mm" and o.phase == "backward"]
    # dW = grad^T (64 x 16, read whole: 4,096 B) @ x (16 x 32: 2,048 B); written 64 x 32 x 4 B.
    assert mm.bytes_read == 64 * 16 * 4 + 16 * 32 * 4
    assert mm.bytes_written == 64 * 32 * 4
