"""GPU LLM serving: ``aa.predict_generation`` against published measurements (issue #13).

Published figures come from ``bench/data/serving_published.csv`` (one row per figure, with its
source, address, how it was read and what was assumed): llama.cpp pull requests and a llama.cpp
benchmark repository (llama-bench ``tg``/``pp``), MLC LLM's perf-bench and blogs, torchao's
quantization README, Hugging Face's TGI-on-SageMaker benchmark and its transformers/optimum
quantization benchmarks, the Jetson AI Lab page, bitsandbytes' benchmarking README (transformers
``generate`` 4.46 with BF16/NF4/LLM.int8 at batch 1-32) and the optimum-benchmark runs of a
public quantization-benchmarking repository. No constant of the cost model is fitted to them.
Issue #13's goals: batch-1 decode within 20 %, time to first token within 30 %, batched
throughput within 25 %.

Each model is built from its published config on the meta device (``CONFIGS``; no download),
captured once with ``aa.profile_generation`` and predicted per row with the row's device,
device count and tensor-parallel degree, weight format, batch, prompt and output lengths and
stack (``engine="engine"`` for serving engines and for llama.cpp, MLC and torchao's compiled
generate, which replay graphs; ``engine="eager"`` for plain transformers ``generate``).

What was changed after seeing these rows (2026-12-06; the first run, on the model before, read
decode batch 1 MAPE 28 % / median 19 % / 69 % inside P10-P90, prefill 147 %, all rows median
34 %): the first run showed every datacenter decode predicted too fast, int4 most, and int4
prefill priced on INT4 tensor cores. Three structural changes followed, none with a constant
fitted to these rows: weight-only int4/nf4 multiply on the 16-bit engine; a serving engine's
decode and prefill run fused kernels (memory-bound ops one kernel per module, q/k/v and
gate/up one GEMM each) and a graph-replayed decode step keeps each kernel's measured fixed cost
on the GPU, less the 0.4 us a graph saves (it had been 0.5 us a kernel in all); the per-kernel
costs take the P10-P90 spread of Vidur's measured small kernels. Every row, tune and held-out
alike, was seen before these changes: the split below guards later fitted changes only.

Second pass, same day, on the 74 rows above (not fitted either): a serving engine's prefill
computes the vocabulary head for the last prompt token of each sequence only (it had priced
logits for every prompt token: 7 % of Llama-3-8B's prefill FLOPs); the catalog gained dense
INT8/INT4 rates for the RTX 3090 and RTX 4080 and FP16 tensor rates for the Jetson Orin Nano
(Super), which change no row's prediction. Old rows then read: batch-1 decode unchanged (MAPE
16 % / median 10 %), prefill_tok_s MAPE 112 -> 113 %, median 65 -> 75 % (already predicted too
fast, now faster), ttft_s unchanged (eager rows). Then 39 rows from 8 new sources were added
(the ``ADDED_2026_12_06`` ids): all held out, none looked at before these changes.

Third pass (2026-12-06, later): the 11 TGI 1.0.3 rows had been priced as a graph-replaying
engine, but TGI's CUDA graphs were experimental and off by default until its PR #1703 of
2024-04-04 (PR #1428 added them). They are now priced with the ``fused`` stack (the engine's
fused kernels, each launched from Python at eager PyTorch's per-kernel host cost): a fact about
the source, no constant fitted. Their APE median went 90 % -> 66 %; the rows stay far off
(continuous batching under SageMaker's load test, GPTQ kernels of that release).

Fourth pass (same day): NF4 priced as bitsandbytes runs it. Its ``matmul_4bit`` runs the fused
4-bit GEMV only for a one-row input; any other call dequantises the weight to 16 bit and
multiplies in 16 bit (``MatMul4Bit``, bitsandbytes 0.41-0.45 source). That is read from the
library's code, not fitted: nf4 rows at batch > 1 (6 bnb rows, hfquant-02) moved from +26 to
+199 % fast to +9 to +158 %; batched figures within 25 % went 11 -> 15 of 32.

Fifth pass (same day, a cost-model change made for the single-GPU bench, not for these rows):
published achievable-matmul fractions now move the compute side of GEMMs only and FP8 GEMMs
read the FP8 table (H100 SXM 70.9 %); GPUs without such a figure take the best torch.mm rate of
a public quick-benchmark table (RTX 3090 and 4090 run above their rated BF16 peak); and
power-limited GPUs (T4, L4) slow their tensor-core GEMMs' compute side as NeuSight's T4/L4/P4
FP32 timings show. Consumer 16-bit prefill went -30..-14 % -> -16..+11 %; llama.cpp's int4
prefill on the RTX 3090 went -5..+7 % -> +23..+39 % (its dequantise-then-cuBLAS path of that
time is not priced); torchao's FP8 decode on the H100 went +13 / +30 % -> +17 / +34 % (its
GEMVs no longer carry the H100's GEMM fraction; torchao quantises each activation in a kernel
of its own, which is not priced either).

Sixth pass (same day): a Llama-style RMSNorm written out in Python (pow, mean, rsqrt,
multiplies; no op named *norm*) was not recognised as a norm, so its kernel was not fused with
the residual add before it, as engines (vLLM's ``fused_add_rms_norm``, TensorRT-LLM) and
Inductor run it: a Llama decode step is now 10 kernels a layer, not 12. That is how the engines
run, not a fit; these rows moved the wrong way: batch-1 decode MAPE 19 -> 20 % (28/47 within
20 % either way) and inside P10-P90 77 -> 70 % (xdai-09/14/15, sagemaker-05 left their band:
llama.cpp of 2023 and TGI 1.0.3 launch more kernels a layer than an engine that fuses them),
torchao signed +4 -> +9 % (its FP8 rows +23 / +42 %), batched throughput MAPE 108 -> 128 % on
the TGI 1.0.3 rows.

Seventh pass (2026-12-06, later): a weight-only int8 format, ``int8wo`` (W8A16: 8-bit weights,
16-bit activations and multiply, prefill at the 16-bit rate), beside ``int8``, which stays
W8A8 on the INT8 engine. Five rows were relabelled int8 -> int8wo from what their sources ran,
not from their errors: torchao's ``int8wo`` technique (torchao-02/05/08) and llama.cpp's Q8_0
(pr4766-03/04: the CUDA backend of January 2024 decoded through its quantised matrix-vector
kernels and dequantised a prompt of more than 32 rows to fp16 for cuBLAS); bitsandbytes'
LLM.int8() rows stay int8. pr4766-03 (Q8_0 prefill on an RTX 4090) went +254 -> +30 %;
prefill/TTFT MAPE 84 -> 75 %, 13 -> 14 of 23 within 30 %; batch-1 decode MAPE 20.5 -> 20.4 %
(the int8wo decode rows move -7..+1 %: their GEMVs' compute side now runs at the 16-bit rate).

Eighth pass (2026-12-06, seventh session; how eager PyTorch issues tensor parallelism, no
constant fitted): a step launched from Python (``engine="fused"`` or ``"eager"``) now counts
each tensor-parallel all-reduce, two per block, as a host launch at an eager kernel's cost;
graph-replaying engines are unchanged. The eight TGI 1.0.3 rows at tp 8 moved toward their
figures but stay far (Llama-2-7B batch 1: -65 -> -57 %; 70B: -38 -> -28 %; throughput rows
+315..+98 % -> +279..+74 %); no goal count changed; held-out APE mean 40 -> 37 %. In the same
session every learned step's P10-P90 band widened by ``STEP_SPREAD`` (calibrated on NeuSight's
measured steps, not on these rows): held-out rows inside 71 -> 77 %.

Metrics (the CSV's ``metric``), all compared in the unit the source gives:
``decode_tok_s_per_seq`` = 1 / TPOT at the row's batch (llama-bench ``tg N`` starts at an empty
context: predicted at a 1-token prompt; rows at batch > 1 count as batched throughput, the same
APE as batch / TPOT; llama-bench ``pp512`` run in microbatches of B <= 16 tokens is read as
decoding at batch B: each step is a forward of B tokens against one cache through the kernels
batched decoding uses, its rate / B per sequence); ``prefill_tok_s`` = batch x prompt / TTFT
(llama-bench ``pp N``);
``ttft_s``; ``e2e_s_per_token`` = request time / output tokens (prefill included, as the
SageMaker and optimum tables average it); ``throughput_tok_s`` = output tokens per second over
the batch, prefill included (``GenerationPrediction.tokens_per_s``).

Bits per weight. The cost model's formats are int4 = 4.25 bits (group 128, fp16 scale and
zero), int8 and int8wo = 8, nf4 = 4.13 (double quantisation), and it keeps the vocabulary
head in 16 bit.
Sources differ: llama.cpp Q4_0 is 4.5 bits with a Q6_K (6.56-bit) output matrix, Q8_0 8.5,
Q4_K_M 4.89; MLC q4f16_1 4.5 with the head quantised; torchao int4wo-64 4.5 with the head
quantised (its README prints the bytes read per token). Each row is predicted with the
closest format (``pred``, what a user of aiadvisor gets) and, beside it, bits-adjusted
(``adj``): the decode step moved by the difference in weight bytes read per step, priced at
the model's own marginal seconds per weight byte (the slope between its fp16 and int4
predictions of the same configuration). Prefill is compute-bound and is not adjusted.

Baselines: decode = weights read per step (the source's bytes, split over TP) / (70 % of the
memory bandwidth); prefill = dense-peak roofline (2 x non-embedding parameters x tokens at the
16-bit dense peak, FP8 peak for FP8 rows). Composite metrics combine the two as the model does.

Tune / held-out split, by SOURCE, fixed before any error was looked at: sources sorted by row
count (largest first, ties by source id) go one by one to the split that has fewer rows so far
(ties to tune). A later model change is fitted on ``tune`` and checked on ``held-out``. Sources
added on 2026-12-06 after the model changes of that day (``ADDED_2026_12_06``) are all
held out and do not enter the balancing, so the first split is unchanged.

Stacks (the CSV's ``aa_engine``, see ``STACKS``): ``engine`` (graph-replaying engines, the
built-in decoder), ``fused`` (an engine's fused kernels without graph replay, the built-in
decoder), ``eager`` (transformers ``generate`` before v4.36: eager attention) and
``eager_sdpa`` (transformers ``generate`` since: SDPA attention), both priced
``engine="eager"`` on transformers' own ``LlamaForCausalLM``.

Usage: ``python bench/serving_published.py [--no-summary]`` (about 15 s: profiles five
decoders on meta, three of them also as transformers' Llama). Writes
``bench/results/serving_published.json``.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

DATA = REPO / "bench" / "data" / "serving_published.csv"

#: Published configs (numbers from each model's Hugging Face ``config.json``).
CONFIGS = {
    # meta-llama/Llama-2-7b-hf (LLaMA-7B and CodeLlama-7B share the shape; CodeLlama's
    # vocabulary is 32016, 0.1 % more parameters)
    "llama-2-7b": dict(vocab_size=32000, hidden_size=4096, num_layers=32, num_heads=32,
                       intermediate_size=11008, style="llama", max_positions=4096),
    # meta-llama/Llama-2-13b-hf
    "llama-2-13b": dict(vocab_size=32000, hidden_size=5120, num_layers=40, num_heads=40,
                        intermediate_size=13824, style="llama", max_positions=4096),
    # meta-llama/Llama-2-70b-hf (grouped-query attention, 8 key/value heads)
    "llama-2-70b": dict(vocab_size=32000, hidden_size=8192, num_layers=80, num_heads=64,
                        num_kv_heads=8, intermediate_size=28672, style="llama",
                        max_positions=4096),
    # meta-llama/Meta-Llama-3-8B (Llama 3.1 8B has the same shape; its RoPE scaling has no
    # parameters)
    "llama-3-8b": dict(vocab_size=128256, hidden_size=4096, num_layers=32, num_heads=32,
                       num_kv_heads=8, intermediate_size=14336, style="llama",
                       max_positions=8192),
    # meta-llama/Meta-Llama-3-70B (Llama 3.1 70B has the same shape; its longer position limit
    # changes no parameter)
    "llama-3-70b": dict(vocab_size=128256, hidden_size=8192, num_layers=80, num_heads=64,
                        num_kv_heads=8, intermediate_size=28672, style="llama",
                        max_positions=8192),
}
MODEL_KEYS = {"Llama-2-7B": "llama-2-7b", "LLaMA-7B": "llama-2-7b",
              "CodeLlama-7B": "llama-2-7b", "Llama-2-13B": "llama-2-13b",
              "Llama-2-70B": "llama-2-70b", "Llama-3-8B": "llama-3-8b",
              "Llama-3.1-8B": "llama-3-8b", "Llama-3.1-70B": "llama-3-70b"}
#: How each CSV ``aa_engine`` is profiled and priced: (model built for the trace, the
#: ``engine`` passed to ``aa.predict_generation``). ``engine``: the built-in decoder (fused
#: kernels, graph replay); ``eager``: transformers' ``LlamaForCausalLM`` with its ``eager``
#: attention (the default before v4.36, Dec 2023); ``eager_sdpa``: the same model with SDPA
#: attention (the default since), both priced as plain transformers ``generate``.
STACKS = {"engine": ("builtin", "engine"), "fused": ("builtin", "fused"),
          "eager": ("hf-eager", "eager"), "eager_sdpa": ("hf-sdpa", "eager")}
#: Sources added on 2026-12-06, after the model changes of that day (module docstring): all
#: held out.
ADDED_2026_12_06 = frozenset({
    "bnb_bench_v045", "hf_quant_bench_runs", "mlc_engine_blog_2024", "llamacpp_pr7676",
    "llamacpp_pr7860", "llamacpp_pr8062", "llamacpp_pr15802", "llamacpp_pr15131"})
RATE_METRICS = ("decode_tok_s_per_seq", "prefill_tok_s", "throughput_tok_s")
TIME_METRICS = ("ttft_s", "e2e_s_per_token")
TO_SI = {"tok/s": 1.0, "s": 1.0, "ms": 1e-3}
DECODE_BW_FRACTION = 0.7


@dataclass
class Row:
    """One published figure (a CSV row) and what the bench computes for it."""

    csv: dict
    value: float
    split: str = ""
    segment: str = ""
    pred: tuple | None = None          # (predicted, low, high) in the metric's unit
    adj: float | None = None           # bits-adjusted prediction
    base: float | None = None          # naive baseline
    weights_ratio: float | None = None  # source / modelled weight bytes per decode step
    skipped: str = ""
    extra: dict = field(default_factory=dict)

    def __getattr__(self, name):
        try:
            return self.__dict__["csv"][name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def batch_n(self) -> int:
        return int(self.csv["batch"])

    def ape(self, which: str = "pred") -> float | None:
        got = self.pred[0] if which == "pred" and self.pred else getattr(self, which, None)
        return None if got is None else abs(got - self.value) / self.value

    def speed_ratio(self, got: float | None = None) -> float | None:
        """Predicted speed / published speed (> 1: predicted too fast), whatever the unit."""
        got = self.pred[0] if got is None and self.pred else got
        if got is None:
            return None
        return got / self.value if self.metric in RATE_METRICS else self.value / got


def load_rows(path: Path = DATA) -> list[Row]:
    with open(path, newline="") as fh:
        return [Row(csv=r, value=float(r["value"]) * TO_SI[r["unit"]])
                for r in csv.DictReader(fh)]


def assign_splits(rows: list[Row]) -> None:
    """The tune / held-out rule of the module docstring: the first sources balanced by row
    count, those added on 2026-12-06 (:data:`ADDED_2026_12_06`) all held out."""
    sizes: dict[str, int] = {}
    for r in rows:
        if r.source_id not in ADDED_2026_12_06:
            sizes[r.source_id] = sizes.get(r.source_id, 0) + 1
    filled = {"tune": 0, "held-out": 0}
    chosen = {}
    for source in sorted(sizes, key=lambda s: (-sizes[s], s)):
        split = "tune" if filled["tune"] <= filled["held-out"] else "held-out"
        chosen[source] = split
        filled[split] += sizes[source]
    for r in rows:
        r.split = chosen.get(r.source_id, "held-out")


def build_profiles(keys) -> dict:
    """``aa.profile_generation`` of each (config, stack) on the meta device (:data:`STACKS`):
    the built-in Llama-style decoder for graph-replaying stacks; for plain transformers
    ``generate`` rows transformers' own ``LlamaForCausalLM`` with the attention those releases
    defaulted to, so the traced decode step has the ops and cache handling that ran."""
    import torch

    import aiadvisor as aa
    from aiadvisor import examples

    out = {}
    for key, stack in sorted(set(keys)):
        built = STACKS[stack][0]
        with torch.device("meta"):
            model = (examples._build_decoder(examples.DecoderConfig(**CONFIGS[key]))
                     if built == "builtin"
                     else _hf_llama(CONFIGS[key], "sdpa" if built == "hf-sdpa" else "eager"))
        out[key, stack] = aa.profile_generation(model, prompt_len=512, model_name=key)
    return out


def _hf_llama(cfg: dict, attention: str = "eager"):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
        num_hidden_layers=cfg["num_layers"], num_attention_heads=cfg["num_heads"],
        num_key_value_heads=cfg.get("num_kv_heads") or cfg["num_heads"],
        intermediate_size=cfg["intermediate_size"],
        max_position_embeddings=cfg["max_positions"])
    config._attn_implementation = attention
    return LlamaForCausalLM(config)


def metric_value(metric: str, *, ttft: float, tpot: float, batch: int, prompt: int,
                 output: int, replicas: int = 1) -> float:
    """A row's metric from a (TTFT, TPOT) pair, as the module docstring defines it."""
    request = ttft + (output - 1) * tpot
    return {"decode_tok_s_per_seq": 1.0 / tpot, "prefill_tok_s": batch * prompt / ttft,
            "ttft_s": ttft, "e2e_s_per_token": request / output,
            "throughput_tok_s": replicas * batch * output / request}[metric]


def _modelled_weight_bytes(gp, cfg: dict, precision: str) -> float:
    """Bytes the cost model reads per decode step: linear layers at ``precision``, the
    vocabulary head in 16 bit (32 for fp32); the embedding table is read one row a step."""
    from aiadvisor.units import WEIGHT_BYTES

    head = cfg["vocab_size"] * cfg["hidden_size"]
    return gp.quantizable_params * WEIGHT_BYTES[precision] + head * 2.0


def source_weight_bytes(row: Row, gp, cfg: dict) -> float:
    """Weight bytes the source's format reads per decode step (its printed figure if any)."""
    if row.src_weight_gb:
        return float(row.src_weight_gb) * 1e9
    head = cfg["vocab_size"] * cfg["hidden_size"]
    return (gp.quantizable_params * float(row.format_bits)
            + head * float(row.head_bits)) / 8.0


#: transformers ``generate`` asks a model's forward for the last prompt token's logits only
#: (``num_logits_to_keep=1``, now ``logits_to_keep``) since huggingface/transformers PR #31292
#: (opened 2024-06-06, in the releases of autumn 2024); rows measured before computed every
#: position's. This CSV's transformers rows are of 2023 or of 2024-12 on, so the exact release
#: decides none of them.
LOGITS_TO_KEEP_SINCE = "2024-09"


def row_profile(row: Row, profiles: dict):
    """The row's generation profile, as the source's transformers version ran the prompt."""
    import dataclasses

    gp = profiles[MODEL_KEYS[row.model], row.aa_engine]
    if STACKS[row.aa_engine][1] == "eager" and row.date < LOGITS_TO_KEEP_SINCE:
        gp = dataclasses.replace(gp, logits_to_keep=False)
    return gp


def _request(row: Row, gp, precision: str):
    import aiadvisor as aa

    return aa.predict_generation(
        gp, hardware=row.gpu, num_devices=int(row.num_gpus), tp=int(row.tp),
        weight_precision=precision, prompt_len=int(row.prompt_len),
        output_len=int(row.output_len), batch_size=row.batch_n,
        engine=STACKS[row.aa_engine][1])


def predict_row(row: Row, gp, spec) -> None:
    """Fill ``pred`` (with its P10-P90), ``adj`` and ``base`` of one row."""
    import aiadvisor as aa

    cfg = CONFIGS[MODEL_KEYS[row.model]]
    g = _request(row, gp, row.weight_format)
    kw = dict(batch=row.batch_n, prompt=int(row.prompt_len), output=int(row.output_len),
              replicas=g.replicas)
    mid = metric_value(row.metric, ttft=g.ttft_s, tpot=g.tpot_s, **kw)
    ends = [metric_value(row.metric, ttft=t, tpot=p, **kw)
            for t, p in ((g.ttft_low_s, g.tpot_low_s), (g.ttft_high_s, g.tpot_high_s))]
    row.pred = (mid, min(ends), max(ends))
    w_src = source_weight_bytes(row, gp, cfg)
    w_ours = _modelled_weight_bytes(gp, cfg, row.weight_format)
    row.weights_ratio = w_src / w_ours
    # The model's own marginal seconds per weight byte of this decode step (none where the
    # device has no 16-bit figure to price fp16 with: the row is not adjusted).
    try:
        fp16, int4 = _request(row, gp, "fp16"), _request(row, gp, "int4")
        slope = (fp16.tpot_s - int4.tpot_s) / (_modelled_weight_bytes(gp, cfg, "fp16")
                                              - _modelled_weight_bytes(gp, cfg, "int4"))
    except aa.AIAdvisorError:
        slope = 0.0
    row.extra["slope_s_per_gb"] = slope * 1e9
    row.adj = metric_value(row.metric, ttft=g.ttft_s,
                           tpot=g.tpot_s + slope * (w_src - w_ours), **kw)
    row.base = baseline(row, spec, gp, cfg, w_src)
    row.extra["w_src"] = w_src
    row.extra["bound"] = g.bound


def baseline(row: Row, spec, gp, cfg: dict, w_src: float) -> float | None:
    """Weights / (70 % of bandwidth) per decode step; dense-peak roofline for the prefill."""
    tp = int(row.tp)
    peak = spec.peak_tflops("fp8" if row.weight_format == "fp8" else "fp16") \
        or spec.peak_tflops("bf16")
    if not spec.memory_bw_gbs or not peak:
        return None
    tpot = w_src / tp / (DECODE_BW_FRACTION * spec.memory_bw_gbs * 1e9)
    dense = gp.prefill.num_params - cfg["vocab_size"] * cfg["hidden_size"]
    ttft = 2.0 * dense * row.batch_n * int(row.prompt_len) / (peak * 1e12 * tp)
    replicas = int(row.num_gpus) // tp
    return metric_value(row.metric, ttft=ttft, tpot=tpot, batch=row.batch_n,
                        prompt=int(row.prompt_len), output=int(row.output_len),
                        replicas=replicas)


def run(rows: list[Row]) -> dict:
    """Predict every row (in place); return the profiles."""
    import aiadvisor as aa

    catalog = aa.hardware.catalog().set_index("name")
    profiles = build_profiles((MODEL_KEYS[r.model], r.aa_engine) for r in rows)
    for row in rows:
        row.segment = str(catalog.loc[row.gpu, "segment"])
        spec = aa.hardware.get(row.gpu)
        try:
            predict_row(row, row_profile(row, profiles), spec)
        except aa.AIAdvisorError as err:
            row.skipped = f"{type(err).__name__}: {str(err).split(':')[0]}"
    return profiles


# ----------------------------------------------------------------------------- printing

def _fmt(metric: str, v: float | None) -> str:
    if v is None:
        return "-"
    if metric in TIME_METRICS:
        return f"{v * 1e3:.1f}ms"
    return f"{v:.1f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.0%}"


def print_rows(rows: list[Row]) -> None:
    print(f"{'row':13s} {'split':8s} {'seg':11s} {'gpu':24s} {'model':12s} {'fmt':12s} "
          f"{'b':>3s} {'tp':>2s} {'metric':21s} {'published':>10s} {'pred':>9s} {'APE':>5s} "
          f"{'signed':>6s} {'P10-P90':>19s} {'in':>2s} {'adj':>9s} {'adjAPE':>6s} "
          f"{'W src/ours':>10s} {'baseline':>9s} {'baseAPE':>7s}")
    for r in rows:
        fmt = f"{r.weight_format}({float(r.format_bits):g}b)"
        head = (f"{r.row_id:13s} {r.split:8s} {r.segment:11s} {r.gpu[-24:]:24s} "
                f"{r.model[:12]:12s} {fmt:12s} {r.batch_n:3d} {int(r.tp):2d} "
                f"{r.metric:21s} {_fmt(r.metric, r.value):>10s}")
        if r.skipped:
            print(f"{head}  no prediction: {r.skipped}")
            continue
        mid, lo, hi = r.pred
        inside = "y" if lo <= r.value <= hi else "n"
        base_ape = None if r.base is None else abs(r.base - r.value) / r.value
        print(f"{head} {_fmt(r.metric, mid):>9s} {r.ape():5.0%} {_pct(mid / r.value - 1):>6s} "
              f"{_fmt(r.metric, lo) + '-' + _fmt(r.metric, hi):>19s} {inside:>2s} "
              f"{_fmt(r.metric, r.adj):>9s} {r.ape('adj'):6.0%} {r.weights_ratio:10.2f} "
              f"{_fmt(r.metric, r.base):>9s} "
              f"{'-' if base_ape is None else f'{base_ape:.0%}':>7s}")


def stats(rows: list[Row]) -> dict | None:
    """APE statistics of predicted rows (pred, bits-adjusted and baseline)."""
    done = [r for r in rows if r.pred]
    if not done:
        return None
    apes = sorted(r.ape() for r in done)
    based = [abs(r.base - r.value) / r.value for r in done if r.base is not None]
    return {
        "n": len(done), "mean": statistics.fmean(apes), "median": statistics.median(apes),
        "p90": apes[min(len(apes) - 1, math.ceil(0.9 * len(apes)) - 1)],
        # Speed-oriented whatever the unit: > 0 means predicted faster than published.
        "signed": statistics.fmean(r.speed_ratio() - 1 for r in done),
        "speed": statistics.median(r.speed_ratio() for r in done),
        "inside": sum(r.pred[1] <= r.value <= r.pred[2] for r in done) / len(done),
        "adj_median": statistics.median(r.ape("adj") for r in done),
        "adj_mean": statistics.fmean(r.ape("adj") for r in done),
        "base_mean": statistics.fmean(based) if based else None,
        "base_median": statistics.median(based) if based else None,
    }


def _line(label: str, rows: list[Row]) -> None:
    s = stats(rows)
    skipped = sum(bool(r.skipped) for r in rows)
    if s is None:
        print(f"  {label:34s} no predicted rows ({skipped} without a prediction)")
        return
    base = "-" if s["base_mean"] is None else f"{s['base_mean']:.0%}/{s['base_median']:.0%}"
    print(f"  {label:34s} n={s['n']:2d} APE mean {s['mean']:4.0%} median {s['median']:4.0%} "
          f"P90 {s['p90']:4.0%} | signed {s['signed']:+5.0%} | speed x{s['speed']:.2f} | "
          f"in P10-P90 {s['inside']:4.0%} | bits-adj mean/median {s['adj_mean']:.0%}/"
          f"{s['adj_median']:.0%} | baseline mean/median {base}"
          + (f" | {skipped} not predicted" if skipped else ""))


def _size(row: Row) -> str:
    return {"llama-2-7b": "7-8B", "llama-3-8b": "7-8B", "llama-2-13b": "13B",
            "llama-2-70b": "70B", "llama-3-70b": "70B"}[MODEL_KEYS[row.model]]


def _family(row: Row) -> str:
    return row.engine.split(" (")[0].split(" ")[0]


def _batch1_decode(row: Row) -> bool:
    return row.metric == "decode_tok_s_per_seq" and row.batch_n == 1


def _batched(row: Row) -> bool:
    """Batched serving speed: output throughput at batch > 1, or the decode rate at batch > 1
    (per sequence; the same APE as the aggregate batch / TPOT)."""
    return (row.metric in ("throughput_tok_s", "decode_tok_s_per_seq")
            and row.batch_n > 1)


def _metric(row: Row) -> str:
    """The row's metric, decode rates at batch > 1 apart from batch-1 decode."""
    return row.metric + (", batch > 1" if row.metric == "decode_tok_s_per_seq"
                         and row.batch_n > 1 else "")


GROUPINGS = (
    ("metric", _metric),
    ("segment", lambda r: r.segment),
    ("split", lambda r: r.split),
    ("weight format", lambda r: r.weight_format),
    ("model size", _size),
    ("batch", lambda r: "batch 1" if r.batch_n == 1 else "batch > 1"),
    ("stack", _family),
    ("tensor parallel", lambda r: "tp 1" if int(r.tp) == 1 else "tp > 1"),
)


def print_summaries(rows: list[Row]) -> None:
    print("\nSummary (APE = |pred - published| / published; signed = mean of predicted speed / "
          "published speed - 1, > 0 too fast, whatever the unit; speed = its median ratio; "
          "bits-adj = the prediction with the source's weight bytes; baseline = "
          "weights / 70 % of bandwidth for decode, dense-peak roofline for prefill)")
    _line("all rows", rows)
    for title, key in GROUPINGS:
        print(f" by {title}:")
        for value in sorted({key(r) for r in rows}):
            _line(str(value), [r for r in rows if key(r) == value])
    print(" by segment x metric:")
    for seg in sorted({r.segment for r in rows}):
        for met in sorted({_metric(r) for r in rows if r.segment == seg}):
            _line(f"{seg} / {met}", [r for r in rows if r.segment == seg and _metric(r) == met])
    print(" by split x metric:")
    for split in ("tune", "held-out"):
        for met in sorted({_metric(r) for r in rows if r.split == split}):
            _line(f"{split} / {met}", [r for r in rows if r.split == split and _metric(r) == met])


def goals(rows: list[Row]) -> dict:
    """Issue #13's goals: share of rows within each tolerance."""
    decode = [r for r in rows if r.pred and _batch1_decode(r)]
    first = [r for r in rows if r.pred and r.metric in ("ttft_s", "prefill_tok_s")]
    batched = [r for r in rows if r.pred and _batched(r)]
    out = {"batch-1 decode within 20 %": (decode, 0.20),
           "TTFT / prefill within 30 %": (first, 0.30),
           "batched throughput within 25 %": (batched, 0.25)}
    print("\nIssue #13 goals (share of rows inside the tolerance):")
    for label, (group, tol) in out.items():
        ok = sum(r.ape() <= tol for r in group)
        adj = sum(r.ape("adj") <= tol for r in group)
        print(f"  {label:32s} {ok}/{len(group)} (bits-adjusted {adj}/{len(group)})")
    return out


def bandwidth_fractions(rows: list[Row]) -> None:
    """Share of the memory bandwidth batch-1 decode reaches: published and predicted, with
    the source's weight bytes (KV cache and activations left out)."""
    print("\nBatch-1 decode: weight bytes per token x tokens/s / bandwidth (per device):")
    import aiadvisor as aa

    for fam in sorted({_family(r) for r in rows}):
        picked = [r for r in rows if r.pred and _batch1_decode(r) and _family(r) == fam]
        if not picked:
            continue
        pub, ours = [], []
        for r in picked:
            bw = aa.hardware.get(r.gpu).memory_bw_gbs * 1e9
            w = r.extra["w_src"] / int(r.tp)
            pub.append(w * r.value / bw)
            ours.append(w * r.pred[0] / bw)
        print(f"  {fam:10s} n={len(picked):2d} published median {statistics.median(pub):.0%} "
              f"(range {min(pub):.0%}-{max(pub):.0%}); predicted median "
              f"{statistics.median(ours):.0%} (range {min(ours):.0%}-{max(ours):.0%})")


# ----------------------------------------------------------------------------- hypotheses

#: Alternative pricings that test the hypotheses of the report, printed beside the shipped
#: prediction (never used in the summaries): (label, row filter, request overrides).
SENSITIVITIES = (
    ("prefill of int4/nf4 (weight-only) and int8 (W8A8) priced at the 16-bit rate "
     "(weight_precision=fp16)",
     lambda r: r.metric in ("prefill_tok_s", "ttft_s") and r.weight_format in
     ("int4", "int8", "nf4"), {"weight_precision": "fp16"}),
    ("TGI 1.0.3 rows priced with graph replay (engine='engine', how they were priced before "
     "the 'fused' stack)", lambda r: r.engine.startswith("TGI"), {"engine": "engine"}),
    ("TGI 1.0.3 rows priced as plain transformers generate (engine='eager')",
     lambda r: r.engine.startswith("TGI"), {"engine": "eager"}),
    ("llama.cpp rows of 2023 to early 2024 (before its CUDA graphs) priced engine='eager'",
     lambda r: r.engine.startswith("llama.cpp") and r.source_id in
     ("xiongjiedai_llamacpp", "llamacpp_pr4766") and r.metric == "decode_tok_s_per_seq",
     {"engine": "eager"}),
)


def sensitivities(rows: list[Row], profiles: dict) -> None:
    import aiadvisor as aa

    print("\nHypothesis checks (alternative pricing of some rows; not in the summaries):")
    for label, pick, override in SENSITIVITIES:
        picked = [r for r in rows if r.pred and pick(r)]
        if not picked:
            continue
        alt_apes = []
        for r in picked:
            kw = dict(hardware=r.gpu, num_devices=int(r.num_gpus), tp=int(r.tp),
                      weight_precision=r.weight_format, prompt_len=int(r.prompt_len),
                      output_len=int(r.output_len), batch_size=r.batch_n,
                      engine=STACKS[r.aa_engine][1])
            kw.update(override)
            g = aa.predict_generation(row_profile(r, profiles), **kw)
            alt = metric_value(r.metric, ttft=g.ttft_s, tpot=g.tpot_s, batch=r.batch_n,
                               prompt=int(r.prompt_len), output=int(r.output_len),
                               replicas=g.replicas)
            alt_apes.append(abs(alt - r.value) / r.value)
            r.extra.setdefault("alt", {})[label] = alt
        shipped = [r.ape() for r in picked]
        print(f"  {label}: n={len(picked)}, APE median {statistics.median(shipped):.0%} -> "
              f"{statistics.median(alt_apes):.0%}, mean {statistics.fmean(shipped):.0%} -> "
              f"{statistics.fmean(alt_apes):.0%}")
        for r in picked:
            alt = r.extra["alt"][label]
            print(f"    {r.row_id:13s} published {_fmt(r.metric, r.value):>9s}  shipped "
                  f"{_fmt(r.metric, r.pred[0]):>9s} ({r.pred[0] / r.value - 1:+.0%})  alternative "
                  f"{_fmt(r.metric, alt):>9s} ({alt / r.value - 1:+.0%})")


def decode_excess(rows: list[Row]) -> None:
    """Batch-1 decode: published minus predicted time per token, whole and per layer."""
    print("\nBatch-1 decode, published - predicted time per token (ms; per layer in brackets):")
    groups: dict = {}
    for r in rows:
        if r.pred and _batch1_decode(r):
            groups.setdefault((_family(r), r.segment), []).append(r)
    for (fam, seg), picked in sorted(groups.items()):
        cells = []
        for r in picked:
            layers = CONFIGS[MODEL_KEYS[r.model]]["num_layers"]
            gap = (1 / r.value - 1 / r.pred[0]) * 1e3
            cells.append((gap, gap / layers, r))
        med = statistics.median(c[0] for c in cells)
        per = statistics.median(c[1] for c in cells)
        print(f"  {fam:10s} {seg:11s} n={len(cells):2d} median {med:+6.2f} ms ({per * 1e3:+5.0f} us"
              f"/layer): " + ", ".join(f"{c[2].row_id} {c[0]:+.1f}" for c in cells))


# ----------------------------------------------------------------------------- summary file

REGIMES = (
    ("batch-1 decode tokens/s, GPUs (published)", _batch1_decode,
     "weights / (70 % of bandwidth)", "20 % (issue #13 goal)"),
    ("prefill / time to first token, GPUs (published)",
     lambda r: r.metric in ("prefill_tok_s", "ttft_s"), "dense-peak roofline",
     "30 % (issue #13 goal)"),
    ("batched serving throughput and decode, GPUs (published)", _batched,
     "weights / 70 % bandwidth + dense-peak prefill", "25 % (issue #13 goal)"),
    ("request time per output token, GPUs (published)", lambda r: r.metric == "e2e_s_per_token",
     "weights / 70 % bandwidth + dense-peak prefill", "published per-token latency"),
)


def write_results(rows: list[Row]) -> None:
    from _results import summary_row, write_summary

    out = []
    for regime, pick, base, anchor in REGIMES:
        s = stats([r for r in rows if pick(r)])
        if s is None:
            continue
        out += [
            summary_row(regime=regime, metric="MAPE", value=s["mean"], unit="%", n=s["n"],
                        anchor=anchor, baseline=base, baseline_value=s["base_mean"]),
            summary_row(regime=regime, metric="median APE", value=s["median"], unit="%",
                        n=s["n"], anchor=anchor, baseline=base,
                        baseline_value=s["base_median"]),
            summary_row(regime=regime, metric="signed mean (predicted / published speed - 1)",
                        value=s["signed"],
                        unit="+%", n=s["n"], anchor=anchor),
            summary_row(regime=regime, metric="share of published figures inside P10-P90",
                        value=s["inside"], unit="%", n=s["n"], anchor="80 %"),
        ]
    for split in ("tune", "held-out"):
        s = stats([r for r in rows if r.split == split])
        out.append(summary_row(regime=f"GPU serving, all metrics, {split} sources (published)",
                               metric="median APE", value=s["median"], unit="%", n=s["n"],
                               anchor="published measurements"))
    write_summary("serving_published", out, command="python bench/serving_published.py")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-summary", action="store_true",
                        help="print only; leave bench/results untouched")
    args = parser.parse_args(argv)
    from _results import isolate_measurements

    isolate_measurements()
    rows = load_rows()
    assign_splits(rows)
    profiles = run(rows)
    print(f"{len(rows)} published rows from {len({r.source_id for r in rows})} sources; "
          f"{sum(bool(r.skipped) for r in rows)} without a prediction\n")
    print("splits: " + ", ".join(
        f"{s}: {sorted({r.source_id for r in rows if r.split == s})}"
        for s in ("tune", "held-out")))
    print_rows(rows)
    print_summaries(rows)
    goals(rows)
    bandwidth_fractions(rows)
    decode_excess(rows)
    sensitivities(rows, profiles)
    if not args.no_summary:
        write_results(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
