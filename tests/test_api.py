"""aa.advise and the Report: fields, recomputation without re-tracing, renderings, bad input,
and a hostile hardware catalog that must not change the generated code."""

from __future__ import annotations

import ast
import dataclasses
import json
import re

import pytest
import torch

import aiadvisor as aa
from aiadvisor.errors import InvalidArgumentError, UnknownHardwareError
from aiadvisor.schema import ModelProfile, Prediction, Recommendation


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(256, 256) for _ in range(4))
        self.head = torch.nn.Linear(256, 10)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return MLP()


@pytest.fixture(scope="module")
def report(model):
    return aa.advise(model, torch.randn(32, 256), hardware="H100 SXM", model_name="net",
                     inputs_name="batch", optimizer_name="opt")


def test_report_fields(report):
    assert isinstance(report.profile, ModelProfile)
    # 4 x (256 x 256 + 256) + 256 x 10 + 10 parameters, counted by hand
    assert report.profile.num_params == 4 * (256 * 256 + 256) + 2570
    assert isinstance(report.prediction, Prediction)
    assert report.prediction.hardware == "NVIDIA H100 SXM"
    assert report.options == {"hardware": "NVIDIA H100 SXM", "num_devices": 1,
                              "precision": "fp32", "batch_size": 32, "seq_len": None,
                              "mode": "train", "budget_usd_per_hour": None, "price": None}
    assert len(report.hardware) == len(aa.hardware.all_specs())
    assert list(report.precision["precision"]) == ["fp32", "tf32", "bf16", "fp16", "fp8",
                                                   "mxfp8", "fp4", "int8", "int8wo", "int4", "nf4"]
    assert report.parallel.iloc[0]["strategy"] == "ddp"
    assert report.recommendations and all(isinstance(r, Recommendation)
                                          for r in report.recommendations)
    for rec in report.recommendations:
        names = {n.id for n in ast.walk(ast.parse(rec.code)) if isinstance(n, ast.Name)}
        assert "model" not in names and "x" not in names  # the user's names are used


def test_report_is_read_only(report):
    with pytest.raises(AttributeError, match="read-only"):
        report.options = {}


def test_with_options_recomputes_without_retracing(report, monkeypatch):
    import aiadvisor.profiler

    def no_trace(*args, **kwargs):
        raise AssertionError("with_options must not re-trace the model")

    monkeypatch.setattr(aiadvisor.profiler, "profile", no_trace)
    bigger = report.with_options(batch_size=64, num_devices=4)
    assert bigger.options["batch_size"] == 64 and bigger.options["num_devices"] == 4
    # forward FLOPs of Linear layers are linear in the batch: exactly twice those at 32
    assert bigger.profile.flops_forward == pytest.approx(2 * report.profile.flops_forward)
    assert (bigger.parallel["dp"] * bigger.parallel["tp"] * bigger.parallel["pp"] == 4).all()
    assert bigger.prediction.num_devices == 4
    other = report.with_options(hardware="A100 80GB SXM", precision="bf16")
    assert other.options["hardware"] == "NVIDIA A100 80GB SXM"
    assert other.prediction.precision == "bf16"
    assert report.options["batch_size"] == 32  # the original is unchanged


def test_with_options_rejects_unknown_or_bad_options(report):
    with pytest.raises(InvalidArgumentError, match="'mode'.*new advise"):
        report.with_options(mode="infer")
    with pytest.raises(InvalidArgumentError, match="num_devices=0"):
        report.with_options(num_devices=0)
    with pytest.raises(InvalidArgumentError, match="precision='fp64'"):
        report.with_options(precision="fp64")
    with pytest.raises(UnknownHardwareError, match="Did you mean"):
        report.with_options(hardware="H100 SXMM")


def test_json_round_trips(report):
    text = report.to_json()
    data = json.loads(text)
    assert data == report.to_dict()
    assert "NaN" not in text
    assert data["options"]["hardware"] == "NVIDIA H100 SXM"
    assert [r["id"] for r in data["recommendations"]] == [r.id for r in report.recommendations]
    assert len(data["hardware"]) == len(report.hardware)


def test_markdown_and_text(report):
    md = report.to_markdown()
    assert md.startswith("# aiadvisor report")
    assert md.count("```python") == len(report.recommendations)
    assert "| plan | memory/device |" in md
    text = str(report)
    assert "Recommendations" in text and report.recommendations[0].title in text
    assert "estimate" in text  # figures are labelled as estimates
    assert repr(report).startswith("<aiadvisor.Report net: train on 1 x NVIDIA H100 SXM")
    # One device: the parallel ranking's single-device row is not presented as a "plan".
    assert "One device, no parallelism: the step fits in" in md
    assert "Best plan: ddp" not in md


def test_html_is_self_contained_and_theme_aware(report):
    html = report._repr_html_()
    assert html.startswith("<style>") and 'class="aiadvisor-report"' in html
    assert "<script" not in html and "<iframe" not in html
    # colors come from JupyterLab's theme variables (with fallbacks), never hard-coded white
    assert "var(--jp-ui-font-color1" in html and "#fff" not in html.lower()
    assert html.count('class="aa-card"') == len(report.recommendations)
    # code is shown as escaped text
    first = report.recommendations[0].code
    assert first.splitlines()[0].replace('"', "&quot;").replace("'", "&#x27;") in html


def test_precision_the_device_lacks_is_explained(model):
    report = aa.advise(model, torch.randn(32, 256), hardware="T4", precision="fp8")
    assert report.options["precision"] == "fp16"
    assert report.options["requested_precision"] == "fp8"
    assert any("fp8" in n and "NVIDIA T4" in n for n in report.notes)


def test_a_model_larger_than_any_plan_is_explained():
    from .recommend.conftest import make_profile

    # 70e9 parameters in 80 blocks of 8.75e8 on one 8 GB Jetson (7.2e9 usable): even with
    # every state offloaded, FSDP's working copy of a block (2 x 8.75e8 x 2 + 8.75e8 x 2 =
    # 5.25e9 bytes) plus checkpointed activations (80 x 1e8 block inputs) is over 7.2e9.
    huge = make_profile(num_params=7 * 10**10, num_blocks=80, block_params=875 * 10**6,
                        block_act=10**9, block_out=10**8, other_act=10**9, batch_size=1)
    report = aa.advise(huge, hardware="Jetson Orin Nano 8GB", precision="bf16")
    assert not report.parallel["fits"].any()
    assert any("Nothing fits on 1 x NVIDIA Jetson Orin Nano 8GB" in n for n in report.notes)
    assert str(report) and report._repr_html_()  # renders, nothing raised


@pytest.mark.parametrize("name", ["1net", "net work", "class", "net;import os", ""])
def test_names_are_validated_before_profiling(model, name, monkeypatch):
    import aiadvisor.profiler

    monkeypatch.setattr(aiadvisor.profiler, "profile", lambda *a, **k: pytest.fail("traced"))
    with pytest.raises(InvalidArgumentError, match="Python variable name"):
        aa.advise(model, torch.randn(4, 256), model_name=name)


def test_bad_options_raise(model):
    with pytest.raises(InvalidArgumentError, match="mode='eval'.*'train', 'infer'"):
        aa.advise(model, torch.randn(4, 256), mode="eval")
    with pytest.raises(InvalidArgumentError, match="budget_usd_per_hour=-1"):
        aa.advise(model, torch.randn(4, 256), budget_usd_per_hour=-1)


def test_default_hardware_is_the_attached_device(model):
    report = aa.advise(model, torch.randn(8, 256), mode="infer")
    assert report.options["hardware"] == aa.hardware.detect().name
    assert report.options["mode"] == "infer"


def test_budget_marks_the_rows_within_it(report):
    cheap = report.with_options(budget_usd_per_hour=1.0)
    priced = cheap.hardware[cheap.hardware["usd_per_hour"].notna()]
    expected = priced["usd_per_hour"] * priced["num_devices"] <= 1.0
    assert (priced["within_budget"].astype(bool) == expected).all()
    assert any("$1/hour" in n for n in cheap.notes)


def _all_code(report) -> list[str]:
    return [r.code for r in report.recommendations]


def test_hostile_hardware_csv_cannot_change_the_generated_code(tmp_path, model):
    path = tmp_path / "evil.csv"
    path.write_text(
        "name,vendor,kind,memory_gb,memory_bw_gbs,fp32_tflops,tf32_tflops,bf16_tflops,"
        "fp16_tflops,interconnect,source,notes\n"
        '"EVIL"" GPU\'; import os; os.system(""echo pwned"") #\n'
        'x = 1 <script>alert(1)</script>",NVIDIA,gpu,80,3350,67,494.7,989.4,989.4,'
        '"NVLink\n__import__(\'os\')","x"" + __import__(\'os\').system(\'id\') + """,'
        '"notes\nwith a newline"\n'
    )
    evil = next(s for s in aa.hardware.all_specs(path) if s.name.startswith("EVIL"))
    assert "\n" in evil.name and "<script>" in evil.name
    benign = dataclasses.replace(evil, name="Benign GPU", interconnect="NVLink", source="",
                                 notes="")
    prof = aa.profile(model, torch.randn(32, 256))
    bad = aa.advise(prof, hardware=evil, num_devices=8)
    good = aa.advise(prof, hardware=benign, num_devices=8)
    assert [r.id for r in bad.recommendations] == [r.id for r in good.recommendations]
    assert _all_code(bad) == _all_code(good)  # byte for byte
    for code in _all_code(bad):
        assert "pwned" not in code and "EVIL" not in code and "__import__" not in code
        ast.parse(code)
    html = bad._repr_html_()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert json.loads(bad.to_json())["options"]["hardware"] == evil.name


def test_rationales_use_binary_units_like_the_memory_lines(report):
    # The cards' memory lines use fmt_bytes (MiB, GiB); the rationales must too.
    text = " ".join(r.rationale for r in report.recommendations)
    assert not re.search(r"\d (kB|MB|GB)\b", text)
    assert re.search(r"\d (KiB|MiB|GiB)\b", text)


def test_unpinned_precision_ranks_each_device_at_its_best(report):
    # advise(precision=None): the headline stays in fp32 (what plain PyTorch runs), the ranking
    # runs each device at its best full-rate precision (datasheets: H100/MI300X bf16, T4 fp16).
    assert report.prediction.precision == "fp32"
    rows = report.hardware.set_index("hardware")["precision"]
    assert rows["NVIDIA H100 SXM"] == "bf16" and rows["AMD Instinct MI300X"] == "bf16"
    assert rows["NVIDIA T4"] == "fp16"
    sentence = "Each device is ranked at its best full-rate precision for training"
    assert sentence in str(report) and sentence in report.to_markdown()
    assert sentence in report._repr_html_() and "stays in fp32" in str(report)
    assert json.loads(report.to_json())["hardware_note"].startswith(sentence)
    # Re-advising for another batch keeps it unpinned; pinning a precision ranks at it.
    bigger = report.with_options(batch_size=64)
    assert bigger.hardware.set_index("hardware").loc["NVIDIA H100 SXM", "precision"] == "bf16"
    pinned = report.with_options(precision="fp32")
    assert set(pinned.hardware["precision"]) - {""} == {"fp32"}
    assert sentence not in str(pinned) and "ranked at fp32, as pinned" in str(pinned)


def test_profile_for_advice_is_the_trace_advise_makes(model, report):
    from aiadvisor.api import profile_for_advice, trace_precision

    x = torch.randn(32, 256)
    prof = profile_for_advice(model, x, mode="train")
    # forward FLOPs: 2 x batch x (4 x 256 x 256 + 256 x 10) multiply-adds, counted by hand
    assert prof.flops_forward == 2 * 32 * (4 * 256 * 256 + 256 * 10)
    assert prof.precision == "fp32" and prof.mode == "train"
    split = aa.advise(prof, x, hardware="H100 SXM")
    assert split.prediction.step_time_s == pytest.approx(report.prediction.step_time_s)
    # Training in fp8 traces in bf16 autocast (PyTorch has no fp8 training path of its own).
    assert trace_precision("fp8", mode="train") == "bf16"
    assert profile_for_advice(model, x, precision="fp8").precision == "bf16"
    with pytest.raises(InvalidArgumentError, match="precision='fp64'"):
        profile_for_advice(model, x, precision="fp64")


@pytest.fixture(scope="module")
def train_profile(model):
    return aa.profile(model, torch.randn(8, 256), mode="train", optimizer="adamw")


@pytest.mark.parametrize(("option", "value", "captured", "fix"), [
    ("mode", "infer", "train", "profile again with mode='infer'"),
    ("optimizer", "sgd", "adamw", "profile again with optimizer='sgd'"),
])
def test_advise_refuses_options_a_profile_did_not_capture(train_profile, option, value,
                                                          captured, fix):
    from aiadvisor.errors import ProfileOptionError

    # Before: advise(profile, mode="infer") returned a training report without a word.
    with pytest.raises(ProfileOptionError) as info:
        aa.advise(train_profile, hardware="H100 SXM", **{option: value})
    message = str(info.value)
    assert f"{option}={value!r}" in message and f"captured with {option}={captured!r}" in message
    assert f"omit {option}=" in message and fix in message
    assert isinstance(info.value, aa.AIAdvisorError)


def test_advise_on_an_inference_profile_names_its_missing_optimizer(model):
    from aiadvisor.errors import ProfileOptionError

    infer = aa.profile(model, torch.randn(8, 256), mode="infer")
    assert infer.optimizer == "none"  # inference traces no optimizer step
    with pytest.raises(ProfileOptionError, match="optimizer='adamw'.*optimizer='none'.*"
                                                 "mode='train', optimizer='adamw'"):
        aa.advise(infer, hardware="H100 SXM", optimizer="adamw")
    # The defaults (None) mean "as captured": no error, and the report keeps the profile's mode.
    assert aa.advise(infer, hardware="H100 SXM").options["mode"] == "infer"


def test_advise_measure_needs_a_measured_profile(model, train_profile):
    from aiadvisor.errors import ProfileOptionError

    assert train_profile.measured_step_time_s is None
    with pytest.raises(ProfileOptionError, match=r"measure=True .*without a measurement.*"
                                                 r"profile again with measure=True"):
        aa.advise(train_profile, hardware="H100 SXM", measure=True)
    with pytest.raises(InvalidArgumentError, match="measure='yes'.*True, False or None"):
        aa.advise(train_profile, hardware="H100 SXM", measure="yes")
    measured = aa.profile(model, torch.randn(8, 256), measure=True, measure_steps=1)
    assert measured.measured_step_time_s is not None
    assert aa.advise(measured, hardware="H100 SXM", measure=True).profile.measured_step_time_s \
        == measured.measured_step_time_s


def test_advise_accepts_the_options_a_profile_was_captured_with(train_profile):
    same = aa.advise(train_profile, hardware="H100 SXM", mode="train", optimizer="adamw",
                     measure=False)
    default = aa.advise(train_profile, hardware="H100 SXM")
    assert same.prediction.step_time_s == default.prediction.step_time_s
    with pytest.raises(InvalidArgumentError, match="mode='eval'.*'train', 'infer'"):
        aa.advise(train_profile, hardware="H100 SXM", mode="eval")


def test_price_rule_is_an_option_and_the_ranking_says_which_price(report):
    rented = report.hardware.set_index("hardware")
    # Default: rent where a price exists (RTX PRO 6000 0.66 $/h at packet.ai, 2026-06).
    assert rented.loc["NVIDIA RTX PRO 6000 Blackwell", "usd_per_hour"] == 0.66
    owned = report.with_options(price={"basis": "own", "years": 4})
    assert owned.options["price"] == {"basis": "own", "years": 4.0, "utilisation": 0.5,
                                      "usd_per_kwh": 0.15}
    row = owned.hardware.set_index("hardware").loc["NVIDIA RTX PRO 6000 Blackwell"]
    # 8565 USD / (4 * 8760 * 0.5 h) + 600 W * 0.15 $/kWh = 0.48887 + 0.09 = 0.57887 $/h.
    assert row["usd_per_hour"] == pytest.approx(8565 / 17520 + 0.09, abs=1e-5)
    assert row["price_basis"].startswith("own: 8,565 USD over 4 y")
    assert "4 years" in owned.hardware.attrs["price_note"]
    with pytest.raises(InvalidArgumentError, match="basis='lease'"):
        report.with_options(price="lease")
