"""The dashboard for every kind of target a user can give: none (the attached device), "local"
(its benchmark), a catalog name and a spec the user made, on a CPU-only machine and with a CUDA
or MPS device simulated. The attached device and a user's spec are not catalog rows, so the
dashboard must never look its target up again by name (it did, and failed on every CPU)."""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("anywidget")
pytest.importorskip("altair")

import aiadvisor as aa
from aiadvisor.hardware import detection, lookup
from aiadvisor.schema import HardwareSpec
from aiadvisor.widgets.dashboard import Dashboard

#: A spec as a user would write it: a few figures, the rest unknown (None).
USER_SPEC = HardwareSpec(name="Lab box (my own figures)", vendor="Acme", kind="gpu",
                         memory_gb=24, memory_bw_gbs=936, fp32_tflops=35.6, bf16_tflops=142,
                         source="our own measurement")


def _model_and_batch():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(),
                                torch.nn.Linear(256, 64))
    return model, torch.randn(16, 64)


@pytest.fixture
def no_accelerator(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    if hasattr(torch, "xpu"):
        monkeypatch.setattr(torch.xpu, "is_available", lambda: False)


@pytest.fixture
def small_benchmark(monkeypatch, tmp_path):
    """hardware="local" benchmarks the attached device (~15-20 s with its defaults on 2 shared
    cores): a smaller, still measured benchmark, cached in tmp_path."""
    small = {"sizes": (64, 128), "precisions": ("fp32",), "bandwidth_bytes": 2**22,
             "min_time_s": 0.01, "ops": False}
    monkeypatch.setattr(detection, "detect", functools.partial(
        detection.detect, cache_dir=str(tmp_path), progress=False, benchmark_options=small))


def _fake_cuda(monkeypatch, name: str, memory_bytes: int, sms: int):
    props = SimpleNamespace(name=name, total_memory=memory_bytes, multi_processor_count=sms,
                            major=9, minor=0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: name)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: props)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(detection, "_nvml_details", lambda: {})


def _fake_mps(monkeypatch, chip: str):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(detection, "_sysctl",
                        lambda key: chip if key == "machdep.cpu.brand_string" else "")


def _lookups(monkeypatch) -> list[str]:
    """Every catalog lookup by name from here on."""
    calls: list[str] = []
    original = lookup.get

    def spy(name, *args, **kwargs):
        calls.append(name)
        return original(name, *args, **kwargs)

    monkeypatch.setattr(lookup, "get", spy)
    return calls


def _select(control, value):
    """What the browser sends when a slider or dropdown is moved: the new index."""
    labels = [o[1] if isinstance(o, tuple) else o for o in control.options]
    control.set_state({"index": labels.index(value)})


def _exercise(report, monkeypatch) -> Dashboard:
    """Open every tab, move the batch and device sliders, switch to a catalog device and back
    to the report's own target; return the dashboard. Fails on any error the dashboard shows."""
    target = report.hardware_spec
    dash = Dashboard(report, cell_id="cell-1")
    calls = _lookups(monkeypatch)
    for index in range(len(dash.views)):
        dash.tabs.set_state({"selected_index": index})
        assert dash.views[index].box.children, dash.tabs.titles[index]
    assert dash.errors.outputs == ()
    assert dash.hardware.value == target.name
    _select(dash.batch, 64)
    assert dash.report.profile.batch_size == 64
    _select(dash.devices, 8)
    assert dash.report.options["num_devices"] == 8
    assert dash.report.hardware_spec is target  # carried, not looked up again
    dash.render_all()
    assert dash.errors.outputs == ()
    _select(dash.hardware, "NVIDIA H100 SXM")
    assert dash.report.hardware_spec.name == "NVIDIA H100 SXM"
    _select(dash.hardware, target.name)
    assert dash.report.hardware_spec is target
    dash.render_all()
    assert dash.errors.outputs == (), dash.errors.outputs
    # The target is never looked up by name: only the catalog device the user picked was.
    assert target.name not in calls or target.name == "NVIDIA H100 SXM"
    cards = dash.views[-1].cards
    for (_, button, _), rec in zip(cards, dash.report.recommendations):
        assert button.code == rec.code and button.cell_id == "cell-1"
    return dash


@pytest.mark.usefixtures("no_accelerator")
def test_the_attached_cpu_with_default_arguments(monkeypatch):
    model, x = _model_and_batch()
    report = aa.advise(model, x)
    spec = report.hardware_spec
    assert spec.kind == "cpu" and spec.name == detection.detect().name
    assert report.prediction.hardware == spec.name
    dash = _exercise(report, monkeypatch)
    assert spec.name in dash.header.value


@pytest.mark.usefixtures("no_accelerator", "small_benchmark")
def test_the_benchmarked_local_device(monkeypatch):
    model, x = _model_and_batch()
    report = aa.advise(model, x, hardware="local")
    assert report.hardware_spec.measured and report.hardware_spec.kind == "cpu"
    _exercise(report, monkeypatch)


def test_a_catalog_device(monkeypatch):
    model, x = _model_and_batch()
    report = aa.advise(model, x, hardware="A100 80GB")  # an alias
    assert report.hardware_spec.name == "NVIDIA A100 80GB SXM"
    _exercise(report, monkeypatch)


def test_a_spec_the_user_made(monkeypatch):
    model, x = _model_and_batch()
    report = aa.advise(model, x, hardware=USER_SPEC)
    assert report.hardware_spec is USER_SPEC
    assert report.prediction.hardware == USER_SPEC.name
    dash = _exercise(report, monkeypatch)
    # Its memory is the line drawn on the profile's memory chart: 24 GiB (binary, see
    # HardwareSpec.memory_bytes) = 25,769,803,776 bytes.
    assert USER_SPEC.memory_bytes == 24 * 1024**3
    assert dash.report.hardware_spec.memory_bytes == 25_769_803_776


def test_a_simulated_cuda_device_in_the_catalog(monkeypatch):
    # What torch reports on an H100 SXM: "NVIDIA H100 80GB HBM3", 132 SMs, 79.6 GiB.
    _fake_cuda(monkeypatch, "NVIDIA H100 80GB HBM3", 85_520_809_984, 132)
    model, x = _model_and_batch()
    report = aa.advise(model, x)
    assert report.hardware_spec.name == "NVIDIA H100 SXM"
    assert "via cuda" in report.hardware_spec.notes
    _exercise(report, monkeypatch)


def test_a_simulated_cuda_device_not_in_the_catalog(monkeypatch):
    # A device the catalog lacks: only its memory is known (from the driver), no peaks.
    _fake_cuda(monkeypatch, "NVIDIA Imaginary 9000", 48 * 2**30, 100)
    model, x = _model_and_batch()
    report = aa.advise(model, x)
    spec = report.hardware_spec
    assert spec.name == "NVIDIA Imaginary 9000" and spec.fp32_tflops is None
    _exercise(report, monkeypatch)


def test_a_simulated_apple_gpu(monkeypatch):
    _fake_mps(monkeypatch, "Apple M2 Pro")
    model, x = _model_and_batch()
    report = aa.advise(model, x)
    spec = report.hardware_spec
    assert spec.vendor == "Apple" and "via mps" in spec.notes
    _exercise(report, monkeypatch)


def _shown(widget) -> bool:
    return widget.layout.display != "none"


@pytest.mark.usefixtures("no_accelerator", "small_benchmark")
def test_calibrate_button_measures_the_attached_cpu_and_recomputes(monkeypatch):
    model, x = _model_and_batch()
    report = aa.advise(model, x)
    estimated = report.prediction
    assert not report.hardware_spec.measured
    dash = Dashboard(report, cell_id="cell-1")
    assert _shown(dash.calibrate_row)  # the attached CPU, on estimated peaks
    statuses: list[str] = []
    dash.calibrate_status.observe(lambda change: statuses.append(change["new"]), names="value")
    dash.calibrate.click()
    assert dash.errors.outputs == (), dash.errors.outputs
    spec = dash.report.hardware_spec
    assert spec.measured and spec.kind == "cpu" and spec.name == report.hardware_spec.name
    assert any(s.startswith("calibrating: ") for s in statuses), statuses
    pred = dash.report.prediction
    assert any(n.startswith("Calibrated with this device's own benchmark") for n in pred.notes)
    assert not any(n.startswith("This CPU was not benchmarked") for n in pred.notes)
    # The same step priced on measured figures: the estimate's band carried
    # ESTIMATED_CPU_SPREAD (0.26 in quadrature, so ln(high / low) > 0.52); the calibrated one
    # the measured spread (+-20 %: ln(1.2 / (1 / 1.2)) = 0.36 with this op-less benchmark).
    assert pred.step_time_s != estimated.step_time_s
    assert math.log(estimated.high_s / estimated.low_s) > 0.52
    assert math.log(pred.high_s / pred.low_s) < math.log(estimated.high_s / estimated.low_s)
    assert not _shown(dash.calibrate_row) and not dash.calibrate.disabled
    assert dash.hardware.value == spec.name
    # Back from a catalog device, the target is the measured spec, not the estimate.
    _select(dash.hardware, "NVIDIA H100 SXM")
    assert not _shown(dash.calibrate_row)
    _select(dash.hardware, spec.name)
    assert dash.report.hardware_spec is spec and not _shown(dash.calibrate_row)


@pytest.mark.usefixtures("no_accelerator")
def test_calibrate_button_only_for_the_attached_device_and_says_a_failure(monkeypatch):
    model, x = _model_and_batch()
    catalog = Dashboard(aa.advise(model, x, hardware="NVIDIA H100 SXM"))
    assert not _shown(catalog.calibrate_row)
    report = aa.advise(model, x)
    dash = Dashboard(report)
    assert _shown(dash.calibrate_row)
    # A benchmark that fails: detect returns the unmeasured spec, naming why.
    failed = detection.detect()
    monkeypatch.setattr(detection, "detect", lambda benchmark=False, **kw: failed)
    monkeypatch.setattr(detection, "benchmark_failure_for",
                        lambda spec: "RuntimeError: no timer" if spec is failed else None)
    dash.calibrate.click()
    assert "the calibration failed (RuntimeError: no timer)" in dash.calibrate_status.value
    assert dash.report is report and _shown(dash.calibrate_row)
    assert not dash.calibrate.disabled and dash.errors.outputs == ()


def test_no_calibrate_button_for_an_attached_gpu(monkeypatch):
    # The attached GPU's catalog row has datasheet figures, not estimated ones.
    _fake_cuda(monkeypatch, "NVIDIA H100 80GB HBM3", 85_520_809_984, 132)
    model, x = _model_and_batch()
    report = aa.advise(model, x)
    assert report.hardware_spec.kind == "gpu"
    assert report.hardware_spec.name == detection.detect().name
    assert not _shown(Dashboard(report).calibrate_row)
