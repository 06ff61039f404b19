"""Inference of an FP32-stored model at bf16/fp16 is priced as the recommended code runs it:
weights converted once, the forward under torch.autocast, whose CUDA kernels run softmax and
norms in FP32 with a cast on each side (PyTorch's autocast_mode.cpp fp32 list)."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa
from aiadvisor.units import fmt_bytes


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(1024, 1024)
        self.norm = torch.nn.LayerNorm(1024)

    def forward(self, x):
        return torch.softmax(self.norm(self.proj(x)), dim=-1)


def _profile(dtype=torch.float32, mode="infer"):
    torch.manual_seed(0)
    return aa.profile(Head().to(dtype), torch.randn(4096, 1024, dtype=dtype), mode=mode)


def _island_bytes(prof) -> float:
    """By the rule: 20 bytes an element instead of the 16-bit op's 4, i.e. 8 / 4 times the
    FP32 trace's bytes of each layer_norm and softmax record."""
    names = ("aten.native_layer_norm", "aten._softmax")
    return sum(2.0 * (op.bytes_read + op.bytes_written) for op in prof.ops
               if op.phase == "forward" and op.op.split("[")[0] in names)


def test_the_islands_cost_a_gpu_their_fp32_traffic_and_two_casts_each():
    prof = _profile()
    extra = _island_bytes(prof)
    # (4096 x 1024) elements in and out of each: 16 MiB read + 16 MiB written in FP32, so at
    # least 2 x 32 MiB = 64 MiB more per op, 128 MiB for the two.
    assert extra >= 128 * 2**20
    on = aa.predict(prof, hardware="H100 SXM", precision="bf16")
    off = aa.predict(prof, hardware="H100 SXM", precision="bf16", autocast=False)
    note = next(n for n in on.notes if "torch.autocast" in n)
    assert "4 more kernels" in note and fmt_bytes(extra) in note
    assert not any("torch.autocast" in n for n in off.notes)
    # The extra bytes at no more than the H100's 3350 GB/s: a floor on the added kernel time
    # (this small step waits on the host either way, so its total moves less).
    added = on.compute_s + on.memory_s - off.compute_s - off.memory_s
    assert added >= extra / 3350e9
    assert on.step_time_s > off.step_time_s


def test_no_islands_on_a_cpu_for_a_16_bit_model_or_in_training():
    prof = _profile()
    # CPU autocast keeps softmax and layer_norm in bf16: the same step either way.
    cpu = [aa.predict(prof, hardware="Xeon Platinum 8480+", precision="bf16", autocast=a)
           for a in (True, False)]
    assert cpu[0].step_time_s == pytest.approx(cpu[1].step_time_s, rel=1e-12)
    # A model stored in bf16 runs as stored (no autocast); training has its own AMP rule.
    for other in (_profile(torch.bfloat16), _profile(mode="train")):
        steps = [aa.predict(other, hardware="H100 SXM", precision="bf16", autocast=a)
                 for a in (True, False)]
        assert steps[0].step_time_s == pytest.approx(steps[1].step_time_s, rel=1e-12)


def test_the_table_prices_the_same_islands_as_predict():
    from aiadvisor.costmodel.api import predict_table
    from aiadvisor.hardware import get

    prof = _profile()
    table = predict_table(prof, specs=[get("H100 SXM"), get("Xeon Platinum 8480+")],
                          precisions=["bf16"]).set_index("hardware")
    for name in ("NVIDIA H100 SXM", "Intel Xeon Platinum 8480+"):
        single = aa.predict(prof, hardware=name, precision="bf16")
        assert table.loc[name, "step_time_s"] == pytest.approx(single.step_time_s, rel=1e-9)


def test_the_inference_autocast_advice_says_what_it_prices():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(num_hidden_layers=2, attn_implementation="eager")
    with torch.device("meta"):
        model = transformers.BertForSequenceClassification(config)
    tokens = torch.randint(0, 30522, (32, 128), device="meta")
    on_gpu = {r.id: r for r in aa.advise(model, tokens, mode="infer", hardware="H100 SXM")
              .recommendations}
    assert "keeps softmax and norms in fp32" in on_gpu["bf16_autocast"].rationale
    on_cpu = aa.advise(model, tokens, mode="infer", hardware="Xeon Platinum 8480+")
    assert all("keeps softmax and norms in fp32" not in r.rationale
               for r in on_cpu.recommendations)
