"""Serving charts: tokens/s against concurrency and TPOT against context, from small tables."""

from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("altair")

from aiadvisor.viz.serving import throughput_chart, tpot_context_chart


def _values(spec, part):
    data = part["data"]
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


PLAN = pd.DataFrame({
    "weight_precision": ["bf16", "bf16", "bf16", "int4", "int4"],
    "batch_size": [1, 2, 4, 1, 2],
    "tokens_per_s": [50.0, 95.0, 180.0, 120.0, 230.0],
    "fits": [True, True, False, True, True],  # 4 bf16 sequences do not fit
})


def test_throughput_chart_has_one_line_per_format_of_what_fits():
    spec = throughput_chart(PLAN, current=2).to_dict()
    lines, rule = spec["layer"]
    points = _values(spec, lines)
    assert [(p["series"], p["concurrency"]) for p in points] == [
        ("bf16", 1), ("bf16", 2), ("int4", 1), ("int4", 2)]
    assert lines["encoding"]["x"]["scale"]["type"] == "log"
    assert _values(spec, rule) == [{"concurrency": 2}]
    assert "estimated" in spec["title"]["subtitle"][0]


def test_tpot_chart_in_milliseconds_with_the_target_thicker():
    curves = pd.DataFrame({"hardware": ["A", "A", "B"], "context_len": [256, 128, 128],
                           "tpot_s": [0.012, 0.010, 0.020]})
    spec = tpot_context_chart(curves, highlight="A", current=128).to_dict()
    points = _values(spec, spec["layer"][0])
    # Sorted by device, then context; seconds shown as ms (0.010 s = 10 ms).
    assert [(p["device"], p["context"], p["tpot_ms"], p["target"]) for p in points] == [
        ("A", 128, 10.0, True), ("A", 256, 12.0, True), ("B", 128, 20.0, False)]
    assert _values(spec, spec["layer"][1]) == [{"context": 128}]
