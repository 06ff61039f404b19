"""Render code templates with the user's names and values, safely.

Templates are constants written in :mod:`aiadvisor.codegen.templates`. They are filled with
:class:`string.Template` placeholders of two kinds only:

* names (``$model``, ``$inputs``, ``$optimizer``, ``$loss_fn``, ``$dataset``, ``$call``): the user's
  variable names, each validated as a Python identifier that is not a keyword;
* values (``$v_<key>``): plain Python values written with :func:`repr` (numbers, booleans, None,
  strings, tuples and lists of those), so a string from a data file can only ever become a string
  literal, never code or a line break.

Every rendered snippet is parsed with :func:`ast.parse` before it is returned.
"""

from __future__ import annotations

import ast
import keyword
import math
import string
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError

CALL_STYLES = ("positional", "star", "kwargs")


def check_identifier(name: str, value: object) -> str:
    """Return ``value`` if it is a valid Python identifier (not a keyword), else raise.

    >>> check_identifier("model_name", "net")
    'net'
    """
    if not isinstance(value, str) or not value.isidentifier() or keyword.iskeyword(value):
        raise InvalidArgumentError(
            f"{name}={value!r} is not valid: expected a Python variable name (letters, digits and "
            f"underscores, not starting with a digit, not a keyword), e.g. 'model'."
        )
    return value


@dataclass(frozen=True, kw_only=True)
class CodeNames:
    """The user's variable names that generated code refers to."""

    model: str = "model"
    inputs: str = "x"
    optimizer: str = "optimizer"
    loss_fn: str = "loss_fn"
    dataset: str = "dataset"
    call_style: str = "positional"
    """How the model is called with the inputs: ``model(x)``, ``model(*x)`` or ``model(**x)``."""

    def __post_init__(self) -> None:
        for field_name in ("model", "inputs", "optimizer", "loss_fn", "dataset"):
            check_identifier(f"{field_name}_name", getattr(self, field_name))
        if self.call_style not in CALL_STYLES:
            raise InvalidArgumentError(
                f"call_style={self.call_style!r} is not valid: expected one of "
                f"{', '.join(map(repr, CALL_STYLES))}."
            )

    @property
    def call(self) -> str:
        """The expression that runs the model on the inputs, e.g. ``model(**x)``."""
        prefix = {"positional": "", "star": "*", "kwargs": "**"}[self.call_style]
        return f"{self.model}({prefix}{self.inputs})"

    @property
    def args(self) -> str:
        """The positional arguments as a tuple expression, e.g. ``(x,)``."""
        return {"positional": f"({self.inputs},)", "star": f"tuple({self.inputs})",
                "kwargs": "()"}[self.call_style]

    @property
    def kwargs(self) -> str:
        """The keyword arguments as an expression (``None`` unless the model takes ``**x``)."""
        return self.inputs if self.call_style == "kwargs" else "None"

    def mapping(self) -> dict[str, str]:
        return {
            "model": self.model, "inputs": self.inputs, "optimizer": self.optimizer,
            "loss_fn": self.loss_fn, "dataset": self.dataset, "call": self.call,
            "args": self.args, "kwargs": self.kwargs,
        }


def literal(value: Any) -> str:
    """Python source for a plain value, via ``repr``; anything else is refused."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(f"value={value!r} is not valid: expected a finite number.")
        return repr(value)
    if isinstance(value, (tuple, list)):
        inner = ", ".join(literal(v) for v in value)
        if isinstance(value, tuple):
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        return f"[{inner}]"
    raise InvalidArgumentError(
        f"value={value!r} of type {type(value).__name__} cannot go into generated code: expected "
        f"None, bool, int, float, str, or a tuple/list of those."
    )


class CodeTemplateError(InvalidArgumentError):
    """A template is missing a value or renders to code that does not parse (a bug here)."""


def render(template: str, *, names: CodeNames, values: dict[str, Any] | None = None) -> str:
    """Fill ``template`` with validated ``names`` and ``repr``'d ``values``; check it parses.

    Parameters
    ----------
    template : str
        A constant template with ``$name`` placeholders for names and ``$v_key`` for values.
    names : CodeNames
        The user's variable names (already validated).
    values : dict, optional
        Plain values, keyed without the ``v_`` prefix.

    Returns
    -------
    str
        Python source that :func:`ast.parse` accepts.
    """
    mapping: dict[str, str] = dict(names.mapping())
    for key, value in (values or {}).items():
        if not key.isidentifier():
            raise CodeTemplateError(f"value key {key!r} is not an identifier.")
        mapping[f"v_{key}"] = literal(value)
    try:
        code = string.Template(template).substitute(mapping)
    except (KeyError, ValueError) as exc:
        raise CodeTemplateError(f"template placeholder {exc} has no value.") from None
    try:
        ast.parse(code)
    except SyntaxError as exc:
        raise CodeTemplateError(f"rendered snippet does not parse: {exc}\n{code}") from None
    return code
