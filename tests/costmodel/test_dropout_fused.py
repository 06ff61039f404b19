"""Training dropout as a CUDA device runs it: one native_dropout kernel with a one-byte mask,
where a CPU or meta trace records ATen's composite (empty_like, bernoulli_, div_, mul)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import aiadvisor as aa
from aiadvisor.costmodel.api import _ops
from aiadvisor.costmodel.dropout import NATIVE_DROPOUT


class Net(torch.nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.fc = torch.nn.Linear(256, 512)
        self.drop = torch.nn.Dropout(p)
        self.out = torch.nn.Linear(512, 10)

    def forward(self, x):
        return self.out(self.drop(self.fc(x)))


BATCH = 32
ELEMENTS = BATCH * 512  # the dropout's input, worked by hand


def _profile(p=0.1, mode="train"):
    torch.manual_seed(0)
    return aa.profile(Net(p), torch.randn(BATCH, 256), mode=mode, optimizer="sgd")


def test_the_profile_notes_each_training_dropout_call_and_what_it_ran():
    prof = _profile()
    (group,) = prof.dropout
    assert (group.module, group.calls, group.element_bytes) == ("drop", 1, 4)
    assert group.elements == pytest.approx(ELEMENTS)
    ran = {name: count for name, count, _, _ in group.ops}
    assert ran["aten.bernoulli_"] == ran["aten.div_"] == ran["aten.mul"] == 1
    # The composite writes its mask in the input's dtype, scales it in place, multiplies:
    # the multiply reads input and mask and writes the output (3 x 4 bytes an element).
    mul = next(o for o in group.ops if o[0] == "aten.mul")
    assert mul[2] + mul[3] == pytest.approx(3 * 4 * ELEMENTS)
    # Twice the batch: twice the elements (the scaling traces carry the groups).
    assert prof.at(batch_size=2 * BATCH).dropout[0].elements == pytest.approx(2 * ELEMENTS)


@pytest.mark.parametrize("p,mode", [(0.0, "train"), (0.1, "infer")])
def test_no_group_without_a_training_dropout(p, mode):
    assert _profile(p, mode).dropout == ()


def test_a_gpu_prices_one_native_dropout_and_a_cpu_the_traced_ops():
    prof = _profile()
    traced, gpu = _ops(prof, fused=False), _ops(prof, fused=True)
    assert "aten.bernoulli_" in set(traced.name) and NATIVE_DROPOUT not in set(traced.name)
    assert "aten.bernoulli_" not in set(gpu.name)
    i = list(gpu.name).index(NATIVE_DROPOUT)
    assert gpu.count[i] == 1
    # Reads the fp32 input, writes the fp32 output and a one-byte mask: 9 bytes an element.
    assert gpu.bytes_total[i] == pytest.approx(9 * ELEMENTS)
    fwd_t = traced.phase == "forward"
    fwd_g = gpu.phase == "forward"
    # Forward: four dispatches (empty_like, bernoulli_, div_, mul) become one.
    assert traced.count[fwd_t].sum() - gpu.count[fwd_g].sum() == 3
    # Backward: the same multiply, reading the one-byte mask instead of the fp32 copy.
    back_t = traced.bytes_total[~fwd_t].sum()
    back_g = gpu.bytes_total[~fwd_g].sum()
    assert back_t - back_g == pytest.approx(3 * ELEMENTS)


def test_the_gpu_step_is_faster_and_a_cpu_step_unchanged():
    prof = _profile()
    a100 = aa.predict(prof, hardware="A100", precision="fp32")
    without = aa.predict(dataclass_replace(prof, dropout=()), hardware="A100", precision="fp32")
    assert a100.memory_s + a100.overhead_s < without.memory_s + without.overhead_s
    cpu = aa.hardware.all_specs()
    spec = next(s for s in cpu if s.kind == "cpu")
    assert aa.predict(prof, hardware=spec, precision="fp32").step_time_s == pytest.approx(
        aa.predict(dataclass_replace(prof, dropout=()), hardware=spec,
                   precision="fp32").step_time_s)


def dataclass_replace(prof, **kw):
    import dataclasses

    return dataclasses.replace(prof, **kw)


def test_a_group_whose_ops_a_transform_removed_is_left_alone():
    from aiadvisor.recommend.transforms import map_ops

    prof = map_ops(_profile(), lambda op: None if op.op == "aten.bernoulli_" else op)
    assert NATIVE_DROPOUT not in set(_ops(prof, fused=True).name)
    assert np.isfinite(aa.predict(prof, hardware="A100", precision="fp32").step_time_s)


def test_the_prediction_says_how_dropout_was_costed():
    prof = _profile()
    gpu = aa.predict(prof, hardware="A100", precision="fp32")
    assert any("1 training dropout call costed" in n and "native_dropout" in n for n in gpu.notes)
    spec = next(s for s in aa.hardware.all_specs() if s.kind == "cpu")
    assert not any("native_dropout" in n for n in aa.predict(prof, hardware=spec).notes)


def test_the_cuda_memory_view_keeps_one_byte_masks():
    from aiadvisor.profiler import assemble

    prof = _profile()
    # The traced composite saved the fp32 mask for backward (4 bytes an element); CUDA's
    # native_dropout saves a bool mask: 3 bytes an element less in the CUDA view of the peak,
    # the same allocator-level peak of the traced device.
    static, dyn = prof.scaling["static"], assemble_dyn(prof)
    none = {k: v for k, v in dyn.items() if not k.startswith("dropout|")}
    plain = assemble.build_profile({**static}, none, batch_size=BATCH, seq_len=None)
    assert plain.memory.cuda_peak_bytes - prof.memory.cuda_peak_bytes == 3 * ELEMENTS
    assert plain.memory.peak_bytes == prof.memory.peak_bytes


def assemble_dyn(prof):
    from aiadvisor.profiler.scaling import evaluate

    return evaluate(prof.scaling["fit"], prof.batch_size, prof.seq_len)
