"""Multi-node LLM pre-training: predicted vs published per-GPU throughput, next to the
"6 N FLOPs per token at 40 % of dense peak" rule, a dense-peak roofline (every executed FLOP
at the dense peak) and the old flat ~10 GB/s network model, per scale bucket (16-64,
96-1024, 2048-16384 devices).

Published figures come from the papers and reports named per row (held-out validation:
nothing in the cost model was fitted to them; the fabric efficiencies are the table's
NCCL/vendor figures). Each row is predicted with the layout, batch and network the source
describes (what it leaves open is marked "assumed" in the row's notes): TP/PP/DP degrees,
ZeRO stage, global batch and micro-batches, sequence length, activation recompute, Llama 3's
interleaved pipeline (virtual stages; its count assumed), each pipeline paced by its slowest
stage (Megatron-LM's partition: equal blocks per stage, the embedding on the first, the LM
head and loss on the last) and, for the runs of 2021-22 (NeoX, BLOOM, OPT, MT-NLG), the stack
as it was then: attention without FlashAttention (``DecoderConfig(attention="explicit")``:
the full score matrix in memory), tensor parallel without sequence parallelism
(``ParallelConfig(sequence_parallel=False)``: every TP rank runs the norms and residual adds
on the whole sequence; Korthikanti et al., May 2022) and, on DeepSpeed's pipeline engine
(NeoX, BLOOM, MT-NLG), the data-parallel gradient reduction after the pipeline flush
(``overlap_grad_reduce=False``).

Comparison unit: the figure the source reports. Tokens/s/GPU rows compare directly; TFLOP/s
rows convert predicted tokens/s with the paper's own FLOPs convention: ``model`` = (6 N + 12 l
h s) per token (PaLM's and Llama 3's MFU), ``hfu`` = the same x 4/3 (Megatron-DeepSpeed's
formula counts the recomputed forward under full activation checkpointing).

Usage: ``python bench/costmodel_multinode.py`` (about 40 s: profiles the models on meta).
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


@dataclass
class Row:
    name: str
    cfg: dict
    hardware: str
    precision: str
    seq_len: int
    global_batch: int
    layout: dict
    published: float
    unit: str            # "tokens/s/GPU" or "TFLOP/s/GPU"
    convention: str      # "tokens", "model" or "hfu"
    source: str
    fabric: object = None
    notes: list[str] = field(default_factory=list)
    attention: str = "sdpa"  # "explicit": the stack predates FlashAttention (May 2022)
    node_size: int | None = None  # devices per node where the cluster's differ from the usual


#: Llama 3 ran Megatron's interleaved 1F1B (paper sec. 3.3.2, "pipeline parallelism
#: improvements"); its number of virtual stages was not retrieved, so the least interleaving
#: (2 chunks per device) is assumed, chosen before looking at the result; main() prints the
#: rows at v = 1, 2 and 4 beside it.
LLAMA3_V = 2
LLAMA3_NOTES = ["no activation checkpointing (the paper trains 8K sequences without it; as "
                "recalled)", f"interleaved pipeline, {LLAMA3_V} virtual stages per device assumed "
                "(the paper's count not retrieved)", "batch per DP replica 32 (8K GPUs) / 16 "
                "(16K GPUs) sequences of 8192, micro-batch 1 (table 4)"]

PRE_FLASH = ("explicit attention: the run (2021-22 Megatron/DeepSpeed/fairseq stack) "
             "predates FlashAttention (Dao et al., May 2022)")

DEEPSPEED_PIPE = ("data-parallel gradients reduced after the pipeline flush (DeepSpeed's "
                  "pipeline engine: overlap_grad_reduce=False)")

MT_NLG_CFG = dict(vocab_size=51200, hidden_size=20480, num_layers=105, num_heads=128,
                  style="gpt2")

#: KempnerForge's dense models (its weak-scaling README's table): Llama-3 vocabulary, GQA.
KEMPNER_CFG = {
    "7B": dict(vocab_size=128256, hidden_size=4096, num_layers=32, num_heads=32,
               num_kv_heads=8, intermediate_size=14336, style="llama"),
    "13B": dict(vocab_size=128256, hidden_size=5120, num_layers=40, num_heads=40,
                num_kv_heads=8, intermediate_size=17920, style="llama"),
    "70B": dict(vocab_size=128256, hidden_size=8192, num_layers=80, num_heads=64,
                num_kv_heads=8, intermediate_size=28672, style="llama"),
}

#: Llama 2 shapes (the 34B was described in the Llama 2 paper, never released: 48 layers,
#: GQA with 8 key/value heads as the 70B).
FMS_CFG = {
    "34b": dict(vocab_size=32000, hidden_size=8192, num_layers=48, num_heads=64,
                num_kv_heads=8, intermediate_size=22016, style="llama"),
    "70b": dict(vocab_size=32000, hidden_size=8192, num_layers=80, num_heads=64,
                num_kv_heads=8, intermediate_size=28672, style="llama"),
}

ROWS = [
    Row("GPT-NeoX-20B", dict(vocab_size=50432, hidden_size=6144, num_layers=44, num_heads=64,
                             intermediate_size=24576, style="gpt2"),
        "NVIDIA A100 40GB SXM", "fp16", 2048, 1536,
        dict(dp_degree=12, tp_degree=2, pp_degree=4, zero_stage=1, checkpointing="full",
             num_microbatches=32, sequence_parallel=False,
             overlap_grad_reduce=False),
        117.0, "TFLOP/s/GPU", "hfu",
        "GPT-NeoX-20B paper (Black et al. 2022), sec. 3: 96 A100-40GB, TP2 PP4, ~117 TFLOP/s "
        "per GPU; 12 servers, 4 ConnectX-6 HDR HCAs per 8 GPUs",
        fabric={"gbps": 100.0, "latency_us": 1.5, "efficiency": 0.85,
                "name": "HDR, 4 x 200 Gb/s per 8 GPUs"},
        notes=["batch 1536 of the paper's 1538 (divisible by dp 12)",
               "micro-batches 32 of 4 per replica (NeoX 20B.yml: micro-batch 4, gradient "
               "accumulation 32; as recalled)", "TFLOP/s counted with recompute (NeoX get_flops)",
               PRE_FLASH, DEEPSPEED_PIPE],
        attention="explicit"),
    Row("BLOOM-176B", dict(vocab_size=250880, hidden_size=14336, num_layers=70, num_heads=112,
                           style="gpt2"),
        "NVIDIA A100 80GB SXM", "bf16", 2048, 2048,
        dict(dp_degree=8, tp_degree=4, pp_degree=12, zero_stage=1, checkpointing="full",
             num_microbatches=128, sequence_parallel=False,
             overlap_grad_reduce=False),
        150.0, "TFLOP/s/GPU", "hfu",
        "BigScience BLOOM-176B training notes / BLOOM paper (2022): 384 A100-80GB, TP4 PP12 "
        "DP8, ~150 TFLOP/s; Jean Zay nodes: 4 x 100 Gb/s Omni-Path per 8 GPUs",
        fabric={"gbps": 50.0, "latency_us": 2.0, "efficiency": 0.8,
                "name": "Omni-Path, 4 x 100 Gb/s per 8 GPUs"},
        notes=["micro-batch 2 (128 per replica) assumed", "Omni-Path efficiency assumed as RoCE",
               PRE_FLASH, DEEPSPEED_PIPE],
        attention="explicit"),
    Row("OPT-175B", dict(vocab_size=50272, hidden_size=12288, num_layers=96, num_heads=96,
                         style="gpt2"),
        "NVIDIA A100 80GB SXM", "fp16", 2048, 992,
        dict(dp_degree=124, tp_degree=8, zero_stage=3, checkpointing="full",
             sequence_parallel=False),
        147.0, "TFLOP/s/GPU", "hfu",
        "OPT paper (Zhang et al. 2022), sec. 2.4: 992 A100-80GB, FSDP + Megatron TP8, up to "
        "147 TFLOP/s per GPU (figure as recalled; not retrieved by the search tool)",
        notes=["batch 992 x 2048 (~2M tokens) so dp 124 divides it",
               "8 x 200 Gb/s HDR per node (Azure NDm A100 v4) assumed",
               "TFLOP/s counted with recompute assumed", PRE_FLASH],
        attention="explicit"),
    Row("MT-NLG 530B, 3360 GPUs", MT_NLG_CFG,
        "NVIDIA A100 80GB SXM", "bf16", 2048, 1920,
        dict(dp_degree=12, tp_degree=8, pp_degree=35, zero_stage=1, checkpointing="full",
             num_microbatches=160, sequence_parallel=False,
             overlap_grad_reduce=False),
        113.0, "TFLOP/s/GPU", "hfu",
        "MT-NLG paper (Smith et al. 2022) / Microsoft-NVIDIA blog 'Using DeepSpeed and "
        "Megatron to train MT-NLG 530B': 3360 A100-80GB (420 DGX A100, HDR InfiniBand), TP8 "
        "PP35, batch 1920, 44.4 s per iteration, 113 TFLOP/s per GPU (sec. 2.4, as quoted by "
        "llm-analysis' MT-NLG example)",
        notes=["micro-batch 1 (160 per replica) assumed", "ZeRO-1 data parallel assumed",
               PRE_FLASH, DEEPSPEED_PIPE],
        attention="explicit"),
    Row("LLaMA-65B", dict(vocab_size=32000, hidden_size=8192, num_layers=80, num_heads=64,
                          intermediate_size=22016, style="llama"),
        "NVIDIA A100 80GB SXM", "bf16", 2048, 2048,
        dict(dp_degree=256, tp_degree=8, zero_stage=3, checkpointing="selective"),
        380.0, "tokens/s/GPU", "tokens",
        "LLaMA paper (Touvron et al. 2023), sec. 2.4: ~380 tokens/s/GPU on 2048 A100-80GB, "
        "4M-token batch, model + sequence parallelism, saved expensive activations",
        notes=["TP8 + FSDP layout assumed (the paper names no degrees)"]),
    Row("Llama 3 405B, 8K GPUs", dict(vocab_size=128256, hidden_size=16384, num_layers=126,
                                      num_heads=128, num_kv_heads=8, intermediate_size=53248,
                                      style="llama"),
        "NVIDIA H100 SXM", "bf16", 8192, 2048,
        dict(dp_degree=64, tp_degree=8, pp_degree=16, zero_stage=1, num_microbatches=32,
             virtual_stages=LLAMA3_V),
        430.0, "TFLOP/s/GPU", "model",
        "Llama 3 paper (2024), table 4: 8192 H100, TP8 CP1 PP16 DP64, seq 8192, 430 TFLOP/s "
        "(43 % BF16 MFU); RoCE 400 Gb/s per GPU (figures as recalled; table not retrieved)",
        fabric="RoCE 400G", notes=LLAMA3_NOTES),
    Row("Llama 3 405B, 16K GPUs", dict(vocab_size=128256, hidden_size=16384, num_layers=126,
                                       num_heads=128, num_kv_heads=8, intermediate_size=53248,
                                       style="llama"),
        "NVIDIA H100 SXM", "bf16", 8192, 2048,
        dict(dp_degree=128, tp_degree=8, pp_degree=16, zero_stage=1, num_microbatches=16,
             virtual_stages=LLAMA3_V),
        400.0, "TFLOP/s/GPU", "model",
        "Llama 3 paper (2024), table 4: 16384 H100, TP8 CP1 PP16 DP128, 400 TFLOP/s (41 % MFU)",
        fabric="RoCE 400G", notes=LLAMA3_NOTES),
    Row("PaLM 540B", dict(vocab_size=256000, hidden_size=18432, num_layers=118, num_heads=48,
                          num_kv_heads=1, intermediate_size=73728, style="llama"),
        "Google TPU v4", "bf16", 2048, 2048,
        dict(dp_degree=512, tp_degree=12, zero_stage=3, checkpointing="full"),
        0.462 * 275, "TFLOP/s/GPU", "model",
        "PaLM paper (Chowdhery et al. 2022), sec. 4 and table 3: 6144 TPU v4 in 2 pods, 12-way "
        "model x 256-way data per pod, 46.2 % MFU of 275 TFLOP/s",
        notes=["weights sharded over data as ZeRO-3", "rematerialisation as full checkpointing"]),
    *[Row(f"MT-NLG 530B, {gpus} GPUs", MT_NLG_CFG, "NVIDIA A100 80GB SXM", "bf16", 2048, 1920,
          dict(dp_degree=gpus // 280, tp_degree=8, pp_degree=35, zero_stage=1,
               checkpointing="full", num_microbatches=1920 // (gpus // 280),
               sequence_parallel=False, overlap_grad_reduce=False),
          tflops, "TFLOP/s/GPU", "hfu",
          f"MT-NLG paper (Smith et al. 2022), sec. 2.4 (as quoted by llm-analysis' MT-NLG "
          f"example): batch 1920 on {gpus // 8} DGX A100, {seconds} s per iteration, "
          f"{tflops:.0f} TFLOP/s per GPU",
          notes=["micro-batch 1 assumed", "ZeRO-1 data parallel assumed", PRE_FLASH,
                 DEEPSPEED_PIPE], attention="explicit")
      for gpus, seconds, tflops in ((2240, 60.1, 126.0), (2800, 50.2, 121.0))],
    *[Row(f"fms-fsdp Llama 2 {size}, 128 GPUs", FMS_CFG[size], "NVIDIA A100 80GB SXM", "bf16",
          4096, 128 * batch, dict(dp_degree=128, zero_stage=3, checkpointing="full"),
          tokens_s, "tokens/s/GPU", "tokens",
          f"IBM foundation-model-stack/fms-fsdp README (PyTorch FSDP, SDPA flash attention): "
          f"Llama 2 {size} on 128 A100, FSDP sharding, activation checkpointing True, batch "
          f"{batch} per GPU, {tokens_s} token/gpu/sec",
          notes=["A100 80GB SXM and the catalog's default network (8 x 200 Gb/s HDR per node) "
                 "assumed: the README names neither", "sequence length 4096 (Llama 2's; "
                 "the README's 4k context)", "checkpointing of every block assumed"])
      for size, batch, tokens_s in (("34b", 8, 772), ("70b", 6, 380))],
    *[Row(f"KempnerForge {size}, {gpus} GPUs", KEMPNER_CFG[size], "NVIDIA H200 SXM", "bf16",
          4096, gpus // 4 * micro * 4,
          dict(dp_degree=gpus // 4, tp_degree=4, zero_stage=3, checkpointing="full",
               grad_accum_steps=4),
          tokens_s / gpus, "tokens/s/GPU", "tokens",
          f"KempnerForge benchmarks/weak_scaling_160gpu/README.md (Kempner Institute, "
          f"2026-06-30): Llama-3-style {size}, {gpus} H200 141GB (4 per node, NVLink; "
          f"InfiniBand between nodes), TP4 x FSDP{gpus // 4}, full activation checkpointing, "
          f"bf16, seq 4096, batch {micro} per GPU, grad_accum 4: {tokens_s:,} tok/s",
          node_size=4,
          notes=["NICs not stated: the catalog's H200 default (one 400 Gb/s NDR NIC per GPU) "
                 "assumed", "sequence parallelism with TP assumed"])
      for size, gpus, micro, tokens_s in (("13B", 32, 4, 110373), ("13B", 64, 4, 216507),
                                          ("13B", 128, 4, 423306), ("70B", 32, 2, 18688),
                                          ("70B", 64, 2, 35824), ("70B", 128, 2, 69985))],
    *[Row(f"KempnerForge {size}, {gpus} GPUs (Apr.)", KEMPNER_CFG[size], "NVIDIA H200 SXM",
          "bf16", 4096, gpus // 4 * 4 * accum,
          dict(dp_degree=gpus // 4, tp_degree=4, zero_stage=3, checkpointing="full",
               grad_accum_steps=accum),
          tokens_s / gpus, "tokens/s/GPU", "tokens",
          f"KempnerForge benchmarks/mfu_scaling/mfu_scaling_2026-04-05.md: Llama-3-style "
          f"{size}, {gpus} H200 (4 per node), TP=4+FSDP={gpus // 4}, full activation "
          f"checkpointing, bf16, seq 4096, batch 4 x grad_accum {accum}, torch.compile: "
          f"{tokens_s:,} tok/s", node_size=4,
          notes=["NICs not stated: one 400 Gb/s NDR NIC per GPU assumed",
                 "sequence parallelism with TP assumed",
                 "compiled (torch.compile=true); predicted as eager PyTorch"])
      for size, gpus, accum, tokens_s in (("7B", 16, 2, 82988), ("13B", 16, 4, 53814),
                                          ("7B", 32, 2, 155917))],
]


def flops_per_token(prof, row: Row) -> float:
    """FLOPs per token as the row's paper counts them."""
    layers, hidden, s = row.cfg["num_layers"], row.cfg["hidden_size"], row.seq_len
    if row.convention == "hfu":
        # Megatron-DeepSpeed / GPT-NeoX logging (megatron/utils.py, gpt-neox
        # megatron/logging.py get_flops): 24 f l h^2 (1 + s / 6h + V / 16 l h) per token,
        # f = 4 with activation checkpointing (the forward runs twice), else 3.
        vocab = row.cfg["vocab_size"]
        factor = 4 if row.layout.get("checkpointing") == "full" else 3
        return 24 * factor * layers * hidden**2 * (1 + s / (6 * hidden)
                                                   + vocab / (16 * layers * hidden))
    return 6 * prof.num_params + 12 * layers * hidden * s


def build(row: Row):
    import torch

    from aiadvisor.examples import DecoderConfig, _build_decoder

    cfg = DecoderConfig(max_positions=row.seq_len, attention=row.attention, **row.cfg)
    with torch.device("meta"):
        model = _build_decoder(cfg)
    # Traced at batch 2, not 1: with one sequence, reshapes that merge the batch and head
    # dimensions are free views, so the copies a real batch makes would be missing from the
    # trace and the batch scaling would extrapolate their count from nothing.
    return model, torch.randint(0, 1000, (2, row.seq_len), device="meta")


def old_step_s(prof, spec, precision, parallel) -> float:
    """The model as it was before fabrics: the flat fitted ~10 GB/s inter-node figure."""
    from aiadvisor.costmodel.api import _ops
    from aiadvisor.costmodel.devices import device_arrays
    from aiadvisor.costmodel.model import load_model
    from aiadvisor.costmodel.precision import MEASURED_PRECISIONS
    from aiadvisor.costmodel.predict import step_parts

    model = load_model()
    parts = step_parts(prof, _ops(prof), precision, parallel,
                       device_arrays([spec], precision, model), model,
                       measured_precision=precision in MEASURED_PRECISIONS, networks=None)
    return float(parts.total_s[1, 0])


def stage_ratio(pred) -> float:
    """Slowest / average pipeline stage, as the prediction's note reports it (1 without one)."""
    for note in pred.notes:
        found = re.search(r"slowest stage, up to ([0-9.]+) x the average", note)
        if found:
            return float(found.group(1))
    return 1.0


def summary(label, errors):
    import numpy as np

    e = np.abs(np.asarray(errors))
    return (f"{label:34s} MAPE {e.mean():6.1%}  median {np.median(e):6.1%}  "
            f"P90 {np.percentile(e, 90):6.1%}")


def main() -> int:
    import aiadvisor as aa
    from aiadvisor.costmodel import predict
    from aiadvisor.costmodel.precision import gemm_peak_tflops
    from aiadvisor.hardware import get
    from aiadvisor.profiler import rescale
    from aiadvisor.schema import ParallelConfig

    ours, rule, old, roof, inside_flags, sizes, interleave = [], [], [], [], [], [], []
    bands = []
    from aiadvisor.estimate import bubble_fraction

    print(f"{'row':26s} {'GPUs':>6s} {'unit':>13s} {'published':>9s} {'ours':>7s} "
          f"{'P10-P90':>15s} {'rule':>7s} {'roof':>7s} {'old':>7s} {'comm':>6s} "
          f"{'bubble':>6s} {'stage':>5s} {'MFU':>5s}")
    for row in ROWS:
        t0 = time.perf_counter()
        model, ids = build(row)
        prof = aa.profile(model, ids, mode="train", precision=row.precision,
                          optimizer="adamw")
        prof = rescale(prof, batch_size=row.global_batch)
        spec = get(row.hardware)
        parallel = ParallelConfig(**row.layout)
        pred = predict(prof, hardware=spec, precision=row.precision,
                       num_devices=parallel.num_devices, parallel=parallel, fabric=row.fabric,
                       node_size=row.node_size)
        tokens = row.global_batch * row.seq_len
        per_gpu = tokens / parallel.num_devices
        fpt = flops_per_token(prof, row)
        scale = 1.0 if row.convention == "tokens" else fpt / 1e12

        def reported(step_s, per_gpu=per_gpu, scale=scale):
            return per_gpu / step_s * scale

        peak = gemm_peak_tflops(spec, row.precision)
        rule_value = 0.4 * peak * 1e12 / (6 * prof.num_params) * scale
        # Dense-peak roofline: every FLOP the step executes (model FLOPs, plus the recomputed
        # forward under full checkpointing) at the dense peak, nothing else.
        model_fpt = 6 * prof.num_params + 12 * row.cfg["num_layers"] * row.cfg[
            "hidden_size"] * row.seq_len
        executed = model_fpt * (4 / 3 if parallel.checkpointing == "full" else 1.0)
        roof_value = peak * 1e12 / executed * scale
        values = (reported(pred.step_time_s), rule_value,
                  reported(old_step_s(prof, spec, row.precision, parallel)), roof_value)
        lo, hi = reported(pred.high_s), reported(pred.low_s)
        bubble = bubble_fraction(parallel.pp_degree, parallel.num_microbatches,
                                 parallel.virtual_stages)
        if parallel.virtual_stages > 1:
            interleave.append((row, prof, spec, parallel, reported))
        inside_flags.append(lo <= row.published <= hi)
        bands.append(_raw_band(pred, values[0] / row.published, parallel.num_devices))
        sizes.append(parallel.num_devices)
        for store, value in zip((ours, rule, old, roof), values):
            store.append(value / row.published - 1)
        print(f"{row.name:26s} {parallel.num_devices:6d} {row.unit:>13s} "
              f"{row.published:9.1f} {values[0]:7.1f} {lo:7.1f}-{hi:<7.1f} {values[1]:7.1f} "
              f"{values[3]:7.1f} {values[2]:7.1f} "
              f"{pred.communication_s / pred.step_time_s:6.1%} "
              f"{bubble:6.1%} {stage_ratio(pred):5.2f} "
              f"{pred.mfu:5.1%} ({time.perf_counter() - t0:.0f} s)")
        if spec.interconnect_bw_gbs is None:
            print(f"    {spec.name} has no interconnect figure in the catalog: its scale-up "
                  "links were taken as PCIe 4.0 x16 (64 GB/s)")
        print(f"    {pred.network}")
        print(f"    source: {row.source}")
        if row.notes:
            print(f"    assumed: {'; '.join(row.notes)}")
    print()
    print(summary("aiadvisor (hierarchical fabrics)", ours))
    print(summary("6N FLOPs/token at 40% of peak", rule))
    print(summary("dense-peak roofline", roof))
    print(summary("old model (flat ~10 GB/s)", old))
    buckets = []
    for label, low, high in BUCKETS:
        pick = [i for i, n in enumerate(sizes) if low <= n <= high]
        if not pick:
            continue
        buckets.append((label, pick))
        print(f"  {label:16s} ours " + summary("", [ours[i] for i in pick]).strip()
              + f"  | rule MAPE {_mape([rule[i] for i in pick]):.1%}"
              + f"  | roofline MAPE {_mape([roof[i] for i in pick]):.1%}"
              + f"  | old MAPE {_mape([old[i] for i in pick]):.1%}"
              + f"  | inside P10-P90 {sum(inside_flags[i] for i in pick)}/{len(pick)}"
              + f"  ({len(pick)} rows)")
    print(f"published inside the P10-P90 interval: {sum(inside_flags)}/{len(ROWS)}")
    loo = _spread_report(bands)
    for row, prof, spec, parallel, reported in interleave:
        cells = []
        for v in (1, 2, 4):
            alt = replace(parallel, virtual_stages=v)
            pred = predict(prof, hardware=spec, precision=row.precision,
                           num_devices=alt.num_devices, parallel=alt, fabric=row.fabric,
                           node_size=row.node_size)
            value = reported(pred.step_time_s)
            cells.append(f"v={v}: {value:5.1f} ({value / row.published - 1:+.0%})")
        print(f"  {row.name:24s} virtual stages (published {row.published:.0f}): "
              + ", ".join(cells))
    print("signed error per row (ours): " + ", ".join(
        f"{row.name} {e:+.0%}" for row, e in zip(ROWS, ours)))
    print(EXPLANATION)
    _write_summary(ours, rule, old, roof, inside_flags, buckets, loo)
    return 0


def _raw_band(pred, ratio, num_devices):
    """(log of measured / predicted step, log-widths below and above the step) of a row's
    band before the multi-node spread (undone: the spread adds in quadrature)."""
    import math

    from aiadvisor.costmodel.predict import MULTINODE_SPREAD

    s = MULTINODE_SPREAD if pred.network and "nodes of" in pred.network else 0.0
    down = math.log(pred.step_time_s / pred.low_s)
    up = math.log(pred.high_s / pred.step_time_s)
    raw = [math.sqrt(max(w * w - s * s, 0.0)) for w in (down, up)]
    # Reported figures are per second: measured step / predicted step = ours / published.
    return math.log(ratio), raw[0], raw[1]


SPREAD_GRID = [round(0.01 * k, 2) for k in range(0, 61)]


def _inside(band, s) -> bool:
    import math

    r, down, up = band
    return -math.hypot(down, s) <= r <= math.hypot(up, s)


def _choose_spread(bands) -> float:
    """Smallest spread on the grid with >= 80 % of ``bands`` inside (the grid's end if none)."""
    for s in SPREAD_GRID:
        if sum(_inside(b, s) for b in bands) >= 0.8 * len(bands):
            return s
    return SPREAD_GRID[-1]


def _spread_report(bands) -> tuple[float, int, int]:
    """Print the spread the rows support and its leave-one-row-out coverage; return (spread
    chosen on all rows, held-out rows inside, rows)."""
    from aiadvisor.costmodel.predict import MULTINODE_SPREAD

    chosen = _choose_spread(bands)
    held = [_inside(b, _choose_spread(bands[:i] + bands[i + 1:])) for i, b in enumerate(bands)]
    raw = sum(_inside(b, 0.0) for b in bands)
    print(f"multi-node spread: without it {raw}/{len(bands)} inside; chosen on all rows "
          f"{chosen:.2f} (shipped MULTINODE_SPREAD = {MULTINODE_SPREAD:.2f}); leave-one-row-out "
          f"(chosen on the other rows, each row judged with it): {sum(held)}/{len(bands)} "
          "inside")
    return chosen, sum(held), len(bands)


#: Scale buckets of the summary (devices per run); the issue's regimes are 16-64 and 128-6144.
BUCKETS = (("16-64 GPUs", 16, 64), ("96-1024 GPUs", 65, 1024),
           ("2048-16384 GPUs", 1025, 1 << 20))


def _mape(errors) -> float:
    return sum(abs(e) for e in errors) / len(errors)


def _write_summary(ours, rule, old, roof, inside_flags, buckets, loo) -> None:
    import statistics

    from _results import summary_row, write_summary

    rows = []
    for label, pick in buckets:
        regime = f"LLM pre-training on {label} (published rows)"
        n = len(pick)
        mine = [ours[i] for i in pick]
        rows += [
            summary_row(regime=regime, metric="MAPE of throughput per device",
                        value=_mape(mine), unit="%", n=n,
                        anchor="6N FLOPs per token at 40 % of dense peak",
                        anchor_value=_mape([rule[i] for i in pick]), anchor_unit="%",
                        baseline="dense-peak roofline",
                        baseline_value=_mape([roof[i] for i in pick])),
            summary_row(regime=regime, metric="median APE of throughput per device",
                        value=statistics.median(abs(e) for e in mine), unit="%", n=n,
                        anchor="6N FLOPs per token at 40 % of dense peak",
                        anchor_value=statistics.median(abs(rule[i]) for i in pick),
                        anchor_unit="%"),
            summary_row(regime=regime, metric="share of published figures inside P10-P90",
                        value=sum(inside_flags[i] for i in pick) / n, unit="%", n=n,
                        anchor="80 % (the issue's goal)"),
        ]
    _, held, n = loo
    rows.append(summary_row(
        regime="LLM pre-training on 16-16384 devices (published rows)",
        metric="share inside P10-P90, leave-one-row-out (multi-node spread chosen without it)",
        value=held / n, unit="%", n=n, anchor="80 % (the issue's goal)"))
    write_summary("costmodel_multinode", rows, command="python bench/costmodel_multinode.py")


EXPLANATION = """
Reading the misses (columns above: roof = dense-peak roofline, comm = exposed communication
share of the predicted step, bubble = the pipeline idle fraction (pp - 1) / (v m + pp - 1),
v = virtual stages, stage = slowest / average pipeline stage, MFU = predicted model FLOPs
utilisation):
- The 2021-22 A100 rows (NeoX, BLOOM, OPT, MT-NLG at 3360) were +27/+13/+21/+34 % too fast.
  General behaviours of the cost model, each keyed on the configuration, took them to
  +19/+5/+2/+14 %: (1) no sequence parallelism under TP (the norms and residual adds of every
  block run whole on each TP rank: OPT +21 -> +10 %, MT-NLG +34 -> +26 %); (2) the gradient
  accumulation pass of every micro-batch after the first (read the new gradient, read and
  write the sum: 12 bytes per fp32 parameter; MT-NLG, micro-batch 1: +26 -> +17 %); (3) the
  DP reduction hides behind the last micro-batch's backward only, and (4) not at all on
  DeepSpeed's pipeline engine (both < 2 % here); (5) full checkpointing recomputes the
  repeated blocks only, not the embedding, head and loss (+1..3 % faster: right, and the
  wrong way for these rows); (6) full checkpointing reruns each block's forward with its TP
  all-reduces (OPT +10 -> +2 %, MT-NLG +19 -> +14 %). Still not modelled: attention dropout
  (OPT 0.1), DeepSpeed's own stage partition, the host side of those stacks (NeoX ran with
  synchronize-each-layer). MT-NLG at 2240, 2800 and 3360 GPUs (60.1, 50.2, 44.4 s per
  iteration) fit a fixed ~6 s per step on top of (m + pp - 1) equal slots; the cost model has
  no such term (its DP reduction is ~0.5 s), most of the +8..+14 % left.
- Held-out rows and what was changed after seeing them: the KempnerForge weak-scaling rows
  (H200, 4 per node, TP4 x FSDP, full recompute, grad_accum 4) came out 13B +6..+11 %, 70B
  +26 %; FSDP reduce-scatters its gradients in every accumulation step (also DeepSpeed
  ZeRO-3's behaviour), which the model had costed once per step: with it the 70B rows were
  -7..-8 %. The April KempnerForge rows (7B and 13B at 16-32 GPUs, compiled) then came out 7B
  +21/+29 %, 13B +9 %, which led to (6): now +11/+18 % and +1 %. The fms-fsdp rows (-5 %,
  -3 %) and the MT-NLG 2240/2800 rows were predicted without any change made for them.
  KempnerForge's NICs are not stated: one 400 Gb/s NDR per GPU assumed; its runs are
  compiled, predicted as eager.
- Llama 3 rows: interleaved with v = 2 (assumed; the paper's count was not retrieved); the
  line per row above shows v = 1 / 2 / 4. The gradient accumulation pass made them 3-4 %
  slower (Megatron's --gradient-accumulation-fusion would remove it; not known for Meta's
  stack, so not assumed).
- PaLM: TPU v4 ICI for its 12-way model parallel; its hybrid sharding costed as ZeRO-3 over
  all 512 data-parallel ranks, its partial rematerialisation (HFU/MFU = 1.25) as full, which
  (6) makes 2 more all-reduces per block than it ran: -6 -> -13 %.
- Intervals: MULTINODE_SPREAD widens the band of steps that span nodes by the smallest value
  that puts 80 % of these rows inside; with the rows and model above that is 0 (19/21 inside
  without it; leave-one-row-out 19/21). It was 0.04 before (6) and the April rows. Since
  STEP_SPREAD (0.14, calibrated on NeuSight's single-node steps) widens every learned step's
  band, 20/21 are inside.
- Conventions: hfu rows count the recomputed forward as Megatron-DeepSpeed / GPT-NeoX log it
  (factor 4); model rows (PaLM, Llama 3) do not; KempnerForge and fms-fsdp rows compare
  tokens/s.
No efficiency, overlap or bandwidth constant was fitted to these rows, so the throughput
errors are the same left-one-row-out; the structural changes above were informed by rows as
said.
"""


if __name__ == "__main__":
    raise SystemExit(main())
