"""The shipped spec table: schema and unit checks on every row, datasheet spot checks, and the
loader's validation of user CSVs."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from aiadvisor.errors import HardwareCatalogError
from aiadvisor.hardware import COLUMNS, KINDS, all_specs, catalog, get, shipped_csv_path
from aiadvisor.hardware.spec_table import FIGURE_COLUMNS, NUMERIC_COLUMNS

REPO = Path(__file__).resolve().parents[2]
DESIGN_COLUMNS = (
    "name", "vendor", "kind", "year", "memory_gb", "memory_bw_gbs", "fp32_tflops", "tf32_tflops",
    "bf16_tflops", "fp16_tflops", "fp8_tflops", "int8_tops", "int4_tops", "tdp_w",
    "interconnect", "interconnect_bw_gbs", "usd_per_hour", "source",
)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return catalog()


@pytest.fixture(scope="module")
def rows(table: pd.DataFrame) -> pd.DataFrame:
    return table.set_index("name")


def _value(rows: pd.DataFrame, name: str, column: str) -> float:
    return float(rows.loc[name, column])


# --- the one copy --------------------------------------------------------------------------

def test_the_shipped_csv_is_the_repository_copy_and_there_is_only_one():
    assert shipped_csv_path().resolve() == (REPO / "data" / "hardware_specs.csv").resolve()
    copies = [p for p in REPO.rglob("hardware_specs.csv")
              if ".venv" not in p.parts and "build" not in p.parts]
    assert copies == [REPO / "data" / "hardware_specs.csv"]


def test_columns_are_the_design_columns_plus_extras(table):
    assert tuple(table.columns) == COLUMNS
    assert set(DESIGN_COLUMNS) <= set(table.columns)
    assert {"notes", "aliases"} <= set(table.columns)


# --- every row -----------------------------------------------------------------------------

def test_at_least_45_rows_with_unique_names_and_a_source(table):
    assert len(table) >= 45
    assert table["name"].is_unique
    assert (table["source"].str.len() > 20).all()
    assert table["vendor"].str.len().gt(0).all()
    assert set(table["kind"]) <= set(KINDS)


def test_numbers_are_positive_or_unknown_never_zero(table):
    for column in NUMERIC_COLUMNS:
        values = table[column].dropna()
        assert (values > 0).all(), column


def test_years_are_plausible(table):
    assert table["year"].between(2017, 2026).all()


def test_memory_bandwidth_is_plausible_for_the_kind(table):
    # HBM parts: 0.8-10 TB/s; GDDR cards 300-1800 GB/s; unified-memory laptop GPUs from 100
    # (Apple M4: 120 GB/s LPDDR5X); LPDDR inference cards from 130 (Qualcomm Cloud AI 100:
    # 4 x 64-bit LPDDR4X-4266 = 136.5 GB/s); LPDDR edge 15-300 (Raspberry Pi 5: 32-bit
    # LPDDR4X-4267 = 17.1 GB/s; Jetson AGX Thor: 256-bit LPDDR5X-8533 = 273 GB/s);
    # CPUs 50-1000 GB/s.
    limits = {"gpu": (100, 10_000), "tpu": (500, 10_000), "npu": (130, 10_000),
              "edge": (15, 300), "cpu": (50, 1_000)}
    for _, row in table.dropna(subset=["memory_bw_gbs"]).iterrows():
        low, high = limits[row["kind"]]
        assert low <= row["memory_bw_gbs"] <= high, row["name"]


def test_interconnect_bandwidth_is_never_stored_as_memory_bandwidth(table):
    # The seed article's A100 "600 GB/s" was NVLink. No row may repeat that confusion.
    both = table.dropna(subset=["memory_bw_gbs", "interconnect_bw_gbs"])
    assert (both["memory_bw_gbs"] != both["interconnect_bw_gbs"]).all()


def test_bf16_is_at_least_fp32_where_both_exist(table):
    both = table.dropna(subset=["bf16_tflops", "fp32_tflops"])
    assert len(both) > 20
    assert (both["bf16_tflops"] >= both["fp32_tflops"]).all()


def test_fp8_is_at_least_bf16_where_both_exist(table):
    both = table.dropna(subset=["fp8_tflops", "bf16_tflops"])
    assert len(both) > 15
    assert (both["fp8_tflops"] >= both["bf16_tflops"]).all()


def test_nvidia_and_amd_tensor_ratios_are_the_dense_ones(table):
    # On NVIDIA (Ampere and later) and AMD CDNA3 tensor cores TF32 runs at half the BF16 rate
    # and FP8 at twice it. A row mixing a sparse figure with dense ones breaks these ratios.
    for _, row in table[table["vendor"].isin(["NVIDIA", "AMD"])].iterrows():
        if (not math.isnan(row["tf32_tflops"]) and row["kind"] == "gpu"
                and "GeForce" not in row["name"]):
            assert row["bf16_tflops"] / row["tf32_tflops"] == pytest.approx(2, rel=0.05), (
                row["name"])
        if not math.isnan(row["fp8_tflops"]):
            assert row["fp8_tflops"] / row["bf16_tflops"] == pytest.approx(2, rel=0.02), row["name"]


def test_pre_ampere_nvidia_has_no_tf32_or_bf16_figure(rows):
    # Volta/Turing have no TF32 or BF16 tensor path: bf16 runs emulated, so the cells stay blank.
    for name in ("NVIDIA V100 SXM2 16GB", "NVIDIA V100 SXM2 32GB", "NVIDIA V100 PCIe 32GB",
                 "NVIDIA T4"):
        assert math.isnan(rows.loc[name, "tf32_tflops"])
        assert math.isnan(rows.loc[name, "bf16_tflops"])


def test_prices_say_where_and_when(table):
    priced = table.dropna(subset=["usd_per_hour"])
    assert len(priced) >= 5
    for _, row in priced.iterrows():
        assert re.search(r"Price: .*20\d\d", row["notes"]), row["name"]


def test_cpu_peaks_match_the_derivation_written_in_their_notes(table):
    # Each CPU row writes "fp32 = cores x GHz x FLOP/cycle = X": recompute it here.
    cpus = table[table["kind"] == "cpu"]
    assert len(cpus) >= 5
    assert cpus["notes"].str.contains("AVX-512|AMX").sum() >= 5
    for _, row in cpus.iterrows():
        match = re.search(r"fp32 = (\d+) x ([\d.]+)(?: GHz)? x (\d+)", row["notes"])
        assert match, row["name"]
        cores, ghz, per_cycle = int(match[1]), float(match[2]), int(match[3])
        assert cores * ghz * per_cycle / 1000 == pytest.approx(row["fp32_tflops"], rel=0.01)


def test_every_device_named_in_the_issue_is_present():
    wanted = [
        "V100 16GB", "V100 32GB", "T4", "A10", "A10G", "A30", "A40", "A100 40GB SXM",
        "A100 80GB SXM", "A100 40GB PCIe", "A100 80GB PCIe", "L4", "L40S", "H100 SXM",
        "H100 PCIe", "H100 NVL", "H200", "GH200", "B200", "GB200", "RTX 3090", "RTX 4090",
        "RTX 5090", "Jetson AGX Orin", "Orin Nano", "MI250X", "MI300X", "MI325X", "MI355X",
        "Gaudi 2", "Gaudi 3", "TPU v4", "TPU v5e", "TPU v5p", "TPU v6e", "Trainium",
        "Trainium2", "Inferentia2", "M1 Max", "M2 Max", "M3 Max", "M4 Max",
        "Xeon Platinum 8480+", "Xeon Platinum 8592+", "Xeon 6980P", "EPYC 9654", "EPYC 9755",
        "Ryzen 9 7950X",
    ]
    names = {get(w).name for w in wanted}
    assert len(names) == len(wanted)


def test_all_specs_converts_every_row_and_keeps_unknown_as_none(table):
    specs = all_specs()
    assert [s.name for s in specs] == list(table["name"])
    a10g = next(s for s in specs if s.name == "NVIDIA A10G")
    assert a10g.fp32_tflops is None and a10g.bf16_tflops is None  # unknown, not 0
    assert a10g.memory_gb == 24


# --- datasheet spot checks (written by hand; source in each comment) ------------------------

def test_h100_sxm_is_dense(rows):
    # NVIDIA H100 datasheet: BF16 1,979 and FP8 3,958 TFLOPS "shown with sparsity,
    # specifications 1/2 lower without": dense 989.4 / 1978.9; HBM3 3.35 TB/s; NVLink 900 GB/s.
    assert _value(rows, "NVIDIA H100 SXM", "bf16_tflops") == pytest.approx(989.4)
    assert _value(rows, "NVIDIA H100 SXM", "fp8_tflops") == pytest.approx(1978.9)
    assert _value(rows, "NVIDIA H100 SXM", "memory_bw_gbs") == 3350
    assert _value(rows, "NVIDIA H100 SXM", "interconnect_bw_gbs") == 900


def test_h200_has_h100_compute_and_more_memory(rows):
    # NVIDIA H200 datasheet / MLPerf v4.1 system JSON: 141 GB HBM3e, 4.8 TB/s, TGP 700 W;
    # FP16 1,979 is the sparse figure (seed claim 1), dense 989.4.
    assert _value(rows, "NVIDIA H200 SXM", "memory_gb") == 141
    assert _value(rows, "NVIDIA H200 SXM", "memory_bw_gbs") == 4800
    assert _value(rows, "NVIDIA H200 SXM", "fp16_tflops") == pytest.approx(989.4)
    assert _value(rows, "NVIDIA H200 SXM", "tdp_w") == 700


def test_a100_memory_bandwidth_is_not_its_nvlink(rows):
    # NVIDIA A100 datasheet: 80 GB SXM 2,039 GB/s, 80 GB PCIe 1,935 GB/s, 40 GB 1,555 GB/s;
    # 600 GB/s is NVLink3 (seed claim 6 is false).
    assert _value(rows, "NVIDIA A100 80GB SXM", "memory_bw_gbs") == 2039
    assert _value(rows, "NVIDIA A100 80GB PCIe", "memory_bw_gbs") == 1935
    assert _value(rows, "NVIDIA A100 40GB SXM", "memory_bw_gbs") == 1555
    assert _value(rows, "NVIDIA A100 80GB SXM", "interconnect_bw_gbs") == 600
    assert _value(rows, "NVIDIA A100 80GB SXM", "bf16_tflops") == 312  # 624 with sparsity


def test_mi300x_dense_figures(rows):
    # AMD CDNA3 peak: FP16/BF16 1,307.4 dense (2,614.9 sparse), FP8 2,614.9 dense; 192 GB
    # HBM3 at 5.3 TB/s; 750 W (MLPerf v4.1 AMD system JSON). 1,502 matches no AMD figure.
    assert _value(rows, "AMD Instinct MI300X", "bf16_tflops") == pytest.approx(1307.4)
    assert _value(rows, "AMD Instinct MI300X", "fp8_tflops") == pytest.approx(2614.9)
    assert _value(rows, "AMD Instinct MI300X", "memory_gb") == 192
    assert _value(rows, "AMD Instinct MI300X", "memory_bw_gbs") == 5300
    assert _value(rows, "AMD Instinct MI300X", "tdp_w") == 750


def test_gaudi_3_is_not_gaudi_2(rows):
    # Intel Hot Chips 2024 deck: Gaudi 3 128 GB HBM2e, 3.67 TB/s, BF16/FP8 matrix 1835, 900 W
    # air-cooled; Gaudi 2 96 GB, 2.46 TB/s, 432 BF16, 600 W (the seed mixed them up).
    assert _value(rows, "Intel Gaudi 3", "memory_gb") == 128
    assert _value(rows, "Intel Gaudi 3", "memory_bw_gbs") == pytest.approx(3700, rel=0.01)
    assert _value(rows, "Intel Gaudi 3", "bf16_tflops") == 1835
    assert _value(rows, "Intel Gaudi 3", "tdp_w") == 900
    assert _value(rows, "Intel Gaudi 2", "memory_gb") == 96
    assert _value(rows, "Intel Gaudi 2", "tdp_w") == 600


def test_blackwell_figures_are_dense(rows):
    # NVIDIA HGX B200 table: FP8 9 PF and FP4 18 PF per GPU with sparsity -> 4.5 / 9 PF dense;
    # GB200: FP8 10 PF sparse -> 5 PF; NVLink5 1.8 TB/s = 2 x 900 GB/s (seed claim 7).
    assert _value(rows, "NVIDIA B200", "fp8_tflops") == 4500
    assert _value(rows, "NVIDIA B200", "fp4_tflops") == 9000
    assert _value(rows, "NVIDIA GB200", "fp8_tflops") == 5000
    assert _value(rows, "NVIDIA GB200", "interconnect_bw_gbs") == 1800


def test_geforce_rates_are_fp32_accumulate(rows):
    # Ada whitepaper App. A: RTX 4090 FP16/BF16 tensor with FP32 accumulate 165.2 dense
    # (330.3 with FP16 accumulate); GA102 whitepaper: RTX 3090 71.2; RTX Blackwell whitepaper
    # Table 3: RTX 5090 209.5.
    assert _value(rows, "NVIDIA GeForce RTX 4090", "fp16_tflops") == pytest.approx(165.2)
    assert _value(rows, "NVIDIA GeForce RTX 4090", "fp8_tflops") == pytest.approx(330.3)
    assert _value(rows, "NVIDIA GeForce RTX 3090", "bf16_tflops") == pytest.approx(71.2)
    assert _value(rows, "NVIDIA GeForce RTX 5090", "bf16_tflops") == pytest.approx(209.5)


def test_l4_and_t4(rows):
    # NVIDIA L4 datasheet prints FP8 485 TFLOPS with sparsity -> 242.5 dense; 300 GB/s, 72 W.
    # NVIDIA T4 datasheet: FP16 65, INT8 130, INT4 260 TOPS (Turing has no sparsity), 70 W.
    assert _value(rows, "NVIDIA L4", "fp8_tflops") == pytest.approx(242.5)
    assert _value(rows, "NVIDIA L4", "tdp_w") == 72
    assert _value(rows, "NVIDIA T4", "fp16_tflops") == 65
    assert _value(rows, "NVIDIA T4", "int8_tops") == 130


def test_tpu_and_trainium(rows):
    # Google Cloud TPU docs: v5e 197 TFLOPs bf16, 16 GB, 819 GBps; v6e 918 TFLOPs, 32 GB,
    # 1638 GBps. AWS Neuron docs: Trainium2 1,299 FP8 dense (2,563 sparse), 667 BF16.
    assert _value(rows, "Google TPU v5e", "bf16_tflops") == 197
    assert _value(rows, "Google TPU v5e", "memory_gb") == 16
    assert _value(rows, "Google TPU v6e", "bf16_tflops") == 918
    assert _value(rows, "Google TPU v6e", "memory_bw_gbs") == 1638
    assert _value(rows, "AWS Trainium2", "fp8_tflops") == 1299
    assert _value(rows, "AWS Trainium2", "bf16_tflops") == 667


def test_no_sparse_headline_is_stored_as_dense(rows):
    # Headline figures that vendors print WITH 2:4 sparsity (datasheets cited in the catalog);
    # the stored value must be half of each, never the headline itself.
    sparse = {
        ("NVIDIA H100 SXM", "bf16_tflops"): 1979, ("NVIDIA H100 SXM", "fp8_tflops"): 3958,
        ("NVIDIA H100 SXM", "tf32_tflops"): 989, ("NVIDIA H100 PCIe", "fp8_tflops"): 3026,
        ("NVIDIA H100 NVL", "fp8_tflops"): 3341, ("NVIDIA H200 SXM", "fp8_tflops"): 3958,
        ("NVIDIA A100 80GB SXM", "bf16_tflops"): 624, ("NVIDIA A100 80GB SXM", "int8_tops"): 1248,
        ("NVIDIA L4", "bf16_tflops"): 242, ("NVIDIA L40S", "fp8_tflops"): 1466,
        ("NVIDIA A10", "bf16_tflops"): 250, ("NVIDIA A30", "bf16_tflops"): 330,
        ("NVIDIA A40", "bf16_tflops"): 299.4, ("NVIDIA B200", "fp8_tflops"): 9000,
        ("NVIDIA B200", "fp4_tflops"): 18000, ("NVIDIA GB200", "bf16_tflops"): 5000,
        ("NVIDIA GeForce RTX 4090", "fp16_tflops"): 330.4,
        ("NVIDIA GeForce RTX 5090", "fp4_tflops"): 3352,
        ("AMD Instinct MI300X", "fp8_tflops"): 5229.8,
        ("AMD Instinct MI300X", "bf16_tflops"): 2614.9,
        ("AMD Instinct MI355X", "fp4_tflops"): 20100, ("AWS Trainium2", "fp8_tflops"): 2563,
    }
    for (name, column), headline in sparse.items():
        stored = _value(rows, name, column)
        assert stored == pytest.approx(headline / 2, rel=0.02), (name, column, stored)


def test_figure_columns_exist_in_the_spec(table):
    spec = get("B200")
    for column in FIGURE_COLUMNS:
        assert hasattr(spec, column)
    assert spec.fp4_tflops == 9000


# --- user CSVs -----------------------------------------------------------------------------

def _csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_user_csv_overrides_a_row_by_name_and_keeps_the_rest(tmp_path):
    path = _csv(tmp_path, "name,usd_per_hour\nnvidia h100 sxm,2.49\n")
    rows = catalog(path).set_index("name")
    assert rows.loc["NVIDIA H100 SXM", "usd_per_hour"] == 2.49
    assert rows.loc["NVIDIA H100 SXM", "bf16_tflops"] == pytest.approx(989.4)  # kept
    assert "Overridden by user CSV" in rows.loc["NVIDIA H100 SXM", "notes"]
    assert len(rows) == len(catalog())


def test_user_csv_adds_a_row_with_unknown_figures_as_nan(tmp_path):
    path = _csv(tmp_path, "name,vendor,kind,memory_gb,bf16_tflops\nAcme NPU 1,Acme,npu,64,500\n")
    table = catalog(path)
    row = table.set_index("name").loc["Acme NPU 1"]
    assert row["bf16_tflops"] == 500 and row["memory_gb"] == 64
    assert math.isnan(row["fp32_tflops"]) and math.isnan(row["memory_bw_gbs"])
    assert "user CSV" in row["source"]
    spec = get("acme npu 1", catalog=table)
    assert spec.bf16_tflops == 500 and spec.fp32_tflops is None and spec.kind == "npu"
    assert get("Acme NPU 1", catalog=path).memory_gb == 64


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name,fp32_tflops\nX,abc\n", ["row 1", "line 2", "'X'", "'fp32_tflops'", "'abc'",
                                       "not a number"]),
        ("name,memory_gb\nA,1\nB,-5\n", ["row 2", "line 3", "'B'", "'memory_gb'", "'-5'"]),
        ("name,bf16_tflops\nX,0\n", ["'bf16_tflops'", "'0'", "never 0"]),
        ("name,fp32_tflops\n,3\n", ["row 1", "column 'name'", "non-empty"]),
        ("vendor,fp32_tflops\nAcme,3\n", ["no 'name' column"]),
        ("name,fp32_tflop\nX,3\n", ["unknown column 'fp32_tflop'", "Did you mean 'fp32_tflops'"]),
        ("name,kind\nX,fpga\n", ["'kind'", "'fpga'", "gpu, tpu, npu, cpu, edge"]),
        ("name,year\nX,20x4\n", ["'year'", "'20x4'"]),
        ("name,memory_gb\nX,1\nx,2\n", ["line 3", "duplicate"]),
        ("name,memory_gb\nX,1,2\n", ["line 2", "extra cells"]),
    ],
)
def test_malformed_user_csv_names_row_column_and_value(tmp_path, text, expected):
    with pytest.raises(HardwareCatalogError) as info:
        catalog(_csv(tmp_path, text))
    message = str(info.value)
    for fragment in expected:
        assert fragment in message, (fragment, message)


def test_missing_user_csv_is_a_catalog_error(tmp_path):
    with pytest.raises(HardwareCatalogError, match="cannot be read"):
        catalog(tmp_path / "nope.csv")


def test_an_installed_wheel_reads_its_packaged_copy(monkeypatch, tmp_path):
    # The wheel force-includes data/hardware_specs.csv as aiadvisor/_data/hardware_specs.csv;
    # importlib.resources must find it there before falling back to the source checkout.
    import importlib.resources

    packaged = tmp_path / "_data" / "hardware_specs.csv"
    packaged.parent.mkdir()
    packaged.write_text("name,vendor,kind\nOnly Row,X,gpu\n", encoding="utf-8")
    monkeypatch.setattr(importlib.resources, "files", lambda package: tmp_path)
    assert shipped_csv_path() == packaged
    assert list(catalog()["name"]) == ["Only Row"]


def test_workstation_and_edge_rows_are_dense(rows):
    # RTX 6000 Ada: NVIDIA gives only 1,457 TFLOPS FP8 with 2:4 sparsity. Dense:
    # 142 SM x 1024 FLOP/clk x 2.505 GHz = 364.2 (fp16/bf16), x 2 = 728.5 (fp8/int8);
    # fp32 = 18,176 cores x 2 x 2.505 GHz = 91.06; 48 GB GDDR6 at 20 Gbit/s x 384 bit = 960 GB/s.
    ada = rows.loc["NVIDIA RTX 6000 Ada Generation"]
    assert (ada["fp32_tflops"], ada["bf16_tflops"], ada["fp8_tflops"]) == (91.1, 364.2, 728.5)
    assert (ada["memory_gb"], ada["memory_bw_gbs"], ada["tdp_w"]) == (48, 960, 300)
    assert ada["fp8_tflops"] < 1457 / 1.5  # never the sparse headline
    # Jetson Orin NX 16GB: "up to 100 TOPS" is sparse INT8, dense 50; fp32 = 1024 x 2 x 0.918.
    nx = rows.loc["NVIDIA Jetson Orin NX 16GB"]
    assert nx["int8_tops"] == 50 and nx["fp32_tflops"] == 1.88 and nx["tdp_w"] == 25
    # DGX Spark: "1 petaFLOP FP4 with sparsity" -> 500 dense; ~31 TFLOPS FP32; 128 GB, 273 GB/s.
    spark = rows.loc["NVIDIA DGX Spark (GB10)"]
    assert spark["fp4_tflops"] == 500 and spark["fp32_tflops"] == 31
    assert (spark["memory_gb"], spark["memory_bw_gbs"]) == (128, 273)
    assert math.isnan(spark["bf16_tflops"])  # not published: blank, not guessed
    assert get("GB10").name == get("DGX Spark").name == "NVIDIA DGX Spark (GB10)"
    assert get("Orin NX").name == "NVIDIA Jetson Orin NX 16GB"
    # Raspberry Pi 5: fp32 = 4 cores x 2.4 GHz x 16 FLOP/cycle = 153.6 GFLOPS;
    # 4267 MT/s x 4 bytes = 17.07 GB/s; 80 USD for 8 GB at launch (Sept 2023).
    pi = rows.loc["Raspberry Pi 5 8GB"]
    assert (pi["fp32_tflops"], pi["memory_bw_gbs"], pi["usd_purchase"]) == (0.154, 17.1, 80)


# --- devices added for issue 15 (figures worked out from the sources named in each row) -------

def test_blackwell_ultra_is_dense_per_gpu(rows):
    # NVIDIA HGX B300 table (8 GPUs): FP8 72 PF and BF16 36 PF "with sparsity", FP4 108 PF
    # without -> per GPU 72/8/2 = 4.5 PF, 36/8/2 = 2.25 PF, 108/8 = 13.5 PF. GB300 NVL72 (72
    # GPUs): FP4 1080 PF dense, FP8 720 PF sparse, 576 TB/s -> 15 PF, 5 PF, 8 TB/s per GPU.
    assert _value(rows, "NVIDIA B300", "fp8_tflops") == 72_000 / 8 / 2
    assert _value(rows, "NVIDIA B300", "bf16_tflops") == 36_000 / 8 / 2
    assert _value(rows, "NVIDIA B300", "fp4_tflops") == 108_000 / 8
    assert _value(rows, "NVIDIA GB300", "fp4_tflops") == 1_080_000 / 72
    assert _value(rows, "NVIDIA GB300", "fp8_tflops") == pytest.approx(720_000 / 72 / 2)
    assert _value(rows, "NVIDIA GB300", "memory_bw_gbs") == 576_000 / 72
    assert _value(rows, "NVIDIA GB300", "memory_gb") == 288
    # INT8 was cut on Blackwell Ultra; the rows leave it blank rather than carry B200's 4500.
    assert math.isnan(rows.loc["NVIDIA B300", "int8_tops"])


def test_rtx_pro_6000_blackwell_is_derived_from_the_sparse_ai_tops(rows):
    # NVIDIA gives only "4,000 AI TOPS" (FP4 with sparsity) and 125 TFLOPS FP32; 512-bit GDDR7
    # at 28 Gbit/s = 512 x 28 / 8 = 1792 GB/s. Dense FP4 = 2000; FP8 = FP4/2; BF16 = FP4/4.
    pro = rows.loc["NVIDIA RTX PRO 6000 Blackwell"]
    assert pro["fp4_tflops"] == 4000 / 2 and pro["fp8_tflops"] == 4000 / 4
    assert pro["bf16_tflops"] == 4000 / 8 == 500
    # cross-check with the clock: 188 SM x 1024 FLOP/clk x 2.617 GHz = 503.8 TFLOPS.
    assert 188 * 1024 * 2.617 / 1000 == pytest.approx(pro["bf16_tflops"], rel=0.01)
    assert (pro["memory_gb"], pro["memory_bw_gbs"], pro["fp32_tflops"]) == (96, 512 * 28 / 8, 125)


def test_rtx_4080_tensor_rate_from_sm_count_and_clock(rows):
    # Ada whitepaper: 76 SMs at 2.505 GHz, 512 FP16 FLOP/clk/SM with FP32 accumulate (dense)
    # = 97.5 TFLOPS; 256-bit GDDR6X at 22.4 Gbit/s = 716.8 GB/s.
    assert _value(rows, "NVIDIA GeForce RTX 4080", "bf16_tflops") == pytest.approx(
        76 * 512 * 2.505 / 1000, abs=0.05)
    assert _value(rows, "NVIDIA GeForce RTX 4080", "memory_bw_gbs") == 256 * 22.4 / 8


def test_qualcomm_cloud_ai_100_cards_match_the_sdk_table(rows):
    # Qualcomm Cloud AI SDK, Architecture: Standard 16 GB / 137 GB/s / FP16 110 / INT8 325 /
    # 75 W; Pro 32 GB / 125 / 375 / 75 W; Ultra = 4 SoCs, 128 GB / 548 GB/s / 290 / 870 / 150 W.
    std = rows.loc["Qualcomm Cloud AI 100 Standard"]
    assert (std["memory_gb"], std["fp16_tflops"], std["int8_tops"], std["tdp_w"]) == (
        16, 110, 325, 75)
    ultra = rows.loc["Qualcomm Cloud AI 100 Ultra"]
    assert ultra["memory_gb"] == 4 * 32 and ultra["memory_bw_gbs"] == 4 * 137
    assert (ultra["int8_tops"], ultra["tdp_w"]) == (870, 150)


def test_tpu7x_and_gaudi_3_pcie(rows):
    # Google TPU7x doc table: BF16 2307, FP8 4614 (= 2 x BF16), 7380 GB/s, ICI 1200 GB/s.
    iron = rows.loc["Google TPU7x (Ironwood)"]
    assert (iron["bf16_tflops"], iron["fp8_tflops"]) == (2307, 2 * 2307)
    assert (iron["memory_bw_gbs"], iron["interconnect_bw_gbs"]) == (7380, 1200)
    # Gaudi 3 PCIe (HL-338): same die and HBM as the OAM, 600 W instead of 900 W.
    card, oam = rows.loc["Intel Gaudi 3 PCIe"], rows.loc["Intel Gaudi 3"]
    assert card["tdp_w"] == 600 and oam["tdp_w"] == 900
    assert card["bf16_tflops"] == oam["bf16_tflops"] == 1835
    assert card["memory_gb"] == oam["memory_gb"] == 128


def test_china_accelerators_are_sourced_or_blank(rows):
    # Cambricon MLU370-X8 launch: FP32 32, FP16/BF16 96, INT8 256 TOPS, 48 GB LPDDR5 at
    # 614.4 GB/s, 250 W. Ascend 910 (2019): FP16 256, INT8 512 = 2 x FP16, 310 W.
    mlu = rows.loc["Cambricon MLU370-X8"]
    assert (mlu["fp16_tflops"], mlu["int8_tops"], mlu["memory_bw_gbs"], mlu["tdp_w"]) == (
        96, 256, 614.4, 250)
    assert _value(rows, "Huawei Ascend 910", "int8_tops") == 2 * _value(
        rows, "Huawei Ascend 910", "fp16_tflops") == 512
    # 910B: no Huawei datasheet and sources disagree (280-376 TFLOPS): compute stays blank.
    for column in FIGURE_COLUMNS:
        assert math.isnan(rows.loc["Huawei Ascend 910B", column]), column
    assert _value(rows, "Huawei Ascend 910C", "fp16_tflops") == 800


def test_edge_inference_targets_say_what_their_tops_are(rows):
    # Jetson AGX Thor: 2,070 FP4 TFLOPS with sparsity -> 1035 dense; no other tensor rate.
    thor = rows.loc["NVIDIA Jetson AGX Thor"]
    assert thor["fp4_tflops"] == 2070 / 2 and math.isnan(thor["bf16_tflops"])
    # Apple M4 Neural Engine 38 TOPS, Snapdragon X Elite Hexagon 45 TOPS, Coral 4 TOPS at
    # 2 TOPS/W = 2 W, AI HAT+ (Hailo-8) 26 TOPS: INT8 figures, FP16 left blank.
    for name, tops in (("Apple M4 Neural Engine", 38), ("Qualcomm Snapdragon X Elite NPU", 45),
                       ("Google Coral USB Accelerator", 4), ("Raspberry Pi AI HAT+ 26 TOPS", 26)):
        assert rows.loc[name, "int8_tops"] == tops, name
        assert math.isnan(rows.loc[name, "fp16_tflops"]), name
        assert "int8" in rows.loc[name, "notes"].lower(), name
    assert _value(rows, "Google Coral USB Accelerator", "tdp_w") == 4 / 2
    # Apple base M4 120 GB/s, M4 Pro 273 GB/s (Apple Newsroom).
    assert _value(rows, "Apple M4 (10-core GPU)", "memory_bw_gbs") == 120
    assert _value(rows, "Apple M4 Pro (20-core GPU)", "memory_bw_gbs") == 273


def test_the_catalog_reaches_75_devices_including_the_issue_15_list():
    wanted = ["B300", "GB300", "MI355X", "Gaudi 3 PCIe", "Ascend 910B", "Ascend 910C",
              "MLU370-X8", "Cloud AI 100", "M4", "M4 Pro", "Apple Neural Engine", "X Elite",
              "Raspberry Pi 5", "Orin NX", "RTX 6000 Ada", "RTX PRO 6000", "DGX Spark"]
    names = {get(w).name for w in wanted}
    assert len(names) == len(wanted)
    assert len(catalog()) >= 75


def test_every_row_has_a_buyer_segment(table, rows):
    from aiadvisor.hardware import SEGMENTS, filter_catalog

    assert set(table["segment"]) <= set(SEGMENTS) and (table["segment"] != "").all()
    # Edge boards and on-device NPUs are the edge segment, and nothing else is.
    assert ((table["kind"] == "edge") == (table["segment"] == "edge")).all()
    expected = {"NVIDIA GeForce RTX 4090": "consumer", "AMD Ryzen 9 7950X": "consumer",
                "Apple M4 (10-core GPU)": "consumer", "NVIDIA H100 SXM": "datacenter",
                "Intel Xeon Platinum 8480+": "datacenter", "Google TPU v5e": "datacenter",
                "NVIDIA RTX PRO 6000 Blackwell": "workstation"}
    for name, segment in expected.items():
        assert rows.loc[name, "segment"] == segment, name
    # The workstation segment, listed by hand: pro cards, the DGX Spark and the Max Macs.
    assert sorted(filter_catalog(table, segment="Workstation")["name"]) == [
        "Apple M1 Max (32-core GPU)", "Apple M2 Max (38-core GPU)", "Apple M3 Max (40-core GPU)",
        "Apple M4 Max (40-core GPU)", "NVIDIA DGX Spark (GB10)",
        "NVIDIA RTX 6000 Ada Generation", "NVIDIA RTX A6000", "NVIDIA RTX PRO 6000 Blackwell"]
    assert get("RTX 4090").segment == "consumer"


def test_a_bad_segment_names_the_choices(tmp_path):
    from aiadvisor.errors import InvalidArgumentError
    from aiadvisor.hardware import filter_catalog

    with pytest.raises(InvalidArgumentError, match="segment='cloud'.*'datacenter'"):
        filter_catalog(segment="cloud")
    with pytest.raises(HardwareCatalogError) as info:
        catalog(_csv(tmp_path, "name,segment\nX,cloud\n"))
    assert "column 'segment'" in str(info.value) and "datacenter, workstation" in str(info.value)


def test_tpu_v4_ici_is_the_pod_all_reduce_bandwidth_per_chip():
    # Cloud TPU v4 docs: "All-reduce bandwidth per Pod 1.1 PB/s", 4096 chips per pod:
    # 1.1e15 / 4096 = 268.6e9 bytes/s per chip.
    spec = get("TPU v4")
    assert spec.interconnect_bw_gbs == pytest.approx(1.1e15 / 4096 / 1e9, abs=0.05)
    assert "1.1 PB/s" in spec.notes and "DERIVED" in spec.notes


def test_serving_gaps_are_dense_figures_worked_from_sm_count_and_clock(rows):
    # GA102 whitepaper (Table 9): RTX 3090 INT8 284/568, INT4 568/1136 TOPS dense/sparse:
    # 82 SM x 2048 INT8 ops/clk x 1.695 GHz = 284.7 dense. Ada whitepaper: RTX 4080
    # 76 SM x 2048 x 2.505 GHz = 389.9 dense (779.8 sparse). INT4 twice INT8.
    assert _value(rows, "NVIDIA GeForce RTX 3090", "int8_tops") == pytest.approx(
        82 * 2048 * 1.695 / 1000, abs=0.05)
    assert _value(rows, "NVIDIA GeForce RTX 4080", "int8_tops") == pytest.approx(
        76 * 2048 * 2.505 / 1000, abs=0.05)
    for name in ("NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4080"):
        assert _value(rows, name, "int4_tops") == pytest.approx(
            2 * _value(rows, name, "int8_tops"), abs=0.15)
        # GeForce: INT8 at 4x the FP16-with-FP32-accumulate rate stored (RTX 4090: 660.6/165.2)
        assert _value(rows, name, "int8_tops") == pytest.approx(
            4 * _value(rows, name, "fp16_tflops"), rel=0.01)
    assert _value(rows, "NVIDIA GeForce RTX 4080", "int8_tops") < 779.8 / 1.5  # not sparse
    # Jetson Orin Nano: NVIDIA prints only sparse INT8 (40, Super 67 TOPS); FP16 tensor dense
    # = INT8 dense / 2 (Ampere tensor cores, A100 312/624), cross-checked against
    # 8 SM x 2048 FLOP/clk x 0.625 GHz (1.02 GHz Super). BF16 is not published: blank.
    for name, sparse_int8, ghz in (("NVIDIA Jetson Orin Nano 8GB", 40, 0.625),
                                   ("NVIDIA Jetson Orin Nano Super 8GB", 67, 1.02)):
        fp16 = _value(rows, name, "fp16_tflops")
        assert fp16 == sparse_int8 / 2 / 2
        assert fp16 == pytest.approx(8 * 2048 * ghz / 1000, rel=0.03)
        assert math.isnan(rows.loc[name, "bf16_tflops"])
    # No primary source prints A10G or Apple M2-M4 GPU rates: blank, not guessed.
    for name in ("NVIDIA A10G", "Apple M2 Max (38-core GPU)", "Apple M3 Max (40-core GPU)",
                 "Apple M4 Max (40-core GPU)"):
        assert math.isnan(rows.loc[name, "fp16_tflops"]), name


def test_inference_only_devices_are_marked_with_their_source(tmp_path):
    # The vendor's software runs inference only on these: AWS's Neuron docs list torch-neuronx
    # "for training on Trn1 and Trn2" and "for inference on Inf2, Trn1, and Trn2"; Qualcomm's
    # Cloud AI 100 cards and the on-device NPUs are inference targets.
    table = catalog()
    marked = set(table.loc[table["inference_only"], "name"])
    assert marked == {
        "AWS Inferentia2", "Qualcomm Cloud AI 100 Standard", "Qualcomm Cloud AI 100 Pro",
        "Qualcomm Cloud AI 100 Ultra", "Apple M4 Neural Engine",
        "Qualcomm Snapdragon X Elite NPU", "Google Coral USB Accelerator",
        "Raspberry Pi AI HAT+ 26 TOPS"}
    assert get("Inferentia2").inference_only and "for training on Trn1 and Trn2" in \
        get("Inferentia2").notes
    assert not get("AWS Trainium").inference_only and not get("H100 SXM").inference_only
    # A user CSV may mark its own rows (yes/no, any case) and a bad cell names the choices.
    spec = get("Acme Infer 1", catalog=_csv(tmp_path, "name,kind,inference_only\n"
                                                      "Acme Infer 1,npu,Yes\n"))
    assert spec.inference_only
    with pytest.raises(HardwareCatalogError) as info:
        catalog(_csv(tmp_path, "name,inference_only\nX,maybe\n"))
    assert "column 'inference_only'" in str(info.value) and "'maybe'" in str(info.value)
    assert "expected yes" in str(info.value)


def test_student_geforce_rows_are_dense_fp32_accumulate_rates_from_sms_and_clock():
    # GeForce Ada/Ampere tensor cores: 512 FP16 FLOP/clk/SM with FP32 accumulate (dense; the
    # RTX 4080/4090/3090 whitepaper figures give it), 2048 INT8 ops/clk/SM.
    r4070, r3060 = get("RTX 4070"), get("RTX 3060")
    assert r4070.bf16_tflops == pytest.approx(46 * 512 * 2.475e9 / 1e12, abs=0.05)   # 58.3
    assert r4070.int8_tops == pytest.approx(46 * 2048 * 2.475e9 / 1e12, abs=0.05)    # 233.2
    assert r4070.fp8_tflops == pytest.approx(2 * r4070.bf16_tflops, abs=0.05)
    assert r4070.fp32_tflops == pytest.approx(5888 * 2 * 2.475e9 / 1e12, abs=0.05)   # 29.1
    assert r4070.memory_bw_gbs == 192 * 21 / 8                                        # 504
    assert r3060.bf16_tflops == pytest.approx(28 * 512 * 1.777e9 / 1e12, abs=0.05)   # 25.5
    # NVIDIA's launch "101 tensor-TFLOPs" is sparse with FP16 accumulate: 4x the stored rate.
    assert 4 * r3060.bf16_tflops == pytest.approx(101.9, abs=0.3)
    assert r3060.fp8_tflops is None and r3060.memory_bw_gbs == 192 * 15 / 8          # 360
    assert "DERIVED" in r4070.notes and "DERIVED" in r3060.notes
