"""Predictor: one vectorised cost-model call answers every device x precision of a layout."""

from __future__ import annotations

import pytest

import aiadvisor.costmodel as costmodel
from aiadvisor.recommend.predictor import Predictor
from aiadvisor.schema import ParallelConfig

from .conftest import H100, make_profile


@pytest.mark.parametrize("parallel", [ParallelConfig(dp_degree=4),
                                      ParallelConfig(dp_degree=2, tp_degree=2),
                                      ParallelConfig(pp_degree=4, num_microbatches=4)])
def test_prefill_answers_every_layout_without_a_per_device_call(parallel, monkeypatch):
    # Before, layouts other than plain DDP reached a private cost-model function with the wrong
    # number of arguments; the TypeError was swallowed and each outcome was predicted one by one.
    prof = make_profile(num_params=10**8, num_blocks=4, block_params=2 * 10**7,
                        block_act=10**6, block_out=10**6, batch_size=4)
    predictor = Predictor()
    predictor.prefill(prof, [H100], ["bf16", "fp32"], parallel.num_devices, parallel=parallel)
    expected = {p: costmodel.step_time(prof, H100, p, parallel) for p in ("bf16", "fp32")}

    def no_call(*args, **kwargs):
        raise AssertionError("prefill should have answered this prediction")

    monkeypatch.setattr(costmodel, "step_time", no_call)
    for precision, pred in expected.items():
        got = predictor.outcome(prof, H100, precision=precision, parallel=parallel).prediction
        assert got.step_time_s == pytest.approx(pred.step_time_s, rel=1e-9)
        assert got.confidence == pred.confidence and got.bound == pred.bound
