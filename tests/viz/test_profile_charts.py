"""Profile charts over a hand-built ModelProfile; expected numbers worked out in comments."""

from __future__ import annotations

import pytest

pytest.importorskip("altair")

from aiadvisor.schema import (
    HardwareSpec,
    MemoryBreakdown,
    ModelProfile,
    ModuleRecord,
    OpRecord,
)
from aiadvisor.viz._style import byte_unit, flop_unit
from aiadvisor.viz.modules import module_breakdown
from aiadvisor.viz.profile import (
    memory_chart,
    module_chart,
    roofline_chart,
    roofline_points,
)

GiB = 1024**3


def _values(spec, part=None):
    """Data rows of a chart (or one layer / concat part of it), inline or in ``datasets``."""
    data = (part or spec)["data"]
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


def _module(name, depth, *, flops_fwd=0.0, params=0, act=0, repeat=1, kind="Linear"):
    return ModuleRecord(name=name, type=kind, depth=depth, num_params=params // 4,
                        param_bytes=params, flops_forward=flops_fwd, flops_backward=2 * flops_fwd,
                        bytes_forward=1000.0, bytes_backward=2000.0, activation_bytes=act,
                        repeat=repeat)


def _op(op_class, flops, bytes_read, bytes_written=0.0, phase="forward"):
    return OpRecord(op=f"aten.{op_class}", op_class=op_class, phase=phase, module="",
                    dtype="float32", count=1, flops=flops, bytes_read=bytes_read,
                    bytes_written=bytes_written)


def _profile():
    # A model "Net" = embedding "emb", a stack "blocks" of 6 identical blocks (traced once,
    # rows "blocks.*..." hold one block's numbers, repeat=6) and a "head".
    modules = (
        _module("", 0, kind="Net"),
        _module("emb", 1, params=4_000_000, act=1_000, kind="Embedding"),
        _module("blocks", 1, kind="ModuleList"),
        _module("blocks.*", 2, act=500, repeat=6, kind="Block"),
        _module("blocks.*.attn", 3, flops_fwd=1e9, params=1_000_000, act=2_000, repeat=6),
        _module("blocks.*.mlp", 3, flops_fwd=2e9, params=2_000_000, act=3_000, repeat=6),
        _module("head", 1, flops_fwd=1e9, params=4_000_000, act=4_000),
    )
    ops = (
        _op("gemm", 2e9, 6e6, 4e6),        # 2e9 FLOP / 1e7 B = 200 FLOP/B
        _op("memory", 1e6, 8e6, 2e6),      # 1e6 / 1e7 = 0.1 FLOP/B
        _op("other", 0.0, 4e6),            # no FLOPs: not placed on the roofline
    )
    memory = MemoryBreakdown(weights_bytes=3 * GiB, grads_bytes=3 * GiB, optimizer_bytes=6 * GiB,
                             activations_bytes=2 * GiB, inputs_bytes=0, peak_bytes=14 * GiB)
    return ModelProfile(model_name="net", model_type="Net", mode="train", precision="fp32",
                        optimizer="adamw", batch_size=8, seq_len=128, num_params=10**9,
                        num_trainable_params=10**9, flops_forward=2.001e9, flops_backward=4e9,
                        flops_optimizer=0.0, memory=memory, ops=ops, modules=modules)


# Dense peak 100 TFLOP/s (bf16), 1000 GB/s: ridge = 100e12 / 1000e9 = 100 FLOP/byte.
DEVICE = HardwareSpec(name="Test GPU", vendor="Test", kind="gpu", memory_gb=16,
                      memory_bw_gbs=1000, fp32_tflops=25, bf16_tflops=100)


def test_module_breakdown_opens_the_block_stack_and_sums_repeats():
    frame = module_breakdown(_profile()).set_index("module")
    # The stack holds 6 x (1e9 + 2e9) x 3 (fwd + 2x bwd) = 5.4e10 of 5.7e10 FLOPs (> 50 %), so it
    # is opened down to attn / mlp; the block's own saved activations keep a row of their own.
    assert list(frame.index) == ["blocks.*.mlp", "blocks.*.attn", "head", "emb",
                                 "blocks.* (own ops)"]
    assert frame.loc["blocks.*.mlp", "flops_total"] == 6 * 2e9 * 3
    assert frame.loc["blocks.*.mlp", "param_bytes"] == 6 * 2_000_000
    assert frame.loc["blocks.*.attn", "activation_bytes"] == 6 * 2_000
    assert frame.loc["blocks.* (own ops)", "activation_bytes"] == 6 * 500
    assert frame.loc["head", "flops_total"] == 3e9
    # Nothing is lost: weights 4e6 + 6 x 3e6 + 4e6 = 2.6e7 bytes.
    assert frame["param_bytes"].sum() == 26_000_000


def test_module_breakdown_stops_at_max_rows():
    frame = module_breakdown(_profile(), max_rows=3)
    # Opening "blocks" (1 row -> "blocks.*") fits; opening "blocks.*" would make 5 rows > 3.
    assert list(frame["module"]) == ["blocks.*", "head", "emb"]
    assert frame.loc[0, "flops_total"] == 5.4e10


def test_roofline_points_place_op_classes_by_intensity():
    points = roofline_points(_profile(), DEVICE, precision="bf16").set_index("what")
    assert list(points.index) == ["gemm", "memory", "whole step"]
    assert points.loc["gemm", "intensity"] == pytest.approx(200.0)
    assert points.loc["gemm", "attainable_tflops"] == pytest.approx(100.0)  # above the ridge
    # 0.1 FLOP/B x 1000 GB/s = 100 GFLOP/s = 0.1 TFLOP/s
    assert points.loc["memory", "attainable_tflops"] == pytest.approx(0.1)
    # whole step: 2.001e9 FLOP / 2.4e7 B = 83.4 FLOP/B -> 83.4 TFLOP/s (below the ridge)
    assert points.loc["whole step", "attainable_tflops"] == pytest.approx(2.001e9 / 2.4e7)


def test_roofline_chart_is_log_log_with_the_roof_through_the_ridge():
    spec = roofline_chart(_profile(), DEVICE, precision="bf16").to_dict()
    roof, dots = spec["layer"]
    values = _values(spec, roof)
    assert [round(v["attainable_tflops"], 6) for v in values] == [
        round(values[0]["intensity"] * 1.0, 6), 100.0, 100.0]
    assert values[1]["intensity"] == pytest.approx(100.0)  # the ridge point
    assert dots["encoding"]["x"]["scale"]["type"] == "log"
    assert dots["encoding"]["y"]["scale"]["type"] == "log"
    assert any("estimated" in line for line in spec["title"]["subtitle"])


def test_roofline_needs_a_peak_and_bandwidth():
    bare = HardwareSpec(name="Mystery", vendor="?", kind="gpu")
    with pytest.raises(Exception, match="no bf16 peak or memory bandwidth"):
        roofline_chart(_profile(), bare, precision="bf16")


def test_module_chart_scales_flops_to_one_unit_and_keeps_order():
    spec = module_chart(_profile()).to_dict()
    left, right = spec["hconcat"]
    assert left["encoding"]["x"]["title"] == "GFLOP per step"  # largest 3.6e10 -> GFLOP
    rows = _values(spec, left)
    mlp_fwd = next(r for r in rows
                   if r["label"] == "blocks.*.mlp (Linear) ×6" and r["part"] == "forward")
    assert mlp_fwd["value"] == pytest.approx(12.0)  # 6 x 2e9 FLOP = 12 GFLOP
    assert left["encoding"]["y"]["sort"][0] == "blocks.*.mlp (Linear) ×6"
    assert right["encoding"]["x"]["title"] == "MiB"  # largest 12e6 B = 11.4 MiB


def test_memory_chart_stacks_the_breakdown_against_the_device():
    spec = memory_chart(_profile(), device_memory_bytes=16 * 10**9, device_name="Test GPU")
    spec = spec.to_dict()
    bar, rule = spec["layer"]
    parts = {r["part"]: r["value"] for r in _values(spec, bar)}
    assert parts == {"weights": 3.0, "gradients": 3.0, "optimizer state": 6.0,
                     "activations": 2.0}  # GiB; zero parts (inputs, temporaries) left out
    limit = _values(spec, rule)[0]["value"]
    assert limit == pytest.approx(16e9 / GiB)  # 14.90 GiB: the 14 GiB peak fits


def test_units_pick_the_readable_prefix():
    assert flop_unit(999.0) == (1.0, "FLOP")
    assert flop_unit(1.2e15) == (1e15, "PFLOP")
    assert byte_unit(1023) == (1, "B")
    assert byte_unit(3 * 1024**2) == (1024**2, "MiB")


def test_module_breakdown_drops_rows_below_a_thousandth_of_every_total():
    import dataclasses

    prof = _profile()
    # The model's own ops keep a 4-byte loss scalar: 4 of 38,000 saved bytes (0.01 %), no FLOPs,
    # no weights -- an empty bar. A 400-byte one is 400 / 38,400 = 1.04 % and stays.
    tiny = dataclasses.replace(prof, modules=(
        dataclasses.replace(prof.modules[0], activation_bytes=4), *prof.modules[1:]))
    assert "(model's own ops)" not in set(module_breakdown(tiny)["module"])
    kept = dataclasses.replace(prof, modules=(
        dataclasses.replace(prof.modules[0], activation_bytes=400), *prof.modules[1:]))
    assert "(model's own ops)" in set(module_breakdown(kept)["module"])
