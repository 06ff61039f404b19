"""NCHW convolutions on an NVIDIA GPU's tensor cores pay cuDNN's layout transposes;
channels_last ones, FP32 (CUDA-core) ones, CPUs and AMD GPUs do not (aiadvisor.costmodel.layout)."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa
from aiadvisor.costmodel.api import _ops
from aiadvisor.costmodel.layout import (
    LAYOUT_TRANSPOSE_OP,
    layout_transpose_ops,
    transposed_bytes,
)
from aiadvisor.recommend.transforms import channels_last_convs


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.conv2 = torch.nn.Conv2d(32, 32, 3, padding=1, bias=False)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.head(x.mean((2, 3)))


BATCH = 64


def _profile(mode="infer", channels_last=False):
    torch.manual_seed(0)
    model, x = ConvNet(), torch.randn(BATCH, 16, 32, 32)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    return aa.profile(model, x, mode=mode, optimizer="sgd", precision="bf16")


# Per image, bf16 (2 bytes): conv1 reads 16 x 32 x 32 and writes 32 x 32 x 32 elements, conv2
# reads and writes 32 x 32 x 32; weights 32 x 16 x 9 and 32 x 32 x 9.
CONV_BYTES = 2 * (BATCH * (16 * 1024 + 32 * 1024 + 32 * 1024 + 32 * 1024)
                  + 32 * 16 * 9 + 32 * 32 * 9)


def test_each_nchw_convolution_reads_and_writes_its_operands_once_more():
    prof = _profile()
    extra = layout_transpose_ops(prof)
    assert len(extra) == 2 and {op.module for op in extra} == {"conv1", "conv2"}
    assert sum(op.bytes_total for op in extra) == pytest.approx(2 * CONV_BYTES)
    assert layout_transpose_ops(_profile(channels_last=True)) == []
    # An fp32 trace predicted in bf16 moves the same 2-byte copies: its 4-byte records halve.
    torch.manual_seed(0)
    fp32 = aa.profile(ConvNet(), torch.randn(BATCH, 16, 32, 32), mode="infer")
    assert transposed_bytes(fp32, "bf16") == pytest.approx(2 * CONV_BYTES)
    assert transposed_bytes(prof, "bf16") == pytest.approx(2 * CONV_BYTES)
    # Training: the backward convolutions transpose too (one record each per phase).
    assert {op.phase for op in layout_transpose_ops(_profile("train"))} == {"forward",
                                                                           "backward"}


def test_only_an_nvidia_gpu_on_its_tensor_cores_prices_them():
    prof = _profile()
    ops = _ops(prof, fused=True, transposes=True)
    assert (ops.name == LAYOUT_TRANSPOSE_OP).sum() == 2
    # 256 x the batch: 0.57 GB more traffic, device-bound (the small step waits on the host).
    big = prof.at(batch_size=256 * BATCH)
    nchw = aa.predict(big, hardware="H100 SXM", precision="bf16")
    nhwc = aa.predict(channels_last_convs(big), hardware="H100 SXM", precision="bf16")
    assert nchw.step_time_s > nhwc.step_time_s
    assert any("NCHW <-> NHWC transposes" in n for n in nchw.notes)
    assert not any("NCHW <-> NHWC" in n for n in nhwc.notes)
    # 2 x 256 x 2.2 MB (weights are not scaled, a rounding here) more traffic at 3.35 TB/s:
    # at least 0.17 ms of the difference.
    assert nchw.memory_s - nhwc.memory_s >= 0.9 * 2 * 256 * CONV_BYTES / 3.35e12
    # FP32 convolutions run on CUDA cores in NCHW; a CPU runs oneDNN's own kernels, an AMD GPU
    # MIOpen's, which include NCHW ones: unchanged.
    for hardware, precision in (("H100 SXM", "fp32"), ("Xeon 8480+", "bf16"),
                                ("MI300X", "bf16")):
        spec = aa.hardware.get(hardware)
        a = aa.predict(big, hardware=spec, precision=precision)
        b = aa.predict(channels_last_convs(big), hardware=spec, precision=precision)
        assert a.step_time_s == pytest.approx(b.step_time_s)
        assert not any("NCHW <-> NHWC" in n for n in a.notes)


def test_the_transposes_cost_no_eager_host_time():
    # cuDNN launches them inside the convolution call: the host side of an eager step is the
    # same with and without them (the device side grows).
    prof = _profile().at(batch_size=256 * BATCH)
    nchw = aa.predict(prof, hardware="H100 SXM", precision="bf16")
    nhwc = aa.predict(channels_last_convs(prof), hardware="H100 SXM", precision="bf16")
    assert nchw.host_s == pytest.approx(nhwc.host_s)


def test_the_channels_last_tactic_gains_what_the_step_prices():
    # At 16 x the batch the step is device-bound and channels_last is the plan's first step:
    # its gain is the NCHW step (transposes priced) over the channels_last one.
    torch.manual_seed(0)
    report = aa.advise(ConvNet(), torch.randn(16 * BATCH, 16, 32, 32), mode="infer",
                       hardware="A100 SXM4 80GB", precision="bf16")
    assert report.recommendations[0].id == "channels_last"
    nchw = report.prediction
    nhwc = aa.predict(channels_last_convs(report.profile), hardware="A100 SXM4 80GB",
                      precision="bf16")
    assert nchw.step_time_s > 1.2 * nhwc.step_time_s
    assert report.recommendations[0].predicted_speedup == pytest.approx(
        nchw.step_time_s / nhwc.step_time_s, rel=1e-3)


def test_an_eval_batch_norm_is_priced_as_one_elementwise_pass():
    # Inference batch norm scales and shifts with running statistics: no reduction, so the
    # elementwise table (as relu) prices it, not the normalisation one (two passes).
    from aiadvisor.costmodel.ops import is_norm
    from aiadvisor.recommend.transforms import map_ops

    assert not is_norm("aten.native_batch_norm[eval]")
    assert not is_norm("aten.native_batch_norm[eval][channels_last]")
    assert is_norm("aten.native_batch_norm") and is_norm("aten.native_layer_norm")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32),
                              torch.nn.ReLU())
    prof = aa.profile(net, torch.randn(8, 16, 32, 32), mode="infer",
                      precision="bf16").at(batch_size=8 * 4096)

    def rate(name):
        only = map_ops(prof, lambda op: op if op.op == name else None)
        moved = sum(op.bytes_total for op in only.ops)
        return moved / aa.predict(only, hardware="H100 SXM", precision="bf16").step_time_s

    # Both stream 2 bytes in and 2 out per element (the same 1.1 GB): the same bandwidth.
    assert rate("aten.native_batch_norm[eval]") == pytest.approx(rate("aten.relu"), rel=0.05)
