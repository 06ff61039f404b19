"""Which engine runs an op at a precision, and how a traced profile's bytes change with it.

A profile is traced in one dtype (``float32`` unless traced under autocast). Predicting another
precision converts each op's bytes by element size:

* GEMM-like ops (gemm, conv, attention) read and write activations and weights in the compute
  dtype: an FP32 trace predicted in BF16 halves their bytes (4 -> 2 bytes per element); FP8 and
  INT8 feed the matrix engine one byte per element; INT4/NF4 are weight-only formats: activations
  stay 16 bit and only the weights shrink (see :func:`weight_bytes_per_element`).
* Memory-bound ops (elementwise, norms, embedding) move 16-bit activations under BF16/FP16 and
  under the 8/4-bit formats (their activations are 16 bit), except the ops autocast keeps in FP32
  (norms, softmax, losses): they read 16 bit and write 32 bit, 3 bytes per element on average.
* Optimizer ops keep FP32 master weights and state: unchanged.

Tensor-core (matrix-engine) peaks apply only to GEMM-like ops in an eligible format: FP32 runs at
the FP32 SIMT/vector peak unless ``precision="tf32"``. Memory-bound ops use the vector peak.
"""

from __future__ import annotations

import math

from ..errors import UnsupportedPrecisionError, check_choice
from ..schema import HardwareSpec
from ..units import PRECISIONS, WEIGHT_BYTES

#: Bytes per element of GEMM operands (activations) in each precision.
GEMM_ACT_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0,
                  "int4": 2.0, "nf4": 2.0}
#: Bytes per element of activations outside the GEMMs.
MEMORY_ACT_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 2.0, "int8": 2.0,
                    "int4": 2.0, "nf4": 2.0}
DTYPE_BYTES = {"float32": 4.0, "float64": 8.0, "bfloat16": 2.0, "float16": 2.0,
               "float8_e4m3fn": 1.0, "float8_e5m2": 1.0}

#: Ops autocast runs in FP32 (torch.amp autocast "fp32 list"): they keep FP32 outputs.
AUTOCAST_FP32_OPS = frozenset({
    "aten.native_layer_norm", "aten.native_layer_norm_backward", "aten.layer_norm",
    "aten.native_group_norm", "aten.native_group_norm_backward", "aten._softmax",
    "aten._safe_softmax", "aten._softmax_backward_data", "aten._log_softmax",
    "aten._log_softmax_backward_data", "aten.nll_loss_forward", "aten.nll_loss_backward",
    "aten.mse_loss", "aten.mse_loss_backward", "aten.norm", "aten.linalg_vector_norm",
    "aten.native_batch_norm", "aten.native_batch_norm_backward", "aten._fused_rms_norm",
})

#: Precisions a device may run GEMMs in natively, in order of preference when suggesting a
#: replacement for an unsupported one (nearest first).
NEAREST = {
    "fp8": ("bf16", "fp16", "int8", "tf32", "fp32"),
    "int8": ("fp8", "bf16", "fp16", "fp32"),
    "int4": ("nf4", "int8", "fp8", "bf16", "fp16", "fp32"),
    "nf4": ("int4", "int8", "bf16", "fp16", "fp32"),
    "bf16": ("fp16", "tf32", "fp32"),
    "fp16": ("bf16", "tf32", "fp32"),
    "tf32": ("fp32", "bf16", "fp16"),
    "fp32": ("tf32", "bf16", "fp16"),
}

#: Precisions whose matrix-engine efficiency was measured (Vidur FP16 tensor-core GEMMs; BF16
#: runs on the same units at the same rate) or whose SIMT efficiency was (NeuSight FP32).
MEASURED_PRECISIONS = frozenset({"fp32", "bf16", "fp16"})


def _positive(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) and value > 0 else None


def gemm_peak_tflops(spec: HardwareSpec, precision: str) -> float | None:
    """Dense peak of the engine that runs GEMMs in ``precision`` on ``spec``; None if none.

    INT4 uses the INT4 engine where one exists, otherwise weight-only dequantisation to 16 bit
    (GPTQ/AWQ kernels); NF4 always computes in BF16 (or FP16 where BF16 has no engine).
    """
    if precision in ("int4", "nf4"):
        native = _positive(spec.int4_tops) if precision == "int4" else None
        return native or _positive(spec.bf16_tflops) or _positive(spec.fp16_tflops)
    return _positive(spec.peak_tflops(precision))


def vector_peak_tflops(spec: HardwareSpec) -> float:
    """Peak of the vector (non-matrix) units, for memory-bound ops: FP32 SIMT where published.

    Devices that publish only matrix-engine figures (TPU, Gaudi) get 1/8 of their BF16 peak;
    the ops it is used for are memory bound, so only the order of magnitude matters.
    """
    fp32 = _positive(spec.fp32_tflops)
    if fp32:
        return fp32
    wide = _positive(spec.bf16_tflops) or _positive(spec.fp16_tflops) or 1.0
    return wide / 8.0


def uses_matrix_engine(spec: HardwareSpec, precision: str) -> bool:
    """True when GEMMs in ``precision`` run on tensor cores / matrix units (not FP32 SIMT)."""
    return precision != "fp32" and spec.kind != "cpu"


def supported_precisions(spec: HardwareSpec) -> tuple[str, ...]:
    """Precisions ``spec`` can run GEMMs in (a dense peak exists for their engine)."""
    return tuple(p for p in PRECISIONS if gemm_peak_tflops(spec, p))


def check_precision(spec: HardwareSpec, precision: str) -> str:
    """Return ``precision`` if ``spec`` can run it, else raise with the nearest supported one."""
    check_choice("precision", precision, PRECISIONS)
    if gemm_peak_tflops(spec, precision):
        return precision
    supported = supported_precisions(spec)
    nearest = next((p for p in NEAREST[precision] if p in supported), None)
    fix = f" Use precision={nearest!r} instead." if nearest else ""
    raise UnsupportedPrecisionError(
        f"precision={precision!r} is not supported on {spec.name!r}: it has no {precision} engine "
        f"(no dense {precision} figure in its spec). Supported here: "
        f"{', '.join(supported) or 'none'}.{fix}"
    )


def weight_bytes_per_element(precision: str) -> float:
    """Bytes per stored weight in ``precision``, block scales included
    (:data:`aiadvisor.units.WEIGHT_BYTES`, where the group sizes are derived)."""
    return WEIGHT_BYTES[precision]
