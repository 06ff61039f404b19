"""The fabric and node tables, the network a prediction assumes, and its bad-input errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiadvisor.errors import (
    AIAdvisorError,
    InvalidFabricError,
    NodeLayoutError,
    UnknownFabricError,
)
from aiadvisor.hardware import all_specs, get
from aiadvisor.hardware.fabrics import (
    fabrics,
    get_fabric,
    is_datacenter,
    network_for,
    node_configs,
)

REPO = Path(__file__).resolve().parents[2]


def test_every_datacenter_accelerator_has_a_node_row():
    # Whatever rows hardware_specs.csv holds when this runs: no skip, no fixed list.
    names = [s.name for s in all_specs() if is_datacenter(s)]
    assert len(names) >= 30
    missing = [n for n in names if n.lower() not in node_configs()]
    assert missing == []


def test_consumer_and_edge_parts_are_not_datacenter():
    for name in ("NVIDIA GeForce RTX 4090", "NVIDIA Jetson AGX Orin 64GB", "AMD EPYC 9654"):
        assert not is_datacenter(get(name))
    assert is_datacenter(get("NVIDIA L4")) and is_datacenter(get("Google TPU v5p"))


def test_fabric_rows_have_sources_and_sane_figures():
    rows = fabrics()
    assert len(rows) >= 15
    for f in rows:
        assert f.source and 0 < f.efficiency <= 1 and f.gbps > 0 and f.latency_us >= 0


def test_line_rates_match_the_standards():
    # IBTA data rates per 4x port: EDR 100, HDR 200, NDR 400, XDR 800 Gb/s.
    assert [get_fabric(n).gbps for n in ("EDR", "HDR", "NDR", "XDR")] == [100, 200, 400, 800]
    # GB200 NVL72: 1.8 TB/s per GPU both directions = 1800 * 8 = 14400 Gb/s.
    assert get_fabric("NVL72").gbps == 14400


def test_shipped_in_the_wheel():
    text = (REPO / "pyproject.toml").read_text()   # tomllib is 3.11+; the project runs on 3.10
    assert '"data/fabrics.csv" = "aiadvisor/_data/fabrics.csv"' in text
    assert '"data/node_configs.csv" = "aiadvisor/_data/node_configs.csv"' in text


def test_dgx_h100_network_from_the_datasheet():
    net = network_for(get("NVIDIA H100 SXM"))
    # DGX H100: 8 x 400 Gb/s NDR = 3200 Gb/s per node; 0.92 efficiency (46 of 50 GB/s per NIC,
    # nccl-tests issue #290) / 8 bits / 8 GPUs = 46 GB/s per GPU across nodes.
    assert (net.node_size, net.node_gbps, net.basis) == (8, 3200, "datasheet")
    assert net.nic_gbs_per_device == pytest.approx(3200 * 0.92 / 8 / 8)
    assert "InfiniBand NDR 400G" in net.describe(16) and "2 nodes of 8" in net.describe(16)


def test_cloud_fabric_keeps_its_own_link_count():
    # AWS p5: 32 x 100 Gbps EFA for 8 H100 = 3200 Gb/s per node; p4d: 4 x 100 for 8 A100.
    assert network_for(get("H100"), fabric="p5").node_gbps == 3200
    assert network_for(get("A100 80GB SXM"), fabric="p4d").node_gbps == 400


def test_gaudi_scale_out_ports():
    # Intel: 3 of the 24 ports per Gaudi 3 go out of the box: 8 x 3 x 200 Gb/s = 4800 Gb/s
    # (= the 600 GB/s per direction Intel quotes for an HLS-3).
    net = network_for(get("Intel Gaudi 3"))
    assert net.node_gbps == 4800 and net.node_gbps / 8 == 600


def test_nvl72_domain_spans_compute_trays():
    net = network_for(get("NVIDIA GB200"))
    assert (net.node_size, net.scaleup_size) == (4, 72)


def test_user_fabric_figures_per_device():
    net = network_for(get("H100"), fabric={"gbps": 100, "latency_us": 10})
    # 100 Gb/s per GPU x 8 = 800 Gb/s per node; default efficiency 0.8 is said to be assumed.
    assert net.node_gbps == 800 and net.efficiency == 0.8 and net.basis == "user"
    assert "efficiency assumed" in net.fabric


def test_pinned_node_size_scales_the_node_nics():
    net = network_for(get("H100"), node_size=4, num_devices=16)
    # 4 GPUs keep one 400 Gb/s NIC each: 1600 Gb/s per node.
    assert (net.node_size, net.node_gbps, net.node_size_pinned) == (4, 1600, True)


def test_unknown_fabric_lists_choices():
    with pytest.raises(UnknownFabricError) as err:
        network_for(get("H100"), fabric="infiniband ndr 4000")
    message = str(err.value)
    assert "'infiniband ndr 4000'" in message and "'RoCE 400G'" in message
    assert "Did you mean" in message and isinstance(err.value, AIAdvisorError)


@pytest.mark.parametrize("bad", [{"gbps": 0}, {"gbps": -100}, {"gbps": float("nan")},
                                 {"gbps": 400, "efficiency": 1.5}, {"gbps": "fast"},
                                 {"gbps": 400, "latency_us": -1}])
def test_bad_user_fabric_figures(bad):
    with pytest.raises(InvalidFabricError, match="is not valid: expected"):
        network_for(get("H100"), fabric=bad)


def test_user_fabric_unknown_key():
    with pytest.raises(InvalidFabricError, match="'bandwidth'.*'gbps'"):
        network_for(get("H100"), fabric={"bandwidth": 400})


def test_scale_up_fabric_is_not_a_network():
    with pytest.raises(InvalidFabricError, match="scale-up fabric"):
        network_for(get("H100"), fabric="NVL72")


def test_devices_must_fill_pinned_nodes():
    with pytest.raises(NodeLayoutError, match=r"num_devices=12 .* node_size=8.*8 or 16"):
        network_for(get("H100"), node_size=8, num_devices=12)
    # Not pinned: a partial last node is allowed; fewer devices than a node is one node.
    assert network_for(get("H100"), num_devices=12).node_size == 8
    assert network_for(get("H100"), node_size=8, num_devices=4).node_size == 8


@pytest.mark.parametrize("bad", [0, -8, 2.5, True, "8"])
def test_bad_node_size(bad):
    with pytest.raises(NodeLayoutError, match="node_size=.* is not valid"):
        network_for(get("H100"), node_size=bad)
