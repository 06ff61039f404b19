"""The local measurement store (costmodel/measurements.py) and the per-device correction it
feeds (costmodel/correction.py)."""

from __future__ import annotations

import json
import os

import pytest

import aiadvisor
from aiadvisor.costmodel import measurements, predict
from aiadvisor.costmodel.correction import correction_for, from_records

from .conftest import make_profile, make_spec, op


def _record(ratio: float = 1.2, *, device: str = "Test CPU", kind: str = "cpu",
            predicted: float = 0.010, version: str | None = None) -> measurements.Measurement:
    return measurements.Measurement(
        device=device, device_key=measurements.device_key(kind, device), model="Linear",
        flops=2e9, batch_size=8, mode="train", precision="fp32", predicted_step_s=predicted,
        measured_step_s=predicted * ratio, num_steps=5,
        aiadvisor_version=version or aiadvisor.__version__, torch_version="2.x",
        timestamp=measurements.now_utc())


def test_the_store_defaults_to_the_cache_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("AIADVISOR_MEASUREMENTS")
    monkeypatch.setenv("AIADVISOR_CACHE_DIR", str(tmp_path))
    assert measurements.store_path() == tmp_path / "measurements.json"


def test_append_adds_records_in_order_with_a_schema_version(measurement_store):
    assert measurements.load() == []
    first, second = _record(1.1), _record(0.9)
    assert measurements.append(first) == measurement_store
    measurements.append(second)
    assert measurements.load() == [first, second]
    data = json.loads(measurement_store.read_text())
    assert data["schema_version"] == measurements.SCHEMA_VERSION == 1
    assert data["records"][1]["measured_step_s"] == pytest.approx(0.009)
    # No temporary file is left beside it.
    assert sorted(p.name for p in measurement_store.parent.iterdir()
                  if not p.name.endswith(".lock")) == ["measurements.json"]


@pytest.mark.parametrize("where", ["write", "rename"])
def test_a_crash_before_the_rename_leaves_the_old_file_intact(measurement_store, monkeypatch,
                                                               where):
    measurements.append(_record(1.1))
    before = measurement_store.read_bytes()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed")

    if where == "write":  # dies while the temporary file is being written
        monkeypatch.setattr(measurements.json, "dump", crash)
    else:  # written and flushed, dies before os.replace
        monkeypatch.setattr(measurements.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        measurements.append(_record(1.3))
    assert measurement_store.read_bytes() == before
    assert len(measurements.load()) == 1
    assert [p.name for p in measurement_store.parent.iterdir() if p.suffix == ".tmp"] == []


def test_a_corrupt_store_is_kept_aside_not_deleted(measurement_store):
    measurement_store.write_text('{"schema_version": 1, "records": [', encoding="utf-8")
    assert measurements.load() == []  # reading never moves anything
    assert measurement_store.exists()
    with pytest.warns(UserWarning, match="kept aside as measurements.corrupt-"):
        measurements.append(_record(1.1))
    aside = [p for p in measurement_store.parent.iterdir() if "corrupt" in p.name]
    assert len(aside) == 1 and aside[0].read_text() == '{"schema_version": 1, "records": ['
    assert len(measurements.load()) == 1


def test_an_older_schema_is_kept_aside_and_a_newer_one_left_alone(measurement_store):
    measurement_store.write_text(json.dumps({"schema_version": 0, "records": []}))
    with pytest.warns(UserWarning, match="kept aside as measurements.v0-"):
        measurements.append(_record(1.1))
    assert len(measurements.load()) == 1
    newer = json.dumps({"schema_version": 2, "records": [{"future": True}]})
    measurement_store.write_text(newer)
    with pytest.warns(UserWarning, match="newer aiadvisor"):
        assert measurements.append(_record(1.1)) is None
    assert measurement_store.read_text() == newer
    assert measurements.load() == []


def test_clear_empties_the_store_and_says_how_many(measurement_store):
    for _ in range(3):
        measurements.append(_record())
    assert measurements.clear() == 3
    assert measurements.load() == [] and measurement_store.exists()
    assert measurements.clear() == 0


def test_a_record_refuses_a_non_positive_time():
    with pytest.raises(aiadvisor.AIAdvisorError, match=r"measured_step_s=0\.0 is not valid"):
        _record(0.0)


# -- the correction ---------------------------------------------------------------------------
def test_four_records_at_1_2_move_the_factor_two_thirds_of_the_way():
    fix = from_records([1.2] * 4)
    # mu = 4 ln 1.2 / (4 + 2) = (2/3) ln 1.2 -> factor 1.2^(2/3) = 1.12924.
    assert fix.factor == pytest.approx(1.2 ** (2 / 3)) == pytest.approx(1.12924, abs=1e-5)
    # s^2 = (2 * 0.15^2 + 4 * (ln 1.2 / 3)^2) / 6 = (0.045 + 0.014774) / 6 = 0.0099623;
    # k = sqrt(0.0099623) / 0.15 = 0.66541.
    assert fix.band_scale == pytest.approx(0.66541, abs=1e-4)
    assert fix.num_records == 4


def test_the_band_narrows_as_consistent_evidence_grows():
    scales = [from_records([1.2] * n).band_scale for n in (1, 2, 5, 10, 50)]
    assert scales == sorted(scales, reverse=True)
    # n = 1: s^2 = (2 * 0.0225 + (ln 1.2 * 2/3)^2) / 3 = (0.045 + 0.014774) / 3 = 0.019925
    #   -> k = sqrt(0.019925) / 0.15 = 0.94103;
    # n = 10: s^2 = (0.045 + 10 * (ln 1.2 / 6)^2) / 12 = (0.045 + 0.0092338) / 12 = 0.0045195
    #   -> k = 0.44818.
    assert scales[0] == pytest.approx(0.94103, abs=1e-4)
    assert scales[3] == pytest.approx(0.44818, abs=1e-4)
    # Scattered records (0.7x and 1.4x) support a wider band than the prior.
    assert from_records([0.7, 1.4] * 5).band_scale > 1


def test_apply_rescales_the_band_in_log_space_around_the_new_point():
    fix = from_records([1.2] * 4)
    step, low, high = fix.apply(1.0, 0.8, 1.5)
    assert step == pytest.approx(1.12924, abs=1e-5)
    assert low == pytest.approx(step * 0.8 ** fix.band_scale)
    assert high == pytest.approx(step * 1.5 ** fix.band_scale)


def test_only_this_device_and_this_version_count(measurement_store):
    assert correction_for("cpu", "Test CPU") is None  # no records: off
    measurements.append(_record(1.2))
    measurements.append(_record(3.0, device="Other CPU"))
    measurements.append(_record(3.0, version="0.0.1"))
    fix = correction_for("cpu", "Test CPU")
    assert fix.num_records == 1 and fix.factor == pytest.approx(1.2 ** (1 / 3))


def _measured_cpu():
    return make_spec(name="Test CPU", vendor="Test", kind="cpu", measured=True)


def test_predictions_for_the_benchmarked_device_carry_the_correction(monkeypatch,
                                                                      exact_model):
    prof = make_profile([op("aten.mm", "gemm", "forward", flops=2e12, bytes_read=3e8,
                            bytes_written=1e8)])
    spec = _measured_cpu()
    plain = predict(prof, hardware=spec, precision="fp32", model=exact_model)
    assert plain.correction is None and not any("corrected by" in n for n in plain.notes)
    for _ in range(4):
        measurements.append(_record(1.2))
    fixed = predict(prof, hardware=spec, precision="fp32", model=exact_model)
    factor = 1.2 ** (2 / 3)
    assert fixed.correction == pytest.approx(factor) and fixed.correction_records == 4
    assert fixed.step_time_s == pytest.approx(plain.step_time_s * factor)
    assert fixed.throughput == pytest.approx(plain.throughput / factor)
    assert fixed.uncorrected_step_time_s == pytest.approx(plain.step_time_s)
    assert fixed.notes[0].startswith("Step time corrected by 4 measurements on this device "
                                     "(x1.13;")
    # The same profile on a catalog device, or with the switch off, is not corrected.
    assert predict(prof, hardware=make_spec(name="Test CPU", kind="cpu"), precision="fp32",
                   model=exact_model).correction is None
    off = predict(prof, hardware=spec, precision="fp32", model=exact_model, correction=False)
    assert off.step_time_s == plain.step_time_s
    monkeypatch.setenv("AIADVISOR_MEASURED_CORRECTION", "0")
    assert predict(prof, hardware=spec, precision="fp32", model=exact_model).correction is None


def test_a_read_only_folder_costs_the_record_not_the_measurement(monkeypatch, tmp_path):
    if os.name != "posix" or os.geteuid() == 0:
        pytest.skip("needs a POSIX user the permissions apply to")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    monkeypatch.setenv("AIADVISOR_MEASUREMENTS", str(folder / "measurements.json"))
    try:
        with pytest.warns(UserWarning, match="could not be written"):
            assert measurements.append(_record()) is None
    finally:
        folder.chmod(0o700)


def test_the_report_and_the_dashboard_say_the_prediction_is_corrected(exact_model):
    from types import SimpleNamespace

    import pandas as pd

    from aiadvisor.recommend.render import summary_lines

    prof = make_profile([op("aten.mm", "gemm", "forward", flops=2e12, bytes_read=3e8,
                            bytes_written=1e8)])
    for _ in range(4):
        measurements.append(_record(1.2))
    pred = predict(prof, hardware=_measured_cpu(), precision="fp32", model=exact_model)
    report = SimpleNamespace(profile=prof, prediction=pred, parallel=pd.DataFrame(), notes=[],
                             options={"mode": "infer", "num_devices": 1, "hardware": "Test CPU",
                                      "precision": "fp32"})
    line = next(x for x in summary_lines(report) if x.startswith("Corrected"))
    assert line.startswith("Corrected by 4 measurements on this device (x1.13; ")
    pytest.importorskip("ipywidgets")
    from aiadvisor.widgets.dashboard import headline_html

    assert "Corrected by 4 measurements on this device (x1.13; " in headline_html(report)
