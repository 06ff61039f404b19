"""scaled_dot_product_attention recorded as one call and costed per backend of the target."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import aiadvisor as aa
from aiadvisor.costmodel.attention import (
    attention_backend,
    fused_memory_saving_bytes,
    fused_op_arrays,
)

B, H, T, D = 2, 4, 256, 32


class Attention(torch.nn.Module):
    def __init__(self, dropout: float = 0.1):
        super().__init__()
        self.qkv = torch.nn.Linear(H * D, 3 * H * D)
        self.dropout = dropout

    def forward(self, x):
        q, k, v = self.qkv(x).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training
                                             else 0.0, is_causal=True)
        return out.transpose(1, 2).reshape(B, T, H * D)


@pytest.fixture(scope="module")
def train_prof():
    return aa.profile(Attention(), torch.randn(B, T, H * D), mode="train", scaling=False)


def test_one_sdpa_call_is_recorded_with_its_tensors(train_prof):
    (group,) = train_prof.sdpa
    assert group.module == "[sdpa]" and group.calls == 1 and group.dropout
    # q, k, v and the output: 4 tensors of B x H x T x D FP32 elements.
    assert group.io_bytes == 4 * B * H * T * D * 4
    assert group.lse_bytes == 4 * B * H * T          # one FP32 log-sum-exp per query row
    # The CPU trace ran the math path (dropout): its ops sit under the pseudo-module, and the
    # layers table counts them for the module that called SDPA (the root here).
    math_ops = {op.op for op in train_prof.ops if op.module == "[sdpa]"}
    assert "aten.bmm" in math_ops
    root = train_prof.layers.set_index("name").loc[""]
    attn_flops = 2 * 2 * B * H * T * T * D          # QK^T and PV, 2 FLOPs per multiply-add
    assert root.flops_forward >= attn_flops


def test_fused_arrays_merge_the_math_path_into_one_op_per_phase(train_prof):
    fused = fused_op_arrays(train_prof)
    attn = fused.op_class == "attention"
    assert sorted(fused.phase[attn]) == ["backward", "forward"]
    fwd = attn & (fused.phase == "forward")
    group = train_prof.sdpa[0]
    assert fused.count[fwd].sum() == 1
    # Forward moves q, k, v, o and writes the log-sum-exp: no T x T matrix.
    assert fused.bytes_total[fwd].sum() == pytest.approx(group.io_bytes + group.lse_bytes)
    math_fwd = [op for op in train_prof.ops if op.module == "[sdpa]" and op.phase == "forward"]
    assert fused.flops[fwd].sum() == pytest.approx(sum(op.flops for op in math_fwd))
    assert sum(op.bytes_total for op in math_fwd) > 4 * fused.bytes_total[fwd].sum()


def test_backend_by_device_and_precision(train_prof):
    h100, xeon = aa.hardware.get("H100"), aa.hardware.get("Intel Xeon 6980P")
    assert attention_backend(h100, "bf16") == "flash"
    assert attention_backend(h100, "fp32") == "mem-efficient"
    assert attention_backend(xeon, "bf16") == "as traced"
    on_gpu = aa.predict(train_prof, hardware="H100", precision="bf16")
    assert on_gpu.attention_backend == "flash"
    assert any("flash kernel" in n for n in on_gpu.notes)
    assert aa.predict(train_prof, hardware="Intel Xeon 6980P",
                      precision="bf16").attention_backend == "as traced"


def test_flash_does_not_keep_the_t_by_t_probabilities(train_prof):
    # The math path saves at least the B x H x T x T FP32 probabilities after dropout.
    assert fused_memory_saving_bytes(train_prof) >= B * H * T * T * 4


def test_a_model_without_sdpa_says_none():
    prof = aa.profile(torch.nn.Linear(64, 64), torch.randn(4, 64), mode="infer", scaling=False)
    assert prof.sdpa == ()
    assert aa.predict(prof, hardware="H100", precision="bf16").attention_backend == "none"
