"""The dashboard over a real report: controls set as the front end sets them, lazy tab redraws,
errors routed to the Output, insert buttons and the plain-text fallback."""

from __future__ import annotations

import html

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("anywidget")
pytest.importorskip("altair")

import aiadvisor as aa
from aiadvisor.errors import AIAdvisorError
from aiadvisor.widgets.dashboard import Dashboard, headline_html
from aiadvisor.widgets.insert import InsertCellButton

TARGET = "NVIDIA A100 80GB SXM"


@pytest.fixture(scope="module")
def report():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(),
                                torch.nn.Linear(256, 64))
    return aa.advise(model, torch.randn(16, 64), hardware=TARGET, model_name="model",
                     inputs_name="x")


@pytest.fixture
def dash(report):
    return Dashboard(report, cell_id="cell-3")


def _front_end_selects(slider, value):
    """What the browser sends when a selection slider is moved: the new index."""
    slider.set_state({"index": list(slider.options).index(value)})


def test_controls_start_at_the_reports_options(dash, report):
    assert dash.batch.value == report.profile.batch_size == 16
    assert dash.devices.value == 1
    # No precision was given: the dropdown says "auto" and names the advisor's choice.
    assert report.pinned_options["precision"] is None
    assert dash.precision.value == "auto"
    assert dash.precision.label == f"auto ({report.options['precision']})"
    assert dash.hardware.value == TARGET
    # An MLP on (16, 64) has no sequence dimension: the slider is hidden.
    assert dash.seq.disabled and dash.seq.layout.display == "none"
    assert dash.tabs.titles == ("Profile", "Hardware", "Precision", "Parallelism",
                                "Recommendations")


def test_only_the_visible_tab_is_drawn(dash):
    assert dash._stale == {1, 2, 3, 4}  # Profile drawn, the rest when opened
    profile_tab = dash.views[0].box
    assert len(profile_tab.children) == 4  # summary, memory, modules, roofline
    dash.tabs.set_state({"selected_index": 4})
    assert 4 not in dash._stale
    assert len(dash.views[4].cards_box.children) == len(dash.report.recommendations)


def test_a_tab_drawn_for_old_settings_is_dimmed_until_redrawn(dash):
    recs = dash.views[4]
    dash.tabs.set_state({"selected_index": 4})
    assert "aiadvisor-stale" not in recs.box._dom_classes
    old_code = recs.cards[0][1].code
    dash.tabs.set_state({"selected_index": 0})
    _front_end_selects(dash.batch, 64)
    # The cards still hold the batch-16 plan, so they take no clicks until the tab is opened.
    assert "aiadvisor-stale" in recs.box._dom_classes
    assert "aiadvisor-stale" not in dash.views[0].box._dom_classes
    assert recs.cards[0][1].code == old_code
    dash.tabs.set_state({"selected_index": 4})
    assert "aiadvisor-stale" not in recs.box._dom_classes
    assert recs.cards[0][1].code == dash.report.recommendations[0].code


def test_batch_slider_recomputes_from_the_captured_profile(dash, report):
    memory_chart = dash.views[0].charts["memory"]
    before = dict(memory_chart.spec)
    _front_end_selects(dash.batch, 64)
    assert dash.report is not report
    assert dash.report.profile.batch_size == 64
    # Forward FLOPs of the two Linear layers scale with the batch: 2*64*(64*256 + 256*64).
    assert dash.report.profile.flops_forward == pytest.approx(2 * 64 * 2 * 64 * 256, rel=0.01)
    assert "batch 64" in dash.header.value
    assert memory_chart.spec != before  # redrawn in place, same widget
    assert dash.errors.outputs == ()


def test_precision_and_devices_reach_the_report(dash):
    dash.precision.value = "bf16"
    assert dash.report.prediction.precision == "bf16"
    _front_end_selects(dash.devices, 8)
    assert dash.report.options["num_devices"] == 8
    dash.tabs.selected_index = 3
    assert (dash.report.parallel["strategy"].str.len() > 0).all()
    assert "× 8" in dash.header.value


def test_precision_can_be_pinned_and_unpinned_again(dash, report):
    auto = report.options["precision"]
    pinned = "fp32" if auto != "fp32" else "bf16"
    dash.precision.value = pinned
    assert dash.report.pinned_options["precision"] == pinned
    assert dash.report.prediction.precision == pinned
    assert dash.precision.label == pinned
    dash.precision.value = "auto"
    assert dash.report.pinned_options["precision"] is None
    assert dash.report.prediction.precision == auto
    assert dash.precision.label == f"auto ({auto})"
    # Unpinned stays unpinned when another control moves.
    _front_end_selects(dash.batch, 32)
    assert dash.precision.value == "auto" and dash.report.pinned_options["precision"] is None


def test_report_notes_show_under_the_headline(dash):
    # fp8 on an A100 (no fp8 engine): the advisor explains the fallback in report.notes.
    dash.precision.value = "fp8"
    assert dash.report.notes
    for text in dash.report.notes:
        assert html.escape(text) in dash.header.value


def test_target_device_changes_the_prediction(dash):
    dash.hardware.value = "NVIDIA H100 SXM"
    assert dash.report.prediction.hardware == "NVIDIA H100 SXM"
    assert "NVIDIA H100 SXM" in dash.header.value


def test_a_failing_recompute_goes_to_the_output_and_the_controls_go_back(dash, monkeypatch):
    def refuse(**changes):
        raise AIAdvisorError(f"cannot advise for {changes}")

    monkeypatch.setattr(type(dash.report), "with_options", lambda self, **c: refuse(**c))
    _front_end_selects(dash.batch, 32)
    (output,) = dash.errors.outputs
    assert output["name"] == "stderr"
    assert output["text"] == "cannot advise for {'batch_size': 32}\n"
    assert dash.batch.value == 16  # back to what the report shows


def test_an_unexpected_error_shows_its_traceback(dash, monkeypatch):
    monkeypatch.setattr(type(dash.report), "with_options",
                        lambda self, **c: (_ for _ in ()).throw(ZeroDivisionError("boom")))
    dash.precision.value = "fp16"
    text = dash.errors.outputs[-1]["text"]
    assert "Traceback" in text and "ZeroDivisionError: boom" in text
    assert dash.precision.value == "auto"  # back to what the report shows


def test_recommendation_cards_carry_code_and_the_cell(dash):
    dash.tabs.selected_index = 4
    recs = dash.report.recommendations
    assert recs, "a tiny MLP on a big GPU should trigger tactics"
    for i, card in enumerate(dash.views[4].cards_box.children):
        head, button = card.children
        assert isinstance(button, InsertCellButton)
        assert button.code == recs[i].code
        assert button.cell_id == "cell-3"
        assert recs[i].title.split()[0] in head.value
        assert "estimated" in head.value or recs[i].estimated is False


def test_the_plan_is_drawn_above_the_cards_as_a_waterfall(dash):
    dash.tabs.selected_index = 4
    view = dash.views[4]
    assert view.box.children[0] is view.plan_box
    chart = view.charts["plan"]
    plan = dash.report.plan
    label = "step 1" if len(plan) == 1 else f"steps 1-{len(plan)}"
    assert f"With {label} applied" in view.plan_box.children[1].value
    assert chart is view.plan_box.children[0]


def test_cards_reuse_their_buttons_after_a_recompute(dash):
    dash.tabs.selected_index = 4
    first = dash.views[4].cards_box.children[0].children[1]
    first.set_state({"status": "inserted", "num_clicks": 1})
    _front_end_selects(dash.batch, 64)
    again = dash.views[4].cards_box.children[0].children[1]
    assert again is first and again.code == dash.report.recommendations[0].code


def test_hardware_filters_narrow_the_table(dash):
    dash.tabs.selected_index = 1
    view = dash.views[1]
    assert "AMD" in view.vendor.options
    view.vendor.value = "AMD"
    table = view.box.children[-1].value
    assert "AMD Instinct" in table and "NVIDIA H100 SXM" not in table
    view.fits_only.value = True
    assert dash.errors.outputs == ()


def test_hardware_tab_says_which_precision_each_device_runs(dash):
    # %advise without --precision: each device at its best full-rate precision (A100: bf16).
    dash.tabs.selected_index = 1
    shown = " ".join(getattr(w, "value", "") for w in dash.views[1].box.children)
    assert "ranked at its best full-rate precision for training" in shown
    row = dash.report.hardware.set_index("hardware").loc[TARGET]
    assert row["precision"] == "bf16" and dash.report.prediction.precision == "fp32"


def test_plain_text_is_the_full_report(dash):
    bundle = dash._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert data["text/plain"] == str(dash.report)
    assert "application/vnd.jupyter.widget-view+json" in data


def test_every_tab_draws_without_errors(dash):
    dash.render_all()
    assert dash._stale == set()
    assert dash.errors.outputs == ()
    # Estimated figures say so: the headline and each table's footnote.
    assert "estimated" in dash.header.value
    for view in dash.views[1:4]:
        assert "estimated" in view.box.children[-1].value


def test_headline_without_a_prediction(report):
    class NoPrediction:
        profile = report.profile
        prediction = None

    html = headline_html(NoPrediction())
    assert "Sequential" in html and "batch 16" in html and "per step" not in html


def test_hardware_tab_rent_own_toggle_and_budget_filter(dash):
    dash.tabs.selected_index = 1
    view = dash.views[1]
    rented = dash.report.hardware.set_index("hardware")
    assert rented.loc["NVIDIA RTX PRO 6000 Blackwell", "usd_per_hour"] == 0.66  # packet.ai
    shown = " ".join(getattr(w, "value", "") for w in view.box.children)
    assert "rental price where a device has one" in shown
    view.basis.value = "own"  # as the front end sets it
    assert dash.errors.outputs == ()
    assert dash.report.options["price"]["basis"] == "own"
    owned = dash.report.hardware.set_index("hardware")
    # 8565 USD / (3 * 8760 * 0.5) h + 600 W * 0.15 $/kWh = 0.65183 + 0.09 = 0.74183 $/h.
    assert owned.loc["NVIDIA RTX PRO 6000 Blackwell", "usd_per_hour"] == pytest.approx(
        0.74183, abs=1e-5)
    view = dash.views[1]
    assert view.basis.value == "own"
    # A budget of 0.2 $/device-hour keeps the amortised RTX 4090 (0.189) and drops the
    # RTX 5090 (0.238), the rented H100 SXM (3.78) and every unpriced row.
    view.max_usd.value = 0.2
    table = view.box.children[-1].value
    assert "NVIDIA GeForce RTX 4090" in table and "NVIDIA GeForce RTX 5090" not in table
    assert "NVIDIA H100 SXM" not in table and "Huawei Ascend 910B" not in table
    assert dash.errors.outputs == ()


def test_hardware_tab_segment_filter(dash):
    dash.tabs.selected_index = 1
    view = dash.views[1]
    assert {"datacenter", "workstation", "consumer", "edge"} <= set(view.segment.options)
    view.segment.value = "workstation"
    table = view.box.children[-1].value
    assert "NVIDIA RTX PRO 6000 Blackwell" in table and "NVIDIA H100 SXM" not in table
    assert "NVIDIA GeForce RTX 4090" not in table  # consumer
    assert dash.errors.outputs == ()
