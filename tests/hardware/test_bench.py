"""The microbenchmarks: positive, self-consistent figures; the on-disk cache is reused."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from aiadvisor.errors import InvalidArgumentError
from aiadvisor.hardware import CpuInfo, bench, benchmark, cache_directory, detect, detection, get

# Tiny configuration so each run takes well under a second on a 2-core CPU (the op grid is
# tested on its own below).
TINY = {"sizes": (16, 32), "precisions": ("fp32",), "bandwidth_bytes": 2**16,
        "min_time_s": 0.001, "ops": False}


@pytest.fixture
def counter(monkeypatch):
    """Counts timed measurements by wrapping the timing function."""
    calls = []
    real = bench._time_op

    def counting(fn, **kwargs):
        calls.append(1)
        return real(fn, **kwargs)

    monkeypatch.setattr(bench, "_time_op", counting)
    # Count first timings only: the contention guard's retries are tested on their own below.
    monkeypatch.setattr(bench, "BUSY_SHARE", 0.0)
    return calls


def test_figures_are_positive_and_self_consistent(tmp_path, counter):
    result = benchmark(cache_dir=tmp_path, progress=False, **TINY)
    assert [p.n for p in result.matmul] == [16, 32]
    for point in result.matmul:
        assert point.seconds > 0 and point.tflops > 0
        # 2 n^3 FLOPs per square matmul
        assert point.tflops == pytest.approx(2 * point.n**3 / point.seconds / 1e12)
    ops = {p.op: p for p in result.bandwidth}
    # copy reads + writes one 64 KiB tensor; add reads two and writes one
    assert ops["copy"].num_bytes == 2 * 2**16 and ops["add"].num_bytes == 3 * 2**16
    assert all(p.gbs > 0 for p in result.bandwidth)
    assert result.memory_bw_gbs == max(p.gbs for p in result.bandwidth)
    assert 0 < result.launch_overhead_us < 10_000
    assert result.peak_tflops("fp32") == max(t for _, t in result.curve("fp32"))
    assert result.peak_tflops("bf16") is None
    assert len(counter) == 2 + 2 + 1  # two sizes, copy + add, launch overhead
    assert not result.from_cache


def test_the_cache_is_reused_and_refresh_reruns(tmp_path, counter):
    first = benchmark(cache_dir=tmp_path, progress=False, **TINY)
    assert len(counter) == 5
    second = benchmark(cache_dir=tmp_path, progress=False, **TINY)
    assert len(counter) == 5  # nothing was measured again
    assert second.from_cache and second.cache_path == first.cache_path
    assert second.matmul == first.matmul and second.date == first.date
    benchmark(cache_dir=tmp_path, progress=False, refresh=True, **TINY)
    assert len(counter) == 10
    benchmark(cache_dir=tmp_path, progress=False, **{**TINY, "sizes": (8,)})
    assert len(counter) == 14  # another configuration is measured, not served stale


def test_the_cache_file_records_date_and_versions(tmp_path):
    import torch

    result = benchmark(cache_dir=tmp_path, progress=False, **TINY)
    data = json.loads(Path(result.cache_path).read_text(encoding="utf-8"))
    assert data["torch_version"] == torch.__version__
    assert data["library_versions"]["torch"] == torch.__version__
    assert {"python", "numpy", "aiadvisor"} <= set(data["library_versions"])
    assert data["date"][:4].isdigit() and "T" in data["date"]
    assert torch.__version__.replace("+", "-") in result.cache_path


def test_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("AIADVISOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_directory() == tmp_path / "xdg" / "aiadvisor"
    monkeypatch.setenv("AIADVISOR_CACHE_DIR", str(tmp_path / "own"))
    assert cache_directory() == tmp_path / "own"
    assert cache_directory(tmp_path / "arg") == tmp_path / "arg"


def test_progress_callback_gets_increasing_fractions_ending_at_one(tmp_path):
    seen = []
    benchmark(cache_dir=tmp_path, progress=lambda f, m: seen.append((f, m)), **TINY)
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and fractions[0] == 0.0
    assert any("matmul fp32 n=32" in m for _, m in seen)


def test_text_progress_bar(capsys):
    report = bench.text_progress()
    report(0.5, "matmul fp32 n=1024")
    report(1.0, "done")
    err = capsys.readouterr().err
    assert "[############------------]  50% matmul fp32 n=1024" in err
    assert err.endswith("\n")


def test_cpu_precisions_follow_the_isa_flags():
    plain = SimpleNamespace(backend="cpu", cpu=CpuInfo(model="x", isa_flags=("avx2", "fma")))
    chosen, skipped = bench._default_precisions(plain)
    assert chosen == ("fp32",) and "bf16" in skipped and "fp16" in skipped
    amx = SimpleNamespace(backend="cpu",
                          cpu=CpuInfo(model="x", isa_flags=("avx512_bf16", "amx_bf16")))
    chosen, skipped = bench._default_precisions(amx)
    assert chosen == ("fp32", "bf16") and "fp16" in skipped
    old_gpu = SimpleNamespace(backend="cuda", compute_capability="7.0")
    assert bench._default_precisions(old_gpu)[0] == ("fp32", "fp16")


def test_bad_options_are_rejected(tmp_path):
    with pytest.raises(InvalidArgumentError, match="'int8' cannot be benchmarked"):
        benchmark(cache_dir=tmp_path, progress=False, **{**TINY, "precisions": ("int8",)})
    with pytest.raises(InvalidArgumentError, match="progress="):
        benchmark(cache_dir=tmp_path, progress="yes", **{**TINY, "sizes": (4,)})


def test_detect_with_benchmark_returns_measured_figures(tmp_path, counter):
    spec = detect(benchmark=True, cache_dir=tmp_path, progress=False, benchmark_options=TINY)
    result = benchmark(cache_dir=tmp_path, progress=False, **TINY)
    assert result.from_cache and len(counter) == 5  # detect() measured once, then cached
    assert spec.measured
    assert spec.fp32_tflops == result.peak_tflops("fp32")
    assert spec.memory_bw_gbs == result.memory_bw_gbs
    assert spec.launch_overhead_us == result.launch_overhead_us
    assert spec.notes.startswith("MEASURED") and "fp32_tflops is ESTIMATED" not in spec.notes
    assert "memory_bw_gbs is ESTIMATED" not in spec.notes
    # TINY measures fp32 only: an estimated bf16 peak (a CPU with AMX/AVX512-BF16 flags) stays
    # and its note says it is an estimate.
    assert ("bf16_tflops is ESTIMATED" in spec.notes) == (spec.bf16_tflops is not None)


def test_a_benchmark_of_bf16_replaces_the_estimated_bf16_peak(tmp_path, monkeypatch):
    amx = CpuInfo(model="Test AMX CPU", vendor_id="GenuineIntel", family=6, num_cores=2,
                  num_threads=2, mhz=2600.0, isa_flags=("avx2", "fma", "avx512f", "amx_bf16"))
    monkeypatch.setattr(detection, "cpu_info", lambda: amx)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    if hasattr(torch, "xpu"):
        monkeypatch.setattr(torch.xpu, "is_available", lambda: False)
    # 2 x 2.6 GHz x 1024, the estimate from the flags (not scaled by the quick matmul).
    assert detect(anchor=False).bf16_tflops == pytest.approx(5.3248)
    options = {**TINY, "precisions": ("fp32", "bf16")}
    spec = detect(benchmark=True, cache_dir=tmp_path, progress=False, benchmark_options=options)
    result = benchmark(cache_dir=tmp_path, progress=False, **options)
    assert spec.bf16_tflops == result.peak_tflops("bf16") and "ESTIMATED" not in spec.notes


def test_apply_to_keeps_unmeasured_datasheet_columns(tmp_path):
    result = benchmark(cache_dir=tmp_path, progress=False, **TINY)
    measured = result.apply_to(get("H100"))
    assert measured.fp32_tflops == result.peak_tflops("fp32") and measured.measured
    assert measured.fp8_tflops == pytest.approx(1978.9)  # not measured: datasheet kept


def test_op_grid_counts_work_as_the_profiler_does(tmp_path):
    from aiadvisor.hardware.bench import measurement_for

    n1, n2 = 2**10, 2**12
    result = benchmark(cache_dir=tmp_path, progress=False,
                       **{**TINY, "ops": True, "op_elements": (n1, n2)})
    by_op = {}
    # One first-touch point: the page faults of a fresh 128 MiB buffer (a difference of two
    # timings, so it may be 0 on a platform that hands back reused pages).
    (touch,) = [p for p in result.ops if p.family == "first-touch"]
    assert touch.num_bytes == 128 * 2**20 and touch.seconds >= 0
    # One square-root-of-zeros point: 2^20 zeros against 2^20 ones (a difference, >= 0).
    (zeros,) = [p for p in result.ops if p.family == "sqrt-zero"]
    assert zeros.op == "aten.sqrt[zeros]" and zeros.num_bytes == 4 * 2**20 and zeros.seconds >= 0
    for p in result.ops:
        if p.family in ("first-touch", "sqrt-zero"):
            continue
        if not p.family.startswith(("gemm-", "conv-", "recurrent")):
            by_op.setdefault(p.op, []).append(p)
        assert p.seconds > 0
    # Every op of the grid at both sizes; no attention (16 x 64 x 64 > 4096 elements). Max
    # pools in two windows and two layouts, batch norm in two modes and two layouts (its
    # backward in two layouts), named as a profile names them.
    assert all(len(v) == 2 for v in by_op.values()) and len(by_op) == 30
    pool = "aten.max_pool2d_with_indices"
    assert {pool, pool + "[3x3]", pool + "[channels_last]",
            pool + "[3x3][channels_last]"} <= set(by_op)
    bn = "aten.native_batch_norm"
    assert {bn, bn + "[eval]", bn + "[channels_last]", bn + "[eval][channels_last]",
            bn + "_backward", bn + "_backward[channels_last]"} <= set(by_op)
    # 2 x 2 / 2 pool of 1 x 64 x 4 x 4 (n1 = 1 K elements): 4 KiB read, 1 x 64 x 2 x 2 FP32
    # outputs (1 KiB) and int64 indices (2 KiB); 3 x 3 / 2 / pad 1: the same output shape.
    assert min(p.num_bytes for p in by_op[pool]) == 4096 + 1024 + 2048
    assert min(p.num_bytes for p in by_op[pool + "[3x3]"]) == 4096 + 1024 + 2048
    assert not any(p.family == "attention" for p in result.ops)
    # fp32: add reads two tensors and writes one (12 bytes an element), gelu reads one and
    # writes one (8), gelu_backward reads two and writes one (12); cat of two -> 16.
    for op_name, per_element in (("aten.add", 12), ("aten.gelu", 8), ("aten.gelu_backward", 12),
                                 ("aten.cat", 16)):
        assert sorted(p.num_bytes for p in by_op[op_name]) == [per_element * n1,
                                                               per_element * n2]
    # Linear layers on a CPU: forward (addmm) and backward (one point per mm of the pair), each
    # 2 M K N FLOPs a call.
    from aiadvisor.hardware.calibrate import (
        LINEAR_SHAPES,
        SKINNY_HOT_SHAPES,
        SKINNY_NARROW_SHAPES,
        SKINNY_SHAPES,
        WIDE_SHAPES,
    )

    for family in ("gemm-forward", "gemm-backward"):
        flops = sorted(p.flops for p in result.ops if p.family == family)
        assert flops == sorted(2.0 * m * k * n for m, k, n in LINEAR_SHAPES)
    # Forward GEMMs with large weights (K x N elements recorded): 8 M and 16 M elements, where
    # the linear grid's largest is 1 M (1024 x 1024).
    wide = sorted((p.flops, p.weight_elements) for p in result.ops
                  if p.family == "gemm-forward-wide")
    assert wide == [(2.0 * 256 * 2048 * 4096, 2048 * 4096), (2.0 * 256 * 4096**2, 4096**2)]
    assert max(p.weight_elements for p in result.ops if p.family == "gemm-forward") == 1024**2
    assert len(WIDE_SHAPES) == 2
    # Convolutions: forward 2 N Cout H W Cin k^2 FLOPs ("same" padding, stride 1); the backward
    # (input and weight gradients) twice that.
    from aiadvisor.hardware.calibrate import CONV_SHAPES, RECURRENT_SHAPES, RECURRENT_STEPS

    conv = [2.0 * n * cout * side * side * cin * k * k for n, cin, side, cout, k in CONV_SHAPES]
    assert sorted(p.flops for p in result.ops if p.family == "conv-forward") == sorted(conv)
    # The same convolutions again with channels_last tensors: the same work counted.
    assert sorted(p.flops for p in result.ops if p.family == "conv-forward-cl") == sorted(conv)
    assert sorted(p.flops for p in result.ops if p.family == "conv-backward") == \
        sorted(2 * f for f in conv)
    # Named as a profile names them: the channels_last ones with the layout.
    assert {(p.family, p.op) for p in result.ops if p.family.startswith("conv-")} == {
        ("conv-forward", "aten.convolution"), ("conv-backward", "aten.convolution_backward"),
        ("conv-forward-call", "aten.convolution"),
        ("conv-backward-call", "aten.convolution_backward"),
        ("conv-forward-cl", "aten.convolution[channels_last]"),
        ("conv-backward-cl", "aten.convolution_backward[channels_last]"),
        ("conv-forward-cl-call", "aten.convolution[channels_last]"),
        ("conv-backward-cl-call", "aten.convolution_backward[channels_last]")}
    # Each convolution carries its weight's elements (out x in x k x k), for the per-weight
    # cost; the grid's last two shapes share one (256 x 256 x 3 x 3).
    weights = sorted({p.weight_elements for p in result.ops if p.family == "conv-forward"})
    assert weights == sorted({cout * cin * k * k for _, cin, _, cout, k in CONV_SHAPES})
    assert CONV_SHAPES[-1][1:] != CONV_SHAPES[4][1:] and \
        CONV_SHAPES[-1][1] == CONV_SHAPES[4][1] == 256
    # The per-call points: a 1 x 8 x 4 x 4 -> 8, 1 x 1 convolution, 2 x 8 x 8 x 16 = 2048
    # FLOPs forward, twice that backward, in each layout.
    calls = sorted((p.family, p.flops) for p in result.ops if p.family.endswith("-call"))
    assert calls == [("conv-backward-call", 4096.0), ("conv-backward-cl-call", 4096.0),
                     ("conv-forward-call", 2048.0), ("conv-forward-cl-call", 2048.0)]
    # LSTM layers per step: the input and hidden GEMMs, 2 x batch x 4h x (h + h) FLOPs forward,
    # twice that backward; one point each per shape.
    rec = sorted(p.flops for p in result.ops if p.family == "recurrent")
    lstm = [2.0 * b * 4 * h * 2 * h for b, h in RECURRENT_SHAPES]
    assert rec == sorted(lstm + [2 * f for f in lstm]) and RECURRENT_STEPS > 1
    # Skinny forward GEMMs (decode-step shapes), forward only: M = 1..64 rows of 2048 x 2048,
    # and the same rows of 512 x 8192 (K = 512), each with its K recorded.
    skinny = sorted((p.flops, p.num_bytes, p.inner) for p in result.ops
                    if p.family == "gemm-skinny")
    assert skinny == sorted((2.0 * m * k * n, 4 * (m * k + k * n + n + m * n), k)
                            for m, k, n in (*SKINNY_SHAPES, *SKINNY_NARROW_SHAPES))
    assert {k for _, k, _ in SKINNY_NARROW_SHAPES} == {512}
    # Each timed cycling 512 MiB of weights (32 matrices of 16 MiB in FP32), beyond the
    # development CPU's share of its last-level cache.
    assert {p.cycle_bytes for p in result.ops if p.family == "gemm-skinny"} == {512 * 2**20}
    # Skinny GEMMs on one 256 x 1024 weight, looped over (a recurrent layer's step GEMMs):
    # M = 1, 4, 16 and 64 rows, 2 M K N FLOPs, no cycle.
    hot = sorted((p.flops, p.inner, p.cycle_bytes) for p in result.ops
                 if p.family == "gemm-skinny-hot")
    assert hot == sorted((2.0 * m * k * n, k, 0.0) for m, k, n in SKINNY_HOT_SHAPES)
    assert [m for m, _, _ in SKINNY_HOT_SHAPES] == [1, 4, 16, 64]
    # The skinny grid's square shapes at 1, 4, 16 and 64 rows again, cycling 32 MiB of weights
    # (two 2048 x 2048 FP32 matrices): the rates of a step whose weights a cache may hold.
    warm = sorted((p.flops, p.cycle_bytes) for p in result.ops
                  if p.family == "gemm-skinny-warm")
    assert warm == sorted((2.0 * m * 2048 * 2048, 32 * 2**20) for m in (1, 4, 16, 64))
    # AdamW, SGD with momentum and SGD, four sizes each.
    assert sorted({p.optimizer for p in result.optimizer}) == ["adamw", "sgd", "sgd_momentum"]
    assert len(result.optimizer) == 12 and all(p.seconds > 0 for p in result.optimizer)
    # The cache round-trips the grid, and a spec made from it finds its measurement.
    again = benchmark(cache_dir=tmp_path, progress=False,
                      **{**TINY, "ops": True, "op_elements": (n1, n2)})
    assert again.from_cache and again.ops == result.ops and again.optimizer == result.optimizer
    spec = again.apply_to(get("H100"))
    assert measurement_for(spec) is again
    # 30 grid ops at two sizes, addmm and mm of the linear layers, the large-weight, the
    # skinny, the warm skinny (4) and the skinny-on-one-weight addmm, two
    # convolution and two LSTM-layer ops (forward, backward) per shape, the first touch, the
    # square root of zeros.
    # Convolutions: forward and backward, in NCHW and in channels_last, and the 1,024-MAC one
    # timed for the per-call cost (families ``...-call``). Distinct names: the
    # 30, addmm, mm, convolution and its backward in each layout, the LSTM layer and its
    # backward, the first touch, the square root of zeros: 40.
    timings = (2 * 30 + 2 * len(LINEAR_SHAPES) + len(WIDE_SHAPES) + len(SKINNY_SHAPES)
               + len(SKINNY_NARROW_SHAPES) + len(SKINNY_HOT_SHAPES) + 4
               + 4 * (len(CONV_SHAPES) + 1)
               + 2 * len(RECURRENT_SHAPES) + 2)
    assert f"an op grid ({timings} timings of 40 ops)" in spec.notes


def test_op_grid_runs_in_each_measured_16_bit_type(tmp_path):
    result = benchmark(cache_dir=tmp_path, progress=False,
                       **{**TINY, "precisions": ("fp32", "bf16"), "ops": True,
                          "op_elements": (2**10,)})
    assert result.config["op_dtypes"] == ["float32", "bfloat16"]
    adds = {p.dtype: p.num_bytes for p in result.ops if p.op == "aten.add"}
    # Two reads and a write of 1024 elements: 12 KiB in fp32, 6 KiB in bf16.
    assert adds == {"float32": 12 * 2**10, "bfloat16": 6 * 2**10}
    gemm_dtypes = {p.dtype for p in result.ops if p.family == "gemm-forward"}
    assert gemm_dtypes == {"float32", "bfloat16"}


def test_stalled_timings_are_recognised():
    from aiadvisor.hardware.bench import MatmulPoint, stalled_sizes

    def pts(times):
        return [MatmulPoint(precision="fp32", n=n, seconds=t, tflops=2 * n**3 / t / 1e12)
                for n, t in times]

    # The poisoned cache seen on the shared 2-core machine: n=128, 256 and 512 all ~32 ms
    # (8x the FLOPs at each step for no extra time), then 79 ms and 467 ms.
    busy = pts([(128, 0.03197), (256, 0.03194), (512, 0.03188), (1024, 0.0794), (2048, 0.4666)])
    assert stalled_sizes(busy) == [128, 256]
    # The same machine idle: 0.2 ms, 1.2 ms, 6 ms... each step 5-8x longer.
    idle = pts([(128, 3.1e-5), (256, 2.4e-4), (512, 1.6e-3), (1024, 1.2e-2), (2048, 0.11)])
    assert stalled_sizes(idle) == []
    # Launch-bound sizes may take the same time: below 0.2 ms nothing is concluded.
    assert stalled_sizes(pts([(16, 5e-6), (32, 5e-6)])) == []


def test_a_benchmark_on_a_busy_machine_says_so_and_is_not_cached(tmp_path, monkeypatch):
    # Every call "takes" 32 ms whatever its size, as on the busy machine above.
    monkeypatch.setattr(bench, "_time_op", lambda fn, **kw: (fn(), 0.032)[1])
    monkeypatch.setattr(bench, "BUSY_SHARE", 0.0)  # the stall check alone
    result = benchmark(cache_dir=tmp_path, progress=False, **{**TINY, "sizes": (32, 64, 128)})
    assert "timing fp32" in result.skipped and "busy" in result.skipped["timing fp32"]
    assert result.cache_path is None and not list(tmp_path.glob("*.json"))


def test_the_contention_guard_retries_busy_timings_and_the_result_is_not_cached(tmp_path,
                                                                                monkeypatch):
    # Every timing and every sentinel gets 40 % of the cores, as beside a busy process (the
    # 2-core machine measured 0.35-0.50): the first BUSY_GIVE_UP points are timed
    # 1 + BUSY_RETRIES times, the rest once; all count as busy, and the benchmark says so and
    # is not cached.
    calls = []
    real = bench._time_op
    monkeypatch.setattr(bench, "_time_op", lambda fn, **kw: (calls.append(1), real(fn, **kw))[1])
    monkeypatch.setattr(bench, "BUSY_SHARE", 0.75)  # the guard on (tests/conftest.py)
    monkeypatch.setattr(bench.ContentionGuard, "share", lambda self, fn, t: 0.4)
    monkeypatch.setattr(bench.time, "sleep", lambda s: None)
    real_process_time = bench.time.process_time
    monkeypatch.setattr(bench.time, "process_time", lambda: real_process_time() * 0.0)
    result = benchmark(cache_dir=tmp_path, progress=False, **TINY)
    # 2 matmuls, copy, add, launch overhead: 3 x 4 + 2 x 1 timings
    assert bench.BUSY_GIVE_UP == 3
    assert len(calls) == 3 * (1 + bench.BUSY_RETRIES) + 2
    assert "timing busy" in result.skipped
    assert result.skipped["timing busy"].startswith("5 of 5 timings")
    assert result.cache_path is None and not list(tmp_path.glob("*.json"))


def test_a_quiet_sentinel_accepts_a_single_threaded_timing(monkeypatch, tmp_path):
    # A small op runs on one thread: its own share is low on an idle machine too, and the
    # sentinel (a parallel add) decides; a quiet sentinel keeps the first timing.
    calls = []
    real = bench._time_op
    monkeypatch.setattr(bench, "_time_op", lambda fn, **kw: (calls.append(1), real(fn, **kw))[1])
    monkeypatch.setattr(bench, "BUSY_SHARE", 0.75)  # the guard on (tests/conftest.py)
    monkeypatch.setattr(bench.ContentionGuard, "share", lambda self, fn, t: 0.95)
    real_process_time = bench.time.process_time
    monkeypatch.setattr(bench.time, "process_time", lambda: real_process_time() * 0.0)
    result = benchmark(cache_dir=tmp_path, progress=False, **TINY)
    assert len(calls) == 5 and "timing busy" not in result.skipped
    assert result.cache_path is not None


def test_the_sentinel_sees_two_threads_on_one_core():
    # Real measurement in a child process: torch with 2 threads pinned to one core gets at most
    # half of its threads' time, whatever else the machine runs, so the sentinel is not quiet;
    # the share it reports is at most 1/2 (plus timer slack).
    import os
    import subprocess
    import sys

    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("needs os.sched_setaffinity (Linux)")
    code = (
        "import os, torch\n"
        "os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
        "torch.set_num_threads(2)\n"
        "from aiadvisor.hardware.bench import ContentionGuard\n"
        "g = ContentionGuard(torch, sentinel_s=0.2)\n"
        "print(g.share(g._sentinel, 0.2), g.quiet())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert float(out[0]) <= 0.55 and out[1] == "False"


def test_a_benchmark_leaves_the_callers_random_stream_as_it_was(tmp_path):
    # The timings draw random tensors; the caller's next random numbers are the ones it would
    # have drawn without the benchmark.
    import torch

    torch.manual_seed(1234)
    expected = torch.rand(4)
    torch.manual_seed(1234)
    benchmark(cache_dir=tmp_path, progress=False, refresh=True,
              **{**TINY, "ops": True, "op_elements": (2**10,)})
    assert torch.equal(torch.rand(4), expected)


def test_cold_input_grid_counts_work_as_the_profiler_does_and_cycles_its_inputs():
    import torch

    from aiadvisor.hardware.bench import _sync_fn, cold_grid
    from aiadvisor.hardware.calibrate import COLD_ELEMENTS, COLD_SUFFIX, cold_points

    calls = []

    def time_op(fn, *, sync, min_time_s):
        calls.append(fn)
        fn()
        return 1e-3

    n = 2**12
    # 2 MiB of inputs in pairs of 2 x 16 KiB: 64 pairs a cycle, so each op is one 64th of it.
    pts = cold_points(torch, dev="cpu", sync=_sync_fn(torch, "cpu"), time_op=time_op,
                      min_time_s=0.0, step=lambda _m: None, elements=(n,), cycle_bytes=2**21)
    by_op = {p.op: p for p in pts}
    assert set(by_op) == {f"aten.{o}{COLD_SUFFIX}" for o in ("add", "relu", "gelu_backward",
                                                             "native_layer_norm")}
    # fp32: add and gelu_backward read two and write one (12 bytes an element), relu 8.
    assert by_op["aten.add[cold]"].num_bytes == 12 * n
    assert by_op["aten.relu[cold]"].num_bytes == 8 * n
    assert by_op["aten.gelu_backward[cold]"].num_bytes == 12 * n
    assert all(p.seconds == pytest.approx(1e-3 / 64) for p in pts) and len(calls) == 4
    # Only grid sizes no bigger than the hot grid's largest tensor are timed cold.
    assert cold_grid((2**10, 2**12)) == ()
    assert cold_grid((2**14, 2**17, 2**20, 2**23)) == COLD_ELEMENTS


def _cache_as_calibrate_would(directory) -> bench.BenchmarkResult:
    """A (tiny, real) benchmark of the attached device stored where ``aiadvisor calibrate``
    (the default options) stores it."""
    import dataclasses

    device = detection.probe()
    result = benchmark(cache_dir=directory, progress=False, **TINY)
    config, _ = bench._resolve_config(device, None, None, None, 0.2, True, None)
    result = dataclasses.replace(result, config=config)
    bench._store(bench._cache_file(Path(directory), device.name, device.backend,
                                   torch.__version__), result)
    return result


def test_detect_calibrated_reads_the_cache_and_never_measures(tmp_path, monkeypatch):
    bare = detection.detect_calibrated(cache_dir=tmp_path)
    assert bare == detect() and not bare.measured  # nothing cached: the detected figures
    result = _cache_as_calibrate_would(tmp_path)
    other = tmp_path / "other"
    benchmark(cache_dir=other, progress=False, **TINY)  # a non-default configuration

    def no_measuring(*args, **kwargs):
        raise AssertionError("detect_calibrated measured")

    monkeypatch.setattr(bench, "_run", no_measuring)
    spec = detection.detect_calibrated(cache_dir=tmp_path)
    assert spec.measured and spec.name == bare.name
    assert spec.fp32_tflops == result.peak_tflops("fp32")
    assert spec.memory_bw_gbs == result.memory_bw_gbs
    assert spec.notes.startswith("MEASURED")
    # Read once per process: later reports do not parse the file again.
    for path in tmp_path.glob("benchmark-*.json"):
        path.unlink()
    assert detection.detect_calibrated(cache_dir=tmp_path) == spec
    # A cached benchmark of other options is not the calibration a report reads.
    assert not detection.detect_calibrated(cache_dir=other).measured


def test_a_report_with_no_hardware_uses_the_cached_calibration(benchmark_cache, monkeypatch):
    pytest.importorskip("ipywidgets")
    import aiadvisor as aa
    from aiadvisor.widgets.dashboard import Dashboard

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 8))
    x = torch.randn(16, 64)
    estimated = aa.advise(model, x)
    assert not estimated.hardware_spec.measured
    assert Dashboard(estimated).calibrate_row.layout.display != "none"
    _cache_as_calibrate_would(benchmark_cache)  # AIADVISOR_CACHE_DIR (tests/conftest.py)
    report = aa.advise(model, x)
    assert report.hardware_spec.measured
    assert report.hardware_spec.name == estimated.hardware_spec.name
    assert any(n.startswith("Calibrated with this device's own benchmark")
               for n in report.prediction.notes)
    assert Dashboard(report).calibrate_row.layout.display == "none"


def _thp_always() -> bool:
    """Transparent huge pages for every mapping: a fault then maps 2 MiB, not a 4 KiB page."""
    try:
        return "[always]" in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False


def test_fresh_pages_fault_when_first_written_whatever_the_heap_holds():
    import functools
    import platform

    from aiadvisor.hardware.calibrate import faulted_bytes, write_fresh

    if platform.system() != "Linux" or _thp_always():
        pytest.skip("counts 4 KiB minor faults (Linux without always-on huge pages)")
    # Free 256 MiB of heap first (64 x 4 MiB, a small block kept above them): a torch.empty of
    # 8 MiB could come from it; a new mapping cannot. Filling 8 MiB of new pages faults in
    # 8 MiB (2048 pages of 4 KiB); refilling the same tensor faults in none.
    blocks = [torch.empty(2**20) for _ in range(64)]
    keep = torch.empty(2**16)
    del blocks
    seen = {}

    def write(new):
        seen["dtype"], seen["numel"] = new.dtype, new.numel()
        seen["first"] = faulted_bytes(functools.partial(new.fill_, 1.0))
        seen["again"] = faulted_bytes(functools.partial(new.fill_, 2.0))
        seen["last"] = float(new[-1])

    write_fresh(torch, 8 * 2**20, write)
    assert seen["dtype"] == torch.float32 and seen["numel"] == 2 * 2**20
    assert seen["first"] >= 8 * 2**20
    assert seen["again"] < 2**20
    assert seen["last"] == 2.0
    del keep
