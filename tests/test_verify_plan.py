"""verify_plan: a plan's code applied step by step to copies of a real model on the CPU."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import aiadvisor as aa
from aiadvisor.codegen import SNIPPETS, CodeNames, snippet
from aiadvisor.schema import Recommendation

NAMES = CodeNames(model="net", inputs="batch")


class VideoNet(torch.nn.Module):
    """5-D inputs (batch, channels, frames, height, width): channels_last, a 4-D format,
    cannot convert its Conv3d weights."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv3d(3, 16, 3, padding=1)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.conv(x).relu().mean((2, 3, 4)))


def _rec(tactic_id: str, snippet_id: str, *, speedup: float, effect=None, **values):
    meta = SNIPPETS[snippet_id]
    extra = {"snippet": snippet_id, "requires": list(meta.requires), "launcher": meta.launcher,
             "needs_cuda": meta.needs_cuda, "trigger": {"test": 1}}
    if effect:
        extra["effect"] = effect
    return Recommendation(id=tactic_id, title=tactic_id, category="speed", rationale="",
                          code=snippet(snippet_id, names=NAMES, **values),
                          predicted_speedup=speedup, extra=extra)


def _report(recs, mode="infer", batch_size=4):
    return SimpleNamespace(recommendations=recs, options={"mode": mode},
                           profile=SimpleNamespace(batch_size=batch_size), _names=NAMES)


def test_a_failing_step_is_reported_undone_and_the_plan_carries_on():
    torch.manual_seed(0)
    net, x = VideoNet(), torch.randn(4, 3, 4, 16, 16)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    rng = torch.get_rng_state()
    recs = [_rec("channels_last", "channels_last", speedup=1.2),
            _rec("bf16_autocast", "autocast_infer", speedup=1.5, dtype="bfloat16",
                 device_type="cpu"),
            _rec("larger_batch", "larger_batch", speedup=1.3,
                 effect={"batch_size": 16, "checkpointing": "none"}, batch_size=16,
                 old_batch_size=4),
            _rec("cuda_graphs", "cuda_graphs", speedup=1.1)]
    result = aa.verify_plan(net, x, _report(recs), warmup=1, repeats=3)
    status = {s.tactic: s for s in result.steps}
    assert status["channels_last"].status == "failed"
    assert "rank 4" in status["channels_last"].error  # torch: channels_last needs 4-D tensors
    assert status["bf16_autocast"].status == "measured"
    assert status["larger_batch"].status == "measured"
    assert status["cuda_graphs"].status == "not run here" or torch.cuda.is_available()
    assert all(s.measured_speedup > 0 for s in result.measured)
    # The cumulative figures multiply the measured steps only.
    table = result.table()
    product = status["bf16_autocast"].measured_speedup * status["larger_batch"].measured_speedup
    assert table["measured_cumulative"].iloc[-1] == pytest.approx(product)
    assert result.predicted_cumulative == pytest.approx(1.5 * 1.3)
    # The user's model, its gradients and the RNG are as they were.
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert all(p.grad is None for p in net.parameters())
    assert net.conv.weight.is_contiguous()  # still in its own format
    assert torch.equal(torch.get_rng_state(), rng)
    assert "failed" in str(result) and "rank 4" in str(result)


def test_training_steps_use_the_optimizer_the_code_makes():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    x = torch.randn(16, 32)
    fused = _rec("fused_optimizer", "foreach_optimizer", speedup=1.05)
    result = aa.verify_plan(net, x, _report([fused], mode="train", batch_size=16), warmup=1,
                            repeats=3)
    (step,) = result.steps
    assert step.status == "measured" and step.seconds_per_sample > 0
    assert all(p.grad is None for p in net.parameters())


def test_meta_models_cannot_be_measured():
    with torch.device("meta"):
        net = torch.nn.Linear(4, 4)
    with pytest.raises(aa.errors.InvalidArgumentError, match="meta device"):
        aa.verify_plan(net, torch.randn(2, 4), _report([]))


def test_a_real_plan_runs_on_the_cpu():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(),
                              torch.nn.Linear(1024, 256))
    x = torch.randn(64, 256)
    report = aa.advise(net, x, mode="infer", model_name="net", inputs_name="batch")
    cheap = [r for r in report.recommendations if r.id not in ("torch_compile", "onnx_export")]
    result = aa.verify_plan(net, x, _report(cheap, batch_size=64), warmup=1, repeats=3)
    assert len(result.steps) == len(cheap)
    assert {s.status for s in result.steps} <= {"measured", "failed", "not run here"}


def test_the_default_training_loss_is_the_one_the_profile_prices():
    # The profile's traced and measured steps call backward on the model's own loss, else on
    # the sum of its output; verify_plan times the same step (a mean square cast to FP32 costs
    # passes over a large output that the predicted step does not make).
    from aiadvisor.verification import _default_loss

    out = torch.tensor([[1.0, -2.0], [3.0, 0.5]], requires_grad=True)
    loss = _default_loss(out)
    assert loss.item() == pytest.approx(2.5)       # 1 - 2 + 3 + 0.5, not the mean square 3.5625
    loss.backward()
    assert torch.equal(out.grad, torch.ones(2, 2))  # d(sum)/d(out) = 1 everywhere
    own = torch.tensor(0.25, requires_grad=True)
    assert _default_loss({"loss": own, "logits": out}) is own
