"""LLM generation and serving: ``predict_generation`` (one configuration) and ``plan_serving``
(every weight format x KV format x tensor-parallel degree x concurrency, or every device).

Both take the user's live causal LM (a transformers ``*ForCausalLM``, a built-in example decoder,
any module whose ``forward(input_ids=..., use_cache=True)`` returns its cache; on the meta device
for 70B-400B models) or the :class:`~aiadvisor.schema.GenerationProfile` captured from it once
with :func:`profile_generation`, which is reused without re-tracing.
"""

from __future__ import annotations

from typing import Any

from .errors import AIAdvisorError, InvalidArgumentError, check_choice
from .schema import GenerationPrediction, GenerationProfile, HardwareSpec, KVCacheLayout

__all__ = ["plan_serving", "predict_generation", "profile_generation"]


def profile_generation(model: Any, example_inputs: Any = None, *, prompt_len: int = 512,
                       kv_cache: KVCacheLayout | None = None,
                       model_name: str | None = None) -> GenerationProfile:
    """Capture a causal LM once: its prompt forward (traced on fake tensors) and its KV cache.

    Parameters
    ----------
    model : torch.nn.Module
        The causal LM; weights may be random or on the meta device (nothing runs for real).
    example_inputs : tensor, optional
        Token ids; only the shape matters. Default: one prompt of ``prompt_len`` tokens.
    prompt_len : int
        Length the prompt forward is traced at when no inputs are given (other lengths are
        answered from the trace).
    kv_cache : KVCacheLayout, optional
        For a module whose forward returns no cache: its layout by hand, e.g.
        ``KVCacheLayout.from_shape(num_layers=32, kv_heads=8, head_dim=128)``.
    model_name : str, optional
        Name shown in messages (default: the class name).

    Examples
    --------
    >>> import aiadvisor as aa
    >>> from aiadvisor import examples
    >>> model, _ = examples.build("tiny-gpt")
    >>> gp = aa.profile_generation(model, prompt_len=64)
    >>> gp.kv.elements_per_token   # 2 (K and V) x 4 layers x 4 heads x 64 dims
    2048
    """
    from .profiler.generation import profile_generation as _capture

    if kv_cache is not None and not isinstance(kv_cache, KVCacheLayout):
        raise InvalidArgumentError(
            f"kv_cache of type {type(kv_cache).__name__} is not valid: expected a KVCacheLayout, "
            "e.g. KVCacheLayout.from_shape(num_layers=..., kv_heads=..., head_dim=...).")
    return _capture(model, example_inputs, prompt_len=prompt_len, model_name=model_name,
                    kv_cache=kv_cache)


def _generation_profile(model_or_profile: Any, example_inputs: Any, prompt_len: int,
                        kv_cache: KVCacheLayout | None) -> GenerationProfile:
    if isinstance(model_or_profile, GenerationProfile):
        return model_or_profile
    trace_len = prompt_len if isinstance(prompt_len, int) and prompt_len > 0 else 512
    return profile_generation(model_or_profile, example_inputs, prompt_len=trace_len,
                              kv_cache=kv_cache)


def _spec(hardware: Any) -> HardwareSpec:
    """As :func:`aiadvisor.advise` resolves ``hardware`` (None: the attached device)."""
    from .api import _resolve_hardware

    return _resolve_hardware(hardware)


def predict_generation(model_or_profile: Any, example_inputs: Any = None, *,
                       hardware: str | HardwareSpec | None = None, num_devices: int = 1,
                       tp: int | None = None, weight_precision: str = "bf16",
                       kv_precision: str | None = None, prompt_len: int = 512,
                       output_len: int = 128, batch_size: int = 1, engine: str = "engine",
                       kv_cache: KVCacheLayout | None = None) -> GenerationPrediction:
    """How a causal LM generates on a device: memory, concurrency, TTFT, TPOT and tokens/s.

    Parameters
    ----------
    model_or_profile : torch.nn.Module or GenerationProfile
        The live causal LM, or :func:`profile_generation`'s result (no re-trace).
    example_inputs : tensor, optional
        Token ids (shape only), used when a model is given.
    hardware : str or HardwareSpec, optional
        A catalog name, a spec, or ``"local"``; default: the attached device.
    num_devices : int
        Devices in total: ``num_devices / tp`` replicas of ``tp`` devices each.
    tp : int, optional
        Tensor-parallel degree (default ``num_devices``); must divide the KV heads.
    weight_precision : {"fp32", "bf16", "fp16", "fp8", "fp4", "int8", "int8wo", "int4", "nf4"}
        Format of the linear layers' weights. int8 is W8A8 (weights and activations in int8 on
        the INT8 engine: SmoothQuant checkpoints); int8wo (W8A16: EETQ, TensorRT-LLM W8A16,
        GPTQ 8-bit, llama.cpp Q8_0), int4 and nf4 are weight-only formats that multiply in 16
        bit; fp4 is W4A4 NVFP4 or MXFP4, the device's format, where it has FP4 tensor cores.
    kv_precision : {"fp32", "bf16", "fp16", "fp8", "int8"}, optional
        KV cache format (default: the model's 16-bit dtype; fp8 with fp4 weights where the
        device has FP8).
    prompt_len, output_len : int
        Tokens per request in and out; their sum must fit the model's positions.
    batch_size : int
        Sequences decoded together (concurrent users).
    engine : {"engine", "fused", "eager"}
        The stack assumed: a serving engine (vLLM/TGI/TensorRT-LLM, CUDA-graph decode), the
        same engine without CUDA graphs (``fused``: vLLM ``enforce_eager=True``, TGI
        ``--cuda-graphs 0`` or before 2.0: fused kernels, each launched from Python) or plain
        eager transformers ``generate``.
    kv_cache : KVCacheLayout, optional
        The cache layout by hand, for a module whose forward returns no cache.

    Returns
    -------
    GenerationPrediction
        ``weights_bytes``, ``kv_bytes_per_token``, ``kv_bytes``, ``max_batch``, ``fits``,
        ``ttft_s``, ``tpot_s`` (with ``*_low_s``/``*_high_s``), ``tokens_per_s``,
        ``tokens_per_s_per_user``, ``bound``, ``confidence``, ``notes``. Times are estimated.

    Raises
    ------
    NotACausalLMError, InvalidArgumentError, UnsupportedPrecisionError, UnknownHardwareError

    Examples
    --------
    >>> import aiadvisor as aa
    >>> from aiadvisor import examples
    >>> model, _ = examples.build("llama-3-8b")   # meta device: nothing is allocated
    >>> g = aa.predict_generation(model, hardware="H100 SXM", prompt_len=512, output_len=128)
    >>> g.kv_bytes_per_token     # 2 x 32 layers x 8 KV heads x 128 dims x 2 bytes (bf16)
    131072
    """
    from .costmodel.generation import predict_generation as _predict

    gp = _generation_profile(model_or_profile, example_inputs, prompt_len, kv_cache)
    return _predict(gp, _spec(hardware), num_devices=num_devices, tp=tp,
                    weight_precision=weight_precision, kv_precision=kv_precision,
                    prompt_len=prompt_len, output_len=output_len, batch_size=batch_size,
                    engine=engine)


#: Columns of :func:`plan_serving`'s table, in order.
PLAN_COLUMNS = ("hardware", "weight_precision", "kv_precision", "tp", "num_devices",
                "batch_size", "max_batch", "fits", "tpot_s", "tpot_high_s", "ttft_s",
                "tokens_per_s", "tokens_per_s_per_user", "weights_bytes", "kv_bytes",
                "usd_per_hour", "usd_per_million_tokens", "meets_targets", "bound",
                "confidence")


def plan_serving(model_or_profile: Any, example_inputs: Any = None, *,
                 hardware: str | HardwareSpec | list | None = None, num_devices: int = 1,
                 prompt_len: int = 512, output_len: int = 128,
                 weight_precisions: tuple[str, ...] | None = None,
                 kv_precisions: tuple[str, ...] | None = None,
                 max_tpot_s: float | None = None, max_ttft_s: float | None = None,
                 min_users: int | None = None, engine: str = "engine",
                 kv_cache: KVCacheLayout | None = None):
    """Serving configurations, best first: weight format x KV format x tensor parallel x
    concurrency on one device type, or across the whole catalog (``hardware="catalog"``).

    Rows that fit the device and meet the latency targets (``max_tpot_s``, ``max_ttft_s``,
    ``min_users`` concurrent sequences) come first, by tokens/s (or by $ per million output
    tokens across devices, where the catalog has a price); the rest follow.

    Returns
    -------
    pandas.DataFrame
        One row per configuration with the columns of :data:`PLAN_COLUMNS`; ``attrs["notes"]``
        says what was assumed. Times and $ figures are estimated.

    Examples
    --------
    >>> import aiadvisor as aa
    >>> from aiadvisor import examples
    >>> model, _ = examples.build("llama-3-8b")
    >>> plan = aa.plan_serving(model, hardware="L4", prompt_len=512, output_len=128,
    ...                        max_tpot_s=0.05)
    >>> best = plan.iloc[0]
    >>> bool(best["meets_targets"]), best["weight_precision"] != "bf16"
    (True, True)
    """
    import pandas as pd

    from .costmodel.generation import (
        KV_PRECISIONS,
        WEIGHT_PRECISIONS,
        batch_choices,
        check_kv_precision,
        check_tp,
        generation_table,
    )
    from .costmodel.generation import (
        predict_generation as _predict,
    )
    from .hardware import all_specs

    for name, value in (("max_tpot_s", max_tpot_s), ("max_ttft_s", max_ttft_s)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or value <= 0):
            raise InvalidArgumentError(f"{name}={value!r} is not valid: expected seconds > 0.")
    if min_users is not None and (not isinstance(min_users, int) or min_users < 1):
        raise InvalidArgumentError(f"min_users={min_users!r} is not valid: expected an "
                                   "integer >= 1.")
    for name, values, choices in (("weight_precisions", weight_precisions, WEIGHT_PRECISIONS),
                                  ("kv_precisions", kv_precisions, KV_PRECISIONS)):
        for v in values or ():
            check_choice(name[:-1], v, choices)
    gp = _generation_profile(model_or_profile, example_inputs, prompt_len, kv_cache)
    if isinstance(hardware, str) and hardware == "catalog":
        specs = [s for s in all_specs() if s.memory_gb and s.memory_bw_gbs]
    elif isinstance(hardware, (list, tuple)):
        specs = [_spec(h) for h in hardware]
    else:
        specs = [_spec(hardware)]
    rows = []
    tps = _tp_choices(gp, num_devices)
    for tp in tps:
        check_tp(gp, num_devices=num_devices, tp=tp)
    if len(specs) == 1:
        spec, cache = specs[0], {}
        for tp in tps:
            for wp in _weight_choices(spec, weight_precisions):
                for kv in kv_precisions or _kv_defaults(spec, wp):
                    try:
                        check_kv_precision(spec, kv)
                    except AIAdvisorError:
                        continue
                    config = {"num_devices": num_devices, "tp": tp, "weight_precision": wp,
                              "kv_precision": kv, "prompt_len": prompt_len,
                              "output_len": output_len, "engine": engine, "cache": cache}
                    first = _predict(gp, spec, batch_size=1, **config)
                    for b in batch_choices(first.max_batch) or [1]:
                        g = first if b == 1 else _predict(gp, spec, batch_size=b, **config)
                        rows.append(_row(g, spec, max_tpot_s, max_ttft_s, min_users))
    else:
        by_name = {s.name: s for s in specs}
        for tp in tps:
            for wp in sorted({p for s in specs for p in _weight_choices(s, weight_precisions)}):
                chosen = [s for s in specs if wp in _weight_choices(s, weight_precisions)]
                kvs = tuple(kv_precisions or sorted({k for s in chosen
                                                     for k in _kv_defaults(s, wp)}))
                for g in generation_table(gp, chosen, num_devices=num_devices, tp=tp,
                                          weight_precision=wp, kv_precisions=kvs,
                                          prompt_len=prompt_len, output_len=output_len,
                                          batches=batch_choices(1024), engine=engine):
                    if kv_precisions or g.kv_precision in _kv_defaults(by_name[g.hardware], wp):
                        rows.append(_row(g, by_name[g.hardware], max_tpot_s, max_ttft_s,
                                         min_users))
    frame = pd.DataFrame(rows, columns=list(PLAN_COLUMNS))
    across = len(specs) > 1
    if across:
        # Across devices, the cheapest way to serve wins: $ per million tokens, then speed.
        frame = frame.assign(_price=frame["usd_per_million_tokens"].fillna(float("inf")))
        frame = frame.sort_values(["meets_targets", "_price", "tokens_per_s"],
                                  ascending=[False, True, False]).drop(columns="_price")
    else:
        frame = frame.sort_values(["meets_targets", "tokens_per_s"], ascending=[False, False])
    frame = frame.reset_index(drop=True)
    frame.attrs["notes"] = (
        f"{gp.model_name}: prompt {prompt_len} + output {output_len} tokens; KV cache "
        f"{gp.kv.elements_per_token} elements per token ({gp.kv.source}). Engine: "
        + {"engine": "serving engine with CUDA-graph decode",
           "fused": "serving engine's fused kernels launched without CUDA graphs",
           "eager": "eager PyTorch"}[engine] + "."
        " All times estimated.")
    return frame


def _tp_choices(gp: GenerationProfile, num_devices: int) -> list[int]:
    heads = gp.kv.kv_heads
    return [d for d in range(1, num_devices + 1)
            if num_devices % d == 0 and (heads is None or d == 1 or heads % d == 0)]


def _weight_choices(spec: HardwareSpec, asked: tuple[str, ...] | None) -> list[str]:
    """Weight formats ``spec`` runs, of those asked (default: all but FP32 where a 16-bit
    float runs; without one, as on a CPU without BF16 instructions, the weight-only formats
    compute on FP32's engine and FP32 stays, the format the report defaults to there)."""
    from .costmodel.generation import WEIGHT_PRECISIONS
    from .costmodel.precision import supported_precisions

    supported = supported_precisions(spec)
    if asked:
        return [p for p in asked if p in supported]
    sixteen = any(p in supported for p in ("bf16", "fp16"))
    return [p for p in WEIGHT_PRECISIONS if p in supported and not (p == "fp32" and sixteen)]


def _kv_defaults(spec: HardwareSpec, weight_precision: str) -> tuple[str, ...]:
    from .costmodel.generation import default_kv_precision

    base = default_kv_precision(spec, weight_precision)
    if base == "fp32":
        return (base,)
    # The default, an FP8 cache, and the 16-bit one (fp4 weights default to an FP8 cache).
    return tuple(dict.fromkeys((base, "fp8", default_kv_precision(spec, "bf16"))))


def _row(g: GenerationPrediction, spec: HardwareSpec, max_tpot_s, max_ttft_s, min_users) -> dict:
    price = spec.usd_per_hour
    usd = (price * g.num_devices / 3600.0 / g.tokens_per_s * 1e6
           if price and g.tokens_per_s > 0 else None)
    meets = bool(g.fits and (max_tpot_s is None or g.tpot_s <= max_tpot_s)
                 and (max_ttft_s is None or g.ttft_s <= max_ttft_s)
                 and (min_users is None or g.batch_size >= min_users))
    return {"hardware": g.hardware, "weight_precision": g.weight_precision,
            "kv_precision": g.kv_precision, "tp": g.tp, "num_devices": g.num_devices,
            "batch_size": g.batch_size, "max_batch": g.max_batch, "fits": g.fits,
            "tpot_s": g.tpot_s, "tpot_high_s": g.tpot_high_s, "ttft_s": g.ttft_s,
            "tokens_per_s": g.tokens_per_s, "tokens_per_s_per_user": g.tokens_per_s_per_user,
            "weights_bytes": g.weights_bytes, "kv_bytes": g.kv_bytes, "usd_per_hour": price,
            "usd_per_million_tokens": usd, "meets_targets": meets, "bound": g.bound,
            "confidence": g.confidence}
