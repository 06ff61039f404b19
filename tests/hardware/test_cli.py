"""``aiadvisor hardware``: filters, the aligned table, the detected device, errors."""

from __future__ import annotations

import argparse
import io

import pytest

from aiadvisor.hardware import cli


def _run(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(parser.parse_args(list(argv)), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _names(text: str) -> list[str]:
    lines = text.splitlines()
    body = lines[2:lines.index("") - 1]  # header, rule, rows..., count line, blank
    return [line.split("  ")[0] for line in body]


def test_filters_by_vendor_and_kind():
    code, out, _ = _run("--vendor", "google", "--kind", "tpu", "--no-detect")
    assert code == 0
    assert _names(out) == ["Google TPU v4", "Google TPU v5e", "Google TPU v5p", "Google TPU v6e"]
    assert "4 device(s)" in out


def test_filters_by_memory_and_name():
    # Devices with >= 180 GB (hand-listed from the datasheets): B200 180, GB200 186,
    # MI300X 192, MI325X 256, MI355X 288.
    code, out, _ = _run("--min-memory-gb", "180", "--no-detect")
    assert code == 0
    assert sorted(_names(out)) == sorted([
        "NVIDIA B200", "NVIDIA GB200", "AMD Instinct MI300X", "AMD Instinct MI325X",
        "AMD Instinct MI355X"])
    code, out, _ = _run("--name", "a100", "--no-detect")
    assert len(_names(out)) == 4


def test_table_is_aligned_and_unknown_prints_as_dash():
    _, out, _ = _run("--name", "A10G", "--no-detect")
    header, rule, row = out.splitlines()[:3]
    assert header.startswith("name") and set(rule) <= {"-", " "}
    assert len(header) == len(rule) == len(row)
    assert row.split()[-1] == "-"  # no public price for the A10G
    assert row.split()[:3] == ["NVIDIA", "A10G", "gpu"]


def test_detected_device_is_printed():
    code, out, _ = _run("--name", "H100 SXM")
    assert code == 0 and "Detected device:" in out


def test_bad_kind_is_an_error_not_a_traceback():
    code, out, err = _run("--kind", "fpga", "--no-detect")
    assert code == 2 and out == ""
    assert "--kind='fpga' is not valid" in err


def test_user_csv_is_applied(tmp_path):
    path = tmp_path / "prices.csv"
    path.write_text("name,usd_per_hour\nNVIDIA L4,0.44\n", encoding="utf-8")
    _, out, _ = _run("--csv", str(path), "--name", "L4", "--kind", "gpu", "--no-detect")
    row = out.splitlines()[2]
    assert row.startswith("NVIDIA L4") and row.split()[-1] == "0.44"


@pytest.mark.parametrize("flag", ["--vendor", "--kind", "--min-memory-gb", "--name", "--csv",
                                  "--benchmark", "--refresh", "--no-detect"])
def test_options_are_registered(flag):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert flag in parser.format_help()


def test_budget_filter_keeps_rented_and_amortised_bought_devices():
    # Rental <= 2 $/h: T4 0.59, A100 40GB SXM 1.48, L4 0.8, L40S 1.95, MI300X 1.71, MI325X 2.0.
    # Bought, amortised over 3 years at 50 % use (13140 h) plus TDP at 0.15 $/kWh:
    # RTX 3090 1499/13140 + 0.350*0.15 = 0.167; RTX 4090 1599/13140 + 0.450*0.15 = 0.189;
    # RTX 5090 1999/13140 + 0.575*0.15 = 0.238; DGX Spark 3999/13140 + 0.140*0.15 = 0.325.
    # Raspberry Pi 5 80/13140 + 0 (no TDP published) = 0.0061.
    # Left out: A100 80GB 2.5, H100s, H200; unpriced.
    code, out, _ = _run("--max-usd-per-hour", "2", "--no-detect")
    assert code == 0
    assert sorted(_names(out)) == sorted([
        "NVIDIA T4", "NVIDIA A100 40GB SXM", "NVIDIA L4", "NVIDIA L40S", "AMD Instinct MI300X",
        "AMD Instinct MI325X", "NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4090",
        "NVIDIA GeForce RTX 5090", "NVIDIA DGX Spark (GB10)", "Raspberry Pi 5 8GB"])
    # 0.18 $/h separates the RTX 3090 (0.167) from the RTX 4090 (0.189).
    code, out, _ = _run("--max-usd-per-hour", "0.18", "--kind", "gpu", "--no-detect")
    assert _names(out) == ["NVIDIA GeForce RTX 3090"]


def test_edge_devices_within_a_budget():
    # Edge rows with a price: only the Raspberry Pi 5 (80 USD, 0.0061 $/h amortised).
    code, out, _ = _run("--kind", "edge", "--max-usd-per-hour", "2", "--no-detect")
    assert code == 0 and _names(out) == ["Raspberry Pi 5 8GB"]


def test_negative_budget_is_an_error_not_a_traceback():
    code, out, err = _run("--kind", "edge", "--max-usd-per-hour", "-1", "--no-detect")
    assert code == 2 and out == ""
    assert "--max-usd-per-hour=-1.0 is not valid" in err and "non-negative" in err


def test_budget_option_is_registered():
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert "--max-usd-per-hour" in parser.format_help()
