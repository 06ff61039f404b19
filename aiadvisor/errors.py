"""Errors raised on purpose by aiadvisor.

Every message names the value received, what was expected, the valid choices and, where one
exists, the fix. The notebook magic shows them as a short ``UsageError``; the Python API raises
them with a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "AIAdvisorError",
    "InvalidArgumentError",
    "InvalidModelError",
    "ModelInputError",
    "UnknownHardwareError",
    "HardwareCatalogError",
    "UnsupportedPrecisionError",
    "UnsupportedWorkloadError",
    "MissingHardwareFigureError",
    "UnknownFabricError",
    "InvalidFabricError",
    "NodeLayoutError",
    "ProfileOptionError",
    "ProfilingError",
    "close_matches",
]


class AIAdvisorError(Exception):
    """Base class of every error aiadvisor raises on purpose."""


class InvalidArgumentError(AIAdvisorError, ValueError):
    """An argument has a value outside its valid choices or range."""


class ProfileOptionError(InvalidArgumentError):
    """An option asks a captured profile for another step than the one it traced (a different
    mode, optimizer or a measurement it does not have); the message names the fix."""


class InvalidModelError(AIAdvisorError, TypeError):
    """The object given as a model is not a ``torch.nn.Module``."""


class ModelInputError(AIAdvisorError):
    """The model rejected the example inputs (the model's own error is quoted)."""


class ProfilingError(AIAdvisorError):
    """No profiling path (fake tensors, meta device, real batch of one) could run the model."""


class UnknownHardwareError(AIAdvisorError, KeyError):
    """A hardware name matches no catalog row; the message lists the closest names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class HardwareCatalogError(AIAdvisorError, ValueError):
    """A hardware spec CSV has a malformed cell (row, column and value are named)."""


class UnsupportedPrecisionError(AIAdvisorError, ValueError):
    """A device cannot run a precision; the message suggests the nearest supported one."""


class UnsupportedWorkloadError(AIAdvisorError, ValueError):
    """A device cannot run the step at all (training on an inference-only accelerator); the
    message names the mode to use or the devices that can."""


class MissingHardwareFigureError(AIAdvisorError, ValueError):
    """A figure the prediction needs (memory bandwidth) is blank in the device's spec; the
    message says how to supply it."""


class UnknownFabricError(AIAdvisorError, KeyError):
    """A fabric name matches no row of ``data/fabrics.csv``; the message lists the choices."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InvalidFabricError(InvalidArgumentError):
    """A user-given fabric has a bandwidth, latency or efficiency outside its valid range."""


class NodeLayoutError(InvalidArgumentError):
    """A device count does not fill whole nodes of the pinned ``node_size``."""


def close_matches(value: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Return up to ``n`` of ``choices`` closest to ``value`` (case-insensitive)."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(str(value).lower(), list(lowered), n=n, cutoff=0.5)
    return [lowered[h] for h in hits]


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise ``InvalidArgumentError``.

    >>> check_choice("mode", "train", ("train", "infer"))
    'train'
    """
    choices = tuple(choices)
    if isinstance(value, str) and value in choices:
        return value
    hint = close_matches(str(value), choices, n=1)
    fix = f" Did you mean {hint[0]!r}?" if hint else ""
    raise InvalidArgumentError(
        f"{name}={value!r} is not valid: expected one of {', '.join(map(repr, choices))}.{fix}"
    )
