"""Precision advice for one device: support, memory, predicted speedup and numerical risk."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..costmodel.precision import FP4_TRAINING_NOTE, INFERENCE_ONLY, WEIGHT_ONLY
from ..errors import check_choice
from ..hardware.support import fp4_bits, fp4_format, support_level
from ..schema import HardwareSpec, ModelProfile, ParallelConfig
from ..units import MODES, PRECISIONS
from .memory import PartsSource, device_memory, usable_bytes
from .predictor import Predictor, speedup

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ["precision", "support", "usable", "memory_per_device_bytes", "fits", "step_time_s",
           "speedup_vs_fp32", "speedup_low", "speedup_high", "confidence", "numerical_risk",
           "handled_by", "notes"]

#: (risk, what handles it) per precision and mode. Ranges: fp16 max 65504, smallest subnormal
#: 6e-8; bf16 8 exponent bits (fp32 range), 8 significant bits; FP8 E4M3 max 448, E5M2 57344.
RISKS = {
    "fp32": ("none: the reference", "nothing needed"),
    "tf32": ("matmul inputs rounded to 10 mantissa bits (~1e-3 relative); fp32 accumulation",
             "torch.backends.cuda.matmul.allow_tf32 = True; rarely affects convergence"),
    "bf16": ("8 significant bits (~3 decimal digits); fp32 range, so no overflow",
             "torch.autocast keeps reductions, softmax and norms in fp32; fp32 master weights"),
    "fp16": ("5 exponent bits: gradients below 6e-8 flush to zero, values above 65504 overflow",
             "dynamic loss scaling (torch.amp.GradScaler); autocast keeps softmax/norms in fp32"),
    "fp8": ("E4M3 (max 448, 3 mantissa bits) forward, E5M2 gradients: needs scaling factors",
            ("per-tensor (delayed/current) or row-wise scaling recipes: Transformer Engine, "
            "torchao.float8; keep the first and last layers in bf16")),
    "mxfp8": ("FP8 (E4M3) values with one power-of-two (E8M0) scale per 32: outliers only "
              "affect their own block",
              ("Transformer Engine's MXFP8BlockScaling recipe (block scales computed on the fly, "
               "no amax history) on block-scaled tensor cores; keep the first and last layers "
               "in bf16")),
    "fp4": ("W4A4: weights and activations in E2M1 (values up to 6, 1 mantissa bit) with "
            "block scales; accuracy loss depends on the model: calibrate and evaluate",
            ("NVFP4 (a scale per 16 + a tensor scale) or MXFP4 (a scale per 32) checkpoints "
             "from NVIDIA Model Optimizer, llm-compressor or AMD Quark; served by "
             "TensorRT-LLM / vLLM")),
    "int8": ("W8A8: weights and activations rounded to 256 levels; LLM activation outliers",
             ("per-channel weight scales + dynamic activation scales; LLM.int8() outlier "
             "decomposition or SmoothQuant for large language models")),
    "int8wo": ("W8A16: weights rounded to 256 levels per output channel, activations 16 bit",
               ("weight-only int8 (torchao Int8WeightOnlyConfig, EETQ, TensorRT-LLM W8A16, "
                "GPTQ 8-bit); compute in bf16, so only weight reads shrink")),
    "int4": ("weights rounded to 16 levels per group",
             ("weight-only quantization with group-wise scales (group 128), calibrated by GPTQ "
             "or AWQ; compute in bf16")),
    "nf4": ("weights rounded to 16 normal-distribution quantiles per block",
            ("weight-only NF4 with block-wise absmax (64) and double quantization "
            "(bitsandbytes); QLoRA trains bf16 adapters on the frozen NF4 base")),
}


#: Where to go when a device lacks a precision: the other 16-bit format first (same memory,
#: mixed precision either way), then wider formats.
_NEAREST = {"fp32": (), "tf32": ("fp32",), "bf16": ("fp16", "fp32"), "fp16": ("bf16", "fp32"),
            "fp8": ("bf16", "fp16", "fp32"), "mxfp8": ("fp8", "bf16", "fp16", "fp32"),
            "fp4": ("fp8", "bf16", "fp16", "fp32"), "int8": ("bf16", "fp16", "fp32"),
            "int8wo": ("bf16", "fp16", "fp32"), "int4": ("int8", "bf16", "fp16", "fp32"),
            "nf4": ("bf16", "fp16", "fp32")}


def fallback_precision(spec: HardwareSpec, precision: str, *, mode: str) -> str | None:
    """The nearest precision the device runs: ``precision`` itself, else the first full-rate
    one of :data:`_NEAREST` (fp8 -> bf16 -> fp16 -> fp32). The weight-only formats (int8wo,
    int4, nf4) run wherever their 16-bit engine does (support "emulated" by design: they
    dequantise and multiply in 16 bit), so inference keeps them there. Training never falls to
    an inference format: int8/int8wo/int4/nf4 training means bf16, and fp4 training (not
    offered) the nearest of fp8 -> bf16.

    >>> from aiadvisor.hardware import get
    >>> fallback_precision(get("V100 SXM2 32GB"), "bf16", mode="train")
    'fp16'
    >>> fallback_precision(get("L4"), "int8wo", mode="infer")  # no INT8WO engine is needed
    'int8wo'
    """
    if mode == "train" and precision in INFERENCE_ONLY:
        precision = "bf16"
    first = () if mode == "train" and precision == "fp4" else (precision,)
    for candidate in (*first, *_NEAREST[precision]):
        level = support_level(spec, candidate)
        if level == "full" or (level == "emulated" and candidate in WEIGHT_ONLY
                               and mode != "train"):
            return candidate
    return None


#: What a user would run on a device when they have not pinned a precision: the first of these
#: the device runs at full rate. bf16 before fp16 (fp32 range, no loss scaling), then TF32,
#: then plain fp32. fp8 and the integer formats are never picked silently: they need scaling
#: recipes or quantization, a decision the user makes (the Precision table prices them).
BEST_ORDER = ("bf16", "fp16", "tf32", "fp32")


def best_precision(spec: HardwareSpec, *, mode: str) -> str | None:
    """The precision ``spec`` would run a ``mode`` step in: the first of :data:`BEST_ORDER` it
    supports at full rate (a dense catalog figure), or None when it has none of them.

    Training and inference use the same order: bf16/fp16 mean mixed precision with fp32 master
    weights in training and 16-bit weights in inference.

    >>> from aiadvisor.hardware import get
    >>> best_precision(get("H100 SXM"), mode="train"), best_precision(get("T4"), mode="train")
    ('bf16', 'fp16')
    """
    check_choice("mode", mode, MODES)
    for candidate in BEST_ORDER:
        if support_level(spec, candidate) == "full":
            return candidate
    return None


def _usable(prof: ModelProfile, spec: HardwareSpec, precision: str, level: str) -> tuple[bool, str]:
    if prof.mode == "train" and precision in INFERENCE_ONLY:
        return False, "inference format: weight-only quantization, not for training"
    if prof.mode == "train" and precision == "fp4":
        return False, FP4_TRAINING_NOTE
    if level == "unknown":
        return False, f"{spec.name} has no published {precision} or wider figure"
    if level == "emulated" and precision in ("fp8", "mxfp8", "fp4", "int8"):
        better = fallback_precision(spec, precision, mode=prof.mode)
        engine = {"mxfp8": "block-scaled (MX) FP8", "fp4": "FP4"}.get(precision, precision)
        return False, f"{spec.name} has no {engine} engine; the nearest is {better}"
    if level == "emulated" and precision in WEIGHT_ONLY:
        bits = 8 if precision == "int8wo" else 4
        computed = "at the FP32 rate (a CPU)" if spec.kind == "cpu" else "in 16 bit"
        return True, f"weight-only: stored in {bits} bits, computed {computed}"
    if level == "emulated":
        return False, f"{spec.name} has no {precision} engine"
    return True, _format_note(spec, precision, prof.mode)


def _format_note(spec: HardwareSpec, precision: str, mode: str) -> str:
    """Which block format a usable mxfp8/fp4 row means on ``spec``."""
    if precision == "fp4":
        fmt = fp4_format(spec) or "nvfp4"
        memory = ("; memory sized at NVFP4's 4.5 bits, 6 % above MXFP4's; no torchao W4A4 "
                  "path here: serve an MXFP4 checkpoint (AMD Quark) with vLLM"
                  if fmt == "mxfp4" else "")
        return (f"{fmt.upper()} ({fp4_bits(spec):g} bits): W4A4 linear layers at the FP4 peak, "
                f"attention and other ops in 16 bit; inference and serving only{memory}")
    if precision == "mxfp8":
        how = ("fp8 training with block scales instead of per-tensor scaling"
               if mode == "train" else "fp8 inference with block scales")
        return f"MXFP8 (8.25 bits, a scale per 32): {how}, at the FP8 peak"
    return ""


def precision_table(prof: ModelProfile, spec: HardwareSpec, *, parallel: ParallelConfig,
                    predictor: Predictor, parts_for: PartsSource | None = None) -> pd.DataFrame:
    """One row per precision for ``spec`` under the plan ``parallel``.

    Parameters
    ----------
    prof : ModelProfile
        The (micro-)batch of one data-parallel replica.
    spec : HardwareSpec
        The chosen device.
    parallel : ParallelConfig
        The plan the memory is computed for (its micro-batch is the profile's batch).
    predictor : Predictor
        Cached cost-model calls.
    parts_for : PartsSource, optional
        Activation parts per precision (computed when not given).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COLUMNS`; ``speedup_vs_fp32`` is the cost model's fp32 step time over
        this precision's (NaN where the precision cannot run).
    """
    import pandas as pd

    parts_for = parts_for or PartsSource(prof)
    if parallel == ParallelConfig(dp_degree=parallel.num_devices):
        usable = [p for p in PRECISIONS if _usable(prof, spec, p, support_level(spec, p))[0]]
        predictor.prefill(predictor.step_profile(prof, parallel), [spec], usable,
                          parallel.num_devices)
    reference = predictor(prof, spec, precision="fp32", parallel=parallel)
    rows = [_row(prof, spec, p, parallel, predictor, reference, parts_for) for p in PRECISIONS]
    return pd.DataFrame.from_records(rows, columns=COLUMNS)


def _row(prof, spec, precision, parallel, predictor, reference, parts_for) -> dict[str, Any]:
    nan = float("nan")
    level = support_level(spec, precision)
    usable, note = _usable(prof, spec, precision, level)
    risk, handled = RISKS[precision]
    row: dict[str, Any] = {
        "precision": precision, "support": level, "usable": usable,
        "memory_per_device_bytes": nan, "fits": None, "step_time_s": nan,
        "speedup_vs_fp32": nan, "speedup_low": nan, "speedup_high": nan, "confidence": "",
        "numerical_risk": risk, "handled_by": handled, "notes": note,
    }
    if not usable:
        return row
    mem = device_memory(prof, parallel, precision=precision,
                        parts=parts_for(precision)).total_bytes
    row["memory_per_device_bytes"] = int(mem)
    if spec.memory_bytes is not None:
        row["fits"] = bool(mem <= usable_bytes(spec.memory_bytes))
    outcome = predictor.plan(prof, spec, precision=precision, parallel=parallel)
    pred = outcome.prediction
    if pred is None:
        row["notes"] = "; ".join(filter(None, [note, outcome.reason]))
        return row
    row.update(step_time_s=pred.step_time_s, confidence=pred.confidence)
    if reference is not None:
        s = speedup(reference, pred)
        row.update(speedup_vs_fp32=s.point, speedup_low=nan if s.low is None else s.low,
                   speedup_high=nan if s.high is None else s.high)
    return row
