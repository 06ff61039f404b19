"""Collectives across nodes: hierarchical formulas by hand, the network in predictions, the
overlap of DDP buckets and FSDP prefetch, and bad network input."""

from __future__ import annotations

import pytest

from aiadvisor.costmodel import predict, predict_table
from aiadvisor.costmodel.model import load_model
from aiadvisor.errors import InvalidFabricError, NodeLayoutError, UnknownFabricError
from aiadvisor.estimate import all_to_all_time_s, exposed_time_s, hierarchical_time_s
from aiadvisor.schema import ParallelConfig

from .conftest import make_profile, op


def test_hierarchical_all_reduce_levels_by_hand():
    # 4 GB over 4 nodes of 8: intra 2 * 7/8 * 4e9 / 200e9 = 35 ms; inter: each device holds
    # 4e9 / 8 and all-reduces it with 3 peers at 25 GB/s: 2 * 3/4 * 0.5e9 / 25e9 = 30 ms.
    kw = {"num_devices": 32, "per_domain": 8, "intra_bus_bw_gbs": 200, "inter_bw_gbs": 25,
          "alpha_s": 0.0}
    assert hierarchical_time_s("all_reduce", 4e9, **kw) == pytest.approx(0.035)
    # At 10 GB/s across, inter = 75 ms sets the time; latency: 2 * log2(4) = 4 hops of 5 us.
    slow = hierarchical_time_s("all_reduce", 4e9, **{**kw, "inter_bw_gbs": 10},
                               inter_latency_s=5e-6)
    assert slow == pytest.approx(0.075 + 20e-6)
    # Reduce-scatter: half of each level (bus factor (n - 1) / n): max(17.5, 15) ms.
    assert hierarchical_time_s("reduce_scatter", 4e9, **kw) == pytest.approx(0.0175)
    # Inside one domain it is the flat ring formula.
    one = hierarchical_time_s("all_reduce", 4e9, **{**kw, "num_devices": 8})
    assert one == pytest.approx(2 * 7 / 8 * 4e9 / 200e9)


def test_send_recv_crosses_nodes_only_between_domains():
    kw = {"num_devices": 2, "intra_bus_bw_gbs": 200, "inter_bw_gbs": 25, "alpha_s": 0.0}
    assert hierarchical_time_s("send_recv", 1e9, per_domain=2, **kw) == pytest.approx(5e-3)
    assert hierarchical_time_s("send_recv", 1e9, per_domain=1, **kw) == pytest.approx(40e-3)


def test_all_to_all_by_hand():
    # 64 devices, 8 per node, 1 GB each: 7/64 GB inside at 200 GB/s, 56/64 GB out at 25 GB/s.
    t = all_to_all_time_s(1e9, 64, 200, 25, 8, alpha_s=0.0)
    assert t == pytest.approx(56 / 64 * 1e9 / 25e9)


def test_overlap_floor():
    # 100 ms of all-reduce under 500 ms of backward: only the given floor (last bucket) is paid.
    assert exposed_time_s(0.1, 0.5, min_exposed_s=0.004) == pytest.approx(0.004)
    assert exposed_time_s(0.1, 0.05, min_exposed_s=0.004) == pytest.approx(0.06)


def _grad_profile():
    # 1e9 fp32 parameters (4 GB of gradients); backward: 8 GB moved = 1 GB per rank on 8 ranks.
    return make_profile([op("aten.add", "memory", "backward", bytes_read=6e9, bytes_written=2e9)],
                        mode="train", num_params=int(1e9), weights_bytes=int(4e9))


def test_ddp_across_nodes_by_hand(spec, exact_model):
    # 16 devices = 2 nodes of 8 (no node row for the test GPU: 8 per node, one 100 GbE port
    # assumed). Given fabric: 400 Gb/s per device at 0.9 -> 45 GB/s per device across nodes.
    c = load_model().collectives
    intra = 450 * c.intra_node_efficiency
    inter_s = 2 * 1 / 2 * (4e9 / 8) / 45e9                 # 11.1 ms
    intra_s = 2 * 7 / 8 * 4e9 / (intra * 1e9)
    ar = c.alpha_s["all_reduce"] + max(intra_s, inter_s)   # latency_us=0: no hop cost
    backward_s = 8e9 / 16 / 3e12 + 4e-6                      # 1/16 of the bytes per rank
    pred = predict(_grad_profile(), hardware=spec, precision="fp32", num_devices=16,
                   model=exact_model, fabric={"gbps": 400, "latency_us": 0, "efficiency": 0.9})
    assert pred.communication_s == pytest.approx(ar - 0.8 * backward_s, rel=1e-6)
    assert "2 nodes of 8" in pred.network and "figures you gave" in pred.network
    assert any(n == pred.network for n in pred.notes)


def test_slower_fabric_is_slower_and_old_flat_figure_differs(spec, exact_model):
    prof = _grad_profile()
    kw = {"hardware": spec, "precision": "fp32", "num_devices": 64, "model": exact_model}
    ndr = predict(prof, fabric="NDR", **kw)
    eth = predict(prof, fabric="25GbE", **kw)
    assert eth.communication_s > 5 * ndr.communication_s
    assert "Ethernet 25GbE" in eth.network and "InfiniBand NDR 400G" in ndr.network


def test_tensor_parallel_inside_a_node_uses_nvlink(spec, exact_model):
    # tp=8 fills the node; its all-reduces never touch the NICs whatever the fabric.
    prof = make_profile([op("aten.add", "memory", "forward", bytes_read=2e9, bytes_written=1e9)],
                        num_blocks=4, block_output_bytes=8_000_000)
    cfg = ParallelConfig(tp_degree=8)
    fast = predict(prof, hardware=spec, precision="bf16", num_devices=8, parallel=cfg,
                   model=exact_model, fabric="NDR")
    slow = predict(prof, hardware=spec, precision="bf16", num_devices=8, parallel=cfg,
                   model=exact_model, fabric="25GbE")
    assert fast.communication_s == pytest.approx(slow.communication_s)


def test_fsdp_prefetch_hides_gathers_behind_compute(spec, exact_model):
    # FSDP over 16 devices with a long backward: everything but the first gather and the last
    # reduce-scatter of one block (of 24) hides.
    prof = make_profile([op("aten.add", "memory", "backward", bytes_read=6e12, bytes_written=2e12),
                         op("aten.add", "memory", "forward", bytes_read=3e12, bytes_written=1e12)],
                        mode="train", num_params=int(1e9), weights_bytes=int(4e9), num_blocks=24,
                        block_output_bytes=int(1e6))
    pred = predict(prof, hardware=spec, precision="fp32", num_devices=16, model=exact_model,
                   parallel=ParallelConfig(dp_degree=16, zero_stage=3), fabric="NDR")
    c = load_model().collectives
    nic = 8 * 400 * 0.92 / 8 / 8     # 8 NDR links per node x 0.92 / 8 bits / 8 GPUs: 46 GB/s
    intra = 450 * c.intra_node_efficiency

    def level(factor_intra, factor_inter, size):
        return max(factor_intra * size / (intra * 1e9), factor_inter * size / 8 / (nic * 1e9))

    hops = 2 * 1.5e-6                                          # 2 log2(2) hops of 1.5 us
    gather = c.alpha_s["all_gather"] + hops + level(7 / 8, 1 / 2, 4e9)
    rs = c.alpha_s["reduce_scatter"] + hops + level(7 / 8, 1 / 2, 4e9)
    assert pred.communication_s == pytest.approx((gather + rs) / 24, rel=1e-6)


def test_predict_table_reports_each_devices_fabric(spec):
    from aiadvisor.hardware import get

    table = predict_table(_grad_profile(), specs=[get("H100"), get("A100 80GB SXM")],
                          precisions=["bf16"], num_devices=16)
    assert list(table.fabric) == ["InfiniBand NDR 400G", "InfiniBand HDR 200G"]
    pinned = predict_table(_grad_profile(), specs=[get("H100")], precisions=["bf16"],
                           num_devices=16, fabric="RoCE 400G")
    assert list(pinned.fabric) == ["RoCE 400G"]


def test_bad_network_input_through_predict(spec):
    prof = _grad_profile()
    with pytest.raises(UnknownFabricError, match="'Infiniband QDR'.*expected one of"):
        predict(prof, hardware=spec, num_devices=16, fabric="Infiniband QDR")
    with pytest.raises(InvalidFabricError, match=r"fabric\['gbps'\]=0"):
        predict(prof, hardware=spec, num_devices=16, fabric={"gbps": 0})
    with pytest.raises(NodeLayoutError, match="num_devices=12"):
        predict(prof, hardware=spec, num_devices=12, node_size=8)
    with pytest.raises(NodeLayoutError, match="num_devices=20"):
        predict_table(prof, specs=[spec], num_devices=20, node_size=8)


def test_pipeline_crossing_nodes_pays_the_nic(spec, exact_model):
    # pp=2 inside one node of 8: the send runs on NVLink; pp=16 over 2 nodes: the slowest
    # boundary crosses the NICs and sets the pace of every micro-batch.
    prof = make_profile([op("aten.add", "memory", "forward", bytes_read=2e9, bytes_written=1e9,
                            count=16)], num_blocks=16, block_output_bytes=8_000_000)
    c = load_model().collectives
    kw = {"hardware": spec, "precision": "fp32", "model": exact_model, "fabric": "NDR"}
    inside = predict(prof, num_devices=2, parallel=ParallelConfig(pp_degree=2), **kw)
    assert inside.communication_s == pytest.approx(
        c.alpha_s["send_recv"] + 8e6 / (450e9 * c.intra_node_efficiency))
    across = predict(prof, num_devices=16, parallel=ParallelConfig(pp_degree=16), **kw)
    nic = 8 * 400 * 0.92 / 8 / 8 * 1e9                      # 46 GB/s per GPU
    assert across.communication_s == pytest.approx(
        c.alpha_s["send_recv"] + 1.5e-6 + 8e6 / nic)          # one NDR hop of 1.5 us
