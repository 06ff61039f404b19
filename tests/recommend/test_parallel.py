"""plan_parallel on Llama-3 8B / 70B (meta-device profiles, batch 1 x 2048 per device, bf16,
AdamW) against figures worked out by hand, plus the table's contract and bad input."""

from __future__ import annotations

import pytest

import aiadvisor as aa
from aiadvisor.errors import InvalidArgumentError, UnknownHardwareError, UnsupportedPrecisionError
from aiadvisor.schema import HardwareSpec, ParallelConfig

from .conftest import make_profile

# Parameter counts by hand (Llama-3 configs: vocab 128256, 8 KV heads of 128, untied head):
#   8B: per layer q,o 4096^2 each + k,v 4096x1024 each + MLP 3 x 4096x14336 + 2 norms 4096
#       = 218,112,000; x32 = 6,979,584,000; embed + head 2 x 128256 x 4096 = 1,050,673,152;
#       final norm 4096 -> 8,030,261,248.
#   70B: per layer 2 x 8192^2 + 2 x 8192x1024 + 3 x 8192x28672 + 2 x 8192 = 855,654,400;
#       x80 = 68,452,352,000; embed + head 2 x 128256 x 8192 = 2,101,346,304; + 8192
#       -> 70,553,706,496.
P8, P70 = 8_030_261_248, 70_553_706_496
# H100 SXM: "80 GB" (datasheet) of HBM3, binary: 80 x 2**30 = 85.9e9 bytes; usable with the
# 10 % headroom: 77.3e9 bytes.
USABLE = 0.9 * 80 * 2**30
# Mixed-precision AdamW (ZeRO paper): 2 (bf16 weights) + 2 (grads) + 12 (fp32 master, m, v).
BYTES_PER_PARAM = 16


def _states(row) -> int:
    return row["weights_bytes"] + row["grads_bytes"] + row["optimizer_bytes"]


def test_param_counts_match_the_hand_count(llama8b, llama70b):
    assert llama8b.num_params == P8
    assert llama70b.num_params == P70


def test_llama3_8b_on_8_h100_needs_sharding(llama8b):
    df = aa.plan_parallel(llama8b, hardware="H100 SXM", num_devices=8, precision="bf16")
    ddp = df[df["strategy"] == "ddp"].iloc[0]
    # DDP replicates 16 bytes/param: 16 x 8.03e9 = 128.5e9 bytes > 77.3e9 usable, whatever the
    # activations are.
    assert _states(ddp) == BYTES_PER_PARAM * P8
    assert not ddp["fits"]
    fsdp = df[df["strategy"] == "fsdp"].iloc[0]
    # FSDP over 8: 16 x 8.03e9 / 8 = 16.06e9 bytes of states, plus ~60 h bytes per token per
    # layer of activations (32 x 60 x 4096 x 2048 = 16.1e9, see test_memory) and the logits
    # (~0.6e9) and gathered blocks (~1.3e9): ~34e9 < 77.3e9.
    assert _states(fsdp) == BYTES_PER_PARAM * P8 // 8
    assert fsdp["fits"] and 30e9 < fsdp["memory_per_device_bytes"] < 40e9
    best = df.iloc[0]
    assert best["fits"] and not best["offload"]
    assert best["zero_stage"] >= 1 or best["tp"] > 1  # sharded
    assert df.attrs["advice"] == ""


def test_llama3_70b_on_8_h100_fits_only_with_offload(llama70b):
    df = aa.plan_parallel(llama70b, hardware="H100 SXM", num_devices=8, precision="bf16")
    # Any split of 16 x 70.55e9 bytes of states over 8 devices leaves >= 141.1e9 bytes per
    # device > 77.3e9: no plan without offload can fit.
    on_device = df[~df["offload"]]
    assert not on_device["fits"].any()
    assert (on_device.apply(_states, axis=1) >= BYTES_PER_PARAM * P70 / 8 - 1).all()
    # Offloading states to the host leaves gathered blocks (3 x 855.65e6 x 2 = 5.1e9) and
    # checkpointed activations (80 x 2048 x 8192 x 4 = 5.4e9 + one layer ~1e9 + logits): fits.
    offloaded = df[df["offload"] & df["fits"]]
    assert len(offloaded)
    assert df.iloc[0]["offload"] and df.iloc[0]["fits"]
    # ... with 16 x 70.55e9 = 1.13e12 bytes of host memory per 8-GPU node.
    fsdp_off = df[df["strategy"] == "fsdp+offload+ckpt"].iloc[0]
    assert fsdp_off["cpu_memory_per_node_bytes"] == pytest.approx(BYTES_PER_PARAM * P70, rel=1e-6)
    # Without offload: 16 devices leave 70.55e9 bytes of states each and foreach AdamW's step
    # adds 4 x 70.55e9 / 16 = 17.6e9 (88.2e9 > 77.3e9 usable of an 80 GiB H100, 90 % of
    # 85.9e9): 32 devices. With fused=True the step adds nothing: sharded over 16 devices with
    # full checkpointing the activations are ~1.8e9, 74.4e9 in all: 16.
    advice = df.attrs["advice"]
    assert "without offload it needs 32 devices" in advice
    assert "fused=True" in advice and "it needs 16 devices" in advice
    assert "offload" in advice


def test_llama3_70b_on_32_h100_fits_sharded(llama70b):
    df = aa.plan_parallel(llama70b, hardware="H100 SXM", num_devices=32, precision="bf16")
    assert not df[df["strategy"] == "ddp"].iloc[0]["fits"]
    fits = df[df["fits"] & ~df["offload"]]
    assert len(fits)
    best = df.iloc[0]
    assert best["fits"] and not best["offload"]
    # FSDP over 32 with full checkpointing: 16 x 70.55e9 / 32 = 35.28e9 of states
    # + 5.1e9 gathered + ~7e9 activations, well under 77.3e9.
    row = df[df["strategy"] == "fsdp+ckpt"].iloc[0]
    assert _states(row) == pytest.approx(BYTES_PER_PARAM * P70 / 32, rel=1e-9)
    assert row["fits"] and row["memory_per_device_bytes"] < 60e9


def test_table_is_ranked_and_complete(llama8b):
    df = aa.plan_parallel(llama8b, hardware="H100 SXM", num_devices=8)
    for column in ("strategy", "dp", "tp", "pp", "zero_stage", "offload", "checkpointing",
                   "memory_per_device_bytes", "weights_bytes", "grads_bytes", "optimizer_bytes",
                   "activations_bytes", "fits", "step_time_s", "throughput", "notes"):
        assert column in df.columns
    fits = df["fits"].tolist()
    assert fits == sorted(fits, reverse=True)  # every fitting plan before any other
    speeds = df[df["fits"]]["throughput"].tolist()
    assert speeds == sorted(speeds, reverse=True)
    assert (df["dp"] * df["tp"] * df["pp"] == 8).all()
    assert (df["tp"] <= 8).all()
    labels = set(df["strategy"])
    # The plans' tensor parallel runs without sequence parallelism, as their code does.
    assert {"ddp", "zero1", "zero2", "fsdp", "tp8+no-sp", "fsdp4+tp2+no-sp"} <= labels


def test_step_time_is_the_cost_model_with_that_plan(llama8b):
    df = aa.plan_parallel(llama8b, hardware="H100 SXM", num_devices=8)
    row = df[df["strategy"] == "fsdp"].iloc[0]
    # 8 devices x 1 sample each: the cost model sees the step's 8 samples.
    pred = aa.predict(llama8b.at(batch_size=8), hardware="H100 SXM", precision="bf16",
                      num_devices=8, parallel=ParallelConfig(dp_degree=8, zero_stage=3))
    assert row["step_time_s"] == pytest.approx(pred.step_time_s)
    assert row["throughput"] == pytest.approx(8 / pred.step_time_s)


def test_checkpointing_makes_a_small_device_fit():
    # 1e8 params under autocast (4 + 4 + 8 + 2 bytes = 1.8e9 bytes of states and weight
    # copies) and 8 blocks x 1e9 bytes of activations (+ 1e8 outside the blocks) for a batch of
    # 8 on a 10 GB device (9e9 usable): 1.8e9 + 8e9 + 1e8 = 9.9e9 does not fit; full
    # checkpointing keeps the 8 block inputs (8 x 1e7) plus one block being recomputed (1e9):
    # 1.8e9 + 1.08e9 + 1e8 = 2.98e9 fits.
    prof = make_profile(num_params=10**8, num_blocks=8, block_params=10**7, block_act=10**9,
                        block_out=10**7, other_act=10**8, batch_size=8)
    small = HardwareSpec(name="Small GPU", vendor="NVIDIA", kind="gpu", memory_gb=10,
                         memory_bw_gbs=900, fp32_tflops=30, tf32_tflops=60, bf16_tflops=120,
                         fp16_tflops=120)
    df = aa.plan_parallel(prof, hardware=small, num_devices=1)
    plain = df[df["strategy"] == "ddp"].iloc[0]
    assert plain["memory_per_device_bytes"] == pytest.approx(1.8e9 + 8 * 1e9 + 1e8)
    assert not plain["fits"]
    best = df.iloc[0]
    assert best["fits"] and best["checkpointing"] == "full"
    assert best["activations_bytes"] == pytest.approx(8 * 1e7 + 1e9 + 1e8)


def test_nothing_fits_anywhere_is_explained_not_raised():
    # One sample's activations outside the blocks (40e9 bytes; 5e9 even split 8 ways by tensor
    # parallel within a node) exceed a 4 GB device (3.6e9 usable): no number of devices helps.
    prof = make_profile(num_params=10**6, num_blocks=2, block_params=10**5, block_act=10**6,
                        block_out=10**5, other_act=40 * 10**9, batch_size=1)
    tiny = HardwareSpec(name="Tiny", vendor="NVIDIA", kind="gpu", memory_gb=4,
                        memory_bw_gbs=100, fp32_tflops=5, bf16_tflops=10, fp16_tflops=10,
                        tf32_tflops=5)
    df = aa.plan_parallel(prof, hardware=tiny, num_devices=2)
    assert not df[~df["offload"]]["fits"].any()
    assert "no plan on up to 65536 devices fits without offload" in df.attrs["advice"]


def test_bad_input_raises_with_the_choices(llama8b):
    with pytest.raises(InvalidArgumentError, match="num_devices=0"):
        aa.plan_parallel(llama8b, hardware="H100 SXM", num_devices=0)
    with pytest.raises(InvalidArgumentError, match="precision='bf32'.*'bf16'"):
        aa.plan_parallel(llama8b, hardware="H100 SXM", num_devices=8, precision="bf32")
    with pytest.raises(UnsupportedPrecisionError, match="weight-only"):
        aa.plan_parallel(llama8b, hardware="H100 SXM", num_devices=8, precision="nf4")
    with pytest.raises(UnknownHardwareError, match="Did you mean"):
        aa.plan_parallel(llama8b, hardware="H1000 SXM", num_devices=8)
    with pytest.raises(InvalidArgumentError, match="expected a ModelProfile"):
        aa.plan_parallel("llama", hardware="H100 SXM", num_devices=8)


def test_inference_plans_have_no_optimizer_state():
    infer = make_profile(num_params=P70, num_blocks=80, block_params=855_654_400,
                         block_out=2048 * 8192 * 2, other_act=10**9, mode="infer")
    df = aa.plan_parallel(infer, hardware="H100 SXM", num_devices=8, precision="bf16")
    assert (df["grads_bytes"] == 0).all() and (df["optimizer_bytes"] == 0).all()
    # bf16 weights 2 x 70.55e9 = 141.1e9 bytes: tensor parallel over 8 leaves 17.6e9 per device
    tp8 = df[df["strategy"] == "tp8+no-sp"].iloc[0]
    assert tp8["weights_bytes"] == pytest.approx(2 * P70 / 8)


def test_virtual_stages_interleave_the_pipeline_plans_that_allow_it(llama70b):
    plain = aa.plan_parallel(llama70b, hardware="H100 SXM", num_devices=32)
    inter = aa.plan_parallel(llama70b, hardware="H100 SXM", num_devices=32, virtual_stages=2)
    # tp 8 x pp 4 on 32 devices: a replica of 32 samples in 16 micro-batches (<= 4 pp, a
    # multiple of pp) and 80 blocks = 4 x 2 chunks of 10: interleaving applies.
    # Without sequence parallelism the plan needs full checkpointing to fit.
    row = inter[inter["strategy"] == "tp8+pp4v2+ckpt+no-sp"].iloc[0]
    assert (row["pp"], row["num_microbatches"], row["virtual_stages"]) == (4, 16, 2)
    assert (plain["virtual_stages"] == 1).all()
    pred = aa.predict(llama70b.at(batch_size=32), hardware="H100 SXM", precision="bf16",
                      num_devices=32, parallel=ParallelConfig(tp_degree=8, pp_degree=4,
                                                              num_microbatches=16,
                                                              virtual_stages=2,
                                                              checkpointing="full",
                                                              sequence_parallel=False))
    assert row["step_time_s"] == pytest.approx(pred.step_time_s)
    assert row["step_time_s"] < plain[plain["strategy"] == "tp8+pp4+ckpt+no-sp"].iloc[0][
        "step_time_s"]
    # 80 blocks do not split into 4 x 3 or 2 x 3 chunks: every plan stays plain 1F1B.
    three = aa.plan_parallel(llama70b, hardware="H100 SXM", num_devices=32, virtual_stages=3)
    assert (three["virtual_stages"] == 1).all()
    with pytest.raises(InvalidArgumentError, match="virtual_stages=0"):
        aa.plan_parallel(llama70b, hardware="H100 SXM", num_devices=32, virtual_stages=0)
