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

# Sane ranges per kind of price. Rental: a datacenter accelerator rents for 0.1-15 $/device-hour
# (the Akash marketplace lists a V100 32GB PCIe from 0.17, T4 ~0.3-0.6, AWS p5 H100 list 12.3).
# Purchase: consumer cards and Macs 200-4000 $, workstation cards up to 12000 $ (RTX PRO 6000
# Blackwell MSRP 8,565); edge boards and accelerators 50-4000 $ (Coral USB 75, Jetson AGX Thor
# kit 3,499); server CPUs up to 20000 $; datacenter accelerators sold in 8-card kits
# 2000-40000 $ per card (Gaudi 3 15,625).
RENT_RANGE = {"gpu": (0.1, 15.0), "tpu": (0.2, 15.0), "npu": (0.2, 15.0), "cpu": (0.01, 15.0)}
BUY_RANGE = {"gpu": (200.0, 12000.0), "edge": (50.0, 4000.0), "cpu": (100.0, 20000.0),
             "npu": (2000.0, 40000.0)}


@pytest.fixture(scope="module")
def table():
    return catalog()


def test_every_price_has_a_kind_a_source_and_a_date(table):
    priced = table[table["usd_per_hour"].notna() | table["usd_purchase"].notna()]
    assert len(priced) >= 67
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
    unpriced = get("Ascend 910B")  # Huawei publishes no price (notes say so)
    assert unpriced.usd_per_hour is None and unpriced.usd_purchase is None
    assert hourly_cost(unpriced) is None


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
    # GPUs within 0.2 $/h with the defaults (3 years at 50 % = 13140 h, 0.15 $/kWh):
    # RTX 3090 0.167 and RTX 4090 0.189 (worked in the test above); RTX 4080
    # 1199/13140 + 0.320*0.15 = 0.139; RX 7900 XTX 999/13140 + 0.355*0.15 = 0.129; Mac mini M4
    # 599/13140 = 0.046, M4 Pro 1399/13140 = 0.106 and the 1,999 USD Mac Studios (M1 Max,
    # M2 Max) 0.152 (Apple publishes no TDP: no power term); RTX 4070 599/13140 + 0.200*0.15 =
    # 0.076, RTX 3060 12GB 329/13140 + 0.170*0.15 = 0.051. Left out: RTX 5090 0.238, the
    # 3,999 USD MacBook Pros 0.304, DGX Spark 0.325. One rental is in: the V100 32GB PCIe from
    # 0.17 $/h on the Akash marketplace; the next cheapest rental is the T4 at 0.59.
    cheap = filter_catalog(table, kind="gpu", max_usd_per_hour=0.2)
    assert sorted(cheap["name"]) == [
        "AMD Radeon RX 7900 XTX", "Apple M1 Max (32-core GPU)", "Apple M2 Max (38-core GPU)",
        "Apple M4 (10-core GPU)", "Apple M4 Pro (20-core GPU)", "NVIDIA GeForce RTX 3060 12GB",
        "NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4070", "NVIDIA GeForce RTX 4080",
        "NVIDIA GeForce RTX 4090", "NVIDIA V100 PCIe 32GB"]
    assert cheap.set_index("name").loc["NVIDIA GeForce RTX 3060 12GB", "cost_per_hour"] == \
        pytest.approx(329 / 13140 + 0.170 * 0.15, abs=1e-6)
    assert cheap.set_index("name").loc["NVIDIA V100 PCIe 32GB", "cost_per_hour"] == 0.17
    assert cheap.set_index("name").loc["NVIDIA GeForce RTX 4080", "cost_per_hour"] == \
        pytest.approx(1199 / 13140 + 0.048, abs=1e-6)
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


def test_at_least_90_percent_of_rentable_or_buyable_devices_have_a_price(table):
    # A row without a price either says why no public price exists ("No public price: <why>",
    # e.g. Huawei sells Ascend only at quoted prices) or that none was found in the sources
    # read; the second kind counts against coverage. 70 of the 74 rows that can be rented or
    # bought had a sourced price in 2026-12 (95 %): the goal of 90 % is met.
    priced = table["usd_per_hour"].notna() | table["usd_purchase"].notna()
    no_public = table["notes"].str.contains("No public price: ", regex=False)
    assert not (priced & no_public).any()
    for note in table.loc[no_public, "notes"]:
        assert len(note.split("No public price: ")[1]) > 20  # a reason, not a bare label
    for _, row in table[~priced & ~no_public].iterrows():
        assert "No price found" in row["notes"], row["name"]
    rentable_or_buyable = ~no_public
    assert rentable_or_buyable.sum() == 74
    assert priced.sum() == 70
    assert priced.sum() / rentable_or_buyable.sum() >= 0.9


def test_new_prices_match_the_arithmetic_of_their_sources(table):
    rows = table.set_index("name")
    # Per-device prices derived from instance or kit prices named in price_source:
    # Spheron GB200 Superchip 9.08 $/h for 2 GPUs; AWS trn2.48xlarge ~38.47 $/h for 16 chips;
    # AWS p3dn.24xlarge 31.212 $/h for 8 V100 32GB; Runpod serverless A40 0.00034 $/s and
    # RTX 6000 Ada 0.00053 $/s; Intel kits of 8 accelerators: Gaudi 3 125,000 $, Gaudi 2 65,000 $.
    assert rows.loc["NVIDIA GB200", "usd_per_hour"] == pytest.approx(9.08 / 2)
    assert rows.loc["AWS Trainium2", "usd_per_hour"] == pytest.approx(38.47 / 16, abs=0.005)
    assert rows.loc["NVIDIA V100 SXM2 32GB", "usd_per_hour"] == pytest.approx(31.212 / 8,
                                                                             abs=0.005)
    assert rows.loc["NVIDIA A40", "usd_per_hour"] == pytest.approx(0.00034 * 3600)
    assert rows.loc["NVIDIA RTX 6000 Ada Generation", "usd_per_hour"] == pytest.approx(
        0.00053 * 3600)
    assert rows.loc["Intel Gaudi 3", "usd_purchase"] == 125_000 / 8
    assert rows.loc["Intel Gaudi 2", "usd_purchase"] == 65_000 / 8
    # A device priced both ways keeps both, and its price_kind says so.
    pro = rows.loc["NVIDIA RTX PRO 6000 Blackwell"]
    assert (pro["price_kind"], pro["usd_per_hour"], pro["usd_purchase"]) == ("both", 0.66, 8565)
    # Apple chips are priced as the cheapest Mac that has them, and the note says so.
    assert rows.loc["Apple M4 (10-core GPU)", "usd_purchase"] == 599
    assert "whole Mac mini" in rows.loc["Apple M4 (10-core GPU)", "notes"]


def test_prices_rechecked_against_the_pages_read(table):
    rows = table.set_index("name")
    # instances.vantage.sh data (2026-08-26): p3.2xlarge 3.06 $/h for 1 V100 16GB, p3dn.24xlarge
    # 31.212 $/h for 8 V100 32GB (us-east-1), inf2.xlarge 0.7582 $/h for 1 Inferentia2,
    # dl2q.24xlarge 8.9194 $/h for 8 Cloud AI 100 Standard (us-west-2).
    assert rows.loc["NVIDIA V100 SXM2 16GB", "usd_per_hour"] == 3.06
    assert rows.loc["NVIDIA V100 SXM2 32GB", "usd_per_hour"] == pytest.approx(31.212 / 8, abs=0.005)
    assert rows.loc["AWS Inferentia2", "usd_per_hour"] == pytest.approx(0.7582, abs=0.005)
    assert rows.loc["Qualcomm Cloud AI 100 Standard", "usd_per_hour"] == pytest.approx(
        8.9194 / 8, abs=0.005)
    # Lambda's instances page (2026-09-20) lists 1x GH200 at 2.29 $/h; the catalog had 1.49.
    assert rows.loc["NVIDIA GH200", "usd_per_hour"] == 2.29
    # Newly priced: Massed Compute 1x H200 NVL 3.62 $/h (2026-07-22); Akash V100 32GB PCIe from
    # 0.17 $/h (2026-09-20); Lambda 1x A100 (40 GB PCIe) 1.48 $/h (API record of 2026-03-10);
    # Vultr MI355X on-demand 2.590 $/GPU/h (page captured 2026-07-31).
    # AMD launch prices: Ryzen 9 7950X 699, 9950X 649 USD.
    assert rows.loc["NVIDIA H200 NVL", "usd_per_hour"] == 3.62
    assert rows.loc["NVIDIA A100 40GB PCIe", "usd_per_hour"] == 1.48
    assert rows.loc["AMD Instinct MI355X", "usd_per_hour"] == 2.59
    assert rows.loc["NVIDIA V100 PCIe 32GB", "usd_per_hour"] == 0.17
    assert (rows.loc["AMD Ryzen 9 7950X", "usd_purchase"],
            rows.loc["AMD Ryzen 9 9950X", "usd_purchase"]) == (699, 649)
    rechecked = ["NVIDIA V100 SXM2 16GB", "NVIDIA V100 SXM2 32GB", "AWS Inferentia2",
                 "Qualcomm Cloud AI 100 Standard", "NVIDIA GH200", "AMD Ryzen 9 7950X",
                 "AMD Ryzen 9 9950X"]
    for name in rechecked:
        source = rows.loc[name, "price_source"]
        assert "checked in this session" in source and "not re-read" not in source, name
    # The prices still taken from a named page without re-reading it say so (11 rows).
    not_reread = rows["price_source"].str.contains("not re-read in this session", regex=False)
    assert not_reread.sum() == 11

# --- the price rule: rent or own, user-changeable amortisation ---------------------------------

def test_price_rule_rent_or_own_for_a_device_priced_both_ways():
    from aiadvisor.hardware import PriceRule

    pro = get("RTX PRO 6000")  # rent 0.66 $/h (packet.ai) and MSRP 8,565 USD, 600 W
    rent = PriceRule().quote(pro)
    assert (rent.basis, rent.usd_per_hour, rent.price_date) == ("rent", 0.66, "2026-06")
    assert rent.text.startswith("rent 0.66 $/h (") and "packet.ai" in rent.text
    # Owning: 8565 / (3 * 8760 * 0.5) = 0.65183 $/h plus 600 W at 0.15 $/kWh = 0.09: 0.74183.
    own = PriceRule(basis="own").quote(pro)
    assert own.basis == "own" and own.usd_per_hour == pytest.approx(0.74183, abs=1e-5)
    assert "8,565 USD over 3 y at 50% use + 600 W at 0.15 $/kWh" in own.text
    # Four years, always busy, 0.30 $/kWh: 8565 / 35040 + 0.6 * 0.30 = 0.42443 $/h.
    custom = PriceRule.from_value({"basis": "own", "years": 4, "utilisation": 1.0,
                                   "usd_per_kwh": 0.30})
    assert custom.quote(pro).usd_per_hour == pytest.approx(8565 / 35040 + 0.18, abs=1e-6)
    # A device with one kind of price uses it whatever the basis: the H100 SXM only rents.
    assert PriceRule(basis="own").quote(get("H100 SXM")).usd_per_hour == 3.78
    assert PriceRule().quote(get("Ascend 910B")) is None
    assert hourly_cost(pro, basis="own") == pytest.approx(0.74183, abs=1e-5)


@pytest.mark.parametrize(
    ("value", "fragments"),
    [("lease", ["basis='lease'", "'rent', 'own'"]),
     ({"basis": "own", "year": 4}, ["unknown key(s) year", "basis, years, utilisation"]),
     ({"utilisation": 2}, ["utilisation=2", "at most 1"]),
     (3.5, ["price=3.5", "'rent', 'own'"])],
)
def test_price_rule_rejects_bad_values(value, fragments):
    from aiadvisor.hardware import PriceRule

    with pytest.raises(InvalidArgumentError) as info:
        PriceRule.from_value(value)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


# --- bad prices in a user CSV ---------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        # Missing: a price kind with no price.
        ("name,usd_per_hour,price_kind\nX,,rent\n",
         ["row 1", "'X'", "column 'usd_per_hour'", "is missing for price_kind 'rent'",
          "leave price_kind blank"]),
        # Not a number (a currency sign and a thousands separator).
        ("name,usd_purchase\nA,1599\nB,\"$1,599\"\n",
         ["row 2", "'B'", "column 'usd_purchase'", "'$1,599'", "not a number"]),
        # Negative.
        ("name,usd_purchase,price_kind\nX,-1599,buy\n",
         ["row 1", "column 'usd_purchase'", "'-1599'"]),
        # A purchase price in the hourly column, and an hourly price in the purchase column.
        ("name,usd_per_hour,price_kind\nNVIDIA L4,2500,rent\n",
         ["row 1", "column 'usd_per_hour'", "'2500'", "a purchase price goes in 'usd_purchase'"]),
        ("name,usd_purchase,price_kind\nNVIDIA L4,0.8,buy\n",
         ["column 'usd_purchase'", "'0.8'", "an hourly price goes in 'usd_per_hour'"]),
    ],
)
def test_user_csv_price_errors_name_the_row_and_column(tmp_path, text, fragments):
    with pytest.raises(HardwareCatalogError) as info:
        catalog(_csv(tmp_path, text))
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_a_user_row_without_a_price_is_ranked_without_one_and_the_report_says_so(tmp_path):
    from aiadvisor.hardware import all_specs
    from aiadvisor.recommend.predictor import Predictor
    from aiadvisor.recommend.ranking import rank_hardware
    from tests.recommend.conftest import make_profile

    path = _csv(tmp_path, "name,vendor,kind,memory_gb,memory_bw_gbs,bf16_tflops,fp32_tflops\n"
                          "Acme NPU 1,Acme,npu,64,1000,400,50\n")
    specs = [s for s in all_specs(path) if s.name in ("Acme NPU 1", "NVIDIA L4")]
    prof = make_profile(num_params=1_000_000, batch_size=4, mode="infer", optimizer="none")
    table = rank_hardware(prof, specs=specs, precision=None, num_devices=1,
                          predictor=Predictor()).set_index("hardware")
    acme = table.loc["Acme NPU 1"]
    assert acme["throughput"] > 0  # predicted from its figures...
    assert math.isnan(acme["usd_per_hour"]) and math.isnan(acme["cost_per_million_samples_usd"])
    assert acme["price_basis"] == "no price in the catalog" and not acme["pareto"]
    assert "1 device(s) have no price in the catalog" in table.attrs["price_note"]
    assert table.loc["NVIDIA L4", "usd_per_hour"] == 0.8  # the shipped row keeps its price
