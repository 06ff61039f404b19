"""The hardware spec table: loading, schema validation, user overrides and conversion to specs.

The one copy of the table is ``data/hardware_specs.csv`` in the repository; the wheel ships it as
``aiadvisor/_data/hardware_specs.csv`` (hatch ``force-include``). Every throughput figure in it is
*dense* (a 2:4-sparsity figure is never stored as dense) and every row names its ``source``.
A blank cell means *unknown*, never zero.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import HardwareCatalogError, close_matches
from ..schema import HardwareSpec

if TYPE_CHECKING:  # pandas is imported lazily: ``import aiadvisor.hardware`` stays cheap
    import pandas as pd

__all__ = [
    "COLUMNS",
    "FIGURE_COLUMNS",
    "KINDS",
    "NUMERIC_COLUMNS",
    "TEXT_COLUMNS",
    "all_specs",
    "as_table",
    "catalog",
    "row_to_spec",
    "shipped_csv_path",
]

KINDS = ("gpu", "tpu", "npu", "cpu", "edge")

#: Throughput columns, one per precision (TFLOP/s, or TOP/s for the integer formats).
FIGURE_COLUMNS = (
    "fp32_tflops", "tf32_tflops", "bf16_tflops", "fp16_tflops", "fp8_tflops",
    "int8_tops", "int4_tops", "fp4_tflops",
)
NUMERIC_COLUMNS = (
    "memory_gb", "memory_bw_gbs", *FIGURE_COLUMNS, "tdp_w", "interconnect_bw_gbs",
    "usd_per_hour", "launch_overhead_us",
)
TEXT_COLUMNS = ("vendor", "kind", "interconnect", "source", "notes", "aliases")

#: Canonical column order of :func:`catalog` (the DESIGN.md spec columns plus extras).
COLUMNS = (
    "name", "vendor", "kind", "year", "memory_gb", "memory_bw_gbs", *FIGURE_COLUMNS, "tdp_w",
    "interconnect", "interconnect_bw_gbs", "usd_per_hour", "launch_overhead_us", "source",
    "notes", "aliases",
)

_YEAR_RANGE = (1990, 2100)


def shipped_csv_path() -> Path:
    """Path of the shipped table: inside the wheel, else ``<repo>/data/hardware_specs.csv``."""
    try:
        from importlib.resources import files

        packaged = files("aiadvisor").joinpath("_data", "hardware_specs.csv")
        if packaged.is_file():
            return Path(str(packaged))
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        pass
    return Path(__file__).resolve().parents[2] / "data" / "hardware_specs.csv"


# ---------------------------------------------------------------------------------------------
# Parsing and validation
# ---------------------------------------------------------------------------------------------

def _fail(source: str, line: int, name: str, column: str, value: str, expected: str) -> None:
    who = f" (name {name!r})" if name else ""
    raise HardwareCatalogError(
        f"{source}, row {line - 1} (line {line}){who}, column {column!r}: value {value!r} "
        f"{expected}"
    )


def _parse_number(text: str, *, source: str, line: int, name: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        _fail(source, line, name, column, text,
              "is not a number: expected a positive number, or a blank cell if unknown.")
    if not math.isfinite(value) or value <= 0:
        _fail(source, line, name, column, text,
              "is not valid: expected a positive finite number (leave the cell blank if "
              "unknown; a missing figure is never 0).")
    return value


def _parse_year(text: str, *, source: str, line: int, name: str) -> int:
    try:
        year = int(float(text))
    except ValueError:
        year = -1
    if str(year) != text.strip().split(".")[0] or not _YEAR_RANGE[0] <= year <= _YEAR_RANGE[1]:
        _fail(source, line, name, "year", text,
              f"is not valid: expected a whole year between {_YEAR_RANGE[0]} and "
              f"{_YEAR_RANGE[1]}.")
    return year


def _check_columns(header: list[str], source: str) -> None:
    seen = set()
    for column in header:
        if column in seen:
            raise HardwareCatalogError(f"{source}: column {column!r} appears twice in the header.")
        seen.add(column)
        if column not in COLUMNS:
            hint = close_matches(column, COLUMNS, n=1)
            fix = f" Did you mean {hint[0]!r}?" if hint else ""
            raise HardwareCatalogError(
                f"{source}: unknown column {column!r}: expected columns among "
                f"{', '.join(COLUMNS)}.{fix}"
            )
    if "name" not in header:
        raise HardwareCatalogError(
            f"{source}: no 'name' column: every row needs a name (the other columns are optional)."
        )


def _parse_row(raw: dict[str, str], *, source: str, line: int) -> dict[str, Any]:
    name = (raw.get("name") or "").strip()
    if not name:
        _fail(source, line, "", "name", raw.get("name") or "",
              "is not valid: expected a non-empty device name.")
    row: dict[str, Any] = {"name": name}
    for column, text in raw.items():
        text = (text or "").strip()
        if column == "name" or not text:
            continue
        if column in NUMERIC_COLUMNS:
            row[column] = _parse_number(text, source=source, line=line, name=name, column=column)
        elif column == "year":
            row[column] = _parse_year(text, source=source, line=line, name=name)
        elif column == "kind":
            if text.lower() not in KINDS:
                _fail(source, line, name, "kind", text,
                      f"is not valid: expected one of {', '.join(KINDS)}.")
            row[column] = text.lower()
        else:
            row[column] = text
    return row


def _read_rows(path: Path | str) -> list[dict[str, Any]]:
    """Read and validate one CSV; returns one dict per row holding only the non-blank cells."""
    import csv

    source = f"hardware CSV {str(path)!r}"
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return _parse_csv(csv.DictReader(handle), source)
    except OSError as exc:
        raise HardwareCatalogError(f"{source}: cannot be read ({exc.strerror or exc}).") from exc


def _parse_csv(reader: Any, source: str) -> list[dict[str, Any]]:
    header = [h.strip() for h in (reader.fieldnames or [])]
    _check_columns(header, source)
    reader.fieldnames = header
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for raw in reader:
        line = reader.line_num
        if None in raw:  # more cells than header columns
            _fail(source, line, (raw.get("name") or "").strip(), "(extra cells)",
                  ",".join(raw[None]), f"is not valid: the header has {len(header)} columns.")
        row = _parse_row(raw, source=source, line=line)
        key = row["name"].lower()
        if key in seen:
            _fail(source, line, row["name"], "name", row["name"],
                  f"is a duplicate: the same name is already on line {seen[key]}.")
        seen[key] = line
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------

def _to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=list(COLUMNS))
    for column in NUMERIC_COLUMNS:
        frame[column] = pd.to_numeric(frame[column], errors="raise").astype("float64")
    frame["year"] = frame["year"].astype("Int64")
    for column in ("name", *TEXT_COLUMNS):
        frame[column] = frame[column].fillna("").astype(object)
    return frame


@functools.lru_cache(maxsize=4)
def _shipped_rows(path: str, mtime_ns: int) -> tuple[dict[str, Any], ...]:
    return tuple(_read_rows(path))


def _merge(base: list[dict[str, Any]], extra: list[dict[str, Any]], origin: str
           ) -> list[dict[str, Any]]:
    """User rows override shipped rows by (case-insensitive) name; unknown names are added.

    A blank user cell keeps the shipped value; a new row's blank cells stay unknown."""
    merged = [dict(r) for r in base]
    index = {r["name"].lower(): i for i, r in enumerate(merged)}
    for row in extra:
        i = index.get(row["name"].lower())
        if i is None:
            new = dict(row)
            new.setdefault("source", f"user CSV {origin}")
            index[new["name"].lower()] = len(merged)
            merged.append(new)
            continue
        changed = sorted(c for c in row if c != "name")
        target = merged[i]
        target.update({c: v for c, v in row.items() if c != "name"})
        if changed and "notes" not in row:
            note = f"Overridden by user CSV {origin}: {', '.join(changed)}."
            target["notes"] = f"{target.get('notes', '')} {note}".strip()
    return merged


def catalog(path: str | os.PathLike | None = None) -> pd.DataFrame:
    """The hardware spec table as a DataFrame, one row per device.

    Parameters
    ----------
    path : str or path-like, optional
        A user CSV whose rows add devices or override shipped rows with the same ``name``
        (case-insensitive). It needs a ``name`` column; any subset of the other columns may be
        given. A blank cell is *unknown* (NaN), never zero; for an overridden row it keeps the
        shipped value.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COLUMNS`; throughput figures are dense. Missing figures are NaN.

    Raises
    ------
    HardwareCatalogError
        A cell is malformed (not a number, negative, zero, bad year or kind), a name is missing
        or duplicated, or a column is unknown; the message names the row, column and value.

    Examples
    --------
    >>> table = catalog()
    >>> float(table.set_index("name").loc["NVIDIA H100 SXM", "bf16_tflops"])
    989.4
    """
    shipped = shipped_csv_path()
    rows = list(_shipped_rows(str(shipped), shipped.stat().st_mtime_ns))
    if path is not None:
        rows = _merge(rows, _read_rows(path), origin=str(path))
    return _to_frame(rows)


def as_table(table: pd.DataFrame | str | os.PathLike | None) -> pd.DataFrame:
    """Accept a DataFrame from :func:`catalog`, a user CSV path, or None (the shipped table)."""
    if table is None or isinstance(table, (str, os.PathLike)):
        return catalog(table)
    missing = [c for c in ("name", "vendor", "kind") if c not in table.columns]
    if missing:
        raise HardwareCatalogError(
            f"catalog DataFrame lacks column(s) {', '.join(missing)}: pass the output of "
            "aiadvisor.hardware.catalog()."
        )
    return table


def _clean(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if type(value).__name__ in ("NAType", "NaTType"):  # pandas missing-value singletons
        return None
    return value


def row_to_spec(row: Any) -> HardwareSpec:
    """One catalog row (a mapping or a pandas Series) as a
    :class:`~aiadvisor.schema.HardwareSpec`."""
    get = row.get if hasattr(row, "get") else row.__getitem__
    values: dict[str, Any] = {}
    for column in NUMERIC_COLUMNS:
        value = _clean(get(column, None))
        if value is not None and column in HardwareSpec.__dataclass_fields__:
            values[column] = float(value)
    year = _clean(get("year", None))
    interconnect = _clean(get("interconnect", None)) or None
    aliases = tuple(a.strip() for a in str(_clean(get("aliases", None)) or "").split(";")
                    if a.strip())
    return HardwareSpec(
        name=str(get("name")), vendor=str(_clean(get("vendor", None)) or ""),
        kind=str(_clean(get("kind", None)) or "unknown"),
        year=None if year is None else int(year), interconnect=interconnect,
        source=str(_clean(get("source", None)) or ""), notes=str(_clean(get("notes", None)) or ""),
        aliases=aliases, **values,
    )


def all_specs(catalog: pd.DataFrame | str | os.PathLike | None = None) -> list[HardwareSpec]:
    """Every catalog row as a :class:`~aiadvisor.schema.HardwareSpec`, in table order.

    Parameters
    ----------
    catalog : DataFrame, path or None
        A table from :func:`catalog`, a user CSV path (merged with the shipped table), or None
        for the shipped table.
    """
    table = as_table(catalog)
    return [row_to_spec(row) for _, row in table.iterrows()]
