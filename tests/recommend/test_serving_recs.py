"""Serving recommendations: each engine's own quantisation flag values, the user's names, and
the figures of the plan row each one comes from."""

from __future__ import annotations

import ast

import pandas as pd
import pytest

from aiadvisor.codegen import CodeNames
from aiadvisor.recommend.serving import serving_recommendations
from aiadvisor.serving import PLAN_COLUMNS


def _plan(weight: str, kv: str, *, tp: int = 2, batch: int = 64, devices: int = 2):
    best = {"hardware": "NVIDIA H100 SXM", "weight_precision": weight, "kv_precision": kv,
            "tp": tp, "num_devices": devices, "batch_size": batch, "max_batch": 300,
            "fits": True, "tpot_s": 0.0123, "tpot_high_s": 0.02, "ttft_s": 0.05,
            "tokens_per_s": 5000.0, "tokens_per_s_per_user": 81.3, "weights_bytes": 1,
            "kv_bytes": 1, "usd_per_hour": None, "usd_per_million_tokens": None,
            "meets_targets": True, "bound": "memory", "confidence": "medium"}
    single = {**best, "weight_precision": "bf16", "kv_precision": "bf16", "batch_size": 1,
              "tokens_per_s": 90.0, "tpot_s": 0.011}
    return pd.DataFrame([best, single], columns=list(PLAN_COLUMNS))


def _by_id(recs):
    return {r.id: r for r in recs}


# Flag values from each engine's documentation: vLLM engine arguments (--quantization
# {awq,gptq,fp8,bitsandbytes,...}, --kv-cache-dtype {auto,fp8,...}); TGI launcher --quantize
# {awq,eetq,gptq,bitsandbytes-nf4,fp8,...}; TensorRT-LLM QuantAlgo (FP8, W8A16,
# W8A8_SQ_PER_CHANNEL, W4A16_AWQ). Weight-only int8 (int8wo) is GPTQ 8-bit in vLLM, EETQ in TGI
# and W8A16 in TensorRT-LLM; W8A8 int8 loads from its checkpoint's config in vLLM (no flag),
# is SmoothQuant in TensorRT-LLM and gets no TGI code (TGI's int8 is EETQ, weight-only).
@pytest.mark.parametrize(("weight", "vllm", "tgi", "trt"), [
    ("fp8", "'fp8'", "fp8", "'FP8'"),
    ("int8wo", "'gptq'", "eetq", "'W8A16'"),
    ("int8", "None", "-", "'W8A8_SQ_PER_CHANNEL'"),
    ("int4", "'awq'", "awq", "'W4A16_AWQ'"),
    ("nf4", "'bitsandbytes'", "bitsandbytes-nf4", "'W4A16_AWQ'"),
    ("bf16", "None", None, "None"),
])
def test_quantization_names_are_each_engines_own(weight, vllm, tgi, trt):
    recs = _by_id(serving_recommendations(_plan(weight, "fp8"), names=CodeNames(),
                                          model_id="meta-llama/Llama-3.1-8B", prompt_len=512,
                                          output_len=128))
    assert f"quantization={vllm}," in recs["serve_vllm"].code
    assert "kv_cache_dtype='fp8'" in recs["serve_vllm"].code
    server = recs["serve_vllm_server"].code
    assert "'--kv-cache-dtype', 'fp8'" in server and "'--tensor-parallel-size', '2'" in server
    if tgi == "-":
        assert "serve_tgi" not in recs
        assert "'--quantization'" not in server
        assert "W8A8" in recs["serve_vllm"].rationale   # the checkpoint it needs is named
    else:
        tgi_code = recs["serve_tgi"].code
        assert "'--num-shard', '2'" in tgi_code and "'--max-batch-size', '64'" in tgi_code
    if tgi and tgi != "-":
        assert f"'--quantize', '{tgi}'" in tgi_code
        assert f"'--quantization', {vllm}" in server
    elif tgi is None:
        assert "'--quantize'" not in tgi_code and "'--dtype', 'bfloat16'" in tgi_code
    assert f"quant_algo = {trt}" in recs["serve_tensorrt_llm"].code
    # SGLang server arguments: --quantization {fp8, awq, w8a8_int8, ...}, --kv-cache-dtype
    # {auto, fp8_e4m3, fp8_e5m2}; bitsandbytes NF4 gets no SGLang code here.
    if weight == "nf4":
        assert "serve_sglang" not in recs
    else:
        sglang = recs["serve_sglang"].code
        assert "'--tp', '2'" in sglang and "'--kv-cache-dtype', 'fp8_e4m3'" in sglang
        assert "'--max-running-requests', '64'" in sglang
        sglang_quant = {"fp8": "fp8", "int8": "w8a8_int8", "int8wo": "gptq",
                        "int4": "awq"}.get(weight)
        assert (f"'--quantization', '{sglang_quant}'" in sglang) == (sglang_quant is not None)
        assert ("'--quantization'" in sglang) == (sglang_quant is not None)
    assert "KvCacheConfig(dtype='fp8')" in recs["serve_tensorrt_llm"].code


def test_engine_code_uses_the_names_and_the_plan_row():
    names = CodeNames(model="llm", inputs="batch", call_style="kwargs")
    recs = serving_recommendations(_plan("int4", "bf16"), names=names, model_id="",
                                   prompt_len=512, output_len=128, baseline_tokens_per_s=50.0)
    by_id = _by_id(recs)
    vllm = by_id["serve_vllm"]
    for rec in recs:
        ast.parse(rec.code)
    # No Hub id: the live model is saved where the engines load it from.
    assert "model_id = 'aiadvisor_serving'" in vllm.code
    assert "llm.save_pretrained(model_id)" in vllm.code
    # The row: tp 2, 64 sequences, 512 + 128 = 640 tokens, bf16 KV -> vLLM's "auto".
    for text in ("tensor_parallel_size=2", "max_num_seqs=64", "max_model_len=640",
                 "kv_cache_dtype='auto'", "max_tokens=128"):
        assert text in vllm.code
    assert '"tokens_per_s": 5000.0, "tpot_s": 0.0123' in vllm.code
    assert "5,000 tokens/s" in vllm.title and "TPOT 12.3 ms (estimated)" in vllm.title
    # 5000 / 50 tokens/s of eager generate for one user.
    assert vllm.predicted_speedup == 100.0
    # 2 devices, tp 2: one server.
    assert "Run " not in vllm.rationale
    compiled = by_id["generate_static_compiled"]
    assert "llm.generate(" in compiled.code and "**(batch or {})" in compiled.code
    assert '"tokens_per_s": 90.0, "tpot_s": 0.011' in compiled.code  # the bf16 batch-1 row
    assert compiled.predicted_speedup == 90.0 / 50.0


def test_replicas_are_named_and_nothing_fitting_gives_no_engine_code():
    recs = serving_recommendations(_plan("fp8", "fp8", tp=1, devices=4), names=CodeNames(),
                                   model_id="m", prompt_len=64, output_len=64)
    assert "Run 4 such servers (one per group of 1 devices)." in recs[0].rationale
    plan = _plan("fp8", "fp8").assign(fits=False)
    assert serving_recommendations(plan, names=CodeNames(), model_id="m", prompt_len=64,
                                   output_len=64) == []


@pytest.mark.parametrize(("device", "engines"), [
    ("H100 SXM", {"serve_vllm", "serve_vllm_server", "serve_sglang", "serve_tgi",
                  "serve_tensorrt_llm"}),
    # AMD Instinct: vLLM and SGLang (ROCm), TGI (its AMD installation page), no TensorRT-LLM.
    ("MI300X", {"serve_vllm", "serve_vllm_server", "serve_sglang", "serve_tgi"}),
    # Gaudi: vLLM's Gaudi backend and TGI's Gaudi backend.
    ("Gaudi 3", {"serve_vllm", "serve_vllm_server", "serve_tgi"}),
    # An Apple GPU: none of the three (llama.cpp or MLX serve there).
    ("M3 Max", set()),
])
def test_only_engines_that_run_on_the_device_get_code(device, engines):
    import aiadvisor as aa

    spec = aa.hardware.get(device)
    recs = _by_id(serving_recommendations(_plan("fp8", "fp8"), names=CodeNames(), model_id="m",
                                          prompt_len=512, output_len=128, spec=spec))
    assert set(recs) - {"generate_static_compiled"} == engines
    assert "generate_static_compiled" in recs


def test_a_cpu_gets_vllm_s_cpu_backend_and_no_cuda_graphs():
    from aiadvisor.hardware.detection import detect

    cpu = detect()
    if cpu.kind != "cpu":
        cpu = next(s for s in __import__("aiadvisor").hardware.all_specs() if s.kind == "cpu")
    recs = _by_id(serving_recommendations(_plan("int4", "bf16", tp=1, devices=1),
                                          names=CodeNames(), model_id="m", prompt_len=512,
                                          output_len=128, spec=cpu))
    assert "serve_tensorrt_llm" not in recs
    assert "serve_vllm" in recs and "CPU backend" in recs["serve_vllm"].rationale
    assert ("serve_tgi" in recs) == (cpu.vendor == "Intel")  # TGI's CPU image is Intel's
    rationale = recs["generate_static_compiled"].rationale
    assert "has no CUDA graphs" in rationale and "as a CUDA graph" not in rationale
