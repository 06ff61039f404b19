"""Expert parallelism in plan_parallel: memory with experts split, the all-to-all's price, load
imbalance and bad input, on hand-built profiles and a tiny Mixtral (meta device)."""

from __future__ import annotations

import dataclasses

import pytest

import aiadvisor as aa
from aiadvisor.errors import InvalidArgumentError
from aiadvisor.estimate.collectives import ALL_TO_ALL_ALPHA_S, all_to_all_time_s
from aiadvisor.recommend.expert_parallel import expert_parallel_memory, hot_device_load
from aiadvisor.recommend.predictor import Predictor
from aiadvisor.schema import MoERouting, ParallelConfig

from .conftest import H100, make_profile

# A hand-built MoE profile: 10e9 parameters of which 8e9 are routed experts (8 layers of 8
# experts, top-2), bf16 weights.
P, X = 10_000_000_000, 8_000_000_000


def _moe_profile(**kw):
    prof = make_profile(num_params=P, **kw)
    moe = MoERouting(num_experts=8, top_k=2, num_moe_layers=8, expert_params=X,
                     tokens_per_expert=1.0, hidden_size=4096)
    return dataclasses.replace(prof, moe=moe, num_active_params=P - X * 6 // 8)


def test_all_to_all_inside_a_node():
    # 16 MB per rank over 8 ranks of one node at 450 GB/s: 7/8 of it leaves the device,
    # 14e6 / 450e9 = 31.1 us, plus the 25 us latency.
    t = all_to_all_time_s(16e6, 8, 450, 50, 8)
    assert t == pytest.approx(25e-6 + 14e6 / 450e9)


def test_all_to_all_across_nodes_is_bound_by_the_nic():
    # 16 ranks, 8 per node: 7/16 of 16 MB over NVLink (15.6 us) and 8/16 over the NIC at
    # 50 GB/s per device (160 us): the NIC sets the time.
    t = all_to_all_time_s(16e6, 16, 450, 50, 8)
    assert t == pytest.approx(25e-6 + 8e6 / 50e9)
    assert all_to_all_time_s(16e6, 1, 450, 50, 8) == 0.0


def test_ep_splits_expert_weights_under_ddp():
    prof = _moe_profile()
    # DDP under autocast keeps fp32 weights: dense 2e9 x 4 = 8e9 bytes, experts 8e9 x 4 / 8 =
    # 4e9 with ep=8 (one expert per device) -> 12e9; gradients the same, Adam 8 bytes/param.
    mem = expert_parallel_memory(prof, ParallelConfig(dp_degree=8), 8, precision="bf16",
                                 micro_batch=1)
    assert mem.weights_bytes == pytest.approx(12e9)
    assert mem.grads_bytes == pytest.approx(12e9)
    assert mem.optimizer_bytes == pytest.approx(8 * (2e9 + 1e9))


def test_ep_with_zero1_shards_expert_optimizer_over_the_expert_data_parallel_group():
    prof = _moe_profile()
    # ZeRO-1 over dp=8, ep=4: weights 2 bytes x (2e9 dense + 8e9 / 4 experts) = 8e9; the
    # optimizer (12 bytes) shards the dense part over 8 (3e9) and the experts' 2e9 over the
    # dp/ep = 2 devices holding the same experts (12e9): 15e9, as many as without EP.
    mem = expert_parallel_memory(prof, ParallelConfig(dp_degree=8, zero_stage=1), 4,
                                 precision="bf16", micro_batch=1)
    assert mem.weights_bytes == pytest.approx(8e9)
    assert mem.optimizer_bytes == pytest.approx(15e9)


def test_ep_with_zero3_keeps_the_sharded_weights():
    prof = _moe_profile()
    base = expert_parallel_memory(prof, ParallelConfig(dp_degree=8, zero_stage=3), 1,
                                  precision="bf16", micro_batch=1)
    ep = expert_parallel_memory(prof, ParallelConfig(dp_degree=8, zero_stage=3), 8,
                                precision="bf16", micro_batch=1)
    # 2 bytes x 10e9 / 8 either way: ep x (dp / ep) = dp shards.
    assert ep.weights_bytes == pytest.approx(2.5e9) == base.weights_bytes


def test_hot_device_load_by_hand():
    # 8 experts, imbalance 2 (the hot expert takes 2 m), the other 7 share 6 m. ep=2: the hot
    # rank holds it and 3 others at 6/7 m: (2 + 18/7) / 4 = 1.142857.
    assert hot_device_load(8, 2, 2.0) == pytest.approx((2 + 18 / 7) / 4)
    assert hot_device_load(8, 8, 3.0) == 3.0
    assert hot_device_load(8, 1, 3.0) == 1.0


def test_ep_that_does_not_divide_the_experts_is_refused():
    prof = _moe_profile()
    with pytest.raises(InvalidArgumentError, match=r"ep=3 .*divide 8.*1, 2, 4, 8"):
        aa.plan_parallel(prof, hardware=H100, num_devices=24, ep_degrees=[3])
    with pytest.raises(InvalidArgumentError, match=r"ep=16 .*divide 8"):
        aa.plan_parallel(prof, hardware=H100, num_devices=16, ep_degrees=16)


def test_imbalance_outside_its_range_is_refused():
    prof = _moe_profile()
    for bad in (0.5, 9, float("nan")):
        with pytest.raises(InvalidArgumentError, match=r"moe_imbalance=.*\[1, 8\]"):
            aa.plan_parallel(prof, hardware=H100, num_devices=8, moe_imbalance=bad)


def test_dense_profile_has_no_ep_rows_and_refuses_ep():
    prof = make_profile(num_params=1_000_000, batch_size=1)
    df = aa.plan_parallel(prof, hardware=H100, num_devices=1)
    assert (df["ep"] == 1).all()
    with pytest.raises(InvalidArgumentError, match="no mixture-of-experts"):
        aa.plan_parallel(prof, hardware=H100, num_devices=8, ep_degrees=[2])
    with pytest.raises(InvalidArgumentError, match="no mixture-of-experts"):
        aa.plan_parallel(prof, hardware=H100, num_devices=8, moe_imbalance=1.5)


# --- a tiny Mixtral on the meta device --------------------------------------------------------
transformers = pytest.importorskip("transformers")
BATCH, SEQ, HIDDEN, TOP_K, LAYERS = 2, 32, 64, 2, 2


@pytest.fixture(scope="module")
def mixtral_infer():
    import torch

    cfg = transformers.MixtralConfig(
        vocab_size=256, hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=LAYERS,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=8,
        num_experts_per_tok=TOP_K)
    with torch.device("meta"):
        model = transformers.MixtralForCausalLM(cfg)
    return aa.profile(model, {"input_ids": torch.zeros(BATCH, SEQ, dtype=torch.long)},
                      mode="infer", precision="bf16")


def _row(df, strategy):
    return df[df["strategy"] == strategy].iloc[0]


def test_ep_rows_cover_the_divisors_of_the_experts(mixtral_infer):
    assert mixtral_infer.moe.hidden_size == HIDDEN
    df = aa.plan_parallel(mixtral_infer, hardware="H100 SXM", num_devices=16)
    # 8 experts on 16 devices: ep 2, 4, 8 (16 does not divide 8).
    assert set(df["ep"]) == {1, 2, 4, 8}
    assert {"ddp+ep2", "ddp+ep4", "ddp+ep8"} <= set(df["strategy"])


def test_ep_inference_step_adds_the_all_to_all_by_hand(mixtral_infer):
    df = aa.plan_parallel(mixtral_infer, hardware="H100 SXM", num_devices=16)
    # Each device dispatches its 2 x 32 tokens x 64 hidden x 2 bytes (bf16) x top-2 = 16384
    # bytes; ep=8 stays in one node: 7/8 of it over NVLink at 900 / 2 GB/s. Inference: one
    # dispatch and one combine per MoE layer, 2 layers -> 4 calls.
    per_call = ALL_TO_ALL_ALPHA_S + 16384 * 7 / 8 / 450e9
    ep8, ddp = _row(df, "ddp+ep8"), _row(df, "ddp")
    assert ep8["step_time_s"] - ddp["step_time_s"] == pytest.approx(4 * per_call, rel=1e-6)
    assert ep8["communication_s"] - ddp["communication_s"] == pytest.approx(4 * per_call,
                                                                            rel=1e-6)


def test_load_imbalance_adds_the_hot_ranks_expert_compute(mixtral_infer):
    prof = mixtral_infer
    balanced = _row(aa.plan_parallel(prof, hardware="H100 SXM", num_devices=16), "ddp+ep8")
    hot = _row(aa.plan_parallel(prof, hardware="H100 SXM", num_devices=16, moe_imbalance=2.0),
               "ddp+ep8")
    # Parameters by hand: embed and head 2 x 256 x 64 = 32768; per layer attention
    # 64x64 x 2 + 64x32 x 2 = 12288, router 512, experts 8 x 3 x 64 x 128 = 196608, norms 128;
    # 2 layers + final norm 64 -> 451904; active: less 6/8 of the 393216 expert parameters
    # -> 156992, of which the 2 chosen experts per layer are 98304.
    assert prof.num_params == 451_904 and prof.num_active_params == 156_992
    share = 98_304 / 156_992
    base = Predictor().plan(prof.at(batch_size=16 * BATCH), H100, precision="bf16",
                            parallel=ParallelConfig(dp_degree=16)).prediction
    # One expert per rank (ep = 8 = E): the hot rank does 2x the mean expert work.
    assert hot["step_time_s"] - balanced["step_time_s"] == pytest.approx(
        base.compute_s * share * (2.0 - 1.0), rel=1e-3)


def test_advice_builds_its_prediction_from_the_best_plan_without_ep(mixtral_infer):
    from aiadvisor.recommend.assemble import _chosen_plan

    df = aa.plan_parallel(mixtral_infer, hardware="H100 SXM", num_devices=16)
    ep_first = df.sort_values("ep", ascending=False, kind="stable").reset_index(drop=True)
    assert ep_first.iloc[0]["ep"] == 8 and ep_first.iloc[0]["fits"]
    notes: list[str] = []
    config, fits = _chosen_plan(ep_first, notes)
    # The first plan without EP in that order is DDP over the 16 devices.
    assert (config.dp_degree, config.tp_degree, fits) == (16, 1, True)
    assert any(n.startswith(f"{ep_first.iloc[0]['strategy']} ranks first") for n in notes)


# --- ParallelConfig.ep_degree -----------------------------------------------------------------
def test_ep_degree_must_divide_the_data_parallel_degree():
    assert ParallelConfig(dp_degree=8, ep_degree=4).num_devices == 8  # EP adds no devices
    # 6 data-parallel ranks split into expert groups of 1, 2, 3 or 6, never 4.
    with pytest.raises(InvalidArgumentError, match=r"ep_degree=4 .* dp_degree=6.* 1, 2, 3, 6"):
        ParallelConfig(dp_degree=6, ep_degree=4)
    with pytest.raises(InvalidArgumentError, match="ep_degree=0"):
        ParallelConfig(ep_degree=0)


def test_ep_config_labels_and_rows_round_trip(mixtral_infer):
    from aiadvisor.recommend.assemble import _config_from_row

    assert ParallelConfig(dp_degree=8, zero_stage=3, ep_degree=8,
                          checkpointing="full").label == "fsdp+ep8+ckpt"
    df = aa.plan_parallel(mixtral_infer, hardware="H100 SXM", num_devices=16)
    for _, row in df.iterrows():
        config = _config_from_row(row)
        assert config.ep_degree == row["ep"] and config.label == row["strategy"]


def test_predictor_plans_an_ep_config_as_the_tables_ep_row(mixtral_infer):
    df = aa.plan_parallel(mixtral_infer, hardware="H100 SXM", num_devices=16)
    spec = aa.hardware.get("H100 SXM")
    ep8 = Predictor().plan(mixtral_infer, spec, precision="bf16",
                           parallel=ParallelConfig(dp_degree=16, ep_degree=8)).prediction
    ddp = Predictor().plan(mixtral_infer, spec, precision="bf16",
                           parallel=ParallelConfig(dp_degree=16)).prediction
    assert ep8.step_time_s == pytest.approx(_row(df, "ddp+ep8")["step_time_s"], rel=1e-12)
    # The four all-to-alls worked out in test_ep_inference_step_adds_the_all_to_all_by_hand.
    per_call = ALL_TO_ALL_ALPHA_S + 16384 * 7 / 8 / 450e9
    assert ep8.step_time_s - ddp.step_time_s == pytest.approx(4 * per_call, rel=1e-6)


def test_ep_config_on_a_dense_model_or_a_whole_step_has_no_prediction():
    prof = make_profile(num_params=1_000_000, batch_size=1)
    out = Predictor().plan(prof, H100, precision="bf16",
                           parallel=ParallelConfig(dp_degree=8, ep_degree=8))
    assert out.prediction is None and "mixture-of-experts" in out.reason
    out = Predictor().outcome(prof, H100, precision="bf16",
                              parallel=ParallelConfig(dp_degree=8, ep_degree=8))
    assert out.prediction is None and "Predictor.plan" in out.reason
