"""InsertCellButton: synced state as the front end sets it, and what shows without widgets."""

from __future__ import annotations

import pytest

pytest.importorskip("anywidget")

from aiadvisor.widgets.insert import InsertCellButton, current_cell_id

CODE = "model = model.to(memory_format=torch.channels_last)"


def test_status_set_by_the_front_end_reaches_python():
    button = InsertCellButton(code=CODE, cell_id="cell-7")
    seen = []
    button.observe(lambda change: seen.append(change["new"]), names="status")
    # What the comm handler does with the front end's update after a click.
    button.set_state({"status": "inserted", "num_clicks": 1})
    button.set_state({"status": "copied", "num_clicks": 2})
    assert seen == ["inserted", "copied"]
    assert button.num_clicks == 2


def test_synced_state_holds_code_and_cell_id():
    button = InsertCellButton(code=CODE, cell_id="cell-7", label="Insert below")
    state = button.get_state()
    assert (state["code"], state["cell_id"], state["label"]) == (CODE, "cell-7", "Insert below")
    assert state["mode"] == "auto" and state["show_code"] is True


def test_plain_text_repr_is_the_code():
    data, _ = InsertCellButton(code=CODE)._repr_mimebundle_()
    assert data["text/plain"] == CODE
    assert "application/vnd.jupyter.widget-view+json" in data


def test_view_inserts_by_cell_id_and_falls_back_to_the_clipboard():
    # The behaviour itself is checked in a real browser (tests/browser); here, that the shipped
    # view carries the pieces that behaviour relies on.
    js = str(InsertCellButton._esm)
    for needle in ("aiadvisor-insert", "sharedModel", "insertCell", "cell_id",
                   "insert_cell_below", "navigator.clipboard.writeText", "export default"):
        assert needle in js


class _Kernel:
    def __init__(self, parent):
        self._parent = parent

    def get_parent(self):
        return self._parent


class _Shell:
    def __init__(self, kernel):
        self.kernel = kernel


def test_current_cell_id_reads_the_execute_request_metadata():
    # JupyterLab 4 / Notebook 7 send {"metadata": {"cellId": ...}} with each execute_request.
    shell = _Shell(_Kernel({"header": {}, "metadata": {"cellId": "abc-123"}}))
    assert current_cell_id(shell) == "abc-123"


@pytest.mark.parametrize("shell", [
    _Shell(None),                                # terminal IPython: no kernel
    _Shell(_Kernel({})),                         # nbclassic, VS Code: no cellId
    _Shell(_Kernel({"metadata": {"cellId": 3}})),
])
def test_current_cell_id_is_empty_when_unknown(shell):
    assert current_cell_id(shell) == ""
