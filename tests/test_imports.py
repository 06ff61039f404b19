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


# DESIGN.md's layer diagram, top to bottom: a module may import its own layer and those below it.
# Modules the diagram leaves out: ``examples`` (built-in torch models for the CLI and notebooks)
# sits with the profiler, the layer it feeds; ``verification`` (``aa.verify``, the Python API of
# closing the loop) and ``serving`` (``aa.predict_generation``, ``aa.plan_serving``) with ``api``;
# ``cli`` (the terminal front end) with
# ``magics`` (the notebook one); the package ``__init__`` re-exports everything, above all.
LAYERS = (
    ("errors", "units", "schema"),
    ("profiler", "hardware", "estimate", "costmodel", "examples"),
    ("recommend", "codegen"),
    ("viz", "api", "verification", "serving"),
    ("widgets",),
    ("magics", "cli"),
    ("__init__",),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _package_modules():
    import pathlib

    import aiadvisor

    root = pathlib.Path(aiadvisor.__file__).parent
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        yield path, ("aiadvisor", *parts[:-1]) if is_package else ("aiadvisor", *parts), is_package


def _imported_modules(path, name: tuple[str, ...], is_package: bool):
    """Every aiadvisor module ``path`` imports, at any depth (functions, TYPE_CHECKING).

    ``from package import x`` counts as importing the module ``package.x`` where there is one,
    else the package itself; ``from aiadvisor import __version__`` (package metadata, a
    constant of ``__init__`` that imports nothing) is left out.
    """
    import ast

    modules = {module for _, module, _ in _package_modules()}
    package = name if is_package else name[:-1]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (tuple(a.name.split(".")) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else ()
            target = (*base, *node.module.split(".")) if node.module else base
            for alias in node.names:
                if (*target, alias.name) in modules:
                    yield (*target, alias.name)
                elif not (target == ("aiadvisor",) and alias.name in METADATA):
                    yield target


METADATA = {"__version__"}


def _layer(name: tuple[str, ...]) -> str:
    return name[1] if len(name) > 1 else "__init__"


def test_layer_table_names_every_module():
    layers = {_layer(name) for _, name, _ in _package_modules()}
    assert layers == set(RANK), "add the new module to LAYERS"


def test_imports_point_down_the_layers():
    upward = []
    for path, name, is_package in _package_modules():
        own = RANK[_layer(name)]
        for target in _imported_modules(path, name, is_package):
            if target[0] == "aiadvisor" and RANK[_layer(target)] > own:
                upward.append(f"{'.'.join(name)} imports {'.'.join(target)}")
    assert upward == []


def test_layer_check_sees_a_function_level_upward_import(tmp_path):
    source = tmp_path / "schema.py"
    source.write_text("def at(self):\n    from .profiler.scaling import rescale\n")
    found = list(_imported_modules(source, ("aiadvisor", "schema"), False))
    assert found == [("aiadvisor", "profiler", "scaling")]
    assert RANK[_layer(found[0])] > RANK["schema"]


def _private_costmodel_uses(path) -> list[str]:
    import ast

    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and "costmodel" in (node.module or ""):
            found += [f"import {a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and "costmodel" in ast.unparse(node.value):
            found.append(ast.unparse(node))
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr" \
                and len(node.args) >= 2 and "costmodel" in ast.unparse(node.args[0]) \
                and isinstance(node.args[1], ast.Constant) and str(node.args[1].value)[:1] == "_":
            found.append(ast.unparse(node))
    return found


def test_layers_above_the_cost_model_use_only_its_public_names():
    # The recommender once reached costmodel.api._table_for_precision through getattr (with
    # the wrong arity, the TypeError swallowed): the cost model's batch API is predict_table.
    private = {}
    for path, name, _ in _package_modules():
        if RANK[_layer(name)] > RANK["costmodel"]:
            private.update({".".join(name): uses for uses in [_private_costmodel_uses(path)]
                            if uses})
    assert private == {}


def test_predicting_and_advising_import_no_training_code():
    # Only the fitted tables (data/costmodel/efficiency_model.json) are used at run time:
    # scikit-learn and the fitting code (aiadvisor.costmodel.training) are for
    # scripts/train_costmodel.py and bench/.
    statement = (
        "import importlib.util, torch, aiadvisor as aa; "
        "net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), "
        "torch.nn.Linear(64, 8)); x = torch.randn(4, 32); "
        "prof = aa.profile(net, x); aa.predict(prof, hardware='H100', precision='bf16'); "
        "aa.costmodel.predict_table(prof, specs=[aa.hardware.get('A100')]); "
        "aa.plan_parallel(prof, hardware='H100', num_devices=8, precision='bf16'); "
        "report = aa.advise(net, x, hardware='H100'); report.to_markdown(); "
        "import aiadvisor.cli, aiadvisor.verification; "
        "ui = importlib.util.find_spec('IPython') and importlib.util.find_spec('ipywidgets'); "
        "ui and __import__('aiadvisor.magics'); ui and __import__('aiadvisor.widgets')"
    )
    code = f"import sys, json; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "sklearn" not in {name.split(".")[0] for name in loaded}
    assert "aiadvisor.costmodel.training" not in loaded


def test_public_functions_stay_callable_after_their_modules_are_imported():
    # A submodule named like a public function (aiadvisor.verify once) replaces the function on
    # the package as soon as anything imports it (%advise --verify did): aa.verify(...) then
    # raised "'module' object is not callable" in the user's notebook.
    code = ("import importlib, pkgutil, aiadvisor as aa; "
            "[importlib.import_module(f'aiadvisor.{m.name}') for m in "
            "pkgutil.iter_modules(aa.__path__) if m.name not in ('magics', 'widgets')]; "
            "bad = [n for n in aa._LAZY if type(getattr(aa, n)).__name__ == 'module']; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
