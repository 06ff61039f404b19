"""Profiling never changes the user's model, tensors or RNG, on every path; bad input gets a clear
AIAdvisorError naming the value and the choices."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import aiadvisor as aa
from aiadvisor.errors import InvalidArgumentError, InvalidModelError, ModelInputError


class Net(nn.Module):
    """BatchNorm (running stats), Dropout (RNG), a frozen layer and a user hook."""

    def __init__(self, data_dependent: bool = False):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.bn = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(32, 4)
        self.fc2.bias.requires_grad_(False)
        self.data_dependent = data_dependent

    def forward(self, x):
        h = self.drop(torch.relu(self.bn(self.fc1(x))))
        if self.data_dependent:
            # Boolean-mask indexing has a data-dependent shape: fake and meta tensors cannot run it.
            h = h + h[h > 0].sum()
        return self.fc2(h)


def snapshot(model, x):
    return {
        "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "grads": {k: None if p.grad is None else p.grad.clone()
                  for k, p in model.named_parameters()},
        "requires_grad": {k: p.requires_grad for k, p in model.named_parameters()},
        "training": {k: m.training for k, m in model.named_modules()},
        "hooks": {k: (len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks))
                  for k, m in model.named_modules()},
        "rng": torch.get_rng_state(),
        "x": x.clone(),
        "x_requires_grad": x.requires_grad,
        "param_ids": [id(p) for p in model.parameters()],
    }


def assert_same(before, after):
    assert before["state"].keys() == after["state"].keys()
    for k in before["state"]:
        assert torch.equal(before["state"][k], after["state"][k]), k
    for k, g in before["grads"].items():
        if g is None:
            assert after["grads"][k] is None, k
        else:
            assert torch.equal(g, after["grads"][k]), k
    for key in ("requires_grad", "training", "hooks", "param_ids", "x_requires_grad"):
        assert before[key] == after[key], key
    assert torch.equal(before["rng"], after["rng"])
    assert torch.equal(before["x"], after["x"])


def fresh(data_dependent=False):
    torch.manual_seed(0)
    model = Net(data_dependent)
    model.fc2.register_forward_hook(lambda m, i, o: None)
    x = torch.randn(8, 16)
    # Existing gradients (as between optimizer steps) must survive untouched.
    model.fc1.weight.grad = torch.full_like(model.fc1.weight, 0.25)
    model.eval()  # a non-default flag that profiling in train mode must restore
    model.bn.train()
    return model, x


@pytest.mark.parametrize("kwargs", [
    {"mode": "train"}, {"mode": "infer"}, {"mode": "train", "precision": "bf16"},
    {"mode": "train", "measure": True, "measure_steps": 2},
    {"mode": "infer", "measure": True, "measure_steps": 2},
], ids=["train", "infer", "bf16", "measure-train", "measure-infer"])
def test_profile_changes_nothing(kwargs):
    model, x = fresh()
    before = snapshot(model, x)
    prof = aa.profile(model, x, **kwargs)
    assert prof.path == "fake"
    assert_same(before, snapshot(model, x))
    if kwargs.get("measure"):
        assert prof.measured_step_time_s > 0 and prof.measured_peak_bytes > 0


def test_data_dependent_model_falls_back_to_a_real_batch_of_one_and_changes_nothing():
    model, x = fresh(data_dependent=True)
    before = snapshot(model, x)
    prof = aa.profile(model, x, mode="train")
    assert prof.path == "real"
    assert any("fell back to the real path" in n for n in prof.notes)
    assert any("real batch of" in n for n in prof.notes)
    assert_same(before, snapshot(model, x))
    # FLOPs scale linearly from one sample: fc1 2*16*32 + fc2 2*32*4 per sample, forward
    assert prof.flops_forward == pytest.approx(8 * (2 * 16 * 32 + 2 * 32 * 4))


def test_not_a_module():
    with pytest.raises(InvalidModelError, match="expected a torch.nn.Module"):
        aa.profile(lambda x: x, torch.randn(2, 2))
    with pytest.raises(aa.AIAdvisorError, match="OrderedDict"):
        aa.profile(nn.Linear(2, 2).state_dict(), torch.randn(2, 2))


@pytest.mark.parametrize("kwargs, name, suggestion", [
    ({"mode": "training"}, "mode", "'train'"),
    ({"precision": "bfloat16"}, "precision", "'bf16'"),
    ({"optimizer": "adamW"}, "optimizer", "'adamw'"),
])
def test_unknown_choice_names_value_and_choices(kwargs, name, suggestion):
    with pytest.raises(InvalidArgumentError) as info:
        aa.profile(nn.Linear(2, 2), torch.randn(2, 2), **kwargs)
    message = str(info.value)
    assert f"{name}={next(iter(kwargs.values()))!r}" in message
    assert "expected one of" in message and suggestion in message


def test_inputs_the_model_rejects_quote_the_models_error_and_shapes():
    model, x = nn.Linear(16, 4), torch.randn(8, 10)
    before = model.weight.detach().clone()
    with pytest.raises(ModelInputError) as info:
        aa.profile(model, x)
    message = str(info.value)
    assert "float32[8, 10]" in message  # the input shapes
    assert "mat1 and mat2 shapes cannot be multiplied" in message  # the model's own error
    assert torch.equal(model.weight, before)


def test_inputs_without_tensors():
    with pytest.raises(InvalidArgumentError, match="no tensor"):
        aa.profile(nn.Linear(2, 2), (3, 4))
    with pytest.raises(InvalidArgumentError, match="expected a tensor"):
        aa.profile(nn.Linear(2, 2), "hello")


def test_at_rejects_bad_sizes():
    prof = aa.profile(nn.Linear(4, 4), torch.randn(2, 4))
    with pytest.raises(InvalidArgumentError, match="batch_size=0"):
        prof.at(batch_size=0)



#: A custom op (CPU kernel: x * 2) whose Meta kernel raises a RuntimeError, as some aten meta
#: kernels do: FakeTensorMode logs "failed while attempting to run meta" with a traceback
#: (logging, torch._subclasses.fake_tensor; torch's own stderr handler prints it) and re-raises.
_BROKEN_META_SCRIPT = """
import json, logging, torch, aiadvisor as aa
lib = torch.library.Library("aiadvisor_test", "FRAGMENT")
lib.define("twice(Tensor x) -> Tensor")
lib.impl("twice", lambda x: x * 2, "CPU")
def broken_meta(x):
    raise RuntimeError("meta kernel cannot size this")
lib.impl("twice", broken_meta, "Meta")
class Doubler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
    def forward(self, x):
        return torch.ops.aiadvisor_test.twice(self.lin(x))
logger = logging.getLogger("torch._subclasses.fake_tensor")
before = (list(logger.handlers), logger.propagate)
prof = aa.profile(Doubler(), torch.randn(4, 8), mode="infer")
print(json.dumps({"notes": list(prof.notes),
                  "restored": (list(logger.handlers), logger.propagate) == before}))
"""


def test_fake_tensor_failures_are_summarised_not_printed():
    # A fresh interpreter: torch's stderr handler writes to the real stderr, as in a notebook.
    import json
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _BROKEN_META_SCRIPT], capture_output=True,
                         text=True, timeout=300, check=True)
    assert run.stderr == ""
    out = json.loads(run.stdout.strip().splitlines()[-1])
    # Fake and meta fail on the op, the real batch runs it: one summary note names the op and
    # the first error; the logger's handlers and propagate flag are as before.
    note = next(n for n in out["notes"] if n.startswith("torch logged"))
    assert "aiadvisor_test.twice" in note and "meta kernel cannot size this" in note
    assert any("fell back to the real path" in n for n in out["notes"])
    assert out["restored"]
