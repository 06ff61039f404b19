"""Devices a step cannot be priced on: training on an inference-only accelerator, and a device
whose memory bandwidth no source publishes (before: a 1 GB/s placeholder priced it)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import aiadvisor as aa
from aiadvisor.costmodel.api import predict_table
from aiadvisor.errors import MissingHardwareFigureError, UnsupportedWorkloadError
from aiadvisor.hardware import get
from aiadvisor.recommend.predictor import Predictor
from aiadvisor.recommend.ranking import rank_hardware


@pytest.fixture(scope="module")
def profiles():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(),
                                torch.nn.Linear(2048, 512))
    x = torch.randn(64, 512)
    return aa.profile(model, x, mode="train"), aa.profile(model, x, mode="infer")


def test_training_on_an_inference_only_device_is_refused_with_the_way_out(profiles):
    train, infer = profiles
    with pytest.raises(UnsupportedWorkloadError) as info:
        aa.predict(train, hardware="Inferentia2", precision="bf16")
    message = str(info.value)
    assert "'AWS Inferentia2'" in message and "inference-only" in message
    assert "mode='infer'" in message
    # Inference on it is priced: 2 x 64 x (512 x 2048 x 2) FLOPs = 268 MFLOP at its 190 dense
    # bf16 TFLOP/s is 1.4 us; the step is far above that (launches, bandwidth), and finite.
    pred = aa.predict(infer, hardware="Inferentia2", precision="bf16")
    assert 1.4e-6 < pred.step_time_s < 1.0


def test_a_device_without_memory_bandwidth_is_refused_and_a_given_figure_prices_it(profiles):
    _, infer = profiles
    spec = get("Ascend 910C")
    assert spec.memory_bw_gbs is None and spec.fp16_tflops == 800
    with pytest.raises(MissingHardwareFigureError) as info:
        aa.predict(infer, hardware=spec, precision="fp16")
    assert "'Huawei Ascend 910C'" in str(info.value) and "memory bandwidth" in str(info.value)
    assert "memory_bw_gbs=" in str(info.value)
    # The weights alone, 2 x 512 x 2048 fp16 values = 4 MiB, at a stated 3.2 TB/s take 1.3 us:
    # with the figure supplied the step is priced and at least that.
    given = dataclasses.replace(spec, memory_bw_gbs=3200.0)
    assert aa.predict(infer, hardware=given, precision="fp16").step_time_s > 4 * 2**20 / 3.2e12


def test_tables_and_rankings_leave_them_unpriced_with_the_reason(profiles):
    train, infer = profiles
    specs = [get("Inferentia2"), get("Ascend 910C"), get("AWS Trainium"), get("H100 SXM")]
    assert set(predict_table(train, specs=specs, precisions=["bf16"])["hardware"]) == {
        "AWS Trainium", "NVIDIA H100 SXM"}
    assert set(predict_table(infer, specs=specs, precisions=["bf16"])["hardware"]) == {
        "AWS Inferentia2", "AWS Trainium", "NVIDIA H100 SXM"}
    ranked = rank_hardware(train, specs=specs, precision=None, num_devices=1,
                           predictor=Predictor()).set_index("hardware")
    assert math.isnan(ranked.loc["AWS Inferentia2", "throughput"])
    assert "inference-only device" in ranked.loc["AWS Inferentia2", "notes"]
    assert math.isnan(ranked.loc["Huawei Ascend 910C", "throughput"])
    assert "no published memory bandwidth" in ranked.loc["Huawei Ascend 910C", "notes"]
    assert ranked.loc["AWS Trainium", "throughput"] > 0
    served = rank_hardware(infer, specs=specs, precision=None, num_devices=1,
                           predictor=Predictor()).set_index("hardware")
    assert served.loc["AWS Inferentia2", "throughput"] > 0
