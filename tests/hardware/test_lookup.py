"""Forgiving lookup, aliases, "Did you mean", resolve() and the derived support matrix."""

from __future__ import annotations

import pytest

import aiadvisor.hardware.detection as detect_module
from aiadvisor.errors import AIAdvisorError, InvalidArgumentError, UnknownHardwareError
from aiadvisor.hardware import SUPPORT_LEVELS, catalog, find, get, resolve, support_matrix
from aiadvisor.hardware.lookup import normalize_tokens
from aiadvisor.schema import HardwareSpec
from aiadvisor.units import PRECISIONS


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("H100", "NVIDIA H100 SXM"),  # documented default: the SXM part
        ("h100-sxm", "NVIDIA H100 SXM"),
        ("nvidia h100 sxm", "NVIDIA H100 SXM"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),  # torch.cuda.get_device_name() on SXM
        ("H100 PCIe", "NVIDIA H100 PCIe"),
        ("A100", "NVIDIA A100 80GB SXM"),  # documented default
        ("A100 80GB", "NVIDIA A100 80GB SXM"),
        ("a100 80 gb", "NVIDIA A100 80GB SXM"),
        ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 40GB SXM"),
        ("A100 PCIe 40", "NVIDIA A100 40GB PCIe"),  # "40" matches "40GB"
        ("MI300X", "AMD Instinct MI300X"),
        ("AMD Instinct MI300X", "AMD Instinct MI300X"),
        ("Tesla T4", "NVIDIA T4"),
        ("TPUv5e", "Google TPU v5e"),
        ("trillium", "Google TPU v6e"),
        ("gaudi3", "Intel Gaudi 3"),
        ("Intel(R) Xeon(R) Platinum 8480+", "Intel Xeon Platinum 8480+"),
        ("AMD EPYC 9654 96-Core Processor", "AMD EPYC 9654"),
        ("rtx4090", "NVIDIA GeForce RTX 4090"),
        ("trn2", "AWS Trainium2"),
    ],
)
def test_forgiving_lookup(query, expected):
    assert get(query).name == expected


def test_every_alias_resolves_to_its_own_row():
    table = catalog()
    for _, row in table.iterrows():
        for label in [row["name"], *[a for a in row["aliases"].split(";") if a]]:
            assert get(label).name == row["name"], label


def test_defaults_for_short_names_are_documented_in_notes():
    for short, name in (("H100", "NVIDIA H100 SXM"), ("A100", "NVIDIA A100 80GB SXM"),
                        ("V100", "NVIDIA V100 SXM2 32GB"), ("H200", "NVIDIA H200 SXM")):
        spec = get(short)
        assert spec.name == name
        assert f"'{short}'" in spec.notes


def test_unknown_name_suggests_the_closest():
    with pytest.raises(UnknownHardwareError) as info:
        get("H1000")
    message = str(info.value)
    assert "'H1000'" in message and "Did you mean" in message and "'NVIDIA H100 SXM'" in message
    assert isinstance(info.value, AIAdvisorError) and isinstance(info.value, KeyError)


def test_ambiguous_name_lists_the_candidates():
    with pytest.raises(UnknownHardwareError) as info:
        get("EPYC")
    assert "matches 2 catalog rows" in str(info.value)
    assert "'AMD EPYC 9654'" in str(info.value) and "'AMD EPYC 9755'" in str(info.value)


@pytest.mark.parametrize("bad", ["", "   ", None, 3])
def test_blank_or_non_string_name_is_rejected(bad):
    with pytest.raises(UnknownHardwareError, match="expected a device name"):
        get(bad)


def test_find_returns_none_instead_of_raising():
    assert find("no such chip") is None
    assert find("EPYC") is None  # ambiguous
    assert find("B200").name == "NVIDIA B200"


def test_normalize_tokens_drops_vendor_words_and_joins_sizes():
    assert normalize_tokens("NVIDIA GeForce RTX 4090") == ("rtx", "4090")
    assert normalize_tokens("A100-SXM4-80G") == ("a100", "sxm4", "80gb")


def test_resolve_accepts_names_specs_and_local(monkeypatch):
    spec = get("L4")
    assert resolve(spec) is spec
    assert resolve("l4") == spec
    local = HardwareSpec(name="local thing", vendor="x", kind="cpu", measured=True)
    calls = []

    def fake_detect(benchmark=False, **kwargs):
        calls.append(benchmark)
        return local

    monkeypatch.setattr(detect_module, "detect", fake_detect)
    assert resolve("LOCAL") is local
    assert calls == [True]  # "local" means the benchmarked device
    with pytest.raises(InvalidArgumentError, match="expected a catalog name"):
        resolve(42)


def test_support_matrix_is_derived_from_the_table():
    matrix = support_matrix()
    table = catalog()
    assert list(matrix.columns) == list(PRECISIONS)
    assert list(matrix.index) == list(table["name"])
    assert set(matrix.to_numpy().ravel()) <= set(SUPPORT_LEVELS)
    # V100: FP16 tensor cores but no BF16/TF32/FP8 engine (datasheet) -> bf16 runs emulated.
    assert matrix.loc["NVIDIA V100 SXM2 32GB", "fp16"] == "full"
    assert matrix.loc["NVIDIA V100 SXM2 32GB", "bf16"] == "emulated"
    assert matrix.loc["NVIDIA A100 80GB SXM", "fp8"] == "emulated"  # Ampere has no FP8
    assert matrix.loc["NVIDIA H100 SXM", "fp8"] == "full"
    assert matrix.loc["NVIDIA H100 SXM", "int4"] == "emulated"  # Hopper dropped INT4
    assert matrix.loc["NVIDIA T4", "int4"] == "full"
    assert (matrix["nf4"] != "full").all()  # NF4 is always dequantised to 16 bit
    assert matrix.loc["NVIDIA A10G", "fp32"] == "unknown"  # no published figure
    assert matrix.loc["Google TPU v5e", "fp32"] == "unknown"


def test_support_matrix_follows_a_user_override(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("name,fp8_tflops\nNVIDIA A100 80GB SXM,624\n", encoding="utf-8")
    assert support_matrix(path).loc["NVIDIA A100 80GB SXM", "fp8"] == "full"
