"""DashboardChart: spec updates in place, quick (unvalidated) builds, the offline vega bundle."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("altair")
pytest.importorskip("anywidget")

import altair as alt
from altair.utils import schemapi

from aiadvisor.errors import AIAdvisorError
from aiadvisor.widgets import charts
from aiadvisor.widgets.charts import DashboardChart, quick_charts, use_offline_bundle


@pytest.fixture
def cdn_view():
    """DashboardChart as first imported (CDN view); whatever a test bundles is undone after."""
    saved = DashboardChart.__dict__.get("_esm")
    if saved is not None:
        del DashboardChart._esm
    yield
    if "_esm" in DashboardChart.__dict__:
        del DashboardChart._esm
    if saved is not None:
        DashboardChart._esm = saved


def _bar(values):
    chart = alt.Chart(mark=alt.MarkDef(type="bar")).encode(x=alt.X("v:Q"), y=alt.Y("k:N"))
    chart.data = alt.Data(values=[{"k": str(i), "v": v} for i, v in enumerate(values)])
    return chart


def test_show_replaces_the_spec_in_place():
    widget = DashboardChart(_bar([1.0]))
    assert widget.spec["data"]["values"] == [{"k": "0", "v": 1.0}]
    widget.show(_bar([2.0, 3.0]))
    assert widget.spec == _bar([2.0, 3.0]).to_dict()  # same as a validated to_dict()
    assert widget.embed_options["renderer"] == "svg"  # CSS can recolour SVG for dark themes


def test_quick_charts_switches_validation_off_only_inside():
    before = schemapi.DEBUG_MODE
    with quick_charts():
        assert schemapi.DEBUG_MODE is False
    assert schemapi.DEBUG_MODE == before


@pytest.mark.usefixtures("cdn_view")
def test_offline_never_keeps_the_cdn_view():
    assert use_offline_bundle("never") is False
    assert "_esm" not in DashboardChart.__dict__


@pytest.mark.usefixtures("cdn_view")
def test_offline_always_without_vl_convert_says_how_to_fix(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(charts.importlib.util, "find_spec",
                        lambda name, *a: None if name == "vl_convert" else real(name, *a))
    with pytest.raises(AIAdvisorError, match="pip install vl-convert-python"):
        use_offline_bundle("always")
    assert use_offline_bundle("auto") is False


@pytest.mark.skipif(importlib.util.find_spec("vl_convert") is None,
                    reason="vl-convert-python not installed")
@pytest.mark.usefixtures("cdn_view")
def test_offline_bundle_carries_vega_instead_of_importing_it(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert use_offline_bundle("auto") is True
    esm = DashboardChart.__dict__["_esm"]
    assert "https://esm.sh" not in esm and len(esm) > 100_000
    assert list((tmp_path / "aiadvisor").glob("jupyterchart-*.js"))  # cached for next time
    assert DashboardChart(_bar([1.0]))._esm == esm
