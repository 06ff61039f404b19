"""Prices in the catalog: each says its kind, source and date, sits in a sane range, and a
purchase price turns into $/hour by the documented amortisation rule."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from aiadvisor.errors import HardwareCatalogError, InvalidArgumentError
from aiadvisor.hardware import catalog, get
from aiadvisor.hardware.pricing import hourly_cost
from aiadvisor.hardware.spec_table import _read_rows

# Sane ranges per kind of price. Rental: a datacenter accelerator rents for 0.2-15 $/device-hour
# (T4 ~0.3-0.6, AWS p5 H100 list 12.3). Purchase: consumer/workstation parts 200-4000 $,
# edge boards 50-3000 $.
RENT_RANGE = {"gpu": (0.2, 15.0), "tpu": (0.2, 15.0), "npu": (0.2, 15.0), "cpu": (0.01, 15.0)}
BUY_RANGE = {"gpu": (200.0, 4000.0), "edge": (50.0, 3000.0), "cpu": (100.0, 20000.0),
             "npu": (200.0, 40000.0)}


@pytest.fixture(scope="module")
def table():
    return catalog()


def test_every_price_has_a_kind_a_source_and_a_date(table):
    priced = table[table["usd_per_hour"].notna() | table["usd_purchase"].notna()]
    assert len(priced) >= 13
    for _, row in priced.iterrows():
        assert row["price_kind"] in ("rent", "buy", "both"), row["name"]
        assert len(row["price_source"]) > 10, row["name"]
        assert re.fullmatch(r"20\d\d-\d\d(-\d\d)?", row["price_date"]), row["name"]
        if row["price_kind"] in ("rent", "both"):
            low, high = RENT_RANGE[row["kind"]]
            assert low <= row["usd_per_hour"] <= high, row["name"]
        if row["price_kind"] in ("buy", "both"):
            low, high = BUY_RANGE[row["kind"]]
            assert low <= row["usd_purchase"] <= high, row["name"]
    unpriced = table[table["usd_per_hour"].isna() & table["usd_purchase"].isna()]
    assert (unpriced["price_source"] == "").all() and (unpriced["price_kind"] == "").all()


def test_spot_check_prices_against_their_sources(table):
    rows = table.set_index("name")
    # NVIDIA launch MSRPs of the Founders Editions: RTX 3090 $1,499 (Sept 2020), RTX 4090 $1,599
    # (GTC 2022-09-20, on sale 2022-10-12), RTX 5090 $1,999 (CES 2025-01-06).
    assert rows.loc["NVIDIA GeForce RTX 3090", "usd_purchase"] == 1499
    assert rows.loc["NVIDIA GeForce RTX 4090", "usd_purchase"] == 1599
    assert rows.loc["NVIDIA GeForce RTX 5090", "usd_purchase"] == 1999
    assert rows.loc["NVIDIA GeForce RTX 4090", "price_date"] == "2022-09"
    # Lambda 1x H100 SXM on-demand 3.78 $/GPU-hour, snapshot May 2026.
    assert rows.loc["NVIDIA H100 SXM", "usd_per_hour"] == 3.78
    assert rows.loc["NVIDIA H100 SXM", "price_kind"] == "rent"
    assert "Lambda" in rows.loc["NVIDIA H100 SXM", "price_source"]
    spec = get("RTX 4090")
    assert spec.usd_purchase == 1599 and spec.price_kind == "buy"


def test_amortised_purchase_follows_the_documented_rule():
    # RTX 4090: 1599 $ over 3 years at 50 % use = 1599 / (3 * 8760 * 0.5) = 0.12169 $/h, plus
    # 450 W at 0.15 $/kWh = 0.0675 $/h: 0.18919 $/h.
    assert hourly_cost(get("RTX 4090")) == pytest.approx(0.18919, abs=1e-5)
    # 5 years, always busy, free power: 1599 / 43800 = 0.036507 $/h.
    assert hourly_cost(get("RTX 4090"), years=5, utilisation=1.0, usd_per_kwh=0) == \
        pytest.approx(0.036507, abs=1e-6)
    # A rented device costs its rental price; a device with no price costs None.
    assert hourly_cost(get("H100 SXM")) == 3.78
    assert get("TPU v4").usd_per_hour is None and get("TPU v4").usd_purchase is None
    assert hourly_cost(get("TPU v4")) is None


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [({"years": -1}, "years=-1"), ({"utilisation": 0}, "utilisation=0"),
     ({"utilisation": 1.5}, "at most 1"), ({"usd_per_kwh": -0.1}, "usd_per_kwh=-0.1"),
     ({"years": math.nan}, "years=nan")],
)
def test_amortisation_rejects_bad_assumptions(kwargs, fragment):
    with pytest.raises(InvalidArgumentError, match=re.escape(fragment)):
        hourly_cost(get("RTX 4090"), **kwargs)


def _csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.csv"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("name,usd_per_hour\nX,-2\n", ["'usd_per_hour'", "'-2'", "positive"]),
        ("name,usd_per_hour\nX,1599\n", ["'usd_per_hour'", "'1599'", "'usd_purchase'"]),
        ("name,usd_purchase\nX,2.5\n", ["'usd_purchase'", "'2.5'", "'usd_per_hour'"]),
        ("name,usd_per_hour,price_kind\nX,2.5,buy\n",
         ["row 1", "'X'", "'usd_per_hour'", "wrong column", "price_kind 'buy'"]),
        ("name,usd_purchase,price_kind\nX,999,rent\n", ["'usd_purchase'", "price_kind 'rent'"]),
        ("name,usd_per_hour,price_kind\nX,2.5,lease\n",
         ["'price_kind'", "'lease'", "rent, buy, both"]),
        ("name,usd_per_hour,price_kind,price_date\nX,2.5,rent,May 2026\n",
         ["'price_date'", "'May 2026'", "YYYY-MM"]),
    ],
)
def test_bad_prices_name_row_column_and_value(tmp_path, text, fragments):
    with pytest.raises(HardwareCatalogError) as info:
        catalog(_csv(tmp_path, text))
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("name,usd_per_hour,price_kind,price_date\nX,2.5,rent,2026-05\n",
         ["'price_source'", "is missing"]),
        ("name,usd_per_hour,price_kind,price_source\nX,2.5,rent,Lambda pricing page\n",
         ["'price_date'", "is missing"]),
        ("name,usd_per_hour\nX,2.5\n", ["'price_kind'", "is missing"]),
    ],
)
def test_the_shipped_table_rejects_a_price_without_source_or_date(tmp_path, text, fragments):
    # The shipped table is read with the strict rule; a user CSV may price without a source.
    with pytest.raises(HardwareCatalogError) as info:
        _read_rows(_csv(tmp_path, text), shipped=True)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
    assert _read_rows(_csv(tmp_path, text))[0]["usd_per_hour"] == 2.5


def test_a_user_price_override_names_the_user_csv_as_its_source(tmp_path):
    rows = catalog(_csv(tmp_path, "name,usd_per_hour\nNVIDIA L4,0.44\n")).set_index("name")
    assert rows.loc["NVIDIA L4", "usd_per_hour"] == 0.44
    assert rows.loc["NVIDIA L4", "price_source"].startswith("user CSV")


def test_filter_catalog_by_kind_and_budget(table):
    from aiadvisor.hardware import filter_catalog

    tpus = filter_catalog(table, kind="TPU")
    assert set(tpus["kind"]) == {"tpu"} and len(tpus) == (table["kind"] == "tpu").sum()
    # Budget 0.2 $/h with the defaults: RTX 3090 0.167 and RTX 4090 0.189 (worked in
    # test_amortised_purchase_follows_the_documented_rule), Raspberry Pi 5 80/13140 = 0.0061
    # (no TDP published); RTX 5090 is 0.238.
    cheap = filter_catalog(table, max_usd_per_hour=0.2)
    assert sorted(cheap["name"]) == ["NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4090",
                                     "Raspberry Pi 5 8GB"]
    assert cheap.set_index("name").loc["NVIDIA GeForce RTX 4090", "cost_per_hour"] == \
        pytest.approx(0.18919, abs=1e-5)
    # Written off over 6 years the RTX 5090 costs 1999/26280 + 0.08625 = 0.162 $/h.
    longer = filter_catalog(table, max_usd_per_hour=0.2, years=6)
    assert "NVIDIA GeForce RTX 5090" in set(longer["name"])


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [({"kind": "fpga"}, ["kind='fpga'", "'gpu', 'tpu', 'npu', 'cpu', 'edge'"]),
     ({"max_usd_per_hour": -1}, ["max_usd_per_hour=-1", "non-negative"]),
     ({"min_memory_gb": "lots"}, ["min_memory_gb='lots'"])],
)
def test_filter_catalog_rejects_bad_filters(table, kwargs, fragments):
    from aiadvisor.hardware import filter_catalog

    with pytest.raises(InvalidArgumentError) as info:
        filter_catalog(table, **kwargs)
    for fragment in fragments:
        assert fragment in str(info.value)
