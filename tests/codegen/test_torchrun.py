"""The generated DDP and FSDP training script runs under torchrun: 2 CPU processes, gloo."""

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


@pytest.mark.slow
def test_generated_ddp_and_fsdp_scripts_train_under_torchrun(tmp_path: Path):
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun is not installed next to this Python")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    procs = {}
    for strategy in ("ddp", "fsdp"):
        code = snippet("distributed", names=NAMES, strategy=strategy, nproc=2, bf16=True,
                       num_steps=NUM_STEPS)
        script = tmp_path / f"train_{strategy}.py"
        script.write_text(PREAMBLE + "\n" + code)
        procs[strategy] = subprocess.Popen(
            [str(torchrun), "--standalone", "--nproc_per_node=2", str(script)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path,
        )
    expected = _reference_losses()
    for strategy, proc in procs.items():
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"{strategy}:\n{out[-3000:]}"
        losses = [float(v) for v in re.findall(r"step \d+: loss ([0-9.]+)", out)]
        assert len(losses) == NUM_STEPS, out[-3000:]
        # printed with 4 decimals
        assert losses == pytest.approx(expected, abs=2e-4), strategy
        assert losses[-1] < losses[0]
    assert torch.distributed.is_available()
