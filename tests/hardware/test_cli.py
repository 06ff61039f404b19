"""``aiadvisor hardware``: filters, the aligned table, the detected device, errors."""

from __future__ import annotations

import argparse
import io
import re

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
    end = next(i for i, line in enumerate(lines) if re.match(r"\d+ device\(s\)", line))
    body = lines[2:end]  # header, rule, rows..., count line (and the price rule), blank
    return [line.split("  ")[0] for line in body]


def test_filters_by_vendor_and_kind():
    code, out, _ = _run("--vendor", "google", "--kind", "tpu", "--no-detect")
    assert code == 0
    assert _names(out) == ["Google TPU v4", "Google TPU v5e", "Google TPU v5p", "Google TPU v6e",
                           "Google TPU7x (Ironwood)"]
    assert "5 device(s)" in out


def test_filters_by_memory_and_name():
    # Devices with >= 180 GB (hand-listed from the datasheets): B200 180, GB200 186,
    # MI300X 192, MI325X 256, MI355X 288, B300 288, GB300 288, TPU7x 192 (GiB, as Google
    # states it).
    code, out, _ = _run("--min-memory-gb", "180", "--no-detect")
    assert code == 0
    assert sorted(_names(out)) == sorted([
        "NVIDIA B200", "NVIDIA GB200", "AMD Instinct MI300X", "AMD Instinct MI325X",
        "AMD Instinct MI355X", "NVIDIA B300", "NVIDIA GB300", "Google TPU7x (Ironwood)"])
    code, out, _ = _run("--name", "a100", "--no-detect")
    assert len(_names(out)) == 4


def test_table_is_aligned_and_unknown_prints_as_dash():
    _, out, _ = _run("--name", "A30", "--no-detect")
    header, rule, row = out.splitlines()[:3]
    assert header.startswith("name") and set(rule) <= {"-", " "}
    assert len(header) == len(rule) == len(row)
    assert row.split()[-1] == "-"  # no price found for the A30
    assert row.split()[:3] == ["NVIDIA", "A30", "gpu"]


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
    # Rentals just under / over 2 $/h: MI325X 2.0 and L40S 1.95 in; A100 80GB PCIe 2.10,
    # Trainium2 2.40, B200 3.75 out. Bought, amortised over 3 years at 50 % use (13140 h) plus
    # TDP at 0.15 $/kWh: Gaudi 3 15625/13140 + 0.900*0.15 = 1.324 in; DGX Spark
    # 3999/13140 + 0.140*0.15 = 0.325 in.
    code, out, _ = _run("--max-usd-per-hour", "2", "--no-detect")
    assert code == 0
    names = set(_names(out))
    assert {"AMD Instinct MI325X", "NVIDIA L40S", "Intel Gaudi 3",
            "NVIDIA DGX Spark (GB10)"} <= names
    assert not names & {"NVIDIA A100 80GB PCIe", "AWS Trainium2", "NVIDIA B200",
                        "Huawei Ascend 910B"}
    # 0.135 $/h keeps the RX 7900 XTX (0.129), the M4 Pro Mac mini (0.106), the M4 Mac mini
    # (0.046), the RTX 4070 (599/13140 + 0.200*0.15 = 0.076) and the RTX 3060 12GB
    # (329/13140 + 0.170*0.15 = 0.051) and drops the RTX 4080 (0.139) and the RTX 3090 (0.167).
    code, out, _ = _run("--max-usd-per-hour", "0.135", "--kind", "gpu", "--no-detect")
    assert sorted(_names(out)) == ["AMD Radeon RX 7900 XTX", "Apple M4 (10-core GPU)",
                                   "Apple M4 Pro (20-core GPU)", "NVIDIA GeForce RTX 3060 12GB",
                                   "NVIDIA GeForce RTX 4070"]


def test_edge_devices_within_a_budget():
    # aiadvisor hardware --kind edge --max-usd-per-hour 2 (the command in issue 15). Every
    # priced edge row is far below 2 $/h once amortised (13140 h, 0.15 $/kWh):
    # Jetson AGX Thor 3499/13140 + 0.130*0.15 = 0.286; AGX Orin 1999/13140 + 0.060*0.15 =
    # 0.161; Orin Nano 499/13140 + 0.015*0.15 = 0.040; Orin Nano Super 249/13140 + 0.025*0.15
    # = 0.023; Orin NX 16GB module 599/13140 + 0.025*0.15 = 0.049; Mac mini M4 for its
    # Neural Engine 599/13140 = 0.046; AI HAT+ 110/13140 = 0.0084 (no power figure); Raspberry Pi 5
    # 80/13140 = 0.0061; Coral 75/13140 + 0.002*0.15 = 0.0060. The unpriced Snapdragon X
    # Elite NPU is left out.
    code, out, _ = _run("--kind", "edge", "--max-usd-per-hour", "2", "--no-detect")
    assert code == 0 and sorted(_names(out)) == sorted([
        "NVIDIA Jetson AGX Thor", "NVIDIA Jetson AGX Orin 64GB", "NVIDIA Jetson Orin Nano 8GB",
        "NVIDIA Jetson Orin NX 16GB",
        "NVIDIA Jetson Orin Nano Super 8GB", "Apple M4 Neural Engine",
        "Raspberry Pi AI HAT+ 26 TOPS", "Raspberry Pi 5 8GB", "Google Coral USB Accelerator"])
    # One cent per busy hour keeps the three cheapest: Coral, Pi 5, AI HAT+.
    code, out, _ = _run("--kind", "edge", "--max-usd-per-hour", "0.01", "--no-detect")
    assert sorted(_names(out)) == ["Google Coral USB Accelerator", "Raspberry Pi 5 8GB",
                                   "Raspberry Pi AI HAT+ 26 TOPS"]


def test_negative_budget_is_an_error_not_a_traceback():
    code, out, err = _run("--kind", "edge", "--max-usd-per-hour", "-1", "--no-detect")
    assert code == 2 and out == ""
    assert "--max-usd-per-hour=-1.0 is not valid" in err and "non-negative" in err


def test_budget_option_is_registered():
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert "--max-usd-per-hour" in parser.format_help()


def test_owning_and_amortisation_flags_change_the_budget_filter():
    # RTX PRO 6000 Blackwell rents for 0.66 $/h and sells for 8,565 USD (600 W). Renting it is
    # within 0.7 $/h; owning it costs 8565/13140 + 0.6*0.15 = 0.742 $/h, over budget; written
    # off over 6 years it costs 8565/26280 + 0.09 = 0.416 $/h, within again.
    name = "RTX PRO 6000"
    _, out, _ = _run("--name", name, "--max-usd-per-hour", "0.7", "--no-detect")
    assert _names(out) == ["NVIDIA RTX PRO 6000 Blackwell"]
    assert "rental price where a device has one" in out and "cost $/h" in out
    _, out, _ = _run("--name", name, "--max-usd-per-hour", "0.7", "--own", "--no-detect")
    assert _names(out) == []
    _, out, _ = _run("--name", name, "--max-usd-per-hour", "0.7", "--own", "--years", "6",
                     "--no-detect")
    assert _names(out) == ["NVIDIA RTX PRO 6000 Blackwell"]
    assert out.splitlines()[2].split()[-1] == f"{8565 / 26280 + 0.09:.3g}"  # the cost column
    assert "written off over 6 years" in out
    code, out, err = _run("--max-usd-per-hour", "1", "--utilisation", "1.5", "--no-detect")
    assert code == 2 and "utilisation=1.5" in err and "at most 1" in err


def test_segment_filter_with_a_budget():
    # Consumer devices within 0.2 $/busy hour (13140 h, 0.15 $/kWh): RX 7900 XTX 0.129, RTX 4080
    # 0.139, RTX 3090 0.167, RTX 4090 0.189, Mac mini M4 0.046 / M4 Pro 0.106, Ryzen 9 7950X
    # 699/13140 + 0.170*0.15 = 0.079 and 9950X 649/13140 + 0.170*0.15 = 0.075, RTX 4070 0.076,
    # RTX 3060 12GB 0.051; the RTX 5090 (0.238) is over.
    code, out, _ = _run("--segment", "consumer", "--max-usd-per-hour", "0.2", "--no-detect")
    assert code == 0 and sorted(_names(out)) == sorted([
        "AMD Radeon RX 7900 XTX", "NVIDIA GeForce RTX 4080", "NVIDIA GeForce RTX 3090",
        "NVIDIA GeForce RTX 4090", "Apple M4 (10-core GPU)", "Apple M4 Pro (20-core GPU)",
        "AMD Ryzen 9 7950X", "AMD Ryzen 9 9950X", "NVIDIA GeForce RTX 4070",
        "NVIDIA GeForce RTX 3060 12GB"])
    code, out, err = _run("--segment", "cloud", "--no-detect")
    assert code == 2 and "--segment='cloud' is not valid" in err
