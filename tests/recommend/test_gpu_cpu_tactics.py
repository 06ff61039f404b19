"""Tactics added for GPU plans and the attached CPU: FSDP resharding (priced by the cost model's
overlap model), CPU thread settings, inference precision choices on the L4; each fires on a
hand-worked number and stays silent where it is already applied or gains under 3 %."""

from __future__ import annotations

import ast
import dataclasses

import pytest

import aiadvisor as aa
from aiadvisor.codegen import CodeNames
from aiadvisor.recommend import tactics
from aiadvisor.recommend.memory import PartsSource
from aiadvisor.recommend.predictor import Predictor
from aiadvisor.recommend.tactics import MIN_SPEEDUP, Context
from aiadvisor.schema import ParallelConfig
from aiadvisor.errors import InvalidArgumentError


def _context(prof, config, *, spec_name="H100 SXM", precision="bf16", spec=None) -> Context:
    spec = spec or aa.hardware.get(spec_name)
    parts = PartsSource(prof)
    return Context(prof=prof, spec=spec, precision=precision, num_devices=config.num_devices,
                   config=config, plan_fits=True, parts=parts(precision),
                   names=CodeNames(model="net", optimizer="opt"), predictor=Predictor(),
                   parts_for=parts)


# -- FSDP: reshard_after_forward ----------------------------------------------------------------

def test_fsdp_keeps_gathered_weights_where_the_gathers_are_exposed(llama8b):
    ctx = _context(llama8b, ParallelConfig(dp_degree=8, zero_stage=3))
    rec = tactics.fsdp_overlap(ctx)
    assert rec is not None
    kept = ParallelConfig(dp_degree=8, zero_stage=3, reshard_after_forward=False)
    base, new = ctx.base, ctx.predict(parallel=kept)
    # The gain is the cost model's ratio; only the communication changes (one all-gather per
    # block instead of two), the compute is the same.
    assert rec.predicted_speedup == pytest.approx(base.step_time_s / new.step_time_s, rel=1e-3)
    assert rec.predicted_speedup >= MIN_SPEEDUP
    assert new.compute_s == pytest.approx(base.compute_s)
    assert new.communication_s < base.communication_s
    share = rec.extra["trigger"]["exposed_communication_share"]
    assert share == pytest.approx(base.communication_s / base.step_time_s)
    # Memory by hand: resharding holds this block and the prefetched one (2 x 218,112,000
    # bf16 parameters: q, o 4096^2, k, v 4096 x 1024, MLP 3 x 4096 x 14336, two norms);
    # keeping them holds all 8,030,261,248 parameters in bf16 at the start of backward.
    assert llama8b.num_params == 8_030_261_248
    extra = 2 * (8_030_261_248 - 2 * 218_112_000)  # 15.19e9 bytes
    assert -rec.memory_saving_bytes == pytest.approx(extra, rel=1e-6)
    assert rec.extra["trigger"]["bytes_per_device_unsharded"] <= ctx.usable_bytes
    # The code is the FSDP script with resharding off, and it uses the user's names.
    tree = ast.parse(rec.code)
    assert "reshard_after_forward = False" in rec.code and "net" in {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert kept.label == "fsdp+noreshard"


def test_fsdp_resharding_is_not_offered_when_applied_useless_or_too_big(llama8b, llama70b):
    # already applied
    kept = ParallelConfig(dp_degree=8, zero_stage=3, reshard_after_forward=False)
    assert tactics.fsdp_overlap(_context(llama8b, kept)) is None
    # under 3 %: with tensor parallel over 2 the exposed communication is the TP all-reduces;
    # the data-parallel gathers already hide under compute
    ctx = _context(llama8b, ParallelConfig(dp_degree=4, tp_degree=2, zero_stage=3))
    no_reshard = ctx.predict(parallel=dataclasses.replace(ctx.config,
                                                          reshard_after_forward=False))
    assert ctx.base.step_time_s / no_reshard.step_time_s < MIN_SPEEDUP
    assert tactics.fsdp_overlap(ctx) is None
    # Llama-3-70B: 70.6e9 bf16 parameters (141 GB) cannot stay gathered on an 80 GB H100
    assert tactics.fsdp_overlap(_context(llama70b, ParallelConfig(dp_degree=8,
                                                                  zero_stage=3))) is None


def test_reshard_after_forward_is_validated():
    with pytest.raises(InvalidArgumentError, match="zero_stage=3"):
        ParallelConfig(dp_degree=8, zero_stage=2, reshard_after_forward=False)
    with pytest.raises(InvalidArgumentError, match="True or False"):
        ParallelConfig(dp_degree=8, zero_stage=3, reshard_after_forward="no")
