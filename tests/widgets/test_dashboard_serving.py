"""The Serving tab of a ``mode="generate"`` dashboard: its sliders answer from the captured
generation profile (no re-trace) with the figures ``aa.predict_generation`` and
``aa.plan_serving`` give when called directly."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("anywidget")
pytest.importorskip("altair")

import aiadvisor as aa
import aiadvisor.serving
from aiadvisor import examples
from aiadvisor.units import fmt_seconds
from aiadvisor.widgets import html as H
from aiadvisor.widgets.dashboard import Dashboard
from aiadvisor.widgets.views import ServingView


@pytest.fixture
def no_accelerator(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    if hasattr(torch, "xpu"):
        monkeypatch.setattr(torch.xpu, "is_available", lambda: False)


def _select(control, value):
    """What the browser sends when a slider or dropdown is moved: the new index."""
    labels = [o[1] if isinstance(o, tuple) else o for o in control.options]
    control.set_state({"index": labels.index(value)})


def _tiny_llama():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   vocab_size=1000, max_position_embeddings=256)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg), torch.zeros(1, 64, dtype=torch.long)


def _layer_values(spec: dict, index: int) -> list[dict]:
    data = spec["layer"][index]["data"]
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


def _check_shows_direct_figures(dash: Dashboard, view: ServingView) -> None:
    """The summary and the plan table are what the public functions give for the controls."""
    report = dash.report
    req = view.request()
    g = aa.predict_generation(report.generation_profile, hardware=report.hardware_spec,
                              num_devices=report.options["num_devices"], **req)
    summary = view.summary.value
    assert f"TTFT <b>{fmt_seconds(g.ttft_s)}</b>" in summary
    assert f"TPOT <b>{fmt_seconds(g.tpot_s)}</b>" in summary
    assert f"<b>{g.tokens_per_s:,.0f}</b> tokens/s" in summary or g.tokens_per_s < 100
    assert f"{g.max_batch:,} concurrent sequences" in summary and H.ESTIMATED in summary
    plan = aa.plan_serving(report.generation_profile, hardware=report.hardware_spec,
                           num_devices=report.options["num_devices"],
                           prompt_len=req["prompt_len"], output_len=req["output_len"])
    table = next(w.value for w in view.box.children if "Serving plans on" in getattr(
        w, "value", ""))
    best = plan.iloc[0]
    assert H.format_value("tokens_per_s", best["tokens_per_s"]) in table
    assert f"(the first {min(len(plan), view.TABLE_ROWS)} of {len(plan)})" in table
    # The insert buttons carry the code of the serving recommendations for these lengths.
    recs = report.serving_recommendations(prompt_len=req["prompt_len"],
                                          output_len=req["output_len"])
    assert [b.code for _, b, _ in view.cards[:len(recs)]] == [r.code for r in recs]
    assert all(b.cell_id == "cell-1" for _, b, _ in view.cards)
    assert dash.errors.outputs == (), dash.errors.outputs


def _exercise(report, monkeypatch, moves) -> Dashboard:
    dash = Dashboard(report, cell_id="cell-1")
    assert dash.tabs.titles[-1] == "Serving" and dash.tabs.selected_index == len(dash.views) - 1
    view = dash.views[-1]
    assert isinstance(view, ServingView) and view.box.children
    _check_shows_direct_figures(dash, view)
    traces = []
    monkeypatch.setattr(aiadvisor.serving, "profile_generation",
                        lambda *a, **k: traces.append(a))
    for name, value in moves:
        before = view.summary.value
        _select(getattr(view, name), value)
        assert getattr(view, name).value == value
        _check_shows_direct_figures(dash, view)
        assert view.summary.value != before, name
    assert traces == []  # every answer came from the captured profile
    return dash


def test_tiny_gpt_on_the_attached_cpu_with_default_arguments(no_accelerator, monkeypatch):
    model, x = examples.build("tiny-gpt")  # 8 x 512 tokens, 512 positions
    report = aa.advise(model, x, mode="generate")
    assert report.hardware_spec.kind == "cpu"
    dash = _exercise(report, monkeypatch, [("concurrency", 8), ("prompt", 256),
                                           ("output", 64)])
    view = dash.views[-1]
    # CPUs keep the cache in the model's dtype: no fp8 KV among the choices; the weights are
    # the format the CPU runs (bf16, else fp16, else fp32).
    assert "fp8" not in view.kv.options
    assert view.weights.value == report.serving_defaults()["weight_precision"]


def test_tiny_gpt_on_a_catalog_gpu(monkeypatch):
    model, x = examples.build("tiny-gpt")
    report = aa.advise(model, x, mode="generate", hardware="NVIDIA L4")
    dash = _exercise(report, monkeypatch, [("concurrency", 64), ("prompt", 128),
                                           ("output", 256), ("weights", "int4"), ("kv", "fp8")])
    view = dash.views[-1]
    # TPOT vs context: the L4 and the ranking's first three other devices, one line each.
    devices = {r["device"] for r in _layer_values(view.charts["context"].spec, 0)}
    assert len(devices) == 4 and "NVIDIA L4" in devices
    # Tokens/s vs concurrency: one line per weight format at fp8 KV.
    lines = _layer_values(view.charts["throughput"].spec, 0)
    assert {r["series"] for r in lines} == set(view.weights.options)


def test_tiny_llama_from_transformers(monkeypatch):
    model, ids = _tiny_llama()
    report = aa.advise(model, ids, mode="generate", hardware="NVIDIA H100 SXM")
    # 2 (K, V) x 2 layers x 2 KV heads x 16 dims x 2 bytes (bf16)
    assert report.generation.kv_bytes_per_token == 256
    _exercise(report, monkeypatch, [("concurrency", 16), ("output", 64), ("prompt", 128),
                                    ("weights", "fp8")])


def test_a_request_beyond_the_positions_is_refused_and_the_slider_goes_back():
    model, x = examples.build("tiny-gpt")
    report = aa.advise(model, x, mode="generate", hardware="NVIDIA L4")
    dash = Dashboard(report, cell_id="cell-1")
    view = dash.views[-1]
    before = view.summary.value
    _select(view.output, max(view.output.options))  # 511 output tokens after 384 of prompt
    (error,) = dash.errors.outputs
    assert "prompt_len + output_len = 384 + 511 = 895 is not valid" in error["text"]
    assert "expected at most 512 tokens" in error["text"]
    assert view.output.value == 128 and view.summary.value == before


def test_other_modes_have_no_serving_tab():
    model = torch.nn.Sequential(torch.nn.Linear(16, 16))
    dash = Dashboard(aa.advise(model, torch.randn(4, 16), hardware="NVIDIA L4"))
    assert "Serving" not in dash.tabs.titles and len(dash.views) == 5


def test_a_cpu_without_16_bit_floats_serves_fp32_weights(monkeypatch):
    # An AMD EPYC 9654 in the catalog has no BF16/FP16 figure (as the AVX2-only EPYC VM of
    # 2026-12-07 had no BF16 instructions): the report's weights default to fp32, and the plan
    # must offer them beside the weight-only formats that compute on the same FP32 engine. It
    # had dropped fp32 wherever any other format ran, and the tab failed to open (fp32 not
    # among the choices).
    model, x = examples.build("tiny-gpt")
    report = aa.advise(model, x, mode="generate", hardware="AMD EPYC 9654")
    assert report.serving_defaults()["weight_precision"] == "fp32"
    plan = report.serving_plan(prompt_len=256, output_len=64)
    assert set(plan["weight_precision"]) == {"fp32", "int8wo", "int4", "nf4"}
    # A CPU with BF16 keeps its default (bf16) and leaves fp32 out of the plan.
    bf16 = aa.advise(model, x, mode="generate", hardware="Intel Xeon Platinum 8480+")
    assert "fp32" not in set(bf16.serving_plan(prompt_len=256, output_len=64)["weight_precision"])
    dash = _exercise(report, monkeypatch, [("concurrency", 8), ("weights", "int4")])
    view = dash.views[-1]
    assert list(view.weights.options) == ["fp32", "int8wo", "int4", "nf4"]
