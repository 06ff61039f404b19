"""The generated DDP, FSDP and tensor-parallel scripts run under torchrun: 2 CPU processes,
gloo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aiadvisor.codegen import CodeNames, snippet

NAMES = CodeNames(model="net", inputs="batch", optimizer="opt", loss_fn="my_loss")
NUM_STEPS = 4

PREAMBLE = '''\
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(3))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        for block in self.blocks:
            x = torch.tanh(block(x))
        return self.head(x)


def my_loss(output):
    return output.pow(2).mean()


torch.manual_seed(0)
net = Net()
batch = torch.randn(8, 16)
opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
'''


def _reference_losses() -> list[float]:
    """Single-process training: with the same batch on both ranks, the averaged gradient
    equals the single-process gradient, so DDP and FSDP must reproduce these losses."""
    namespace: dict = {}
    exec(PREAMBLE, namespace)  # noqa: S102 (the same model code the scripts run)
    net, opt, batch, my_loss = (namespace[k] for k in ("net", "opt", "batch", "my_loss"))
    losses = []
    for _ in range(NUM_STEPS):
        loss = my_loss(net(batch))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


TP_PREAMBLE = '''\
import torch
import torch.distributed as dist


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up_proj = torch.nn.Linear(16, 32)
        self.down_proj = torch.nn.Linear(32, 16)

    def forward(self, x):
        return x + self.down_proj(torch.relu(self.up_proj(x)))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(Block() for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


torch.manual_seed(0)
net = Net()
batch = torch.randn(4, 16)
reference = net(batch).detach().clone()
'''

TP_CHECK = '''
output = net(batch)
full = output.full_tensor() if hasattr(output, "full_tensor") else output
torch.testing.assert_close(full, reference)  # the split matmuls give the same result
output.sum().backward()
print("tensor parallel output matches on rank", dist.get_rank())
dist.destroy_process_group()
'''


def _launch(torchrun: Path, script: Path, tmp_path: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen(
        [str(torchrun), "--standalone", "--nproc_per_node=2", str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path,
    )


@pytest.mark.slow
def test_generated_ddp_fsdp_and_tp_scripts_run_under_torchrun(tmp_path: Path):
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun is not installed next to this Python")
    procs = {}
    for strategy in ("ddp", "fsdp"):
        code = snippet("distributed", names=NAMES, strategy=strategy, nproc=2, bf16=True,
                       num_steps=NUM_STEPS)
        script = tmp_path / f"train_{strategy}.py"
        script.write_text(PREAMBLE + "\n" + code)
        procs[strategy] = _launch(torchrun, script, tmp_path)
    tp_script = tmp_path / "train_tp.py"
    tp_script.write_text(TP_PREAMBLE + snippet("tensor_parallel", names=NAMES, tp=2, dp=1,
                                               nproc=2) + TP_CHECK)
    tp = _launch(torchrun, tp_script, tmp_path)
    expected = _reference_losses()
    out, _ = tp.communicate(timeout=240)
    assert tp.returncode == 0, out[-3000:]
    assert out.count("tensor parallel output matches") == 2
    for strategy, proc in procs.items():
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"{strategy}:\n{out[-3000:]}"
        losses = [float(v) for v in re.findall(r"step \d+: loss ([0-9.]+)", out)]
        assert len(losses) == NUM_STEPS, out[-3000:]
        # printed with 4 decimals
        assert losses == pytest.approx(expected, abs=2e-4), strategy
        assert losses[-1] < losses[0]
    assert torch.distributed.is_available()
