"""notebooks/quickstart.ipynb runs top to bottom in a real kernel (nbclient), offline."""

from __future__ import annotations

import pytest

from .notebook_utils import NOTEBOOKS, cell_outputs, error_outputs, execute_notebook

pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("torch")

NOTEBOOK = NOTEBOOKS / "quickstart.ipynb"


@pytest.fixture(scope="module")
def executed():
    return execute_notebook(NOTEBOOK, timeout_s=600)


def test_every_cell_runs_without_error(executed):
    assert error_outputs(executed) == []


def test_advise_shows_the_dashboard_with_the_report_as_text(executed):
    (display,) = [o for o in cell_outputs(executed, "%advise model x") if "data" in o]
    data = display["data"]
    assert "application/vnd.jupyter.widget-view+json" in data  # the dashboard (an ipykernel)
    # After the progress bar, the same output shows the dashboard; its text is the report.
    assert data["text/plain"].startswith("aiadvisor report")
    assert "NVIDIA H100 SXM" in data["text/plain"]


def test_keyboard_insert_names_the_recommendation(executed):
    (out,) = cell_outputs(executed, "%advise --insert 1")
    assert out["text"].startswith("Inserted recommendation 1 (")


def test_the_hand_check_of_the_head_flops_holds(executed):
    (out,) = [o for o in cell_outputs(executed, 'head = report.profile') if "data" in o]
    assert out["data"]["text/plain"] == str(2 * 8 * 64 * 128 * 1000.0)  # 131072000.0
