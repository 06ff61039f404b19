"""``%load_ext aiadvisor`` and ``%advise`` through an IPython shell that re-raises errors."""

from __future__ import annotations

import json
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
    config = Config()
    config.HistoryManager.enabled = False
    ip = TestingShell(config=config)
    ip.run_cell("%load_ext aiadvisor")
    return ip


@pytest.fixture
def ip(shell):
    """The shared shell with a clean namespace and default settings for each test."""
    magics = shell.find_magic("advise").__self__
    shell.user_ns.update(model=object(), x=object())
    yield shell
    for name in ("model", "x", "batch", "net"):
        shell.user_ns.pop(name, None)
    for trait in ("default_mode", "default_hardware", "default_devices", "default_precision",
                  "widgets"):
        magics.set_trait(trait, magics.trait_defaults(trait))
    magics.last_view = None


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
     "--mode 'trian' is not valid: expected one of train, infer. Did you mean 'train'?"),
    ("%advise model x --precision bf61",
     ("--precision 'bf61' is not valid: expected one of fp32, tf32, bf16, fp16, fp8, int8, "
      "int4, nf4. Did you mean 'bf16'?")),
    ("%advise model x --devices 0", "--devices 0 is not valid: expected an integer >= 1."),
    ("%advise model x --batch -2", "--batch -2 is not valid: expected an integer >= 1."),
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


def test_config_rejects_an_unknown_mode(ip, caplog):
    ip.run_cell('%config Advisor.default_mode = "serve"')  # %config logs, it does not raise
    assert ip.find_magic("advise").__self__.default_mode == "train"
    assert "expected any of ['train', 'infer'], not the str 'serve'" in caplog.text


def test_unload_removes_the_magic():
    config = Config()
    config.HistoryManager.enabled = False
    ip = TestingShell(config=config)
    ip.run_cell("%load_ext aiadvisor")
    assert ip.find_magic("advise") is not None
    ip.run_cell("%unload_ext aiadvisor")
    assert ip.find_magic("advise") is None
    assert not any(type(c).__name__ == "Advisor" for c in ip.configurables)
