"""Hardware ranking over the catalog, and the precision table, against hand-worked figures."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

import aiadvisor as aa
from aiadvisor.errors import InvalidArgumentError
from aiadvisor.recommend.precision import (
    best_precision,
    fallback_precision,
    precision_table,
    support_level,
)
from aiadvisor.recommend.predictor import Predictor
from aiadvisor.recommend.ranking import pareto_front, rank_hardware
from aiadvisor.schema import ParallelConfig

from .conftest import make_profile


@pytest.fixture(scope="module")
def specs():
    return aa.hardware.all_specs()


@pytest.fixture(scope="module")
def llama70b_ranking(llama70b, specs):
    return rank_hardware(llama70b, specs=specs, precision="bf16", num_devices=8,
                         predictor=Predictor()).set_index("hardware")


def test_devices_needed_for_llama3_70b(llama70b_ranking):
    r = llama70b_ranking
    # Device memory is binary ("80 GB" = 80 GiB = 85.9e9 bytes); 90 % is usable. Without
    # offload every plan holds at least 16 x 70.55e9 / n bytes of states per device, and
    # torch.optim's foreach AdamW (the profile's optimizer, PyTorch's CUDA default) adds a
    # 4-byte-per-parameter list in step(), after backward has freed the activations:
    # 20 x 70.55e9 / n at the step.
    #   H100 (80 GiB, 77.3e9 usable): n=16 -> 88.2e9 at the step > 77.3e9; n=32 -> 44.1e9: 32.
    #   H200 (141 GiB, 136.3e9):      n=8 -> 176.4e9 > 136.3e9; n=16 -> 88.2e9 (backward:
    #     70.6e9 + acts): 16.
    #   B200 (180 GiB, 173.9e9):      n=8 -> 141.1e9 of states + 35.3e9 of the step's list =
    #     176.4e9 > 173.9e9; n=16: 16 (8 with a fused AdamW, test_parallel).
    assert r.loc["NVIDIA H100 SXM", "devices_needed"] == 32
    assert r.loc["NVIDIA H200 SXM", "devices_needed"] == 16
    assert r.loc["NVIDIA B200", "devices_needed"] == 16
    assert not r.loc["NVIDIA H100 SXM", "fits"] and not r.loc["NVIDIA B200", "fits"]
    assert r.loc["NVIDIA H100 SXM", "num_devices"] == 32  # ranked on what it needs


def test_cost_and_energy_follow_from_price_tdp_and_throughput(llama70b_ranking):
    row = llama70b_ranking.loc["NVIDIA H100 SXM"]
    n, price, tdp = row["num_devices"], row["usd_per_hour"], 700.0  # H100 SXM TDP, datasheet
    # $ per million samples = n devices x $/hour / 3600 s / (samples/s) x 1e6
    assert row["cost_per_million_samples_usd"] == pytest.approx(
        n * price / 3600 / row["throughput"] * 1e6)
    # upper bound: every device at its TDP for the whole step
    assert row["energy_per_sample_j_upper_bound"] == pytest.approx(n * tdp / row["throughput"])


def test_whole_catalog_is_ranked_fastest_first(llama70b_ranking, specs):
    r = llama70b_ranking
    assert len(r) == len(specs)
    speeds = r["throughput"].dropna().tolist()
    assert speeds == sorted(speeds, reverse=True)
    cpu = r[r["kind"] == "cpu"]
    assert cpu["fits"].isna().all() or cpu["fits"].map(lambda v: v is None).all()


def test_pareto_front_by_hand():
    # speed, cost: A (10, 5) and B (8, 3) trade off; C (6, 6) is slower and dearer than A;
    # D has no price and E no prediction: neither is ranked.
    df = pd.DataFrame({"throughput": [10, 8, 6, 12, math.nan],
                       "cost_per_million_samples_usd": [5, 3, 6, math.nan, 1]})
    front = pareto_front(df, cost="cost_per_million_samples_usd", speed="throughput")
    assert front.tolist() == [True, True, False, False, False]


def test_unsupported_precision_falls_back_and_says_so(specs):
    prof = make_profile(num_params=10**8, num_blocks=4, block_params=2 * 10**7, block_act=10**8,
                        block_out=10**6)
    df = rank_hardware(prof, specs=specs, precision="bf16", num_devices=1,
                       predictor=Predictor()).set_index("hardware")
    t4 = df.loc["NVIDIA T4"]  # Turing: fp16 tensor cores, no bf16
    assert t4["precision"] == "fp16" and "bf16 not supported" in t4["notes"]
    assert df.loc["NVIDIA H100 SXM", "precision"] == "bf16"


def test_support_levels_and_nearest_precision():
    v100, h100, t4 = (aa.hardware.get(n) for n in ("V100 SXM2 32GB", "H100 SXM", "T4"))
    assert support_level(h100, "fp8") == "full" and support_level(t4, "fp8") == "emulated"
    assert fallback_precision(t4, "fp8", mode="train") == "fp16"
    assert fallback_precision(v100, "bf16", mode="train") == "fp16"
    assert fallback_precision(h100, "nf4", mode="train") == "bf16"  # weight-only: not training


def test_precision_table_for_inference_memory():
    # Inference, 1e9 parameters: weights at 4, 2, 1 and 4.127/8 bytes per parameter (NF4: 4-bit
    # codes + an 8-bit absmax per 64 weights + an fp32 constant per 256 absmax = 4.127 bits).
    prof = make_profile(num_params=10**9, num_blocks=4, block_params=2 * 10**8,
                        block_out=10**6, mode="infer")
    table = precision_table(prof, aa.hardware.get("H100 SXM"), parallel=ParallelConfig(),
                            predictor=Predictor()).set_index("precision")
    mem = table["memory_per_device_bytes"]
    assert mem["fp32"] - mem["bf16"] == pytest.approx(2e9)
    assert mem["bf16"] - mem["fp8"] == pytest.approx(1e9)
    assert mem["bf16"] - mem["nf4"] == pytest.approx(2e9 - (4 + 8 / 64 + 32 / 16384) / 8 * 1e9)
    assert table.loc["fp32", "speedup_vs_fp32"] == pytest.approx(1.0)
    assert table.loc["bf16", "speedup_vs_fp32"] > 1
    assert table.loc["nf4", "usable"] and "loss scaling" in table.loc["fp16", "handled_by"]


def test_precision_table_for_training_rules_out_weight_only_formats():
    prof = make_profile(num_params=10**8, num_blocks=4, block_params=2 * 10**7,
                        block_act=10**8, block_out=10**6)
    table = precision_table(prof, aa.hardware.get("T4"), parallel=ParallelConfig(),
                            predictor=Predictor()).set_index("precision")
    for p in ("int8", "int4", "nf4"):
        assert not table.loc[p, "usable"] and "not for training" in table.loc[p, "notes"]
    assert not table.loc["fp8", "usable"] and "nearest is fp16" in table.loc["fp8", "notes"]
    assert not table.loc["bf16", "usable"]
    assert table.loc["fp16", "usable"]
    assert "scaling recipes" in table.loc["fp8", "handled_by"]


def test_best_precision_follows_the_datasheet_columns():
    # Dense figures from the catalog (datasheets): H100 and MI300X have bf16 tensor/matrix
    # engines; T4 (Turing) and V100 (Volta) fp16 only; the Jetson Orin Nano row has an fp16
    # tensor figure (derived from its INT8 one), the AGX Orin row fp32 and int8 only, and int8
    # is never picked silently.
    names = {"H100 SXM": "bf16", "MI300X": "bf16", "T4": "fp16", "V100 SXM2 32GB": "fp16",
             "Jetson Orin Nano 8GB": "fp16", "Jetson AGX Orin 64GB": "fp32"}
    for name, expected in names.items():
        for mode in ("train", "infer"):
            assert best_precision(aa.hardware.get(name), mode=mode) == expected, (name, mode)
    h100 = aa.hardware.get("H100 SXM")
    # Hand-built rows: TF32 but no 16-bit engine -> tf32; fp8/int8 but nothing wider -> None
    # (a device is never ranked at fp8/int8 unless the user pins it).
    tf32_only = dataclasses.replace(h100, bf16_tflops=None, fp16_tflops=None)
    assert best_precision(tf32_only, mode="train") == "tf32"
    narrow = dataclasses.replace(h100, fp32_tflops=None, tf32_tflops=None, bf16_tflops=None,
                                 fp16_tflops=None)
    assert best_precision(narrow, mode="infer") is None
    with pytest.raises(InvalidArgumentError, match="mode='serve'"):
        best_precision(h100, mode="serve")


def test_unpinned_ranking_runs_each_device_at_its_best_precision(specs):
    prof = make_profile(num_params=10**8, num_blocks=4, block_params=2 * 10**7, block_act=10**8,
                        block_out=10**6)
    df = rank_hardware(prof, specs=specs, precision=None, num_devices=1,
                       predictor=Predictor()).set_index("hardware")
    assert df.loc["NVIDIA H100 SXM", "precision"] == "bf16"
    assert df.loc["AMD Instinct MI300X", "precision"] == "bf16"
    t4 = df.loc["NVIDIA T4"]
    assert t4["precision"] == "fp16" and "not supported" not in t4["notes"]
    assert set(df["precision"]) - {""} <= {"bf16", "fp16", "tf32", "fp32"}
    assert "best full-rate precision for training" in df.attrs["precision_note"]
    # The row is the cost model's prediction at that precision (plain DDP on one device here:
    # 1e8 bf16 parameters and 4e8 bytes of activations fit an 80 GB H100).
    h100 = df.loc["NVIDIA H100 SXM"]
    assert h100["plan"] == "ddp" and h100["num_devices"] == 1
    direct = aa.predict(prof, hardware="H100 SXM", precision="bf16")
    assert h100["step_time_s"] == pytest.approx(direct.step_time_s, rel=1e-9)
    pinned = rank_hardware(prof, specs=specs, precision="fp32", num_devices=1,
                           predictor=Predictor()).set_index("hardware")
    assert pinned.loc["NVIDIA H100 SXM", "precision"] == "fp32"
    assert pinned.loc["NVIDIA T4", "precision"] == "fp32"  # T4: 8.1 dense fp32 TFLOPS
    assert "as pinned" in pinned.attrs["precision_note"]


def test_ranking_prices_every_row_by_the_rule_and_says_which_price(specs):
    from aiadvisor.hardware import PriceRule

    prof = make_profile(num_params=10_000_000, batch_size=8, mode="infer", optimizer="none")
    names = ["NVIDIA H100 SXM", "NVIDIA GeForce RTX 4090", "NVIDIA RTX PRO 6000 Blackwell",
             "Huawei Ascend 910B"]
    chosen = [s for s in specs if s.name in names]
    rent = rank_hardware(prof, specs=chosen, precision=None, num_devices=1,
                         predictor=Predictor()).set_index("hardware")
    # Renting: the H100 rents for 3.78; the RTX 4090 only sells (1599 USD, 450 W) so it is
    # amortised: 1599 / 13140 + 0.45 * 0.15 = 0.18919 $/h; the RTX PRO 6000 rents for 0.66.
    assert rent.loc["NVIDIA H100 SXM", "usd_per_hour"] == 3.78
    assert rent.loc["NVIDIA GeForce RTX 4090", "usd_per_hour"] == pytest.approx(0.18919,
                                                                                abs=1e-5)
    assert rent.loc["NVIDIA RTX PRO 6000 Blackwell", "usd_per_hour"] == 0.66
    assert rent.loc["NVIDIA GeForce RTX 4090", "price_basis"].startswith("own: 1,599 USD")
    assert "2022-09" in rent.loc["NVIDIA GeForce RTX 4090", "price_basis"]
    # The bought card now has a cost per sample (it had none when only rentals were priced).
    row = rent.loc["NVIDIA GeForce RTX 4090"]
    assert row["cost_per_million_samples_usd"] == pytest.approx(
        row["usd_per_hour"] / 3600 / row["throughput"] * 1e6)
    assert math.isnan(rent.loc["Huawei Ascend 910B", "usd_per_hour"])
    assert rent.loc["Huawei Ascend 910B", "price_basis"] == "no price in the catalog"
    note = rent.attrs["price_note"]
    assert "rental price where a device has one" in note and "3 years at 50% use" in note
    assert "1 device(s) have no price" in note
    # Owning over 5 years at 25 % use: RTX PRO 6000 8565 / 10950 + 0.6 * 0.15 = 0.87219 $/h.
    own = rank_hardware(prof, specs=chosen, precision=None, num_devices=1,
                        predictor=Predictor(),
                        price=PriceRule(basis="own", years=5, utilisation=0.25)
                        ).set_index("hardware")
    assert own.loc["NVIDIA RTX PRO 6000 Blackwell", "usd_per_hour"] == pytest.approx(
        8565 / 10950 + 0.09, abs=1e-5)
    assert own.loc["NVIDIA H100 SXM", "usd_per_hour"] == 3.78  # rent-only stays rented


def test_host_bound_devices_tie_cheapest_first_and_the_ranking_says_so():
    from aiadvisor import examples

    model, x = examples.build("tiny-gpt")
    df = aa.advise(model, x).hardware
    # A 5.4 M-parameter decoder at 8 x 512 tokens: eager PyTorch's host time (hundreds of
    # kernels at 27.5 us) exceeds the device time on most accelerators, which then tie.
    bound = df[df["host_bound"].fillna(False).astype(bool)]
    assert len(bound) >= 10
    assert "host time" in df.attrs["host_note"]
    tied = bound[np.isclose(bound["throughput"], bound["throughput"].iloc[0], rtol=1e-9,
                            atol=0.0)]
    costs = tied["cost_per_million_samples_usd"].dropna().tolist()
    assert len(costs) >= 3 and costs == sorted(costs)
    # A step the devices' own speed decides carries no such sentence.
    big = aa.advise(aa.profile(model, x, mode="train").at(batch_size=256))
    assert big.hardware.attrs["host_note"] == ""
