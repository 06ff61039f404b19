"""binder/ installs what pyproject.toml declares (the same torch pin, from the CPU wheel index,
and the notebook extra), plus everything the notebooks import; every notebook has a test that
executes it."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parents[1]
BINDER = REPO / "binder" / "requirements.txt"
NOTEBOOKS = REPO / "notebooks"

#: Import names whose distribution is spelled differently.
DISTRIBUTION_OF = {"sklearn": "scikit-learn", "IPython": "ipython", "yaml": "pyyaml",
                   "vl_convert": "vl-convert-python"}


def _name(requirement: str) -> str:
    """Distribution name of a requirement line: 'torch==2.13.0' -> 'torch'."""
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower()


def _binder_lines() -> list[str]:
    lines = [line.split("#", 1)[0].strip() for line in BINDER.read_text().splitlines()]
    return [line for line in lines if line]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _binder_distributions() -> set[str]:
    """What the Binder image has: its own lines, the package's dependencies and the extras it
    names (resolved one level, as pip does for a local '.[extra]')."""
    project = _pyproject()["project"]
    names = {"aiadvisor"}
    for line in _binder_lines():
        if line.startswith("-"):
            continue
        if line.startswith("."):
            names.update(_name(r) for r in project["dependencies"])
            extras = re.fullmatch(r"\.\[([\w,\s-]+)\]", line).group(1).split(",")
            for extra in extras:
                names.update(_name(r) for r in project["optional-dependencies"][extra.strip()])
        else:
            names.add(_name(line))
    return names


def test_binder_pins_the_same_torch_from_the_cpu_index():
    lines = _binder_lines()
    pins = [r for r in _pyproject()["project"]["dependencies"] if _name(r) == "torch"]
    assert pins and pins[0] in lines  # e.g. torch==2.13.0, letter for letter
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines


def test_binder_installs_the_package_with_its_notebook_extra():
    extras = _pyproject()["project"]["optional-dependencies"]
    local = [line for line in _binder_lines() if line.startswith(".")]
    assert local == [".[notebook]"] and "notebook" in extras
    # a requirement Binder repeats must not disagree with the package's own spec for it
    declared = {_name(r): r for rs in extras.values() for r in rs if not r.startswith("aiadvisor")}
    for line in _binder_lines():
        if not line.startswith(("-", ".")) and _name(line) in declared and _name(line) != "torch":
            assert line == declared[_name(line)], (line, declared[_name(line)])


def _notebook_imports(path: Path) -> set[str]:
    """Top-level modules imported by the notebook's code cells (magics skipped)."""
    cells = json.loads(path.read_text())["cells"]
    modules = set()
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        source = "\n".join(line for line in source.splitlines()
                           if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules.add(node.module.split(".")[0])
    return modules


def test_binder_has_every_package_the_notebooks_import():
    have = _binder_distributions()
    missing = {}
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        third_party = {m for m in _notebook_imports(path) if m not in sys.stdlib_module_names}
        lacking = {m for m in third_party if DISTRIBUTION_OF.get(m, m).lower() not in have}
        if lacking:
            missing[path.name] = sorted(lacking)
    assert missing == {}


def test_the_import_check_sees_the_course_imports():
    # guards the test above against passing vacuously
    assert {"aiadvisor", "torch", "transformers", "altair"} <= _notebook_imports(
        NOTEBOOKS / "course_serving.ipynb")


def test_every_notebook_is_executed_by_a_test():
    tests = {p.name: p.read_text() for p in (REPO / "tests").glob("test_notebook_*.py")}
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        runners = [name for name, text in tests.items()
                   if f'NOTEBOOKS / "{path.name}"' in text
                   and ("execute_notebook(" in text or "course_checks(NOTEBOOK" in text)]
        assert runners, f"{path.name} is executed by no tests/test_notebook_*.py"
