"""Models and inputs at the edges of what ``profile``/``advise`` take: nothing to train, one
list argument, torch.ao's quantized layers. Each gets a clear answer, not a wrong one."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import aiadvisor as aa


class Softmax(nn.Module):
    def forward(self, x):
        return x.softmax(-1)


class SumOfList(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 8)

    def forward(self, xs):
        return sum(self.proj(x) for x in xs)


def test_training_a_model_with_nothing_to_train_is_refused_and_advice_infers():
    frozen = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
    frozen.requires_grad_(False)
    for model in (Softmax(), frozen):
        with pytest.raises(aa.errors.InvalidArgumentError,
                           match=r"mode='train' is not valid .* no trainable parameter.*"
                                 r"Expected mode='infer'"):
            aa.profile(model, torch.randn(4, 16), mode="train")
    # The dashboard's default step is then inference, and a note says why.
    report = aa.advise(frozen, torch.randn(4, 16))
    assert report.profile.mode == "infer"
    assert any("mode 'infer' assumed" in n for n in report.profile.notes)
    # A model with something to train still defaults to training.
    assert aa.advise(nn.Linear(16, 4), torch.randn(4, 16)).profile.mode == "train"


def test_a_list_is_positional_arguments_and_the_error_says_how_to_pass_one():
    xs = [torch.randn(4, 32), torch.randn(4, 32)]
    with pytest.raises(aa.errors.ModelInputError, match=r"wrap it: \(x,\)"):
        aa.profile(SumOfList(), xs, mode="infer")
    # Wrapped, the list is one argument: two 4 x 32 -> 8 projections, 2 x 2 x 4 x 32 x 8 FLOPs.
    prof = aa.profile(SumOfList(), (xs,), mode="infer")
    assert prof.flops_forward == 2 * 2 * 4 * 32 * 8
    assert prof.batch_size == 4


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
def test_torch_ao_quantized_layers_are_named_as_not_counted():
    model = torch.ao.quantization.quantize_dynamic(
        nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8)), {nn.Linear},
        dtype=torch.qint8)
    prof = aa.profile(model, torch.randn(4, 64), mode="infer")
    assert any(n.startswith("quantized.linear_dynamic (torch.ao quantization") and
               "precision='int8'" in n for n in prof.notes)
