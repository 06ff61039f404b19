"""HTML pieces of the dashboard: unit formatting by column name, escaping, recommendation cards."""

from __future__ import annotations

import math

import pytest

from aiadvisor.schema import Recommendation
from aiadvisor.widgets.html import format_value, kv_table, recommendation_card, table

GiB = 1024**3


@pytest.mark.parametrize(("column", "value", "text"), [
    ("memory_per_device_bytes", 3 * GiB, "3.00 GiB"),
    ("step_time_s", 0.0123, "12.3 ms"),
    ("step_time_s", 2.5, "2.50 s"),
    ("flops_forward", 2.5e12, "2.50 TFLOP"),
    ("bf16_tflops", 989.4, "989.4 TFLOP/s"),
    ("memory_bw_gbs", 3350.0, "3,350 GB/s"),
    ("usd_per_hour", 3.78, "$3.78"),
    ("usd_per_million_samples", 0.00123, "$0.0012"),
    ("usd_per_million_samples", 12345.0, "$12,345"),
    ("speedup_vs_fp32", 1.5, "1.50×"),
    ("energy_per_sample_j_upper_bound", 0.0123, "0.0123 J"),
    ("cost_per_million_samples_usd", 4.5, "$4.50"),
    ("fits", True, "yes"),
    ("fits", False, "no"),
    ("num_devices", 8, "8"),
    ("throughput", 392831.98, "392,832"),
    ("throughput", 12.345, "12.3"),
    ("step_time_s", None, "–"),
    ("step_time_s", math.nan, "–"),
    ("strategy", "fsdp+offload", "fsdp+offload"),
])
def test_format_value_uses_the_unit_in_the_column_name(column, value, text):
    assert format_value(column, value) == text


def test_table_escapes_data_and_marks_rows():
    rows = [{"name": "<script>alert(1)</script>", "fits": True},
            {"name": "B & C", "fits": False}]
    out = table(rows, [("name", "device"), ("fits", "fits")],
                highlight=lambda r: r["fits"], muted=lambda r: not r["fits"])
    assert "<script>" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "B &amp; C" in out
    assert out.count('class="aiadvisor-best"') == 1
    assert out.count('class="aiadvisor-muted"') == 1
    assert "<th>device</th><th>fits</th>" in out


def test_kv_table_escapes_values():
    assert "<td>a &lt;b&gt;</td>" in kv_table([("k", "a <b>")])


def _rec(**changes):
    return Recommendation(**{
        "id": "bf16", "title": "Train in bf16 <mixed>", "category": "precision",
        "rationale": "GEMMs are 94% of the FLOPs", "code": "x = 1", "predicted_speedup": 2.1,
        "speedup_low": 1.7, "speedup_high": 2.6, "memory_saving_bytes": 2 * GiB, **changes})


def test_recommendation_card_says_what_why_gain_interval_and_memory():
    card = recommendation_card(_rec(), 3)
    assert '<span class="aiadvisor-num">3</span>' in card
    assert "Train in bf16 &lt;mixed&gt;" in card
    assert "GEMMs are 94% of the FLOPs" in card
    assert "2.10× as fast (likely 1.70–2.60×)" in card
    assert "saves 2.00 GiB per device" in card
    assert "estimated" in card
    assert "%advise --insert 3" in card


def test_recommendation_card_memory_cost_and_no_speed_figure():
    card = recommendation_card(_rec(predicted_speedup=None, speedup_low=None,
                                    speedup_high=None, memory_saving_bytes=-GiB), 1)
    assert "no speed change predicted" in card
    assert "needs 1.00 GiB more per device" in card


def test_recommendation_card_without_an_interval_shows_the_point_alone():
    # The cost model could not separate the two predictions: no "likely" range.
    card = recommendation_card(_rec(predicted_speedup=1.03, speedup_low=None,
                                    speedup_high=None), 1)
    assert "1.03× as fast;" in card and "likely" not in card


def test_measured_recommendation_is_not_called_estimated():
    card = recommendation_card(_rec(estimated=False), 1)
    assert "(measured)" in card and "estimated" not in card
