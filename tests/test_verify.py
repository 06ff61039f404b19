"""aa.verify appends its measurement to the local store, and the next prediction for the
attached device is corrected by it."""

from __future__ import annotations

import functools
import math

import pytest
import torch

import aiadvisor as aa
from aiadvisor.costmodel import measurements


@pytest.fixture(scope="module")
def small_benchmark(tmp_path_factory):
    """A small (still measured) benchmark of the attached CPU without the op grid, once for
    this module (cached in a temporary folder): the defaults take ~15-20 s on 2 shared cores."""
    from aiadvisor.hardware import detection

    small = {"sizes": (64, 128), "precisions": ("fp32",), "bandwidth_bytes": 2**22,
             "min_time_s": 0.01, "ops": False}
    cache = str(tmp_path_factory.mktemp("benchmark"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(detection, "detect", functools.partial(
            detection.detect, cache_dir=cache, progress=False, benchmark_options=small))
        yield


def _net():
    torch.manual_seed(0)
    return (torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10)), torch.randn(16, 64))


@pytest.mark.usefixtures("small_benchmark")
def test_verify_records_and_the_next_prediction_is_corrected(measurement_store):
    net, x = _net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    first = aa.verify(net, x, mode="train", precision="fp32", model_name="net")
    assert first.recorded_to == str(measurement_store)
    (rec,) = measurements.load()
    assert rec.source == "verify" and rec.model == "Sequential" and rec.mode == "train"
    assert rec.device == first.hardware.name and rec.batch_size == 16
    assert rec.measured_step_s == first.measured_step_time_s
    assert rec.predicted_step_s == first.prediction.step_time_s  # uncorrected: empty store
    assert rec.flops == first.profile.flops_forward + first.profile.flops_backward
    assert rec.torch_version == torch.__version__ and rec.aiadvisor_version == aa.__version__
    # One record at ratio r with 2 prior pseudo-records: factor r^(1/3).
    again = aa.predict(first.profile, hardware="local", precision="fp32")
    assert again.correction == pytest.approx(rec.ratio ** (1 / 3))
    assert again.step_time_s == pytest.approx(rec.predicted_step_s * rec.ratio ** (1 / 3))
    assert "corrected by 1 measurement on this device" in again.notes[0]
    # The second verification shows the corrected prediction and says so; its record keeps
    # the uncorrected one, so that ratios always compare with the same cost model.
    second = aa.verify(net, x, mode="train", precision="fp32", model_name="net")
    assert second.prediction.correction_records == 1
    assert "corrected by 1 earlier measurement" in str(second)
    latest = measurements.load()[-1]
    assert latest.predicted_step_s == pytest.approx(second.prediction.uncorrected_step_time_s)
    assert math.isclose(latest.predicted_step_s, rec.predicted_step_s, rel_tol=1e-9)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())


@pytest.mark.usefixtures("small_benchmark")
def test_verify_with_record_false_leaves_the_store_alone(measurement_store):
    net, x = _net()
    v = aa.verify(net, x, mode="infer", precision="fp32", record=False)
    assert v.recorded_to is None and not measurement_store.exists()


@pytest.mark.usefixtures("small_benchmark")
def test_verify_plan_records_the_step_as_you_run_it(measurement_store):
    from types import SimpleNamespace

    from aiadvisor.codegen import CodeNames
    from aiadvisor.costmodel import resolve_hardware

    net, x = _net()
    prof = aa.profile(net, x, mode="infer")
    spec = resolve_hardware("local")

    def report(precision):
        return SimpleNamespace(recommendations=[], profile=prof, hardware_spec=spec,
                               _names=CodeNames(model="net", inputs="x"),
                               options={"mode": "infer", "precision": precision,
                                        "num_devices": 1})

    result = aa.verify_plan(net, x, report("fp32"), warmup=1, repeats=3)
    (rec,) = measurements.load()
    assert result.recorded_to == str(measurement_store) and rec.source == "verify_plan"
    assert rec.measured_step_s == pytest.approx(result.baseline_seconds_per_sample * 16)
    assert rec.num_steps == 3
    expected = aa.predict(prof, hardware=spec, precision="fp32", correction=False)
    assert rec.predicted_step_s == pytest.approx(expected.step_time_s)
    # A report in bf16 predicted another step than the plain one measured: not recorded.
    assert aa.verify_plan(net, x, report("bf16"), warmup=1, repeats=3).recorded_to is None
    assert len(measurements.load()) == 1
