"""Rescaling is a profiler function; the profiles it makes carry ``.at`` as a shorthand."""

from __future__ import annotations

import dataclasses

import pytest

import aiadvisor as aa
from aiadvisor.errors import InvalidArgumentError
from aiadvisor.profiler import TracedProfile, rescale
from aiadvisor.schema import ModelProfile


@pytest.fixture(scope="module")
def linear_prof():
    import torch

    return aa.profile(torch.nn.Linear(256, 128), torch.randn(8, 256), mode="infer")


def test_profile_returns_a_traced_profile_whose_at_is_rescale(linear_prof):
    assert isinstance(linear_prof, TracedProfile) and isinstance(linear_prof, ModelProfile)
    # A linear layer's forward: 2 x batch x 256 x 128 FLOPs = 2 x 16 x 32768 at batch 16.
    doubled = linear_prof.at(batch_size=16)
    assert doubled.flops_forward == pytest.approx(2 * 16 * 256 * 128)
    assert rescale(linear_prof, batch_size=16).flops_forward == doubled.flops_forward
    assert isinstance(doubled, TracedProfile)


def test_replace_keeps_the_shorthand(linear_prof):
    noted = dataclasses.replace(linear_prof, notes=("hand-edited",))
    assert type(noted) is TracedProfile
    assert noted.at(batch_size=4).flops_forward == pytest.approx(2 * 4 * 256 * 128)


def test_rescale_takes_a_hand_built_profile(linear_prof):
    fields = {f.name: getattr(linear_prof, f.name) for f in dataclasses.fields(ModelProfile)}
    plain = ModelProfile(**{**fields, "scaling": None})
    assert rescale(plain, batch_size=plain.batch_size) is plain
    with pytest.raises(InvalidArgumentError, match="cannot be rescaled"):
        rescale(plain, batch_size=2 * plain.batch_size)
