"""Unit constants and formatting. Bytes are ints internally; GiB = 1024**3, GB = 1000**3."""

from __future__ import annotations

KiB = 1024
MiB = 1024**2
GiB = 1024**3
GB = 1000**3
TERA = 1e12

#: Bytes per element of each precision name, as stored (nf4/int4: half a byte per weight; the
#: per-block scales of NF4/GPTQ add about 0.5 bit per weight, counted in ``weight_bits``).
BYTES_PER_ELEMENT = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "nf4": 0.5,
}

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "nf4")
MODES = ("train", "infer")
#: Modes ``advise`` and ``%advise`` take: the profiled steps, and ``generate`` (LLM prefill +
#: decode, captured with ``aa.profile_generation``; its prompt forward is an ``infer`` profile).
ADVISE_MODES = (*MODES, "generate")
OPTIMIZERS = ("adamw", "adam", "sgd", "sgd_momentum", "none")

#: (tensors of optimizer traffic, FLOPs) per trainable element in one ``step()`` (torch.optim
#: update rules): AdamW reads param, grad, exp_avg, exp_avg_sq and writes param, exp_avg,
#: exp_avg_sq (7 tensors); ~14 FLOPs (lerp 3, mul+addcmul 4, sqrt+div+add 3, addcdiv 3, decay 1).
#: SGD with momentum reads p, g, buf and writes buf, p (5); plain SGD reads p, g, writes p (3).
OPTIMIZER_TRAFFIC = {"adamw": (7, 14), "adam": (7, 13), "sgd_momentum": (5, 3), "sgd": (3, 2)}

#: Hardware-spec column holding each precision's dense peak (TFLOP/s; TOP/s for the integer
#: formats). The one copy: the schema, the catalog, the support levels and the benchmark read it.
#: NF4 has no engine anywhere (weights are dequantised to 16 bit), so it has no column.
PRECISION_COLUMN = {
    "fp32": "fp32_tflops", "tf32": "tf32_tflops", "bf16": "bf16_tflops",
    "fp16": "fp16_tflops", "fp8": "fp8_tflops", "int8": "int8_tops", "int4": "int4_tops",
    "nf4": None,
}


def fmt_bytes(num_bytes: float) -> str:
    """Format a byte count with binary units: ``fmt_bytes(3 * 1024**3) == '3.00 GiB'``."""
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def fmt_flops(flops: float) -> str:
    """Format a FLOP count with decimal prefixes: ``fmt_flops(2.5e12) == '2.50 TFLOP'``."""
    value = float(flops)
    for unit in ("FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"):
        if abs(value) < 1000 or unit == "EFLOP":
            return f"{value:.0f} {unit}" if unit == "FLOP" else f"{value:.2f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def fmt_seconds(seconds: float) -> str:
    """Format a duration: ``fmt_seconds(0.0123) == '12.3 ms'``."""
    s = float(seconds)
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.1f} µs"
