"""Charts over the advisor's tables (hardware ranking, parallel plans, precisions)."""

from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("altair")

from aiadvisor.recommend.ranking import pareto_front
from aiadvisor.viz.plans import memory_per_device_chart, pareto_chart, precision_chart

GiB = 1024**3


def _values(spec, part):
    data = part["data"]
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


RANKING = pd.DataFrame({
    "name": ["A", "B", "C", "D", "E"],
    "vendor": ["v1", "v1", "v2", "v2", "v3"],
    # $/1M samples and samples/s. A: cheapest; B: faster and dearer; C: slower and dearer than
    # B (dominated); D: fastest; E: no price (cannot be placed).
    "usd_per_million_samples": [1.0, 2.0, 3.0, 5.0, None],
    "throughput": [100.0, 300.0, 200.0, 900.0, 50.0],
    "fits": [True, True, False, True, True],
})


def test_pareto_front_keeps_only_undominated_rows():
    front = pareto_front(RANKING, cost="usd_per_million_samples", speed="throughput")
    assert front.tolist() == [True, True, False, True, False]


def test_pareto_front_ties_are_both_kept():
    tied = pd.DataFrame({"c": [1.0, 1.0], "s": [5.0, 5.0]})
    assert pareto_front(tied, cost="c", speed="s").tolist() == [True, True]


def test_pareto_chart_draws_the_front_in_cost_order_and_says_what_is_missing():
    spec = pareto_chart(RANKING, cost="usd_per_million_samples", speed="throughput",
                        cost_title="$ per 1M samples", speed_title="samples/s").to_dict()
    line, points, labels = spec["layer"]
    assert [r["name"] for r in _values(spec, labels)] == ["A", "B", "D"]
    assert [r["name"] for r in _values(spec, line)] == ["A", "B", "D"]
    shapes = {r["name"]: r["fit_text"] for r in _values(spec, points)}
    assert shapes == {"A": "fits", "B": "fits", "C": "does not fit", "D": "fits"}
    assert points["encoding"]["x"]["scale"]["type"] == "log"
    assert spec["title"]["subtitle"][0].startswith("estimated")
    assert "1 device(s) without a price" in spec["title"]["subtitle"][1]


def test_pareto_chart_labels_only_front_points_that_do_not_overprint():
    # B2 is 1 % dearer and 1 % faster than B: on the front, but its label would print over
    # B's (log axes span 1-5 $ and 100-900 samples/s: 1 % is under a percent of either).
    # Its point and tooltip stay; D, far from both, keeps its label.
    ranking = pd.concat([RANKING, pd.DataFrame({
        "name": ["B2"], "vendor": ["v1"], "usd_per_million_samples": [2.02],
        "throughput": [303.0], "fits": [True]})], ignore_index=True)
    spec = pareto_chart(ranking, cost="usd_per_million_samples", speed="throughput",
                        cost_title="$ per 1M samples", speed_title="samples/s").to_dict()
    line, points, labels = spec["layer"]
    assert [r["name"] for r in _values(spec, line)] == ["A", "B", "B2", "D"]
    assert "B2" in {r["name"] for r in _values(spec, points)}
    assert [r["name"] for r in _values(spec, labels)] == ["A", "B", "D"]


def test_pareto_chart_draws_the_tables_front_not_its_own():
    # The ranking's front over A, B, C is A and B (C is slower and dearer than B). Shown without
    # B (e.g. "fits only"), C beats nothing it is shown with but is still not on the table's
    # front: the chart draws the table's column, so chart and table agree (before, the chart
    # recomputed the front of what it was given and drew A and C).
    ranking = RANKING.iloc[:3].assign(
        pareto=pareto_front(RANKING.iloc[:3], cost="usd_per_million_samples",
                            speed="throughput"))
    assert ranking["pareto"].tolist() == [True, True, False]
    shown = ranking[ranking["name"] != "B"]
    spec = pareto_chart(shown, cost="usd_per_million_samples", speed="throughput",
                        cost_title="$ per 1M samples", speed_title="samples/s").to_dict()
    line, points, _labels = spec["layer"]
    assert [r["name"] for r in _values(spec, line)] == ["A"]
    assert {r["name"]: r["pareto"] for r in _values(spec, points)} == {"A": True, "C": False}


def test_memory_per_device_chart_marks_plans_that_do_not_fit():
    plans = pd.DataFrame({"strategy": ["ddp", "fsdp"],
                          "memory_per_device_bytes": [96 * GiB, 24 * GiB],
                          "fits": [False, True]})
    spec = memory_per_device_chart(plans, memory="memory_per_device_bytes", label="strategy",
                                   device_memory_bytes=80 * 10**9, device_name="H100").to_dict()
    bars, rule = spec["layer"]
    rows = {r["plan"]: (r["value"], r["fit_text"]) for r in _values(spec, bars)}
    assert rows == {"ddp": (96.0, "does not fit"), "fsdp": (24.0, "fits")}  # GiB
    assert _values(spec, rule)[0]["value"] == pytest.approx(80e9 / GiB)  # 74.5 GiB
    assert bars["encoding"]["x"]["title"] == "GiB per device"


def test_precision_chart_mutes_unusable_precisions_and_draws_the_range():
    table = pd.DataFrame({"precision": ["fp32", "bf16", "fp8", "int4"],
                          "speedup_vs_fp32": [1.0, 7.5, float("nan"), 2.0],
                          "speedup_low": [1.0, 6.0, float("nan"), float("nan")],
                          "speedup_high": [1.0, 9.0, float("nan"), float("nan")],
                          "usable": [True, True, False, False]})
    spec = precision_chart(table, precision="precision", speedup="speedup_vs_fp32",
                           supported="usable", low="speedup_low", high="speedup_high").to_dict()
    bars, whiskers, one = spec["layer"]
    # fp8 has no prediction: left out; int4 is drawn but muted.
    assert [(r["precision"], r["speedup"], r["support"]) for r in _values(spec, bars)] == [
        ("fp32", 1.0, "usable"), ("bf16", 7.5, "usable"), ("int4", 2.0, "not usable here")]
    assert [(r["precision"], r["low"], r["high"]) for r in _values(spec, whiskers)] == [
        ("fp32", 1.0, 1.0), ("bf16", 6.0, 9.0)]
    assert _values(spec, one) == [{"one": 1.0}]


def test_plan_waterfall_runs_from_one_to_the_cumulative_speedup():
    from aiadvisor.viz.plans import plan_waterfall_chart

    # Three steps: 2x, then 0.8x (checkpointing: slower, saves memory), then 1.5x:
    # throughput 1 -> 2 -> 1.6 -> 2.4 times the start.
    plan = pd.DataFrame({"title": ["bf16", "checkpointing", "compile"],
                         "speedup_step": [2.0, 0.8, 1.5],
                         "speedup_cumulative": [2.0, 1.6, 2.4]})
    spec = plan_waterfall_chart(plan).to_dict()
    bars = _values(spec, spec["layer"][0])
    assert [(b["start"], b["end"]) for b in bars] == [(0.0, 1.0), (1.0, 2.0), (2.0, 1.6),
                                                      (1.6, 2.4)]
    assert [b["kind"] for b in bars] == ["start", "faster", "slower", "faster"]
    assert [b["text"] for b in bars[1:]] == ["2.00x", "0.80x", "1.50x"]
    assert bars[1]["step"] == "1. bf16"
