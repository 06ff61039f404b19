"""Serving advice for ``mode="generate"``: the report's default request, a short text section and
engine configurations (vLLM, SGLang, TGI, TensorRT-LLM, transformers) with code, from a serving
plan row.

Quantisation names are each engine's own flag values (vLLM engine arguments ``--quantization``
and ``--kv-cache-dtype``; SGLang server arguments ``--quantization`` and ``--kv-cache-dtype``;
TGI launcher ``--quantize``; TensorRT-LLM ``QuantAlgo``), so the code
runs as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..codegen import SNIPPETS, CodeNames, snippet
from ..schema import GenerationPrediction, GenerationProfile, HardwareSpec, Recommendation
from ..units import fmt_bytes, fmt_seconds

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["context_curves", "context_points", "default_request", "default_weight_precision",
           "serving_html", "serving_markdown",
           "serving_engines", "serving_lines", "serving_recommendations"]

#: Output tokens per request when the report is not told otherwise.
DEFAULT_OUTPUT_LEN = 128
#: Directory the code saves a model to when ``model.config`` names no Hub id.
LOCAL_MODEL_DIR = "aiadvisor_serving"

#: vLLM ``quantization=``: fp8 quantises 16-bit weights on load, bitsandbytes loads 4-bit NF4 on
#: load; AWQ (int4) and GPTQ (int8wo here: GPTQ has 8-bit weight-only checkpoints) need a
#: checkpoint quantised that way. 16-bit and fp32 weights need none. fp4 and int8 (W8A8) have
#: no entry: an NVFP4/MXFP4 or W8A8 INT8 checkpoint (NVIDIA Model Optimizer, llm-compressor,
#: AMD Quark) names its method in its config.json, which vLLM reads.
VLLM_QUANTIZATION = {"fp8": "fp8", "int8wo": "gptq", "int4": "awq", "nf4": "bitsandbytes"}
#: vLLM ``kv_cache_dtype=``: "auto" (the model's dtype) or "fp8"; vLLM has no int8 cache.
VLLM_KV = {"fp8": "fp8"}
#: TGI ``--quantize``: fp8, eetq (int8 weight-only) and bitsandbytes-nf4 quantise on load; awq
#: needs an AWQ checkpoint.
TGI_QUANTIZE = {"fp8": "fp8", "int8wo": "eetq", "int4": "awq", "nf4": "bitsandbytes-nf4"}
#: TensorRT-LLM ``QuantAlgo`` members: weight-only int8 (W8A16), int8 SmoothQuant (W8A8, per
#: channel), int4 AWQ (W4A16_AWQ, also the closest to NF4, which TensorRT-LLM does not run),
#: FP8 and NVFP4 weights and activations.
TRTLLM_QUANT_ALGO = {"fp8": "FP8", "fp4": "NVFP4", "int8": "W8A8_SQ_PER_CHANNEL",
                     "int8wo": "W8A16", "int4": "W4A16_AWQ", "nf4": "W4A16_AWQ"}
#: SGLang ``--quantization`` (server arguments): fp8 quantises 16-bit weights on load; awq,
#: w8a8_int8 (our int8 is W8A8) and gptq (8-bit weight-only: int8wo) need a checkpoint
#: quantised that way. An NVFP4/MXFP4 checkpoint
#: names its method in its config.json, which SGLang reads: no flag. NF4 has no entry: SGLang
#: gets no code for it (:data:`SGLANG_UNSUPPORTED`).
SGLANG_QUANTIZATION = {"fp8": "fp8", "int4": "awq", "int8": "w8a8_int8", "int8wo": "gptq"}
#: SGLang ``--kv-cache-dtype``: "auto" or an FP8 format (fp8_e4m3, as vLLM's "fp8").
SGLANG_KV = {"fp8": "fp8_e4m3"}
SGLANG_UNSUPPORTED = ("nf4",)
#: Weight formats TGI gets no code for: fp4 (no ``--quantize`` value loads it) and int8 W8A8
#: (no launcher value quantises to it; TGI's int8 is EETQ, weight-only: int8wo).
TGI_UNSUPPORTED = ("fp4", "int8")
#: ``KvCacheConfig(dtype=...)`` values: "auto" (the model's) or "fp8".
TRTLLM_KV = {"fp8": "fp8"}
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
SIXTEEN_BIT = ("bf16", "fp16", "fp32")


#: Where each engine runs, by the device's (vendor, kind), as each project documents it:
#: vLLM's installation guide lists NVIDIA CUDA, AMD ROCm, Intel XPU, x86 and ARM CPUs, Google
#: TPU, Intel Gaudi and AWS Neuron (docs.vllm.ai, "Installation"), and Huawei Ascend through
#: the vllm-ascend hardware plugin of the vLLM project; TGI's installation pages cover NVIDIA,
#: AMD, Intel (GPUs and Xeon CPUs), Gaudi, Inferentia and TPU (text-generation-inference docs,
#: installation_*.md); SGLang's server runs on NVIDIA and AMD (ROCm) GPUs (docs.sglang.io;
#: its other backends are left out here); TensorRT-LLM runs on NVIDIA datacenter and
#: workstation GPUs only. Jetson modules, Apple GPUs, Raspberry Pi and the other NPUs get none
#: of these (llama.cpp, MLX or the vendor's runtime serve there). ``None`` stands for any vendor
#: (vLLM's CPU backend builds for x86, ARM and Apple silicon CPUs).
ENGINE_HARDWARE = {
    "vllm": {("NVIDIA", "gpu"), ("AMD", "gpu"), ("Intel", "gpu"), ("Intel", "npu"),
             ("Google", "tpu"), ("AWS", "npu"), ("Huawei", "npu"), (None, "cpu")},
    "sglang": {("NVIDIA", "gpu"), ("AMD", "gpu")},
    "tgi": {("NVIDIA", "gpu"), ("AMD", "gpu"), ("Intel", "gpu"), ("Intel", "npu"),
            ("Intel", "cpu"), ("Google", "tpu"), ("AWS", "npu")},
    "tensorrt_llm": {("NVIDIA", "gpu")},
}


def serving_engines(spec: HardwareSpec | None) -> tuple[str, ...]:
    """The engines of :data:`ENGINE_HARDWARE` that run on ``spec`` (all of them without one).

    >>> from aiadvisor.hardware import get
    >>> serving_engines(get("H100 SXM")), serving_engines(get("MI300X"))
    (('vllm', 'sglang', 'tgi', 'tensorrt_llm'), ('vllm', 'sglang', 'tgi'))
    """
    if spec is None:
        return tuple(ENGINE_HARDWARE)
    return tuple(engine for engine, where in ENGINE_HARDWARE.items()
                 if (spec.vendor, spec.kind) in where or (None, spec.kind) in where)


def default_weight_precision(spec: HardwareSpec) -> str:
    """BF16 where the device runs it, else FP16, else FP32: how a served model's 16-bit
    checkpoint loads without quantisation."""
    for precision in ("bf16", "fp16"):
        if spec.peak_tflops(precision):
            return precision
    return "fp32"


def default_request(gp: GenerationProfile) -> tuple[int, int]:
    """(prompt_len, output_len) a report answers first: the example's sequence length and 128
    output tokens, both capped so that prompt + output fit the model's positions.

    >>> from types import SimpleNamespace as NS
    >>> default_request(NS(prefill=NS(seq_len=512), max_positions=512))
    (384, 128)
    >>> default_request(NS(prefill=NS(seq_len=16), max_positions=None))
    (16, 128)
    """
    prompt = gp.prefill.seq_len or 512
    output = DEFAULT_OUTPUT_LEN
    limit = gp.max_positions
    if limit is not None:
        output = min(output, max(limit // 2, 1))
        prompt = max(min(prompt, limit - output), 1)
    return prompt, output


def _rate(per_s: float) -> str:
    return f"{per_s:,.0f}" if per_s >= 100 else f"{per_s:.3g}"


def serving_lines(g: GenerationPrediction, plan: pd.DataFrame) -> list[str]:
    """The terminal report's serving section: memory, concurrency, latency, throughput and the
    best plan row, every time marked estimated."""
    fits = "fits" if g.fits else "does not fit"
    lines = [
        f"{g.hardware} x {g.num_devices}, {g.weight_precision} weights, {g.kv_precision} KV "
        f"cache, prompt {g.prompt_len} + output {g.output_len} tokens, {g.batch_size} "
        f"concurrent ({fits})",
        f"weights: {fmt_bytes(g.weights_bytes)}; KV cache per token: "
        f"{fmt_bytes(g.kv_bytes_per_token)}; max concurrency: {g.max_batch:,} sequences "
        "(estimated)",
        f"TTFT {fmt_seconds(g.ttft_s)} (estimated), TPOT {fmt_seconds(g.tpot_s)} (estimated), "
        f"{_rate(g.tokens_per_s)} tokens/s (estimated), "
        f"{_rate(g.tokens_per_s_per_user)} tokens/s per user (estimated)",
    ]
    if len(plan):
        lines.append("best plan: " + plan_row_text(plan.iloc[0]))
    return lines


def plan_row_text(row: Any) -> str:
    """One plan row in words (times estimated)."""
    return (f"{row['weight_precision']} weights, {row['kv_precision']} KV, tp {int(row['tp'])}, "
            f"{int(row['batch_size'])} concurrent: {_rate(row['tokens_per_s'])} tokens/s, "
            f"TPOT {fmt_seconds(row['tpot_s'])}, TTFT {fmt_seconds(row['ttft_s'])} "
            f"(estimated{'' if row['fits'] else '; does not fit'})")


def _best(plan: pd.DataFrame, *, sixteen_bit_single: bool = False) -> Any:
    rows = plan[plan["fits"].astype(bool)]
    if sixteen_bit_single:
        rows = rows[rows["weight_precision"].isin(SIXTEEN_BIT) & (rows["batch_size"] == 1)]
    return None if rows.empty else rows.iloc[0]


def _engine_values(row: Any, *, model_id: str, max_model_len: int) -> dict[str, Any]:
    wp, kv = str(row["weight_precision"]), str(row["kv_precision"])
    return {"model_id": model_id or LOCAL_MODEL_DIR, "save_first": not model_id,
            "tp": int(row["tp"]), "batch": int(row["batch_size"]), "max_model_len": max_model_len,
            "dtype": TORCH_DTYPES.get(wp, "bfloat16") if wp in SIXTEEN_BIT else "auto",
            "wp": wp, "kv": kv, "tokens_per_s": round(float(row["tokens_per_s"]), 1),
            "tpot_s": float(f"{float(row['tpot_s']):.4g}")}


def _vllm_flags(v: dict[str, Any]) -> list[str]:
    flags = ["--dtype", v["dtype"], "--tensor-parallel-size", str(v["tp"]),
             "--kv-cache-dtype", VLLM_KV.get(v["kv"], "auto"),
             "--max-num-seqs", str(v["batch"]), "--max-model-len", str(v["max_model_len"]),
             "--gpu-memory-utilization", "0.9"]
    if v["wp"] in VLLM_QUANTIZATION:
        flags += ["--quantization", VLLM_QUANTIZATION[v["wp"]]]
    return flags


def _sglang_flags(v: dict[str, Any]) -> list[str]:
    flags = ["--dtype", v["dtype"], "--tp", str(v["tp"]),
             "--kv-cache-dtype", SGLANG_KV.get(v["kv"], "auto"),
             "--max-running-requests", str(v["batch"]),
             "--context-length", str(v["max_model_len"]), "--mem-fraction-static", "0.9"]
    if v["wp"] in SGLANG_QUANTIZATION:
        flags += ["--quantization", SGLANG_QUANTIZATION[v["wp"]]]
    return flags


def _tgi_flags(v: dict[str, Any]) -> list[str]:
    flags = ["--num-shard", str(v["tp"]), "--max-batch-size", str(v["batch"]),
             "--max-total-tokens", str(v["max_model_len"])]
    if v["wp"] in TGI_QUANTIZE:
        flags += ["--quantize", TGI_QUANTIZE[v["wp"]]]
    elif v["dtype"] in ("bfloat16", "float16"):
        flags += ["--dtype", v["dtype"]]
    return flags


def _recommendation(rec_id: str, title: str, snippet_id: str, rationale: str, code: str,
                    v: dict[str, Any], baseline: float | None) -> Recommendation:
    meta = SNIPPETS[snippet_id]
    speedup = v["tokens_per_s"] / baseline if baseline else None
    if speedup:
        rationale += (" Speedup: output tokens/s against plain eager transformers generate for "
                      "one user in 16 bit.")
    return Recommendation(
        id=rec_id, title=title, category="serving", rationale=rationale, code=code,
        predicted_speedup=None if speedup is None else round(speedup, 4),
        extra={"snippet": snippet_id, "requires": list(meta.requires), "launcher": meta.launcher,
               "tokens_per_s": v["tokens_per_s"], "tpot_s": v["tpot_s"],
               "weight_precision": v["wp"], "kv_precision": v["kv"], "tp": v["tp"],
               "batch_size": v["batch"]})


def serving_recommendations(plan: pd.DataFrame, *, names: CodeNames, model_id: str,
                            prompt_len: int, output_len: int,
                            baseline_tokens_per_s: float | None = None,
                            spec: HardwareSpec | None = None) -> list[Recommendation]:
    """Engine configurations with code for the best fitting plan row (vLLM offline and server,
    SGLang, TGI, TensorRT-LLM: those that run on ``spec``, :func:`serving_engines`) and for the best
    16-bit single-user row (transformers ``generate``).

    Parameters
    ----------
    plan : pandas.DataFrame
        :func:`aiadvisor.plan_serving`'s table, best first.
    names : CodeNames
        The user's variable names.
    model_id : str
        The model's Hub id (``config._name_or_path``), or "" (the code saves the live model to
        :data:`LOCAL_MODEL_DIR` first).
    prompt_len, output_len : int
        The request the plan was made for (the engines' maximum length is their sum).
    baseline_tokens_per_s : float, optional
        Tokens/s of plain eager ``generate`` for one user: each recommendation's
        ``predicted_speedup`` is its tokens/s over this.
    spec : HardwareSpec, optional
        The device the plan is for: only engines that run on it get code (all without it).
    """
    recs: list[Recommendation] = []
    engines = serving_engines(spec)
    cpu = spec is not None and spec.kind == "cpu"
    base = baseline_tokens_per_s
    row = _best(plan)
    max_len = prompt_len + output_len
    if row is not None:
        v = _engine_values(row, model_id=model_id, max_model_len=max_len)
        figures = (f"{_rate(v['tokens_per_s'])} tokens/s over {v['batch']} concurrent "
                   f"sequences at TPOT {fmt_seconds(v['tpot_s'])} (estimated)")
        where = f"{row['hardware']} x {int(row['num_devices'])}"
        why = (f"Best serving plan on {where}: {row['weight_precision']} weights, "
               f"{row['kv_precision']} KV cache, tensor parallel {v['tp']}: {figures}.")
        replicas = int(row["num_devices"]) // v["tp"]
        if replicas > 1:
            why += f" Run {replicas} such servers (one per group of {v['tp']} devices)."
        if v["wp"] == "fp4":
            why += (" fp4 weights need a checkpoint quantized to the device's 4-bit format "
                    "(NVFP4 on NVIDIA Blackwell, MXFP4 on AMD; NVIDIA Model Optimizer, "
                    "llm-compressor or AMD Quark write one): point model_id at it.")
        elif v["wp"] == "int8":
            why += (" int8 (W8A8) needs a checkpoint with int8 weights and activation scales "
                    "(llm-compressor's W8A8 schemes write one for vLLM and SGLang; "
                    "TensorRT-LLM quantizes with SmoothQuant itself): point model_id at it.")
        quant = {"vllm": VLLM_QUANTIZATION.get(v["wp"]), "tgi": TGI_QUANTIZE.get(v["wp"]),
                 "trt": TRTLLM_QUANT_ALGO.get(v["wp"])}
        common = {k: v[k] for k in ("model_id", "save_first", "tokens_per_s", "tpot_s")}
        if cpu:
            why += (" On a CPU the figures are eager PyTorch's (no engine is modelled there); "
                    "vLLM's CPU backend is a separate build (x86 or ARM).")

        def server(rec_id: str, title: str, more: str, flags: list[str]) -> Recommendation:
            """A server launched with the plan as command-line flags."""
            return _recommendation(rec_id, f"{title}: {figures}", rec_id, why + " " + more,
                                   snippet(rec_id, names=names, **common, flags=flags), v, base)

        if "vllm" in engines:
            recs.append(_recommendation(
                "serve_vllm", f"Serve with vLLM: {figures}", "serve_vllm", why,
                snippet("serve_vllm", names=names, **common, dtype=v["dtype"], tp=v["tp"],
                        quantization=quant["vllm"], kv_cache_dtype=VLLM_KV.get(v["kv"], "auto"),
                        max_num_seqs=v["batch"], max_model_len=max_len, max_tokens=output_len),
                v, base))
            recs.append(server("serve_vllm_server", "vLLM OpenAI-compatible server",
                               "The same engine as a server (vllm serve).", _vllm_flags(v)))
        if "sglang" in engines and v["wp"] not in SGLANG_UNSUPPORTED:
            recs.append(server("serve_sglang", "Serve with SGLang",
                               "SGLang's server (python -m sglang.launch_server) takes the same "
                               "plan as flags; its engine is not priced apart from vLLM's.",
                               _sglang_flags(v)))
        if "tgi" in engines and v["wp"] not in TGI_UNSUPPORTED:
            recs.append(server("serve_tgi", "Serve with Hugging Face TGI",
                               "TGI's launcher takes the same plan as flags. TGI's README now "
                               "says it is in maintenance mode (minor fixes only) and points to "
                               "vLLM or SGLang for new deployments.", _tgi_flags(v)))
        if "tensorrt_llm" in engines:
            recs.append(_recommendation(
                "serve_tensorrt_llm", f"Serve with TensorRT-LLM: {figures}",
                "serve_tensorrt_llm", why + " TensorRT-LLM's LLM API, on NVIDIA GPUs.",
                snippet("serve_tensorrt_llm", names=names, **common, tp=v["tp"],
                        quant_algo=quant["trt"], kv_dtype=TRTLLM_KV.get(v["kv"], "auto"),
                        max_batch_size=v["batch"], max_tokens=output_len), v, base))
    single = _best(plan, sixteen_bit_single=True)
    if single is not None:
        v = _engine_values(single, model_id=model_id, max_model_len=max_len)
        figures = (f"{_rate(v['tokens_per_s'])} tokens/s for one user at TPOT "
                   f"{fmt_seconds(v['tpot_s'])} (estimated)")
        recs.append(_recommendation(
            "generate_static_compiled", f"transformers generate, static cache + torch.compile: "
            f"{figures}", "generate_static_compiled",
            (f"Without a serving engine: {v['wp']} weights and a static KV cache let "
             f"torch.compile compile each decode step once (a CPU has no CUDA graphs: the "
             f"compiled step fuses its ops) ({figures}; one request at a time, no continuous "
             f"batching)." if cpu else
             f"Without a serving engine: {v['wp']} weights and a static KV cache let "
             f"torch.compile capture each decode step as a CUDA graph, as engines run it "
             f"({figures}; one request at a time, no continuous batching)."),
            snippet("generate_static_compiled", names=names, tokens_per_s=v["tokens_per_s"],
                    tpot_s=v["tpot_s"], dtype=v["dtype"], max_new_tokens=output_len), v, base))
    return recs


def context_points(limit: int | None, *, output_len: int, current: int,
                   top: int = 8192) -> list[int]:
    """Prompt lengths a TPOT-vs-context chart samples: powers of two from 16 up to what the
    model's positions leave beside ``output_len`` (or ``top``), plus ``current``.

    >>> context_points(512, output_len=128, current=300)
    [16, 32, 64, 128, 256, 300, 384]
    """
    high = min(top, limit - output_len) if limit is not None else top
    points = {current} if current <= high else set()
    n = 16
    while n <= high:
        points.add(n)
        n *= 2
    if high >= 16:
        points.add(high)
    return sorted(points)


def context_curves(gp: GenerationProfile, specs: list[HardwareSpec], *, num_devices: int,
                   tp: int, weight_precision: str, kv_precision: str | None, batch_size: int,
                   output_len: int, contexts: list[int]) -> pd.DataFrame:
    """TPOT of each device at each prompt length (``generation_table``: one vectorised call per
    length for all devices). A device that cannot run the weight format, or on which
    ``batch_size`` sequences do not fit, has no point there. KV None: each device's default.

    Returns
    -------
    pandas.DataFrame
        Columns ``hardware``, ``context_len``, ``tpot_s``, ``tokens_per_s`` (estimated).
    """
    import pandas as pd

    from ..costmodel.generation import default_kv_precision, generation_table

    defaults = {s.name: kv_precision or default_kv_precision(s, weight_precision) for s in specs}
    kvs = tuple(sorted(set(defaults.values())))
    rows = []
    for context in contexts:
        for g in generation_table(gp, specs, num_devices=num_devices, tp=tp,
                                  weight_precision=weight_precision, kv_precisions=kvs,
                                  prompt_len=context, output_len=output_len,
                                  batches=[batch_size]):
            if g.kv_precision == defaults[g.hardware] and g.fits:
                rows.append({"hardware": g.hardware, "context_len": context,
                             "tpot_s": g.tpot_s, "tokens_per_s": g.tokens_per_s})
    return pd.DataFrame(rows, columns=["hardware", "context_len", "tpot_s", "tokens_per_s"])


#: Plan columns the static reports (HTML, Markdown) show.
PLAN_REPORT_COLUMNS = [("weight_precision", "weights"), ("kv_precision", "KV"), ("tp", "tp"),
                       ("batch_size", "concurrent"), ("fits", "fits"),
                       ("tokens_per_s", "tokens/s"), ("tpot_s", "TPOT"), ("ttft_s", "TTFT"),
                       ("usd_per_million_tokens", "$ per 1M tokens")]


def serving_html(g: GenerationPrediction, plan: pd.DataFrame, *, limit: int = 8) -> str:
    """The serving section of the HTML report (escaped; times estimated)."""
    import html

    from .render import html_table

    items = "".join(f"<li>{html.escape(line)}</li>" for line in serving_lines(g, plan))
    return (f"<h2>Serving (LLM generation)</h2><ul>{items}</ul>"
            f"<h3>Serving plans (best first, top {min(limit, len(plan))} of {len(plan)}; "
            "estimated)</h3>"
            f'<div class="aa-scroll">{html_table(plan, PLAN_REPORT_COLUMNS, limit)}</div>')


def serving_markdown(g: GenerationPrediction, plan: pd.DataFrame, *, limit: int = 8) -> str:
    """The serving section of the Markdown report (times estimated)."""
    from .render import markdown_table

    return "\n".join(["## Serving (LLM generation)", "",
                      *[f"- {line}" for line in serving_lines(g, plan)], "",
                      f"Serving plans, best first (top {min(limit, len(plan))} of {len(plan)}; "
                      "estimated):", "", markdown_table(plan, PLAN_REPORT_COLUMNS, limit), ""])
