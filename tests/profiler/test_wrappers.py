"""Models handed over wrapped: torch.compile's OptimizedModule is traced through its eager
module; a TorchScript module gets a clear error instead of the stateless API's."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa
from aiadvisor import examples
from aiadvisor.errors import InvalidModelError


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)]).eval()


def test_a_compiled_model_profiles_as_its_eager_module_and_says_so():
    model = _mlp()
    compiled = torch.compile(model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    prof = aa.profile(compiled, torch.randn(4, 256), mode="infer")
    # 8 layers x 2 x batch 4 x 256 x 256 multiply-adds, worked by hand.
    assert prof.flops_forward == 8 * 2 * 4 * 256 * 256
    assert any("torch.compile" in n and "_orig_mod" in n for n in prof.notes)
    assert compiled._orig_mod is model  # the wrapper is left as it was
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # The note survives moving the profile to another batch.
    assert any("torch.compile" in n for n in prof.at(batch_size=16).notes)


def test_an_eager_model_gets_no_wrapper_note():
    prof = aa.profile(_mlp(), torch.randn(4, 256), mode="infer")
    assert not any("torch.compile" in n for n in prof.notes)


@pytest.mark.parametrize("make", [lambda m: torch.jit.script(m),
                                  lambda m: torch.jit.trace(m, torch.randn(4, 256))],
                         ids=["script", "trace"])
def test_a_torchscript_module_is_refused_with_the_fix(make):
    scripted = make(_mlp())
    with pytest.raises(InvalidModelError) as err:
        aa.profile(scripted, torch.randn(4, 256), mode="infer")
    text = str(err.value)
    assert type(scripted).__name__ in text and "TorchScript" in text
    assert "torch.nn.Module it was made from" in text


def test_a_compiled_causal_lm_profiles_for_generation():
    model, _ = examples.build("tiny-gpt")
    eager = aa.profile_generation(model, prompt_len=32)
    wrapped = aa.profile_generation(torch.compile(model), prompt_len=32)
    assert wrapped.prefill.flops_forward == eager.prefill.flops_forward
    # tiny-gpt: 4 layers x (K and V) x 4 heads x 64 per token, worked by hand.
    assert wrapped.kv.elements_per_token == eager.kv.elements_per_token == 4 * 2 * 4 * 64
    assert any("torch.compile" in n for n in wrapped.prefill.notes)
