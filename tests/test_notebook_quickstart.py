"""notebooks/quickstart.ipynb runs top to bottom in a real kernel (nbclient), offline."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("torch")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "quickstart.ipynb"


@pytest.fixture(scope="module")
def executed():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    return nb


def _outputs(nb, source_start: str) -> list[dict]:
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(source_start)]
    return cell.outputs


def test_every_cell_runs_without_error(executed):
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert errors == []


def test_advise_shows_the_dashboard_with_the_report_as_text(executed):
    (display,) = [o for o in _outputs(executed, "%advise model x") if "data" in o]
    data = display["data"]
    assert "application/vnd.jupyter.widget-view+json" in data  # the dashboard (an ipykernel)
    # After the progress bar, the same output shows the dashboard; its text is the report.
    assert data["text/plain"].startswith("aiadvisor report")
    assert "NVIDIA H100 SXM" in data["text/plain"]


def test_keyboard_insert_names_the_recommendation(executed):
    (out,) = _outputs(executed, "%advise --insert 1")
    assert out["text"].startswith("Inserted recommendation 1 (")


def test_the_hand_check_of_the_head_flops_holds(executed):
    (out,) = [o for o in _outputs(executed, 'head = report.profile') if "data" in o]
    assert out["data"]["text/plain"] == str(2 * 8 * 64 * 128 * 1000.0)  # 131072000.0
