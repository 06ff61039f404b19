"""``InsertCellButton``: one click puts a code snippet in a new notebook cell below.

The insertion happens in the browser (``insert.js``), so it works even while the kernel is busy;
where the page has no notebook model to edit (VS Code, Colab) the button copies the code to the
clipboard instead. The code is always shown as text under the button.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget
import traitlets

__all__ = ["InsertCellButton", "current_cell_id"]



class InsertCellButton(anywidget.AnyWidget):
    """A button that inserts ``code`` in a new code cell below the cell ``cell_id``.

    Parameters
    ----------
    code : str
        The snippet to insert.
    cell_id : str
        Id of the notebook cell the button's output belongs to (see :func:`current_cell_id`);
        when empty or unknown the front end finds the cell from the page.
    label : str
        Text of the button.

    Examples
    --------
    >>> button = InsertCellButton(code="model = model.to(torch.bfloat16)", cell_id="abc")
    >>> button.status  # set by the front end after a click: inserted, copied or copy-failed
    ''
    """

    _esm = Path(__file__).with_name("insert.js")
    _css = Path(__file__).with_name("insert.css")

    code = traitlets.Unicode("").tag(sync=True)
    cell_id = traitlets.Unicode("").tag(sync=True)
    label = traitlets.Unicode("Insert below").tag(sync=True)
    show_code = traitlets.Bool(True).tag(sync=True)
    """Show the code as text under the button (always on in the dashboard)."""
    mode = traitlets.Enum(("auto", "copy"), default_value="auto").tag(sync=True)
    """``copy`` skips insertion and only copies (what VS Code and Colab get anyway)."""
    status = traitlets.Unicode("").tag(sync=True)
    """What the last click did, reported by the front end: inserted, copied or copy-failed."""
    num_clicks = traitlets.Integer(0).tag(sync=True)

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict, dict] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        # Front ends without widgets (and a reloaded notebook) still show the code.
        data = {**data, "text/plain": self.code}
        return data, metadata


def current_cell_id(shell: Any) -> str:
    """Id of the notebook cell being executed, or "" when the front end does not send it.

    JupyterLab 4 and Notebook 7 put ``cellId`` in the metadata of each execute_request.
    """
    kernel = getattr(shell, "kernel", None)
    try:
        parent = kernel.get_parent() if kernel is not None else {}
    except Exception:  # noqa: BLE001 - any kernel without get_parent: no id
        return ""
    metadata = (parent or {}).get("metadata") or {}
    cell_id = metadata.get("cellId", "")
    return cell_id if isinstance(cell_id, str) else ""
