"""Tactics added for GPU plans and the attached CPU: FSDP resharding (priced by the cost model's
overlap model), CPU thread settings, inference precision choices on the L4; each fires on a
hand-worked number and stays silent where it is already applied or gains under 3 %."""

from __future__ import annotations

import ast
import dataclasses

import pytest

import aiadvisor as aa
from aiadvisor.codegen import CodeNames
from aiadvisor.errors import InvalidArgumentError
from aiadvisor.recommend import tactics
from aiadvisor.recommend.memory import PartsSource
from aiadvisor.recommend.predictor import Predictor
from aiadvisor.recommend.tactics import MIN_SPEEDUP, Context
from aiadvisor.schema import ParallelConfig


def _context(prof, config, *, spec_name="H100 SXM", precision="bf16", spec=None) -> Context:
    spec = spec or aa.hardware.get(spec_name)
    parts = PartsSource(prof)
    return Context(prof=prof, spec=spec, precision=precision, num_devices=config.num_devices,
                   config=config, plan_fits=True, parts=parts(precision),
                   names=CodeNames(model="net", optimizer="opt"), predictor=Predictor(),
                   parts_for=parts)


# -- FSDP: reshard_after_forward ----------------------------------------------------------------

def test_fsdp_keeps_gathered_weights_where_the_gathers_are_exposed(llama8b):
    ctx = _context(llama8b, ParallelConfig(dp_degree=8, zero_stage=3))
    rec = tactics.fsdp_overlap(ctx)
    assert rec is not None
    kept = ParallelConfig(dp_degree=8, zero_stage=3, reshard_after_forward=False)
    base, new = ctx.base, ctx.predict(parallel=kept)
    # The gain is the cost model's ratio; only the communication changes (one all-gather per
    # block instead of two), the compute is the same.
    assert rec.predicted_speedup == pytest.approx(base.step_time_s / new.step_time_s, rel=1e-3)
    assert rec.predicted_speedup >= MIN_SPEEDUP
    assert new.compute_s == pytest.approx(base.compute_s)
    assert new.communication_s < base.communication_s
    share = rec.extra["trigger"]["exposed_communication_share"]
    assert share == pytest.approx(base.communication_s / base.step_time_s)
    # Memory by hand: resharding holds this block and the prefetched one (2 x 218,112,000
    # bf16 parameters: q, o 4096^2, k, v 4096 x 1024, MLP 3 x 4096 x 14336, two norms);
    # keeping them holds all 8,030,261,248 parameters in bf16 at the start of backward.
    assert llama8b.num_params == 8_030_261_248
    extra = 2 * (8_030_261_248 - 2 * 218_112_000)  # 15.19e9 bytes
    assert -rec.memory_saving_bytes == pytest.approx(extra, rel=1e-6)
    assert rec.extra["trigger"]["bytes_per_device_unsharded"] <= ctx.usable_bytes
    # The code is the FSDP script with resharding off, and it uses the user's names.
    tree = ast.parse(rec.code)
    assert "reshard_after_forward = False" in rec.code and "net" in {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert kept.label == "fsdp+noreshard"


def test_fsdp_resharding_is_not_offered_when_applied_useless_or_too_big(llama8b, llama70b):
    # already applied
    kept = ParallelConfig(dp_degree=8, zero_stage=3, reshard_after_forward=False)
    assert tactics.fsdp_overlap(_context(llama8b, kept)) is None
    # under 3 %: with tensor parallel over 2 the exposed communication is the TP all-reduces;
    # the data-parallel gathers already hide under compute
    ctx = _context(llama8b, ParallelConfig(dp_degree=4, tp_degree=2, zero_stage=3))
    no_reshard = ctx.predict(parallel=dataclasses.replace(ctx.config,
                                                          reshard_after_forward=False))
    assert ctx.base.step_time_s / no_reshard.step_time_s < MIN_SPEEDUP
    assert tactics.fsdp_overlap(ctx) is None
    # Llama-3-70B: 70.6e9 bf16 parameters (141 GB) cannot stay gathered on an 80 GB H100
    assert tactics.fsdp_overlap(_context(llama70b, ParallelConfig(dp_degree=8,
                                                                  zero_stage=3))) is None


def test_reshard_after_forward_is_validated():
    with pytest.raises(InvalidArgumentError, match="zero_stage=3"):
        ParallelConfig(dp_degree=8, zero_stage=2, reshard_after_forward=False)
    with pytest.raises(InvalidArgumentError, match="True or False"):
        ParallelConfig(dp_degree=8, zero_stage=3, reshard_after_forward="no")


# -- expert parallel: the plan's step and its code ----------------------------------------------

def _mixtral(num_devices, fabric=None):
    import torch
    transformers = pytest.importorskip("transformers")

    # 8 layers of 16 experts (top-2), hidden 1024: 1.1e9 expert parameters of 1.3e9
    config = transformers.MixtralConfig(
        vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
        num_attention_heads=16, num_key_value_heads=8, num_local_experts=16,
        num_experts_per_tok=2)
    with torch.device("meta"):
        model = transformers.MixtralForCausalLM(config)
    tokens = torch.zeros(4, 2048, dtype=torch.long, device="meta")
    options = {"fabric": fabric} if fabric else {}
    return aa.advise(model, tokens, mode="train", hardware="H100 SXM", num_devices=num_devices,
                     model_name="net", **options)


@pytest.mark.slow
def test_plan_has_an_expert_parallel_step_when_an_ep_plan_ranks_first():
    # 4 nodes on 25 GbE: ZeRO-2's gradient reduce-scatter crosses the slow NICs; with the 16
    # experts split over 8 devices their gradients reduce over 4 devices with 1/8 of the
    # bytes, so zero2+ep8 ranks first.
    report = _mixtral(32, fabric="Ethernet 25GbE")
    top = report.parallel.iloc[0]
    assert (top["strategy"], top["ep"]) == ("zero2+ep8", 8)
    steps = {r.id: r for r in report.recommendations}
    rec = steps["expert_parallel"]
    assert rec.title.endswith("(2 experts each)")  # 16 experts / 8 devices
    assert rec.extra["trigger"]["num_experts"] == 16
    # Priced by the cost model's EP estimate against the same plan without EP (the step
    # before it, ZeRO-2 over 32 devices, in bf16).
    spec, prof = report.hardware_spec, report.profile
    predictor = Predictor(fabric="Ethernet 25GbE")
    ep = ParallelConfig(dp_degree=32, zero_stage=2, ep_degree=8)
    with_ep = predictor(prof, spec, precision="bf16", parallel=ep)
    without = predictor(prof, spec, precision="bf16",
                        parallel=dataclasses.replace(ep, ep_degree=1))
    assert rec.predicted_speedup == pytest.approx(without.step_time_s / with_ep.step_time_s,
                                                  rel=1e-3)
    assert rec.memory_saving_bytes > 0
    # The code: a (4, 8) device mesh, the user's names, a torchrun script.
    assert "mesh_dim_names=(\"dp\", \"ep\")" in rec.code and "(4, 8)" in rec.code
    assert rec.extra["launcher"] == "torchrun"
    assert "net" in {n.id for n in ast.walk(ast.parse(rec.code)) if isinstance(n, ast.Name)}
    # Later steps are priced on top of the EP plan (their predictions exist).
    later = list(steps)[list(steps).index("expert_parallel") + 1:]
    assert later and all(steps[t].predicted_speedup for t in later)


@pytest.mark.slow
def test_no_expert_parallel_step_when_no_ep_plan_ranks_first(llama8b):
    # One NVLink node: FSDP without EP ranks first (EP only adds all-to-alls there).
    report = _mixtral(8)
    assert report.parallel.iloc[0]["ep"] == 1
    assert "expert_parallel" not in {r.id for r in report.recommendations}
    # A dense model has no experts to split, whatever the config says.
    ctx = _context(llama8b, ParallelConfig(dp_degree=8, zero_stage=3))
    assert tactics.expert_parallel(ctx) is None


# -- CPU thread settings ------------------------------------------------------------------------

def _cpu_context(prof, threads):
    from aiadvisor.hardware.threads import ThreadSettings

    ctx = _context(prof, ParallelConfig(), spec_name="Intel Xeon Platinum 8480+",
                   precision="fp32")
    return dataclasses.replace(ctx, threads=ThreadSettings(
        intra_op_threads=threads, inter_op_threads=threads, usable_cores=56,
        source="physical cores"))


@pytest.fixture(scope="module")
def mlp_train():
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                              torch.nn.Linear(4096, 1024))
    return aa.profile(net, torch.randn(256, 1024), mode="train")


def test_cpu_threads_fire_when_torch_uses_fewer_threads_than_cores(mlp_train):
    # 14 intra-op threads on the Xeon 8480+'s 56 cores: the compute-bound ops take 14/56 of
    # their time, the rest of the step stays.
    ctx = _cpu_context(mlp_train, 14)
    rec = tactics.cpu_threads(ctx)
    assert rec is not None
    base = ctx.base
    by_hand = base.step_time_s / (base.step_time_s - base.compute_s * (1 - 14 / 56))
    assert rec.predicted_speedup == pytest.approx(by_hand, rel=1e-3)
    assert rec.extra["trigger"]["intra_op_threads"] == 14
    assert rec.extra["trigger"]["usable_cores"] == 56
    assert "torch.set_num_threads(56)" in rec.code and "14" in rec.code
    ast.parse(rec.code)


def test_cpu_threads_silent_when_set_or_below_three_percent(mlp_train):
    assert tactics.cpu_threads(_cpu_context(mlp_train, 56)) is None  # already at the cores
    assert tactics.cpu_threads(_cpu_context(mlp_train, 64)) is None  # more is not priced
    # 55 of 56: at most 1/56 = 1.8 % of the compute-bound part comes back, under 3 %
    assert tactics.cpu_threads(_cpu_context(mlp_train, 55)) is None
    # a GPU or a catalog CPU without thread figures: nothing to say
    gpu = _context(mlp_train, ParallelConfig(), precision="fp32")
    assert tactics.cpu_threads(gpu) is None
    catalog = _context(mlp_train, ParallelConfig(), spec_name="Intel Xeon Platinum 8480+",
                       precision="fp32")
    assert tactics.cpu_threads(catalog) is None


def test_usable_cores_take_the_tightest_limit(tmp_path):
    from aiadvisor.hardware.threads import cgroup_cpu_limit, usable_cores

    (tmp_path / "cpu.max").write_text("200000 100000\n")  # Binder-style 2-CPU quota
    assert cgroup_cpu_limit(str(tmp_path)) == 2.0
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_limit(str(tmp_path)) is None
    # 64 logical CPUs of 32 physical cores in the container, quota 2.5 -> 2 cores
    assert usable_cores(physical_cores=32, affinity=64, quota=2.5) == (2, "container CPU quota")
    assert usable_cores(physical_cores=32, affinity=8, quota=None) == (8, "CPU affinity")


# -- inference precision and batch choices on the L4 -------------------------------------------

def _bert_l4(batch=1, hardware="L4"):
    import torch
    transformers = pytest.importorskip("transformers")

    with torch.device("meta"):
        model = transformers.BertForSequenceClassification(transformers.BertConfig())
    tokens = torch.randint(0, 30522, (batch, 128), device="meta")
    return aa.advise(model, tokens, mode="infer", hardware=hardware, model_name="net")


@pytest.fixture(scope="module")
def bert_l4():
    return _bert_l4()


def test_l4_inference_offers_fp8_int8_and_fp16_choices(bert_l4):
    steps = {r.id: r for r in bert_l4.recommendations}
    ids = [r.id for r in bert_l4.recommendations]
    # At batch 1 eager PyTorch's host time (228 kernels at 27.5 us, 6.3 ms) bounds the step
    # once its matmuls run in 16 bit: bf16 gains little where it stands (ranked by the
    # device's time, not tied with TF32 on the host-bound step), the CUDA graphs after it much.
    assert ids[:2] == ["bf16_autocast", "cuda_graphs"]
    assert steps["cuda_graphs"].predicted_speedup > 1.5
    first = steps["bf16_autocast"]
    alternatives = {a["id"]: a for a in first.extra["alternatives"]}
    # fp16 is as fast as bf16 on the L4 (121 dense TFLOPS each): listed, not a second step
    assert alternatives["fp16_autocast"]["predicted_speedup"] == pytest.approx(
        first.predicted_speedup, rel=1e-3)
    assert "loss scaling" not in alternatives["fp16_autocast"]["title"]
    # The weight format is one step; FP8 and W8A8 int8 (the L4 has 242.5 dense TOPS/TFLOPS of
    # each) are its alternatives, priced against the same state.
    fmt = next(r for r in bert_l4.recommendations if r.id in ("weight_only_int4", "fp8",
                                                               "dynamic_int8"))
    offered = {fmt.id} | {a["id"] for a in fmt.extra.get("alternatives", ())}
    assert {"fp8", "dynamic_int8"} <= offered
    assert "sdpa" not in steps  # transformers' BERT already runs SDPA


def test_fp8_and_int8_inference_code_and_trigger(bert_l4):
    prof = bert_l4.profile
    # As the plan prices them: after its CUDA-graphs step (no host bound).
    spec = dataclasses.replace(aa.hardware.get("L4"), graph_replay=True)
    ctx = _context(prof, ParallelConfig(), spec=spec, precision="bf16")
    fp8 = tactics.fp8(ctx)
    int8 = tactics.dynamic_int8(ctx)
    # GEMM share by hand: per token and layer 4 x 768^2 + 2 x 768 x 3072 multiply-adds =
    # 14.16 MFLOP, x 12 layers x 128 tokens = 21.74 GFLOP (+ pooler and classifier, 1.2 MFLOP);
    # attention 2 x 128^2 x 64 x 2 x 12 heads x 12 layers = 0.604 GFLOP.
    gemm = 2 * 128 * 12 * (4 * 768**2 + 2 * 768 * 3072) + 2 * (768 * 768 + 768 * 2)
    share = gemm / (gemm + 2 * 128**2 * 64 * 2 * 12 * 12)
    assert fp8.extra["trigger"]["gemm_flops_share"] == pytest.approx(share, rel=2e-3)
    for rec, config in ((fp8, "Float8DynamicActivationFloat8WeightConfig"),
                        (int8, "Int8DynamicActivationInt8WeightConfig")):
        assert config in rec.code and "convert_to_float8_training" not in rec.code
        assert "net" in {n.id for n in ast.walk(ast.parse(rec.code)) if isinstance(n, ast.Name)}
    # each priced as the cost model's ratio at that precision
    for rec, precision in ((fp8, "fp8"), (int8, "int8")):
        ratio = ctx.base.step_time_s / ctx.predict(precision=precision).step_time_s
        assert rec.predicted_speedup == pytest.approx(ratio, rel=1e-3)
    # already in int8 (or training, or a T4 without FP8): not offered
    assert tactics.dynamic_int8(dataclasses.replace(ctx, precision="int8", _base=None)) is None
    t4 = _context(prof, ParallelConfig(), spec_name="T4", precision="fp16")
    assert tactics.fp8(t4) is None


def test_inference_batch_step_says_it_trades_latency(bert_l4):
    rec = next(r for r in bert_l4.recommendations if r.id == "larger_batch")
    assert "latency" in rec.title and "latency-for-throughput" in rec.rationale
    assert "learning rate" not in rec.rationale
    assert "def serve(requests)" in rec.code
    batch = rec.extra["effect"]["batch_size"]
    assert f"{batch} requests per call" in rec.title


def test_cpu_threads_read_from_this_process_for_the_attached_cpu(mlp_train):
    import torch

    from aiadvisor.hardware.threads import is_local_cpu, thread_settings

    detected = aa.hardware.detect(benchmark=False)
    if detected.kind != "cpu" or thread_settings().usable_cores < 2:
        pytest.skip("needs an attached CPU with at least 2 usable cores")
    # The detected spec has no bandwidth until benchmarked: give it one so that the
    # MLP's GEMMs are compute-bound, as a benchmark finds them.
    spec = dataclasses.replace(detected, memory_bw_gbs=20.0)
    assert is_local_cpu(spec) and not is_local_cpu(aa.hardware.get("Intel Xeon Platinum 8480+"))
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        ctx = _context(mlp_train, ParallelConfig(), spec=spec, precision="fp32")
        rec = tactics.cpu_threads(ctx)
    finally:
        torch.set_num_threads(old)
    assert rec is not None and rec.extra["trigger"]["intra_op_threads"] == 1
    cores = rec.extra["trigger"]["usable_cores"]
    assert cores == thread_settings().usable_cores >= 2
    base = ctx.base
    assert rec.predicted_speedup == pytest.approx(
        base.step_time_s / (base.step_time_s - base.compute_s * (1 - 1 / cores)), rel=1e-3)


def test_compile_after_cuda_graphs_keeps_the_graphs_in_one_call():
    import torch
    transformers = pytest.importorskip("transformers")

    # GPT-2 at batch 1 on the L4: launch-bound (CUDA graphs), then fusion on top. Applying the
    # second step's code must not drop the first step's graphs: one compile call with both.
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    report = aa.advise(model, torch.randint(0, 50257, (1, 128), device="meta"), mode="infer",
                       hardware="L4", model_name="net")
    steps = [r.id for r in report.recommendations]
    assert steps.index("cuda_graphs") < steps.index("torch_compile")
    graphs = report.recommendations[steps.index("cuda_graphs")]
    fused = report.recommendations[steps.index("torch_compile")]
    assert 'net.compile(backend="cudagraphs")' in graphs.code
    assert "net.compile(mode='reduce-overhead')" in fused.code
    assert "replaces its backend" in fused.rationale
    # Without the graphs step before it (a CPU), plain default mode.
    cpu = _context(report.profile, ParallelConfig(), spec_name="Intel Xeon Platinum 8480+",
                   precision="fp32")
    rec = tactics.torch_compile(cpu)
    assert rec is None or "mode='default'" in rec.code


# -- fused optimizer on a CPU -------------------------------------------------------------------

def test_fused_optimizer_fires_on_the_attached_cpu_for_few_tensors(tmp_path):
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(),
                              torch.nn.Linear(1024, 256))
    prof = aa.profile(net, torch.randn(32, 256), mode="train")
    local = aa.hardware.detect(cache_dir=str(tmp_path))        # unbenchmarked attached CPU
    if local.kind != "cpu":
        pytest.skip("the attached device is not a CPU")
    ctx = _context(prof, ParallelConfig(), spec=local, precision="fp32")
    rec = tactics.fused_optimizer(ctx)
    # 4 parameter tensors: on a GPU that is too few launches to matter ...
    assert tactics.fused_optimizer(_context(prof, ParallelConfig(), precision="fp32")) is None
    # ... on a CPU the default loop streams 20 tensors an element where a fused AdamW streams
    # 7. Measured on the development CPU (2-core Xeon VM, median of 300 steps): the whole step
    # 1.9-3.4 ms with the default AdamW over four runs, 1.02-1.06 ms fused (1.8-3.2x).
    assert rec is not None and rec.extra["trigger"]["optimizer_launches"] == 4
    assert 1.3 < rec.predicted_speedup < 4.0
    assert "fused=True" in rec.code and "20 tensor passes per element" in rec.rationale
    assert "makes 7" in rec.rationale
    ast.parse(rec.code)


def test_compile_is_not_offered_for_cpu_training_but_is_for_cpu_inference():
    import torch
    transformers = pytest.importorskip("transformers")

    config = transformers.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=256)
    torch.manual_seed(0)
    model = transformers.BertModel(config, add_pooling_layer=False)
    ids = torch.randint(0, 1000, (4, 64))
    cpu = "Intel Xeon Platinum 8480+"
    train = aa.profile(model, ids, mode="train")
    infer = aa.profile(model, ids, mode="infer")
    # Measured no gain when training on a CPU (ResNet 0.91x, BERT-4L 1.02x FP32), so never
    # offered there; the same model in inference still gets priced (and the rule may fire).
    assert tactics.torch_compile(_context(train, ParallelConfig(), spec_name=cpu,
                                          precision="fp32")) is None
    gpu = tactics.torch_compile(_context(train, ParallelConfig(), spec_name="L4",
                                         precision="bf16"))
    assert gpu is not None and gpu.predicted_speedup > 1.03
    rec = tactics.torch_compile(_context(infer, ParallelConfig(), spec_name=cpu,
                                         precision="fp32"))
    assert rec is not None and rec.predicted_speedup > 1.03


def test_embedding_int8_is_noise_where_its_saving_is_under_one_percent_of_memory():
    import torch
    from torch import nn

    from aiadvisor.recommend.tactics import MIN_MEMORY_SHARE

    class Lookup(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(8192, 256)          # 2.1 M parameters, FP32: 8 MiB
            self.out = nn.Linear(256, 256)

        def forward(self, ids):
            return self.out(self.emb(ids))

    torch.manual_seed(0)
    prof = aa.profile(Lookup(), torch.randint(0, 8192, (8, 128)), mode="infer")
    # 8-bit rows save 2,097,152 x 3 bytes = 6 MiB in FP32: 0.03 % of a 23 GB CPU's usable
    # memory (dropped), 7 % of a 0.1 GB device's (offered, saying so).
    assert MIN_MEMORY_SHARE == 0.01
    cpu = aa.hardware.get("Intel Xeon Platinum 8480+")
    big = dataclasses.replace(cpu, memory_gb=23.0)
    small = dataclasses.replace(cpu, memory_gb=0.1)
    assert tactics.embedding_int8(_context(prof, ParallelConfig(), spec=big,
                                           precision="fp32")) is None
    rec = tactics.embedding_int8(_context(prof, ParallelConfig(), spec=small, precision="fp32"))
    assert rec is not None and rec.memory_saving_bytes == 2_097_152 * 3
    assert "lookups get slower" in rec.rationale


def test_a_cpu_bf16_peak_says_whether_it_was_measured_or_estimated(mlp_train):
    # The attached CPU before its benchmark: 2 cores x 2600 MHz x 1024 bf16 FLOP/cycle (AMX)
    # = 5.3248 TFLOPS, a figure worked out from /proc/cpuinfo, not timed; after the benchmark
    # timed bf16 it is the best matmul measured. A catalog CPU's figure is its datasheet's.
    from aiadvisor.hardware.detection import ANCHOR_MARK, BF16_ESTIMATE_MARK
    from aiadvisor.schema import HardwareSpec

    detected = HardwareSpec(name="Local Xeon", vendor="Intel", kind="cpu", fp32_tflops=0.3328,
                            bf16_tflops=5.3248, memory_gb=16, memory_bw_gbs=30,
                            source="detected: /proc/cpuinfo, /proc/meminfo",
                            notes=f"{BF16_ESTIMATE_MARK}, not measured: 2 cores x 2600 MHz")
    benchmarked = dataclasses.replace(detected, measured=True, bf16_tflops=2.1, notes="")

    def rationale(spec):
        ctx = _context(mlp_train, ParallelConfig(), spec=spec, precision="fp32")
        rec = tactics.bf16_autocast(ctx)
        assert rec is not None
        return rec.rationale

    assert "has 5.325 dense bf16 TFLOPS (estimated from its ISA flags and clock, a peak: not " \
           "measured)" in rationale(detected)
    assert "has 2.1 dense bf16 TFLOPS (the best matmul measured on it)" in rationale(benchmarked)
    # Scaled by the quick matmul (detection.anchored_cpu_spec): still an estimate, said so.
    anchored = dataclasses.replace(detected, bf16_tflops=7.0,
                                   notes=f"{ANCHOR_MARK} (x1.31): ... " + detected.notes)
    assert "has 7 dense bf16 TFLOPS (estimated from its ISA flags and clock, scaled by a quick " \
           "matmul, a peak: not measured)" in rationale(anchored)
    catalog = _context(mlp_train, ParallelConfig(), spec_name="Intel Xeon Platinum 8480+",
                       precision="fp32").spec
    rec = tactics.bf16_autocast(_context(mlp_train, ParallelConfig(), spec=catalog,
                                         precision="fp32"))
    assert rec is not None and "estimated" not in rec.rationale and "measured" not in \
        rec.rationale
