"""Total and active parameters of a mixture-of-experts model in the report and the dashboard."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import aiadvisor as aa

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# Tiny Mixtral by hand: embed and head 2 x 256 x 64 = 32768; per layer attention 12288, router
# 512, experts 8 x 3 x 64 x 128 = 196608, norms 128; 2 layers + final norm 64 -> 451,904;
# active per token (top-2 of 8): less 6/8 of the 393,216 expert parameters -> 156,992.
EXPECTED = "451,904 parameters (156,992 active per token: top-2 of 8 experts)"


@pytest.fixture(scope="module")
def prof():
    cfg = transformers.MixtralConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=8,
        num_experts_per_tok=2)
    with torch.device("meta"):
        model = transformers.MixtralForCausalLM(cfg)
    return aa.profile(model, {"input_ids": torch.zeros(1, 16, dtype=torch.long)}, mode="infer",
                      scaling=False)


def _report(prof):
    # What the renderers read of a Report (aa.advise builds the real one, in tens of seconds).
    import pandas as pd

    return SimpleNamespace(profile=prof, prediction=None, parallel=pd.DataFrame(), notes=[],
                           options={"mode": "infer", "num_devices": 1, "hardware": "H100 SXM",
                                    "precision": "bf16"})


def test_report_summary_shows_total_and_active_parameters(prof):
    from aiadvisor.recommend.render import summary_lines

    assert EXPECTED in summary_lines(_report(prof))[0]


def test_dashboard_profile_tab_and_headline_show_them(prof):
    pytest.importorskip("ipywidgets")
    from aiadvisor.widgets.dashboard import headline_html
    from aiadvisor.widgets.views import _summary_html

    assert EXPECTED in _summary_html(prof)
    assert EXPECTED in headline_html(_report(prof))


def test_dense_model_shows_one_count():
    from aiadvisor.units import fmt_params

    prof = aa.profile(torch.nn.Linear(8, 4), torch.zeros(2, 8), scaling=False)
    assert fmt_params(prof) == "36 parameters"   # 8 x 4 + 4
