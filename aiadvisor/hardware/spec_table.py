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
import re
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
    "PRICE_KINDS",
    "SEGMENTS",
    "TEXT_COLUMNS",
    "all_specs",
    "as_table",
    "catalog",
    "filter_catalog",
    "row_to_spec",
    "shipped_csv_path",
]

KINDS = ("gpu", "tpu", "npu", "cpu", "edge")
#: Who buys a device (``segment``): rented or racked in a datacenter, a workstation card or
#: desktop, a consumer card or computer, an edge board or on-device NPU.
SEGMENTS = ("datacenter", "workstation", "consumer", "edge")

#: Throughput columns, one per precision (TFLOP/s, or TOP/s for the integer formats).
FIGURE_COLUMNS = (
    "fp32_tflops", "tf32_tflops", "bf16_tflops", "fp16_tflops", "fp8_tflops",
    "int8_tops", "int4_tops", "fp4_tflops",
)
NUMERIC_COLUMNS = (
    "memory_gb", "memory_bw_gbs", *FIGURE_COLUMNS, "tdp_w", "interconnect_bw_gbs",
    "usd_per_hour", "usd_purchase", "launch_overhead_us",
)
TEXT_COLUMNS = (
    "vendor", "kind", "segment", "interconnect", "price_kind", "price_source", "price_date",
    "source", "notes", "aliases",
)

#: ``price_kind`` values: ``rent`` (``usd_per_hour``, on-demand list price per device-hour),
#: ``buy`` (``usd_purchase``, list price of one device) or ``both``.
PRICE_KINDS = ("rent", "buy", "both")
_PRICE_COLUMNS = {"rent": ("usd_per_hour",), "buy": ("usd_purchase",),
                  "both": ("usd_per_hour", "usd_purchase")}
# No device in the catalog rents for more than ~15 $/device-hour (AWS p5 H100 works out to 12.3)
# and none sells for under ~50 $: a figure outside these is the other kind of price.
_MAX_USD_PER_HOUR = 100.0
_MIN_USD_PURCHASE = 20.0

#: Canonical column order of :func:`catalog` (the DESIGN.md spec columns plus extras).
COLUMNS = (
    "name", "vendor", "kind", "segment", "year", "memory_gb", "memory_bw_gbs", *FIGURE_COLUMNS,
    "tdp_w", "interconnect", "interconnect_bw_gbs", "usd_per_hour", "usd_purchase", "price_kind",
    "price_source", "price_date", "launch_overhead_us", "source", "notes", "aliases",
    "inference_only",
)
#: ``inference_only`` cells: ``yes`` where the vendor's software runs inference only on the
#: device (no training step is priced there), blank or ``no`` otherwise.
YES_NO = {"yes": True, "no": False}

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
        elif column == "price_date":
            if not re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", text):
                _fail(source, line, name, column, text,
                      "is not valid: expected the date the price was read, YYYY-MM or "
                      "YYYY-MM-DD.")
            row[column] = text
        elif column == "price_kind":
            if text.lower() not in PRICE_KINDS:
                _fail(source, line, name, column, text,
                      f"is not valid: expected one of {', '.join(PRICE_KINDS)}.")
            row[column] = text.lower()
        elif column == "inference_only":
            if text.lower() not in YES_NO:
                _fail(source, line, name, column, text,
                      "is not valid: expected yes (the vendor's software runs inference only "
                      "on it), no, or a blank cell.")
            row[column] = YES_NO[text.lower()]
        elif column in ("kind", "segment"):
            choices = KINDS if column == "kind" else SEGMENTS
            if text.lower() not in choices:
                _fail(source, line, name, column, text,
                      f"is not valid: expected one of {', '.join(choices)}.")
            row[column] = text.lower()
        else:
            row[column] = text
    return row


def _check_price(row: dict[str, Any], *, source: str, line: int, require_source: bool) -> None:
    """A price sits in the column of its kind, in a plausible range, with a source and a date."""
    name = row["name"]
    hourly, purchase = row.get("usd_per_hour"), row.get("usd_purchase")
    if hourly is not None and hourly > _MAX_USD_PER_HOUR:
        _fail(source, line, name, "usd_per_hour", f"{hourly:g}",
              f"is not valid: expected a rental price per device-hour (at most "
              f"{_MAX_USD_PER_HOUR:g}); a purchase price goes in 'usd_purchase'.")
    if purchase is not None and purchase < _MIN_USD_PURCHASE:
        _fail(source, line, name, "usd_purchase", f"{purchase:g}",
              f"is not valid: expected the purchase price of one device (at least "
              f"{_MIN_USD_PURCHASE:g} USD); an hourly price goes in 'usd_per_hour'.")
    kind = row.get("price_kind")
    if hourly is None and purchase is None:
        if kind is not None:  # a price was announced but not given
            column = _PRICE_COLUMNS[kind][0]
            _fail(source, line, name, column, "",
                  f"is missing for price_kind {kind!r}: give the price, or leave price_kind "
                  "blank to use the row without a price.")
        return
    if kind is None:
        if not require_source:
            return
        _fail(source, line, name, "price_kind", "",
              f"is missing: a price needs price_kind, one of {', '.join(PRICE_KINDS)}.")
    rule = "'rent' uses usd_per_hour, 'buy' uses usd_purchase, 'both' uses both."
    for column in ("usd_per_hour", "usd_purchase"):  # a price in the wrong column first
        if row.get(column) is not None and column not in _PRICE_COLUMNS[kind]:
            _fail(source, line, name, column, f"{row[column]:g}",
                  f"is in the wrong column for price_kind {kind!r}: {rule}")
    for column in _PRICE_COLUMNS[kind]:
        if row.get(column) is None:
            _fail(source, line, name, column, "", f"is missing for price_kind {kind!r}: {rule}")
    if require_source:
        for column in ("price_source", "price_date"):
            if not row.get(column):
                _fail(source, line, name, column, "",
                      "is missing: every price needs price_source (page title or URL) and "
                      "price_date (YYYY-MM) so it can be checked and aged.")


def _read_rows(path: Path | str, *, shipped: bool = False) -> list[dict[str, Any]]:
    """Read and validate one CSV; returns one dict per row holding only the non-blank cells."""
    import csv

    source = f"hardware CSV {str(path)!r}"
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return _parse_csv(csv.DictReader(handle), source, require_price_source=shipped)
    except OSError as exc:
        raise HardwareCatalogError(f"{source}: cannot be read ({exc.strerror or exc}).") from exc


def _parse_csv(reader: Any, source: str, *, require_price_source: bool = False
               ) -> list[dict[str, Any]]:
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
        _check_price(row, source=source, line=line, require_source=require_price_source)
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
    frame["inference_only"] = frame["inference_only"].eq(True)
    return frame


@functools.lru_cache(maxsize=4)
def _shipped_rows(path: str, mtime_ns: int) -> tuple[dict[str, Any], ...]:
    return tuple(_read_rows(path, shipped=True))


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
        if ("usd_per_hour" in row or "usd_purchase" in row) and "price_source" not in row:
            row = {**row, "price_source": f"user CSV {origin}"}
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
        A cell is malformed (not a number, negative, zero, bad year, kind, price_kind or
        price_date), a price is in the wrong column (``usd_per_hour`` above 100 or not matching
        ``price_kind``), a name is missing or duplicated, or a column is unknown; the message
        names the row, column and value. Shipped prices must also give ``price_source`` and
        ``price_date``; a user CSV price without them is labelled ``user CSV <path>``.

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


def filter_catalog(table: pd.DataFrame | str | os.PathLike | None = None, *,
                   kind: str | None = None, segment: str | None = None,
                   vendor: str | None = None,
                   name: str | None = None, min_memory_gb: float | None = None,
                   max_usd_per_hour: float | None = None, years: float | None = None,
                   utilisation: float | None = None, usd_per_kwh: float | None = None,
                   basis: str | None = None) -> pd.DataFrame:
    """The catalog rows that match every filter given, in table order.

    Parameters
    ----------
    table : DataFrame, path or None
        A table from :func:`catalog`, a user CSV path, or None for the shipped table.
    kind : str, optional
        One of :data:`KINDS` (case-insensitive).
    segment : str, optional
        One of :data:`SEGMENTS` (case-insensitive): datacenter, workstation, consumer, edge.
    vendor, name : str, optional
        Case-insensitive substring of the vendor / device name.
    min_memory_gb : float, optional
        Only devices with at least this much memory (unknown memory is left out).
    max_usd_per_hour : float, optional
        Only devices that cost at most this much per busy hour: the rental price, else the
        purchase price amortised by :func:`aiadvisor.hardware.pricing.hourly_cost` (``years``,
        ``utilisation``, ``usd_per_kwh`` and ``basis`` ("rent" or "own", for devices priced
        both ways) are passed on; None keeps its defaults). Devices with no price are left
        out.

    Returns
    -------
    pandas.DataFrame
        The matching rows, with an extra column ``cost_per_hour`` when a budget is given.

    Raises
    ------
    InvalidArgumentError
        ``kind`` is not one of :data:`KINDS`, ``segment`` not one of :data:`SEGMENTS`, or
        ``min_memory_gb`` / ``max_usd_per_hour`` is negative or not a number.

    Examples
    --------
    >>> sorted(filter_catalog(kind="tpu", vendor="google")["name"])[:2]
    ['Google TPU v4', 'Google TPU v5e']
    """
    from ..errors import InvalidArgumentError, check_choice
    from .pricing import hourly_cost

    def bound(label: str, value: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number) or number < 0:
            raise InvalidArgumentError(
                f"{label}={value!r} is not valid: expected a non-negative number.")
        return number

    table = as_table(table)
    if kind is not None:
        kind = check_choice("kind", str(kind).lower(), KINDS)
        table = table[table["kind"] == kind]
    if segment is not None:
        segment = check_choice("segment", str(segment).lower(), SEGMENTS)
        table = table[table["segment"] == segment]
    if vendor:
        table = table[table["vendor"].str.lower().str.contains(vendor.lower(), regex=False)]
    if name:
        table = table[table["name"].str.lower().str.contains(name.lower(), regex=False)]
    if min_memory_gb is not None:
        table = table[table["memory_gb"] >= bound("min_memory_gb", min_memory_gb)]
    if max_usd_per_hour is not None:
        budget = bound("max_usd_per_hour", max_usd_per_hour)
        assumptions = {k: v for k, v in (("years", years), ("utilisation", utilisation),
                                         ("usd_per_kwh", usd_per_kwh), ("basis", basis))
                       if v is not None}
        cost = table.apply(lambda row: hourly_cost(row, **assumptions), axis=1,
                           result_type="reduce") if len(table) else table["usd_per_hour"]
        table = table.assign(cost_per_hour=cost.astype("float64"))
        table = table[table["cost_per_hour"] <= budget]
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
    price = {c: str(_clean(get(c, None)) or "") or None
             for c in ("price_kind", "price_source", "price_date")}
    aliases = tuple(a.strip() for a in str(_clean(get("aliases", None)) or "").split(";")
                    if a.strip())
    return HardwareSpec(
        name=str(get("name")), vendor=str(_clean(get("vendor", None)) or ""),
        kind=str(_clean(get("kind", None)) or "unknown"),
        segment=str(_clean(get("segment", None)) or "") or None,
        year=None if year is None else int(year), interconnect=interconnect,
        source=str(_clean(get("source", None)) or ""), notes=str(_clean(get("notes", None)) or ""),
        aliases=aliases, inference_only=bool(_clean(get("inference_only", None)) or False),
        **price, **values,
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
