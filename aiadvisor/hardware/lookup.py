"""Forgiving lookup of catalog rows by name or alias.

"H100", "h100-sxm", "nvidia h100 sxm" and "NVIDIA H100 80GB HBM3" (what ``torch.cuda`` reports)
all find the same row. Ambiguous short names resolve to the row that lists them as an alias,
which is documented in that row's ``notes`` (e.g. "H100" is the SXM part, "A100" the 80 GB SXM
part). An unknown name raises :class:`~aiadvisor.errors.UnknownHardwareError` with the closest
names.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from typing import TYPE_CHECKING

from ..errors import InvalidArgumentError, UnknownHardwareError
from ..schema import HardwareSpec
from .spec_table import as_table, catalog, row_to_spec, shipped_csv_path

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["candidates", "find", "get", "normalize_tokens", "resolve"]

#: Words that carry no identity (vendor and marketing words, punctuation left-overs).
_NOISE = frozenset({
    "nvidia", "amd", "intel", "google", "aws", "amazon", "apple", "tesla", "geforce", "instinct",
    "habana", "cloud", "the", "gpu", "processor", "core", "r", "tm", "c", "with", "and",
    "accelerator", "tensor",
})
_SPLIT = re.compile(r"[^a-z0-9+.]+")


def normalize_tokens(text: str) -> tuple[str, ...]:
    """Lowercase identity tokens of a device name.

    >>> normalize_tokens("NVIDIA A100-SXM4-80GB")
    ('a100', 'sxm4', '80gb')
    >>> normalize_tokens("a100 80 GB")
    ('a100', '80gb')
    """
    raw = [t.strip(".") for t in _SPLIT.split(str(text).lower())]
    tokens: list[str] = []
    for token in raw:
        if not token or token in _NOISE:
            continue
        if token in ("gb", "g") and tokens and tokens[-1].isdigit():
            tokens[-1] += "gb"
            continue
        if re.fullmatch(r"\d+g", token):
            token += "b"
        tokens.append(token)
    return tuple(tokens)


def _compact(tokens: tuple[str, ...]) -> str:
    return "".join(tokens)


def _token_in(token: str, key: tuple[str, ...]) -> bool:
    return token in key or (token.isdigit() and f"{token}gb" in key)


class _Index:
    """Name/alias keys of one table: compact key -> row positions, and token sets per row."""

    def __init__(self, table: pd.DataFrame) -> None:
        self.table = table
        self.names: list[str] = [str(n) for n in table["name"]]
        self.compact: dict[str, set[int]] = {}
        self.keys: list[list[tuple[str, ...]]] = []
        self.labels: dict[str, set[int]] = {}
        for pos, (name, aliases) in enumerate(zip(table["name"], table["aliases"])):
            labels = [str(name)] + [a.strip() for a in str(aliases or "").split(";") if a.strip()]
            keys = []
            for label in labels:
                tokens = normalize_tokens(label)
                keys.append(tokens)
                self.compact.setdefault(_compact(tokens), set()).add(pos)
                self.labels.setdefault(label.lower(), set()).add(pos)
            self.keys.append(keys)

    def exact(self, query: str) -> set[int]:
        hits = self.labels.get(query.strip().lower())
        if hits:
            return hits
        return self.compact.get(_compact(normalize_tokens(query)), set())

    def subset(self, query: str) -> set[int]:
        """Rows with a name/alias containing every query token ("40" also matches "40gb")."""
        wanted = normalize_tokens(query)
        if not wanted:
            return set()
        return {pos for pos, keys in enumerate(self.keys)
                if any(all(_token_in(t, key) for t in wanted) for key in keys)}

    def suggestions(self, query: str, n: int = 3) -> list[str]:
        key = _compact(normalize_tokens(query)) or query.lower()
        close = difflib.get_close_matches(key, list(self.compact), n=10, cutoff=0.5)
        out: list[str] = []
        for hit in close:
            for pos in sorted(self.compact[hit]):
                if self.names[pos] not in out:
                    out.append(self.names[pos])
        return out[:n]


@functools.lru_cache(maxsize=2)
def _shipped(path: str, mtime_ns: int) -> tuple[pd.DataFrame, _Index]:
    table = catalog()
    return table, _Index(table)


def _table_and_index(source: pd.DataFrame | str | os.PathLike | None
                     ) -> tuple[pd.DataFrame, _Index]:
    """The table to search and its index; the shipped table's index is built once."""
    if source is None:
        path = shipped_csv_path()
        return _shipped(str(path), path.stat().st_mtime_ns)
    table = as_table(source)
    return table, _Index(table)


def _locate(name: str, index: _Index) -> tuple[int | None, list[str]]:
    """Row position for ``name`` (None if none or ambiguous) and the candidate names."""
    hits = index.exact(name)
    if len(hits) == 1:
        return next(iter(hits)), []
    if not hits:
        hits = index.subset(name)
        if len(hits) == 1:
            return next(iter(hits)), []
    if hits:
        return None, [index.names[p] for p in sorted(hits)]
    return None, index.suggestions(name)


def find(name: str, *, catalog: pd.DataFrame | str | os.PathLike | None = None
         ) -> HardwareSpec | None:
    """Like :func:`get` but returns None instead of raising (no match, or ambiguous)."""
    if not isinstance(name, str) or not name.strip():
        return None
    table, index = _table_and_index(catalog)
    pos, _ = _locate(name, index)
    return None if pos is None else row_to_spec(table.iloc[pos])


def candidates(name: str, *, catalog: pd.DataFrame | str | os.PathLike | None = None
               ) -> list[HardwareSpec]:
    """Every row ``name`` could mean: exact name/alias hits plus rows containing all its tokens.

    >>> [s.name for s in candidates("Orin Nano")]
    ['NVIDIA Jetson Orin Nano 8GB', 'NVIDIA Jetson Orin Nano Super 8GB']
    """
    if not isinstance(name, str) or not name.strip():
        return []
    table, index = _table_and_index(catalog)
    positions = sorted(index.exact(name) | index.subset(name))
    return [row_to_spec(table.iloc[p]) for p in positions]


def get(name: str, *, catalog: pd.DataFrame | str | os.PathLike | None = None) -> HardwareSpec:
    """Look up one device by name or alias, forgivingly.

    Case, punctuation and vendor words are ignored ("nvidia h100 sxm" = "H100-SXM"). A short
    name that fits several rows resolves to the row listing it as an alias ("H100" -> the SXM
    part, "A100" -> the 80 GB SXM part); otherwise the name must identify one row.

    Parameters
    ----------
    name : str
        A catalog name, an alias, or a name as ``torch.cuda.get_device_name()`` reports it.
    catalog : DataFrame, path or None
        A table from :func:`~aiadvisor.hardware.catalog`, a user CSV path, or None (shipped).

    Returns
    -------
    HardwareSpec

    Raises
    ------
    UnknownHardwareError
        No row matches, or several do; the message lists the closest names ("Did you mean").

    Examples
    --------
    >>> get("h100-sxm").name
    'NVIDIA H100 SXM'
    >>> get("A100 80GB").memory_bw_gbs
    2039.0
    """
    if not isinstance(name, str) or not name.strip():
        raise UnknownHardwareError(
            f"hardware={name!r} is not valid: expected a device name such as 'H100 SXM' "
            "(see aiadvisor.hardware.catalog()['name'])."
        )
    table, index = _table_and_index(catalog)
    pos, candidates = _locate(name, index)
    if pos is not None:
        return row_to_spec(table.iloc[pos])
    raise UnknownHardwareError(_unknown_message(name, candidates, index))


def _unknown_message(name: str, candidates: list[str], index: _Index) -> str:
    table = index.table
    ambiguous = bool(index.exact(name) or index.subset(name))
    if ambiguous:
        return (f"hardware {name!r} matches {len(candidates)} catalog rows; be more specific. "
                f"Did you mean {_or_list(candidates[:6])}?")
    hint = f" Did you mean {_or_list(candidates)}?" if candidates else ""
    return (f"hardware {name!r} is not in the catalog ({len(table)} devices; list them with "
            f"aiadvisor.hardware.catalog()['name'] or `aiadvisor hardware`).{hint}")


def _or_list(names: list[str]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def resolve(hardware: str | HardwareSpec) -> HardwareSpec:
    """A :class:`~aiadvisor.schema.HardwareSpec` from a catalog name, a spec, or ``"local"``.

    ``"local"`` is the attached device, benchmarked once (:func:`detect` with
    ``benchmark=True``; the result is cached on disk).

    Examples
    --------
    >>> resolve("MI300X").bf16_tflops
    1307.4
    """
    if isinstance(hardware, HardwareSpec):
        return hardware
    if isinstance(hardware, str) and hardware.strip().lower() == "local":
        from .detection import detect

        return detect(benchmark=True)
    if isinstance(hardware, str):
        return get(hardware)
    raise InvalidArgumentError(
        f"hardware={hardware!r} is not valid: expected a catalog name (str), a HardwareSpec, "
        "or 'local'."
    )
