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
