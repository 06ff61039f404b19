"""The advice as a stacked plan: each step priced on top of the ones before, exclusive choices
as one step, no noise, nothing the model already does."""

from __future__ import annotations

import math

import pytest
import torch

import aiadvisor as aa
from aiadvisor.costmodel import step_time
from aiadvisor.recommend import transforms
from aiadvisor.recommend.applied import detect, optimizer_name
from aiadvisor.recommend.plan import trigger_text
from aiadvisor.recommend.tactics import MIN_SPEEDUP
from aiadvisor.schema import ParallelConfig

from .conftest import _llama


def _gpt2_profile():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=5000, n_positions=256,
                        attn_implementation="eager")
    torch.manual_seed(0)
    # Batch 128: the bf16 step is device-bound on an H100 (at batch 8 eager PyTorch's host
    # time, ~500 kernels at 27.5 us, bounds it: the plan's precision step then follows the
    # CUDA graphs, see test_host_bound_plan_prices_precision_after_the_graphs).
    return aa.profile(GPT2LMHeadModel(config), torch.randint(0, 5000, (128, 256)), mode="train")


@pytest.fixture(scope="module")
def gpt2_report():
    return aa.advise(_gpt2_profile(), hardware="H100 SXM")


def _bert(**config):
    from transformers import BertConfig, BertForSequenceClassification

    with torch.device("meta"):
        return BertForSequenceClassification(BertConfig(**config))


def _gpt2_base():
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.device("meta"):
        return GPT2LMHeadModel(GPT2Config())


def _resnet50():
    from transformers import ResNetConfig, ResNetForImageClassification

    with torch.device("meta"):  # ResNetConfig's defaults are ResNet-50 (depths 3, 4, 6, 3)
        return ResNetForImageClassification(ResNetConfig())


def _tokens(vocab: int, batch: int, seq: int):
    return torch.randint(0, vocab, (batch, seq), device="meta")


#: The issue's five GPU workloads, built from transformers configs on the meta device:
#: fine-tuning shapes for training, one online request (batch 1) for inference.
WORKLOADS = {
    "bert_train_a100": (_bert, lambda: _tokens(30522, 32, 128),
                        {"mode": "train", "hardware": "A100 SXM 80GB"}),
    "bert_infer_l4": (_bert, lambda: _tokens(30522, 1, 128), {"mode": "infer",
                                                              "hardware": "L4"}),
    "resnet50_train_h100": (_resnet50, lambda: torch.randn(64, 3, 224, 224, device="meta"),
                            {"mode": "train", "hardware": "H100 SXM"}),
    "gpt2_infer_l4": (_gpt2_base, lambda: _tokens(50257, 1, 128), {"mode": "infer",
                                                                   "hardware": "L4"}),
    "llama3_8b_train_8xh100": (lambda: _llama(4096, 14336, 32, 32),
                               lambda: _tokens(128256, 1, 2048),
                               {"mode": "train", "hardware": "H100 SXM", "num_devices": 8}),
}


@pytest.fixture(scope="module")
def five():
    out = {}
    for name, (build, inputs, options) in WORKLOADS.items():
        model = build()
        out[name] = (aa.advise(model, inputs(), **options), detect(model))
    return out


# -- stacking -----------------------------------------------------------------------------------

def test_steps_are_priced_on_top_of_the_ones_before(gpt2_report):
    plan = gpt2_report.plan
    steps = list(plan["tactic"])
    assert steps[0] == "bf16_autocast" and "sdpa" in steps
    prof = gpt2_report.profile
    spec = gpt2_report.hardware_spec
    # Step 1 against the fp32 start; step "sdpa" against bf16 (step 1 applied), with and
    # without the fused attention, straight from the cost model.
    fp32, bf16 = (step_time(prof, spec, p, ParallelConfig()).step_time_s for p in ("fp32", "bf16"))
    assert plan.iloc[0]["speedup_step"] == pytest.approx(fp32 / bf16, rel=1e-3)
    fused = step_time(transforms.fused_attention(prof), spec, "bf16", ParallelConfig())
    row = plan.set_index("tactic").loc["sdpa"]
    assert row["speedup_step"] == pytest.approx(bf16 / fused.step_time_s, rel=1e-3)
    # Alone against fp32 the fused attention would have been priced differently.
    alone = fp32 / step_time(transforms.fused_attention(prof), spec, "fp32",
                             ParallelConfig()).step_time_s
    assert abs(alone - row["speedup_step"]) > 0.01
    # The cumulative column is the running product of the steps.
    product = plan["speedup_step"].cumprod()
    assert plan["speedup_cumulative"].to_numpy() == pytest.approx(product.to_numpy(), rel=1e-3)


def test_exclusive_precisions_are_one_step_with_alternatives(gpt2_report):
    ids = [r.id for r in gpt2_report.recommendations]
    assert sum(i in ("tf32", "bf16_autocast", "fp16_autocast") for i in ids) == 1
    first = gpt2_report.recommendations[0]
    alternatives = {a["id"]: a["predicted_speedup"] for a in first.extra["alternatives"]}
    # TF32 is slower than bf16 on an H100 (494.7 vs 989.4 dense TFLOPS), so it is listed.
    assert set(alternatives) == {"tf32"} and alternatives["tf32"] < first.predicted_speedup
    assert "TF32" in gpt2_report.plan.iloc[0]["alternatives"]


@pytest.mark.slow
def test_no_noise_and_every_step_says_its_trigger(five, gpt2_report):
    reports = [r for r, _ in five.values()] + [gpt2_report]
    for report in reports:
        for rec in report.recommendations:
            assert rec.extra["trigger"], rec.id
            speed_only = not rec.memory_saving_bytes or rec.memory_saving_bytes <= 0
            if speed_only and rec.category not in ("parallelism", "memory"):
                assert rec.predicted_speedup >= MIN_SPEEDUP, (rec.id, rec.predicted_speedup)
        assert all(report.plan["trigger"].str.len() > 0)


def test_trigger_text_is_readable():
    assert trigger_text({"launch_overhead_share": 0.146, "ddp_bytes_per_device": 3 * 2**30}) \
        == "launch_overhead_share = 15%; ddp_bytes_per_device = 3.00 GiB"


def test_plan_is_in_every_rendering(gpt2_report):
    md = gpt2_report.to_markdown()
    assert "## Plan" in md and "with steps 1-k" in md
    html = gpt2_report._repr_html_()
    assert "<h2>Plan</h2>" in html and "with steps 1-k" in html
    data = gpt2_report.to_dict()["plan"]
    assert [s["tactic"] for s in data["steps"]] == list(gpt2_report.plan["tactic"])
    assert data["baseline_step_time_s"] == pytest.approx(gpt2_report.prediction.step_time_s)
    text = str(gpt2_report)
    n = len(gpt2_report.plan)
    label = "step 1" if n == 1 else f"steps 1-{n}"
    assert "As you run it:" in text and f"With {label} applied:" in text


# -- the five GPU workloads -------------------------------------------------------------

@pytest.mark.slow
def test_five_gpu_workloads_get_long_plans_of_distinct_tactics(five):
    steps = {name: [r.id for r in report.recommendations] for name, (report, _) in five.items()}
    # The issue asks for 5 steps on each; BERT-base training on the A100 gets 4 (bf16, fused
    # AdamW, torch.compile, larger batch): at batch 32 x 128 the bf16 step is device-bound,
    # so CUDA graphs save only each kernel's 0.4 us of launch (NVIDIA's figure), under 3 %;
    # they are worth 2.2x at batch 1 on the L4 (host-bound), where they come second. BERT-base
    # inference at batch 1 on the L4 used to get 4 steps for another reason: fusion was priced
    # module by module, so the residual add and its LayerNorm (a child module) stayed two
    # kernels after torch.compile; priced as one kernel, as Inductor makes it, the fusion step
    # clears 3 % (see the hand-worked test of transforms.fuse_elementwise in
    # test_transforms.py).
    assert sum(len(ids) >= 5 for ids in steps.values()) >= 4, steps
    assert all(len(ids) >= 4 for ids in steps.values()), steps
    assert "torch_compile" in steps["bert_infer_l4"], steps
    distinct = set().union(*map(set, steps.values()))
    offered = distinct | {a["id"] for report, _ in five.values()
                          for r in report.recommendations for a in r.extra.get("alternatives", ())}
    # 12 distinct steps: bf16_autocast, channels_last, cuda_graphs, dataloader, fp8, fsdp,
    # fsdp_overlap, fused_optimizer, larger_batch, optimizer_8bit, torch_compile,
    # weight_only_int4; 17 offered with the alternatives (tf32, fp16_autocast, dynamic_int8,
    # onnx_export, serving). Not 15 steps: the other tactics do not pay here by the cost
    # model's numbers (full checkpointing for a larger Llama micro-batch: 173 ms per sample at
    # batch 16 vs 128 ms at batch 4; selective saves nothing under flash attention; 2:4
    # sparsity needs a compute-bound inference step, both are memory-bound; no matmul is left
    # in fp32 under autocast for TF32; tensor parallel without sequence parallelism, as its
    # code runs, is slower than FSDP over 8), or cannot be seen in these profiles (padding for
    # sequence packing, a decode loop for a static KV cache).
    assert len(distinct) >= 12, sorted(distinct)
    assert len(offered) >= 17, sorted(offered)
    assert {"fp16_autocast", "dynamic_int8", "fp8"} <= offered  # the L4's inference choices
    for report, _ in five.values():
        cumulative = report.plan["speedup_cumulative"].iloc[-1]
        assert math.isfinite(cumulative) and cumulative > 1


@pytest.mark.slow
def test_nothing_already_applied_is_recommended(five):
    report, applied = five["bert_train_a100"]
    assert "sdpa" in applied  # transformers' BERT runs scaled_dot_product_attention
    for report, applied in five.values():
        assert not set(applied) & {r.id for r in report.recommendations}
    assert "sdpa" not in {r.id for r in five["bert_infer_l4"][0].recommendations}


# -- detection ----------------------------------------------------------------------------------

class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.conv(x).mean((2, 3)))


def test_detects_fused_and_foreach_optimizers():
    net = torch.nn.Linear(8, 8)
    assert detect(net, optimizer=torch.optim.AdamW(net.parameters())) == {}
    fused = detect(net, optimizer=torch.optim.AdamW(net.parameters(), fused=True))
    assert fused == {"fused_optimizer": "the optimizer has fused=True"}
    foreach = detect(net, optimizer=torch.optim.SGD(net.parameters(), lr=0.1, foreach=True))
    assert "foreach=True" in foreach["fused_optimizer"]


def test_detects_channels_last_compile_and_checkpointing():
    net = ConvNet()
    assert "channels_last" not in detect(net)
    net = net.to(memory_format=torch.channels_last)
    assert "'conv.weight'" in detect(net)["channels_last"]
    compiled = torch.compile(ConvNet())  # wrapping only: nothing compiles until a call
    assert "torch_compile" in detect(compiled)
    bert = _bert(num_hidden_layers=1, hidden_size=64, num_attention_heads=2,
                 intermediate_size=128)
    assert "activation_checkpointing" not in detect(bert)
    bert.gradient_checkpointing_enable()
    assert detect(bert)["activation_checkpointing"].endswith("_checkpointing is True")
    assert "sdpa" in detect(bert)


def test_detects_a_loader_with_pinned_memory_and_workers():
    data = torch.utils.data.TensorDataset(torch.zeros(4, 2))
    assert detect(dataloader=torch.utils.data.DataLoader(data)) == {}
    loader = torch.utils.data.DataLoader(data, pin_memory=True, num_workers=2)
    assert "num_workers=2" in detect(dataloader=loader)["dataloader"]


def test_tf32_switch_starts_the_plan_in_tf32():
    net = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.GELU(),
                              torch.nn.Linear(2048, 2048))
    x = torch.randn(8192, 2048)  # device-bound in bf16 (at batch 256 the host bounds it)
    before = aa.advise(net, x, hardware="A100 SXM 80GB", mode="infer")
    assert "tf32" in {a["id"] for a in before.recommendations[0].extra.get("alternatives", [])}
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        after = aa.advise(net, x, hardware="A100 SXM 80GB", mode="infer")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    first = after.recommendations[0]
    # TF32 is no longer an alternative (it is on); fp16, as fast as bf16 for inference, is.
    alternatives = {a["id"] for a in first.extra.get("alternatives", [])}
    assert first.id == "bf16_autocast" and alternatives == {"fp16_autocast"}
    # bf16 on top of TF32 gains less than on top of fp32.
    assert first.predicted_speedup < before.recommendations[0].predicted_speedup
    assert any("starts in tf32" in s for s in after.plan.attrs["skipped"])


def test_advise_takes_the_users_optimizer_and_loader():
    net = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(40)])
    x = torch.randn(65536, 256)  # device-bound (at batch 64 the host bounds every kernel)
    plain = aa.advise(net, x, hardware="H100 SXM", optimizer=torch.optim.AdamW(net.parameters()))
    fused = aa.advise(net, x, hardware="H100 SXM",
                      optimizer=torch.optim.AdamW(net.parameters(), fused=True))
    assert "fused_optimizer" in {r.id for r in plain.recommendations}
    assert "fused_optimizer" not in {r.id for r in fused.recommendations}
    assert any("fused=True" in s for s in fused.plan.attrs["skipped"])
    assert fused.with_options(batch_size=131072).plan.attrs["skipped"] == \
        fused.plan.attrs["skipped"]  # detection survives with_options


def test_optimizer_instances_map_to_update_rules():
    params = torch.nn.Linear(2, 2).parameters()
    assert optimizer_name(torch.optim.Adam(params)) == "adam"
    assert optimizer_name("adamw") == "adamw"
    with pytest.raises(aa.errors.InvalidArgumentError, match="Adagrad.*adamw"):
        optimizer_name(torch.optim.Adagrad(torch.nn.Linear(2, 2).parameters()))
