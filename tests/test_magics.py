"""``%load_ext aiadvisor`` and ``%advise`` through an IPython shell that re-raises errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config


class TestingShell(InteractiveShell):
    """A shell whose ``run_cell`` raises the cell's error instead of printing it."""

    __test__ = False  # not a pytest test class

    def run_cell(self, raw_cell, *args, **kwargs):
        result = super().run_cell(raw_cell, *args, **kwargs)
        result.raise_error()
        return result


@pytest.fixture(scope="module")
def shell():
    """The singleton shell (``display()`` and ``capture_output`` find it through get_ipython)."""
    config = Config()
    config.HistoryManager.enabled = False
    if InteractiveShell.initialized():
        InteractiveShell.clear_instance()
    ip = TestingShell.instance(config=config)
    ip.run_cell("%load_ext aiadvisor")
    yield ip
    TestingShell.clear_instance()


@pytest.fixture
def ip(shell):
    """The shared shell with a clean namespace and default settings for each test."""
    magics = shell.find_magic("advise").__self__
    shell.user_ns.update(model=object(), x=object())
    yield shell
    for name in ("model", "x"):
        shell.user_ns.pop(name, None)
    for trait in ("default_mode", "default_hardware", "default_devices", "default_precision",
                  "widgets", "offline_charts", "price_basis", "price_years",
                  "price_utilisation", "price_usd_per_kwh"):
        magics.set_trait(trait, magics.trait_defaults(trait))
    magics.last_view = magics.last_call = magics.last_verification = None


def run_error(ip, line: str) -> str:
    with pytest.raises(UsageError) as info:
        ip.run_cell(line)
    return str(info.value)


def test_load_ext_imports_no_torch_pandas_or_widgets():
    # A fresh interpreter: what is in sys.modules after %load_ext is what loading costs.
    code = (
        "import json, sys\n"
        "from IPython.testing.globalipapp import start_ipython\n"
        "ip = start_ipython()\n"
        "ip.run_line_magic('load_ext', 'aiadvisor')\n"
        "assert 'advise' in ip.magics_manager.magics['line']\n"
        "heavy = ('torch', 'pandas', 'ipywidgets', 'anywidget', 'altair', 'sklearn')\n"
        "print(json.dumps([m for m in heavy if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_unknown_variable_suggests_the_close_name(ip):
    assert run_error(ip, "%advise modle x") == (
        "MODEL 'modle' is not defined in the notebook. Did you mean 'model'?")
    assert run_error(ip, "%advise model xx") == (
        "INPUTS 'xx' is not defined in the notebook. Did you mean 'x'?")


def test_unknown_variable_without_a_close_name(ip):
    assert run_error(ip, "%advise zzzzzz x") == "MODEL 'zzzzzz' is not defined in the notebook."


def test_expression_instead_of_a_name_is_refused(ip):
    assert "must be the name of a variable" in run_error(ip, "%advise model[0] x")


def test_dotted_name_reports_the_missing_attribute(ip):
    assert run_error(ip, "%advise model.encoder x") == (
        "MODEL 'model.encoder': 'model' has no attribute 'encoder'.")


def test_unknown_option_suggests_the_close_option(ip):
    message = run_error(ip, "%advise model x --batchsize 8")
    assert message.startswith("%advise has no option --batchsize. Did you mean --batch?")


@pytest.mark.parametrize(("line", "expected"), [
    ("%advise model x --mode trian",
     ("--mode 'trian' is not valid: expected one of train, infer, generate. Did you mean "
      "'train'?")),
    ("%advise model x --precision bf61",
     ("--precision 'bf61' is not valid: expected one of fp32, tf32, bf16, fp16, fp8, mxfp8, "
      "fp4, int8, int8wo, int4, nf4. Did you mean 'bf16'?")),
    ("%advise model x --devices 0", "--devices 0 is not valid: expected an integer >= 1."),
    ("%advise model x --batch -2", "--batch -2 is not valid: expected an integer >= 1."),
    ("%advise model x --node-size 0", "--node-size 0 is not valid: expected an integer >= 1."),
])
def test_bad_option_values_are_named_with_the_choices(ip, line, expected):
    assert run_error(ip, line) == expected


def test_non_integer_batch_is_a_usage_error(ip):
    assert "invalid int value: 'big'" in run_error(ip, "%advise model x --batch big")


def test_missing_inputs_shows_an_example(ip):
    assert "e.g. `%advise model x`" in run_error(ip, "%advise model")


def test_insert_before_any_report(ip):
    assert run_error(ip, "%advise --insert 1") == (
        "There is no report yet: run `%advise MODEL INPUTS` first.")


def test_help_shows_usage_and_examples(ip):
    doc = ip.find_magic("advise").__doc__
    assert "%advise [--mode MODE] [--batch N]" in doc
    assert "%advise --insert 2" in doc
    assert "--precision P    One of fp32, tf32, bf16" in doc


def test_config_sets_defaults(ip):
    ip.run_cell('%config Advisor.default_mode = "infer"')
    ip.run_cell("%config Advisor.default_devices = 8")
    magics = ip.find_magic("advise").__self__
    assert (magics.default_mode, magics.default_devices) == ("infer", 8)


def test_config_sets_the_price_rule_advise_uses(ip):
    magics = ip.find_magic("advise").__self__
    assert magics._price_rule() is None  # all defaults: advise() keeps its own defaults
    ip.run_cell('%config Advisor.price_basis = "OWN"')
    ip.run_cell("%config Advisor.price_years = 4")
    rule = magics._price_rule()
    assert rule == {"basis": "own", "years": 4.0, "utilisation": 0.5, "usd_per_kwh": 0.15}
    from aiadvisor.hardware import PriceRule, get

    # What advise(price=rule) does with it: RTX 4090 1599 / (4 * 8760 * 0.5) + 0.45 * 0.15.
    assert PriceRule.from_value(rule).quote(get("RTX 4090")).usd_per_hour == pytest.approx(
        1599 / 17520 + 0.0675)


_PRECISION_CHOICES = ("'fp32', 'tf32', 'bf16', 'fp16', 'fp8', 'mxfp8', 'fp4', 'int8', 'int8wo', "
                      "'int4', 'nf4'")


@pytest.mark.parametrize(("line", "expected"), [
    ('default_mode = "serve"', "Advisor.default_mode='serve' is not valid: expected one of "
                               "'train', 'infer', 'generate'."),
    ('default_mode = 3', "Advisor.default_mode=3 is not valid: expected one of 'train', "
                         "'infer', 'generate'."),
    ('default_precision = "bf17"', f"Advisor.default_precision='bf17' is not valid: expected "
                                   f"one of {_PRECISION_CHOICES} or '' (let the advisor "
                                   "choose). Did you mean 'bf16'?"),
    ('default_devices = "8"', "Advisor.default_devices='8' is not valid: expected an integer "
                              ">= 1, or None (let the advisor choose). Did you mean 8 (a "
                              "number, without quotes)?"),
    ("default_devices = 0", "Advisor.default_devices=0 is not valid: expected an integer >= 1"),
    ("default_devices = -4", "Advisor.default_devices=-4 is not valid: expected an integer >= "
                             "1"),
    ("default_devices = True", "Advisor.default_devices=True is not valid: expected an "
                               "integer >= 1"),
    ('widgets = "False"', "Advisor.widgets='False' is not valid: expected True or False. Did "
                          "you mean False (without quotes)?"),
    ('offline_charts = "sometimes"', "Advisor.offline_charts='sometimes' is not valid: "
                                     "expected one of 'auto', 'always', 'never'."),
    ('default_hardware = "H1000 SXM"', "Advisor.default_hardware='H1000 SXM' is not valid: "
                                       "expected a catalog name"),
    ("default_hardware = 100", "Advisor.default_hardware=100 is not valid: expected a catalog "
                               "name (e.g. 'NVIDIA H100 SXM'), 'local' or ''"),
    ('precision = "bf16"', "Advisor has no setting 'precision': expected one of "
                           "'default_devices', 'default_hardware', 'default_mode', "
                           "'default_precision', 'offline_charts', 'price_basis', "
                           "'price_usd_per_kwh', 'price_utilisation', 'price_years', "
                           "'widgets'. Did you mean 'default_precision'?"),
    ('price_basis = "lease"', "Advisor.price_basis='lease' is not valid: expected one of "
                              "'rent', 'own'."),
    ("price_utilisation = 1.5", "Advisor.price_utilisation=1.5 is not valid: expected a "
                                "fraction > 0 and <= 1."),
    ('price_years = "4"', "Advisor.price_years='4' is not valid: expected a number of years > "
                          "0. Did you mean 4 (a number, without quotes)?"),
    ("price_usd_per_kwh = -0.1", "Advisor.price_usd_per_kwh=-0.1 is not valid: expected a "
                                 "price in USD per kWh >= 0."),
])
def test_config_rejects_bad_values_naming_the_setting_and_choices(ip, caplog, line, expected):
    magics = ip.find_magic("advise").__self__
    before = {name: getattr(magics, name) for name in magics.trait_names(config=True)}
    ip.run_cell(f"%config Advisor.{line}")  # %config logs the error, it does not raise
    assert expected in caplog.text
    # Before: traitlets' "expected any of ['train', 'infer'], not the str 'serve'" (no
    # choices for precision: any string was kept), and 0 / "bf17" / "precision" were accepted.
    assert {name: getattr(magics, name) for name in before} == before


def test_config_errors_are_aiadvisor_errors(ip):
    from aiadvisor.errors import AIAdvisorError
    from aiadvisor.magics import ConfigValueError

    magics = ip.find_magic("advise").__self__
    with pytest.raises(ConfigValueError, match="Advisor.default_precision='bf17'") as info:
        magics.default_precision = "bf17"
    assert isinstance(info.value, AIAdvisorError)
    with pytest.raises(ConfigValueError, match="Did you mean 'NVIDIA H100 SXM'"):
        magics.default_hardware = "H1000 SXM"


def test_config_accepts_names_in_any_case_and_none_devices(ip):
    ip.run_cell('%config Advisor.default_precision = "BF16"')
    ip.run_cell("%config Advisor.default_devices = None")
    ip.run_cell('%config Advisor.default_hardware = "local"')
    ip.run_cell('%config Advisor.default_mode = "Infer"')
    magics = ip.find_magic("advise").__self__
    assert (magics.default_precision, magics.default_devices) == ("bf16", None)
    assert (magics.default_hardware, magics.default_mode) == ("local", "infer")


def test_bad_setting_in_the_profile_config_is_a_usage_error_at_load():
    config = Config()
    config.HistoryManager.enabled = False
    config.Advisor.default_devices = 0
    shell = TestingShell(config=config)
    with pytest.raises(UsageError, match="aiadvisor was not loaded: Advisor.default_devices=0 "
                                         "is not valid: expected an integer >= 1"):
        shell.run_cell("%load_ext aiadvisor")
    assert not any(type(c).__name__ == "Advisor" for c in shell.configurables)


def test_unload_removes_the_magic():
    config = Config()
    config.HistoryManager.enabled = False
    ip = TestingShell(config=config)
    ip.run_cell("%load_ext aiadvisor")
    assert ip.find_magic("advise") is not None
    ip.run_cell("%unload_ext aiadvisor")
    assert ip.find_magic("advise") is None
    assert not any(type(c).__name__ == "Advisor" for c in ip.configurables)


# --- with the advisor: a real report on a small model ------------------------------------------
torch = pytest.importorskip("torch")
TARGET = "NVIDIA A100 80GB SXM"


@pytest.fixture(scope="module")
def advised(shell):
    """`%advise net batch` once (static display: the testing shell has no kernel)."""
    from IPython.utils.capture import capture_output

    torch.manual_seed(0)
    shell.user_ns.update(net=torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                                 torch.nn.Linear(128, 10)),
                         batch=torch.randn(16, 64))
    with capture_output() as captured:
        shell.run_cell(f'%advise net batch --hardware "{TARGET}"')
    report = shell.find_magic("advise").__self__.last_view
    return report, captured


def test_advise_without_widgets_shows_the_reports_html_and_text(advised):
    report, captured = advised
    assert type(report).__name__ == "Report"
    (bundle,) = [o.data for o in captured.outputs]
    assert bundle["text/html"] == report._repr_html_()
    assert bundle["text/plain"] == str(report)
    assert "estimate" in bundle["text/plain"]


def test_variable_names_become_the_names_in_the_code(advised):
    report, _ = advised
    # The 16 x 64 -> 128 -> 10 MLP is tiny, so tactics fire; their code names `net`, never the
    # default `model`.
    codes = "\n".join(rec.code for rec in report.recommendations)
    assert re.search(r"\bnet\b", codes)
    assert not re.search(r"\bmodel\b", codes)
    assert report.profile.batch_size == 16
    assert report.options["hardware"] == TARGET


def test_insert_puts_the_recommendation_in_the_next_cell(ip, advised):
    report, _ = advised
    magics = ip.find_magic("advise").__self__
    magics.last_view = report
    ip.run_cell("%advise --insert 1")
    assert ip.rl_next_input == report.recommendations[0].code
    last = report.recommendations[-1]
    ip.run_cell(f"%advise --insert {last.id}")
    assert ip.rl_next_input == last.code


def test_insert_out_of_range_names_the_valid_numbers(ip, advised):
    report, _ = advised
    ip.find_magic("advise").__self__.last_view = report
    count = len(report.recommendations)
    assert run_error(ip, "%advise --insert 99") == (
        f"--insert 99: the last report has recommendations 1 to {count}.")
    assert "no recommendation has that number or id" in run_error(ip, "%advise --insert nope")


@pytest.mark.usefixtures("advised")
def test_options_and_config_defaults_reach_the_advisor(ip):
    ip.run_cell("%config Advisor.default_mode = 'infer'")
    ip.run_cell("%config Advisor.default_hardware = 'NVIDIA H100 SXM'")
    from IPython.utils.capture import capture_output

    with capture_output():
        ip.run_cell("%advise net batch --devices 8 --precision BF16 --batch 64")
    options = ip.find_magic("advise").__self__.last_view.options
    assert (options["mode"], options["hardware"], options["num_devices"], options["precision"],
            options["batch_size"]) == ("infer", "NVIDIA H100 SXM", 8, "bf16", 64)


@pytest.mark.usefixtures("advised")
def test_advisor_errors_become_one_line_usage_errors(ip):
    # UnknownHardwareError from the catalog, shown without a traceback.
    message = run_error(ip, '%advise net batch --hardware "H100 SXN"')
    assert message.startswith("hardware 'H100 SXN' is not in the catalog")
    assert "Did you mean 'NVIDIA H100 SXM'" in message
    # The batch tensor passed as the model: InvalidModelError.
    assert "expected a torch.nn.Module" in run_error(ip, "%advise batch batch")


@pytest.mark.usefixtures("advised")
def test_dashboard_in_a_kernel_and_insert_follows_its_sliders(ip, monkeypatch):
    from IPython.utils.capture import capture_output

    from aiadvisor.magics import Advisor
    from aiadvisor.widgets.dashboard import Dashboard

    monkeypatch.setattr(Advisor, "_use_widgets", lambda self: True)
    with capture_output() as captured:
        ip.run_cell(f'%advise net batch --hardware "{TARGET}"')
    dashboard = ip.find_magic("advise").__self__.last_view
    assert isinstance(dashboard, Dashboard)
    # First the progress bar, then (same display id) the dashboard in its place.
    views = [o.data.get("application/vnd.jupyter.widget-view+json") for o in captured.outputs]
    assert views[-1]["model_id"] == dashboard.model_id
    # The user drags batch size to 64; --insert uses the report the dashboard now shows.
    dashboard.batch.set_state({"index": list(dashboard.batch.options).index(64)})
    assert dashboard.report.profile.batch_size == 64
    ip.run_cell("%advise --insert 1")
    assert ip.rl_next_input == dashboard.report.recommendations[0].code


def test_widgets_need_a_kernel_and_the_ui_packages(ip, monkeypatch):
    import importlib.util

    magics = ip.find_magic("advise").__self__
    assert magics._use_widgets() is False  # a terminal shell: no kernel, no widgets
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    assert magics._use_widgets() is True
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "anywidget" else real(name, *a))
    assert magics._use_widgets() is False  # anywidget missing: the static report instead
    monkeypatch.undo()
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    ip.run_cell("%config Advisor.widgets = False")
    assert magics._use_widgets() is False


def test_quoted_values_lose_their_quotes(ip):
    # Quotes group a name with spaces; they must not reach the advisor.
    from aiadvisor.magics import _parse

    magic = ip.find_magic("advise")
    args = _parse(magic, '''model x --hardware "NVIDIA H100 SXM" --precision 'bf16' ''')
    assert (args.hardware, args.precision) == ("NVIDIA H100 SXM", "bf16")
    assert "could not split" in run_error(ip, '%advise model x --hardware "H100')


# --- %advise --verify: measured vs predicted on the attached device -------------------------
@pytest.fixture
def small_benchmark(monkeypatch, tmp_path):
    """hardware="local" benchmarks the attached device; its defaults take ~15-20 s on 2 shared
    cores, so this runs a smaller (still measured) benchmark, cached in tmp_path."""
    import functools

    from aiadvisor.hardware import detection

    small = {"sizes": (64, 128), "precisions": ("fp32",), "bandwidth_bytes": 2**22,
             "min_time_s": 0.01}
    monkeypatch.setattr(detection, "detect", functools.partial(
        detection.detect, cache_dir=str(tmp_path), progress=False, benchmark_options=small))


@pytest.mark.usefixtures("small_benchmark")
def test_verify_measures_the_last_model_and_predicts_with_the_cost_model(ip):
    from IPython.utils.capture import capture_output

    import aiadvisor as aa

    device = "cuda" if torch.cuda.is_available() else "cpu"  # the attached device
    torch.manual_seed(0)
    ip.user_ns.update(net=torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                              torch.nn.Linear(128, 10)).to(device),
                      batch=torch.randn(16, 64, device=device))
    with capture_output() as captured:
        ip.run_cell(f'%advise net batch --hardware "{TARGET}"')
        ip.run_cell("%advise --verify")
    v = ip.find_magic("advise").__self__.last_verification
    assert v.profile.model_name == "net" and v.profile.mode == "train"
    assert v.measured_step_time_s > 0
    # 64 x 128 + 128 + 128 x 10 + 10 = 9,610 fp32 parameters; after an AdamW step the weights,
    # gradients and both moments are live: 16 bytes each, 153,760 bytes at least.
    assert v.measured_peak_bytes >= 16 * 9610
    # The prediction is the cost model's for this profile on the benchmarked attached device
    # (made before this measurement joined the store, which was empty: no correction).
    expected = aa.predict(v.profile, hardware="local", precision="fp32", correction=False)
    assert v.prediction.correction is None and v.recorded_to
    assert v.prediction.step_time_s == expected.step_time_s > 0
    assert v.hardware.measured and v.prediction.hardware == v.hardware.name
    assert v.predicted_peak_bytes == v.profile.memory.peak_bytes > 16 * 9610
    assert v.step_time_ratio == pytest.approx(v.measured_step_time_s / expected.step_time_s)
    bundle = captured.outputs[-1].data
    text = bundle["text/plain"]
    assert "measured / predicted" in text and f"{v.step_time_ratio:.2f}" in text
    assert "<table" in bundle["text/html"] and "peak memory" in bundle["text/html"]


def test_verify_before_any_report(ip):
    assert run_error(ip, "%advise --verify") == (
        "Nothing to verify yet: run `%advise MODEL INPUTS` first (or "
        "`%advise MODEL INPUTS --verify`).")


@pytest.mark.parametrize(("line", "expected"), [
    ('%advise model x --verify --hardware "H100"',
     "--verify measures the example batch on the attached device: --hardware does not apply."),
    ("%advise model x --verify --insert 1",
     "--verify and --insert are separate commands: run one at a time."),
    ("%advise model --verify", "%advise MODEL INPUTS --verify needs the example batch too."),
])
def test_verify_options_that_do_not_apply(ip, line, expected):
    assert run_error(ip, line) == expected


@pytest.mark.usefixtures("small_benchmark")
def test_verify_errors_are_one_line(ip):
    ip.user_ns.update(batch=torch.randn(4, 8))
    with torch.device("meta"):
        ip.user_ns["ghost"] = torch.nn.Linear(8, 8)
    assert "on the meta device" in run_error(ip, "%advise ghost batch --verify")
    ip.user_ns["lin"] = torch.nn.Linear(8, 8)
    message = run_error(ip, "%advise lin batch --verify --precision int8")
    assert message.startswith("precision='int8' cannot be verified")
    assert "\n" not in message


# --- mode generate: a causal LM's serving ------------------------------------------------------
def test_advise_generate_shows_the_serving_answer(ip):
    from IPython.utils.capture import capture_output

    from aiadvisor import examples

    llm, ids = examples.build("tiny-gpt")
    ip.user_ns.update(llm=llm, ids=ids)
    ip.run_cell("%config Advisor.default_mode = 'generate'")
    with capture_output() as captured:
        ip.run_cell('%advise llm ids --hardware "NVIDIA L4"')
    report = ip.find_magic("advise").__self__.last_view
    assert report.options["mode"] == "generate"
    (bundle,) = [o.data for o in captured.outputs]
    assert "Serving (LLM generation)" in bundle["text/plain"]
    # --insert 1 is the best serving configuration's code (vLLM), in the user's names.
    ip.run_cell("%advise --insert 1")
    assert ip.rl_next_input == report.recommendations[0].code
    assert "from vllm import LLM" in ip.rl_next_input and "llm.save_pretrained" in ip.rl_next_input


def test_advise_generate_on_a_model_that_is_no_lm_is_one_line(ip):
    ip.user_ns.update(net=torch.nn.Linear(8, 8), batch=torch.randn(2, 8))
    message = run_error(ip, '%advise net batch --mode generate --hardware "NVIDIA L4"')
    assert message.startswith("Linear has no token embedding")
    assert "generation needs a causal LM" in message and "\n" not in message


def test_fabric_and_node_size_reach_advise(ip):
    import torch

    ip.user_ns.update(model=torch.nn.Linear(16, 16), x=torch.randn(4, 16))
    message = run_error(ip, "%advise model x --hardware H100 --devices 12 --node-size 8")
    assert "num_devices=12 does not fill whole nodes of node_size=8" in message
    message = run_error(ip, '%advise model x --hardware H100 --devices 16 --fabric "token ring"')
    assert "fabric='token ring' is not a known fabric" in message and "'RoCE 400G'" in message


def test_verify_plan_measures_the_last_reports_steps(ip):
    from IPython.utils.capture import capture_output

    from aiadvisor.verification import PlanVerification

    torch.manual_seed(0)
    ip.user_ns.update(net=torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                              torch.nn.Linear(128, 10)),
                      batch=torch.randn(16, 64))
    with capture_output() as captured:
        ip.run_cell("%advise net batch --mode infer")  # the attached CPU, as detected
        ip.run_cell("%advise --verify-plan")
    result = ip.find_magic("advise").__self__.last_verification
    assert isinstance(result, PlanVerification)
    view = ip.find_magic("advise").__self__.last_view
    report = getattr(view, "report", view)  # a dashboard, or the report without widgets
    assert [s.tactic for s in result.steps] == [r.id for r in report.recommendations]
    assert "As you run it" in captured.outputs[-1].data["text/plain"]
    assert "<table" in captured.outputs[-1].data["text/html"]


def test_verify_plan_refuses_a_plan_for_another_device(ip):
    ip.user_ns.update(lin=torch.nn.Linear(8, 8), batch=torch.randn(4, 8))
    from IPython.utils.capture import capture_output

    with capture_output():
        ip.run_cell(f'%advise lin batch --hardware "{TARGET}"')
    if torch.cuda.is_available():
        pytest.skip("the model is on the CPU and the target is a GPU only without CUDA")
    assert "a measurement here says nothing about that device" in run_error(
        ip, "%advise --verify-plan")
