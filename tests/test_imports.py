"""Layer boundaries: ``import aiadvisor`` is cheap, and core layers never import the UI stack."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

UI = ("IPython", "ipywidgets", "anywidget", "altair")


def imported_after(statement: str) -> set[str]:
    code = f"import sys, json; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {name.split(".")[0] for name in json.loads(out.stdout.strip().splitlines()[-1])}


def test_import_aiadvisor_imports_no_torch_and_no_ui():
    mods = imported_after("import aiadvisor")
    assert "torch" not in mods
    assert not mods & set(UI)


@pytest.mark.parametrize("module", [
    "aiadvisor.profiler", "aiadvisor.hardware", "aiadvisor.costmodel", "aiadvisor.recommend",
    "aiadvisor.codegen", "aiadvisor.api", "aiadvisor.cli", "aiadvisor.examples",
])
def test_core_layers_never_import_the_ui_stack(module):
    assert not imported_after(f"import {module}") & set(UI), module


def test_hardware_catalog_needs_no_torch():
    assert "torch" not in imported_after("import aiadvisor as aa; aa.hardware.catalog()")


def test_all_lists_every_lazy_name_in_order():
    import aiadvisor

    expected = ["AIAdvisorError", "__version__", *aiadvisor._LAZY, *aiadvisor._SUBMODULES]
    assert aiadvisor.__all__ == expected
