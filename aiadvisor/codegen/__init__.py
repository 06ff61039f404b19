"""Code generation: templates filled with the user's validated names and ``repr``'d values.

>>> from aiadvisor.codegen import CodeNames, snippet
>>> print(snippet("tf32", names=CodeNames()).splitlines()[0])
# TF32 tensor cores for float32 matmuls and convolutions (fp32 range, 10-bit mantissa).
"""

from __future__ import annotations

from typing import Any

from ..errors import check_choice
from .render import CodeNames, CodeTemplateError, check_identifier, literal, render
from .templates import SNIPPETS, Snippet

__all__ = [
    "SNIPPETS", "CodeNames", "CodeTemplateError", "Snippet", "check_identifier", "literal",
    "render", "snippet",
]


def snippet(snippet_id: str, *, names: CodeNames, **values: Any) -> str:
    """Render the snippet ``snippet_id`` for ``names`` with ``values``.

    Parameters
    ----------
    snippet_id : str
        A key of :data:`SNIPPETS`.
    names : CodeNames
        The user's variable names.
    **values
        Plain values the template needs (numbers, booleans, short strings).

    Returns
    -------
    str
        Python source; it always parses.
    """
    check_choice("snippet_id", snippet_id, SNIPPETS)
    return render(SNIPPETS[snippet_id].template, names=names, values=values)
