"""Fixtures for every test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def measurement_store(tmp_path_factory, monkeypatch):
    """A fresh, empty measurement store per test (``aa.verify`` appends to it and
    ``hardware="local"`` predictions read it), never the user's ~/.cache; notebook kernels
    started by a test inherit it."""
    path = tmp_path_factory.mktemp("measurements") / "measurements.json"
    monkeypatch.setenv("AIADVISOR_MEASUREMENTS", str(path))
    monkeypatch.delenv("AIADVISOR_MEASURED_CORRECTION", raising=False)
    return path


@pytest.fixture(autouse=True)
def benchmark_cache(tmp_path_factory, monkeypatch):
    """An empty device-benchmark cache per test, never the user's ~/.cache: a report with no
    hardware reads a cached benchmark of the attached device (detect_calibrated), so a
    developer's `aiadvisor calibrate` must not change what the tests see; notebook kernels
    started by a test inherit it."""
    path = tmp_path_factory.mktemp("benchmarks")
    monkeypatch.setenv("AIADVISOR_CACHE_DIR", str(path))
    return path


@pytest.fixture(autouse=True)
def no_contention_retries(monkeypatch):
    """Device benchmarks in tests accept every timing: the contention guard would otherwise
    retry, and leave uncached, a test's tiny benchmark whenever the test machine is busy (tests
    of caching would depend on the load). The guard itself is tested with this undone
    (tests/hardware/test_bench.py)."""
    from aiadvisor.hardware import bench

    monkeypatch.setattr(bench, "BUSY_SHARE", 0.0)
