"""The examples in the docstrings run, and print what they say (doctest, one test per module).

Modules of the notebook layer (viz, widgets, magics) need the notebook extras and are skipped
without them, as the rest of their tests are.
"""

from __future__ import annotations

import doctest
import importlib
import pathlib

import pytest

import aiadvisor

ROOT = pathlib.Path(aiadvisor.__file__).parent
#: The optional packages each notebook-layer module imports.
NEEDS = {"viz": ("altair",), "widgets": ("ipywidgets", "anywidget", "altair"),
         "magics": ("IPython",)}
#: Modules whose every example stays skipped, and why (the rest must run at least one).
ALL_SKIPPED = {
    "aiadvisor.verification": "times real steps and benchmarks the attached device (15-20 s)",
}


def _modules_with_examples() -> list[str]:
    names = []
    for path in sorted(ROOT.rglob("*.py")):
        if ">>>" not in path.read_text():
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        names.append(".".join(("aiadvisor", *parts)))
    return names


@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples_run(name):
    layer = name.split(".")[1] if "." in name else ""
    for package in NEEDS.get(layer, ()):
        pytest.importorskip(package)
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, name)
    # Only the docstrings written in this module (not those of names it imports).
    tests = [t for t in tests if t.examples and _defined_in(t, module)]
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    report: list[str] = []
    for test in tests:
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
    if name not in ALL_SKIPPED:
        assert runner.tries > 0, f"{name} has '>>>' but every example is skipped"


def _defined_in(test: doctest.DocTest, module) -> bool:
    return test.filename is None or pathlib.Path(test.filename).resolve() == pathlib.Path(
        module.__file__).resolve()
