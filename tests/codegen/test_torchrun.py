"""The generated DDP, FSDP, tensor- and expert-parallel scripts run under torchrun: 2 CPU
processes, gloo."""

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


def _reference_losses(preamble: str | None = None) -> list[float]:
    """Single-process training: with the same batch on both ranks, the averaged gradient
    equals the single-process gradient, so DDP and FSDP (and, with ``EP_PREAMBLE``, the
    expert-parallel step) must reproduce these losses."""
    namespace: dict = {}
    exec(preamble or PREAMBLE, namespace)  # noqa: S102 (the same model code the scripts run)
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
# As the snippet's last comment says: every rank done, then what holds the groups freed
# before they are destroyed (without this, 1 run in 4 aborted in gloo's teardown here).
dist.barrier()
del net, mesh, output, full, blocks, block_lists, block
import gc
gc.collect()
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
    # FSDP with and without resharding after forward (the fsdp_overlap step): same losses.
    for strategy, reshard in (("ddp", True), ("fsdp", True), ("fsdp", False)):
        code = snippet("distributed", names=NAMES, strategy=strategy, nproc=2, bf16=True,
                       num_steps=NUM_STEPS, reshard_after_forward=reshard)
        name = f"{strategy}{'' if reshard else '_noreshard'}"
        script = tmp_path / f"train_{name}.py"
        script.write_text(PREAMBLE + "\n" + code)
        procs[name] = _launch(torchrun, script, tmp_path)
    expected = _reference_losses()
    for strategy, proc in procs.items():
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"{strategy}:\n{out[-3000:]}"
        losses = [float(v) for v in re.findall(r"step \d+: loss ([0-9.]+)", out)]
        assert len(losses) == NUM_STEPS, out[-3000:]
        # printed with 4 decimals
        assert losses == pytest.approx(expected, abs=2e-4), strategy
        assert losses[-1] < losses[0]
    # The tensor-parallel job runs after the others: eight ranks on two cores once made a TP
    # rank abort in the gloo teardown after its output had matched.
    tp_script = tmp_path / "train_tp.py"
    tp_script.write_text(TP_PREAMBLE + snippet("tensor_parallel", names=NAMES, tp=2, dp=1,
                                               nproc=2) + TP_CHECK)
    tp = _launch(torchrun, tp_script, tmp_path)
    out, _ = tp.communicate(timeout=240)
    assert tp.returncode == 0, out[-3000:]
    assert out.count("tensor parallel output matches") == 2
    assert torch.distributed.is_available()


EP_PREAMBLE = '''\
import torch
from transformers import MixtralConfig, MixtralForCausalLM

# A tiny Mixtral: 2 MoE layers of 4 experts, top-2 routing (transformers' own expert code).
config = MixtralConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, num_local_experts=4,
                       num_experts_per_tok=2, max_position_embeddings=32)
torch.manual_seed(0)
net = MixtralForCausalLM(config)
batch = torch.randint(0, 64, (2, 8))
opt = torch.optim.AdamW(net.parameters(), lr=1e-2)


def my_loss(output):
    logits = output.logits[:, :-1].flatten(0, 1)
    return torch.nn.functional.cross_entropy(logits, batch[:, 1:].flatten())
'''


def _reference_ep_losses() -> list[float]:
    """The same batch on both ranks: the expert-parallel step must match one process's."""
    return _reference_losses(EP_PREAMBLE)


@pytest.mark.slow
def test_generated_expert_parallel_script_runs_under_torchrun(tmp_path: Path):
    pytest.importorskip("transformers")
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun is not installed next to this Python")
    code = snippet("expert_parallel", names=NAMES, ep=2, dp=1, nproc=2, num_steps=NUM_STEPS)
    script = tmp_path / "train_ep.py"
    script.write_text(EP_PREAMBLE + "\n" + code + '''
experts = [m for m in net.modules() if type(m).__name__ == "MixtralExperts"]
# each of the 2 ranks holds 2 of the 4 experts of each layer: (2, 2 x 32, 16) weights
assert [m.num_experts for m in experts] == [2, 2]
assert [tuple(m.gate_up_proj.shape) for m in experts] == [(2, 64, 16)] * 2
print("local experts ok", flush=True)
''')
    proc = _launch(torchrun, script, tmp_path)
    expected = _reference_ep_losses()
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out[-3000:]
    assert out.count("local experts ok") == 2, out[-3000:]
    losses = [float(v) for v in re.findall(r"step \d+: loss ([0-9.]+)", out)]
    assert len(losses) == NUM_STEPS, out[-3000:]
    # cross-entropy over 64 tokens starts near ln 64 = 4.16; printed with 4 decimals
    assert losses == pytest.approx(expected, abs=2e-4)
    assert losses[-1] < losses[0]
