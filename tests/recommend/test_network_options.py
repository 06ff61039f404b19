"""fabric= and node_size= through plan_parallel, advise, %advise and the CLI."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa
from aiadvisor import cli
from aiadvisor.errors import NodeLayoutError, UnknownFabricError


@pytest.fixture(scope="module")
def prof():
    net = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    return aa.profile(net, torch.randn(16, 256), mode="train")


def test_plan_parallel_says_which_network(prof):
    df = aa.plan_parallel(prof, hardware="H100", num_devices=16, fabric="RoCE 400G")
    assert "RoCE 400G" in df.attrs["network"] and "2 nodes of 8" in df.attrs["network"]
    # Said once, in the table's notes, not on every plan row.
    assert df.attrs["network"] in df.attrs["notes"]
    assert not df.notes.str.contains("Network assumed").any()


def test_plan_parallel_slow_fabric_costs_more_communication(prof):
    fast = aa.plan_parallel(prof, hardware="H100", num_devices=16)
    slow = aa.plan_parallel(prof, hardware="H100", num_devices=16, fabric={"gbps": 1})
    pick = lambda df: df[df.strategy == "ddp"].iloc[0].communication_s  # noqa: E731
    assert pick(slow) > pick(fast)


def test_plan_parallel_bad_network(prof):
    with pytest.raises(UnknownFabricError, match="expected one of"):
        aa.plan_parallel(prof, hardware="H100", num_devices=16, fabric="token ring")
    with pytest.raises(NodeLayoutError, match="num_devices=12 does not fill whole nodes"):
        aa.plan_parallel(prof, hardware="H100", num_devices=12, node_size=8)


def test_advise_reports_the_fabric_and_rejects_bad_ones():
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    x = torch.randn(32, 64)
    report = aa.advise(net, x, hardware="A100 80GB SXM", num_devices=16, fabric="p4d")
    assert "AWS EFA 100G" in report.prediction.network
    assert "400 Gb/s per node" in report.prediction.network      # p4d: 4 x 100 Gbps
    assert report.prediction.network in report.notes
    assert report.to_markdown().count("Network assumed") == 1
    with pytest.raises(NodeLayoutError):
        aa.advise(net, x, hardware="H100", num_devices=12, node_size=8)
    pinned = aa.advise(net, x, hardware="H100", num_devices=16, node_size=8)
    with pytest.raises(NodeLayoutError, match="num_devices=20"):
        pinned.with_options(num_devices=20)


def test_cli_fabric_option(capsys):
    assert cli.main(["report", "--model", "mlp", "--batch", "4", "--devices", "16",
                     "--hardware", "H100", "--fabric", "Infiniband NDR 4000"]) == 2
    err = capsys.readouterr().err
    assert "'Infiniband NDR 4000' is not a known fabric" in err
    assert cli.main(["report", "--model", "mlp", "--batch", "4", "--devices", "16",
                     "--hardware", "H100", "--fabric", "200", "--format", "json"]) == 0
    assert "user fabric 200 Gb/s per device" in capsys.readouterr().out
