"""Benchmarks run only where the user asks for the local device, once, and never in predict().

Every benchmark here is the made-up one of ``_result`` (or a failure): the tests are about who
starts a benchmark, how often, and what a prediction says when none is available.
"""

from __future__ import annotations

import pytest

from aiadvisor.costmodel import api, predict
from aiadvisor.hardware import bench, detection
from aiadvisor.hardware.bench import BandwidthPoint, BenchmarkResult, MatmulPoint

from .conftest import make_profile, make_spec, op


def _result() -> BenchmarkResult:
    """A benchmarked CPU: 0.1 TFLOP/s fp32 matmul at n=1024, 10 GB/s copy, 5 us per op."""
    return BenchmarkResult(
        device_name="Test CPU", backend="cpu", torch_version="9.9", date="2026-12-02T00:00:00",
        library_versions={}, config={},
        matmul=(MatmulPoint(precision="fp32", n=1024, seconds=2 * 1024**3 / 1e11, tflops=0.1),),
        bandwidth=(BandwidthPoint(op="copy", num_bytes=2 * 10**9, seconds=0.2, gbs=10.0),),
        launch_overhead_us=5.0)


def _cpu(**overrides):
    fields = {"name": "Test CPU", "vendor": "AMD", "kind": "cpu", "fp32_tflops": 0.05,
              "bf16_tflops": None, "fp16_tflops": None, "tf32_tflops": None,
              "fp8_tflops": None, "memory_bw_gbs": 5, "launch_overhead_us": 8.0}
    return make_spec(**{**fields, **overrides})


def _profile():
    # 2.147e9 FLOPs of fp32 matmul: 21.5 ms at the measured 0.1 TFLOP/s.
    return make_profile([op("aten.mm", "gemm", "forward", flops=2 * 1024**3,
                            bytes_read=8 * 1024**2, bytes_written=4 * 1024**2)])


@pytest.fixture
def calls(monkeypatch, tmp_path):
    """Every benchmark start, recorded; an empty benchmark cache; a fresh process state."""
    started = []
    monkeypatch.setenv("AIADVISOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(api, "_CURVES", {})
    monkeypatch.setattr(detection, "_RUNS", {})
    monkeypatch.setattr(detection, "_FAILED", {})
    monkeypatch.setattr(detection, "probe", lambda: detection.DetectedDevice(
        backend="cpu", name="Test CPU", spec=_cpu(), torch_version="9.9"))
    return started


def _recording(calls, outcome):
    def fake_benchmark(**kwargs):
        calls.append(kwargs)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return fake_benchmark


def test_predict_never_starts_a_benchmark(monkeypatch, calls):
    import aiadvisor.hardware

    fake = _recording(calls, RuntimeError("must not run"))
    monkeypatch.setattr(bench, "benchmark", fake)
    monkeypatch.setattr(aiadvisor.hardware, "benchmark", fake)
    # A spec marked measured whose benchmark is neither in this process nor in the cache.
    orphan = _cpu(measured=True, fp32_tflops=0.1, memory_bw_gbs=10, launch_overhead_us=5.0)
    pred = predict(_profile(), hardware=orphan, precision="fp32")
    assert calls == []
    assert any("neither in this process nor in the benchmark cache" in n for n in pred.notes)
    assert not any(n.startswith("Calibrated with this device") for n in pred.notes)


def test_predict_reads_the_benchmark_cache_without_measuring(monkeypatch, calls, tmp_path):
    monkeypatch.setattr(bench, "benchmark", _recording(calls, RuntimeError("must not run")))
    result = _result()
    bench._store(tmp_path / "benchmark-test-cpu-cpu-torch9.9.json", result)
    spec = result.apply_to(_cpu())
    monkeypatch.setattr(bench, "_APPLIED", {})  # a later process: only the disk cache has it
    pred = predict(_profile(), hardware=spec, precision="fp32")
    assert calls == []
    assert pred.confidence == "medium"
    assert any(n.startswith("Calibrated with this device") for n in pred.notes)
    # The measured matmul curve: 2.147e9 / 1e11 = 21.47 ms (> 12.6 MB / 10 GB/s), + 5 us,
    # x1.04 (CPU_IN_STEP_FACTOR): 22.339 ms.
    assert pred.step_time_s == pytest.approx((2 * 1024**3 / 1e11 + 5e-6) * 1.04, rel=1e-9)


def test_local_device_is_benchmarked_once_with_a_progress_bar(monkeypatch, calls):
    monkeypatch.setattr(bench, "benchmark", _recording(calls, _result()))
    first = api.resolve_hardware("local")
    pred = predict(_profile(), hardware="local", precision="fp32")
    assert len(calls) == 1 and calls[0]["progress"] is True
    assert first.measured and first.fp32_tflops == pytest.approx(0.1)
    assert pred.confidence == "medium"
    assert pred.step_time_s == pytest.approx((2 * 1024**3 / 1e11 + 5e-6) * 1.04, rel=1e-9)


def test_failed_local_benchmark_is_reported_not_swallowed(monkeypatch, calls):
    monkeypatch.setattr(bench, "benchmark",
                        _recording(calls, RuntimeError("perf counters unavailable")))
    spec = api.resolve_hardware("local")
    assert not spec.measured
    assert "Benchmark failed (RuntimeError: perf counters unavailable)" in spec.notes
    pred = predict(_profile(), hardware="local", precision="fp32")
    assert len(calls) == 1  # the failure is remembered, not re-run on every prediction
    assert pred.notes[0].startswith(
        "Calibration of this device failed (RuntimeError: perf counters unavailable)")
    # It ran on the detected peak instead: 2.147e9 FLOPs at 0.05 TFLOP/s, at least 42.9 ms.
    assert pred.step_time_s >= 2 * 1024**3 / 0.05e12
