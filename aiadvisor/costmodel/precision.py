"""Which engine runs an op at a precision, and how a traced profile's bytes change with it.

A profile is traced in one dtype (``float32`` unless traced under autocast). Predicting another
precision converts each op's bytes by element size:

* GEMM-like ops (gemm, conv, attention) read and write activations and weights in the compute
  dtype: an FP32 trace predicted in BF16 halves their bytes (4 -> 2 bytes per element); FP8 and
  INT8 (W8A8) feed the matrix engine one byte per element (MXFP8 1.03: a scale per 32); FP4 is
  W4A4: weights and activations at 4.5 bits (NVFP4; MXFP4 devices 4.25, through
  :attr:`~aiadvisor.costmodel.devices.DeviceArrays.gemm_bytes_scale`); INT8WO/INT4/NF4 are
  weight-only formats: activations stay 16 bit and only the weights shrink (see
  :func:`weight_bytes_per_element`).
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

#: Bytes per element of GEMM operands (activations) in each precision; the block-scaled formats
#: carry their scales (:data:`~aiadvisor.units.WEIGHT_BYTES`: MXFP8 8.25 bits, FP4 4.5 bits).
GEMM_ACT_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0,
                  "mxfp8": WEIGHT_BYTES["mxfp8"], "fp4": WEIGHT_BYTES["fp4"], "int8": 1.0,
                  "int8wo": 2.0, "int4": 2.0, "nf4": 2.0}
#: Bytes per element of the attention core's operands (Q, K, V, scores, whether one fused op or
#: eager batched GEMMs): the GEMM operand size, except under FP4, where only the linear layers
#: are W4A4 and attention runs in 16 bit (the NVFP4 recipes quantize linear layers: NVIDIA
#: TensorRT Model Optimizer, llm-compressor's W4A4 scheme).
ATTENTION_ACT_BYTES = {**GEMM_ACT_BYTES, "fp4": 2.0}
#: Bytes per element of activations outside the GEMMs (norms, activations, residuals stay 16 bit
#: under the 8- and 4-bit formats).
MEMORY_ACT_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 2.0, "mxfp8": 2.0,
                    "fp4": 2.0, "int8": 2.0, "int8wo": 2.0, "int4": 2.0, "nf4": 2.0}
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

#: Weight-only formats: 8- or 4-bit weights, activations and the multiply in 16 bit.
WEIGHT_ONLY = ("int8wo", "int4", "nf4")
#: Quantized formats for inference only (W8A8 int8 and the weight-only ones): training in one
#: of them means bf16.
INFERENCE_ONLY = ("int8", *WEIGHT_ONLY)

#: Why weight-only GEMMs on a CPU are priced at its FP32 rate (a prediction's note). Measured on
#: the development CPU (2 Zen 5 cores, torch 2.13), a 4096 -> 11008 layer at 8 and 64 rows:
#: ``torch._weight_int8pack_mm`` (what torchao's int8 weight-only runs on a CPU) 0.23 TFLOP/s
#: and ``torch._weight_int4pack_mm_for_cpu`` 0.33, against 0.22 for its FP32 and 0.98 for its
#: BF16 matmul. At one row they are bound by the weight bytes (29-34 GB/s).
CPU_WEIGHT_ONLY_NOTE = (
    "Weight-only GEMMs on a CPU priced at its FP32 matmul rate: PyTorch's CPU weight-only "
    "kernels do not run on the BF16 units (measured on a 2-core Zen 5: int8 0.23, int4 0.33 "
    "TFLOP/s against 0.22 FP32 and 0.98 BF16); decoding one token is bound by the weight "
    "bytes either way.")

#: Precisions a device may run GEMMs in natively, in order of preference when suggesting a
#: replacement for an unsupported one (nearest first).
NEAREST = {
    "fp4": ("fp8", "int4", "nf4", "int8", "bf16", "fp16", "fp32"),
    "mxfp8": ("fp8", "bf16", "fp16", "int8", "tf32", "fp32"),
    "fp8": ("bf16", "fp16", "int8", "tf32", "fp32"),
    "int8": ("int8wo", "fp8", "bf16", "fp16", "fp32"),
    "int8wo": ("int8", "fp8", "bf16", "fp16", "fp32"),
    "int4": ("nf4", "int8wo", "int8", "fp8", "bf16", "fp16", "fp32"),
    "nf4": ("int4", "int8wo", "int8", "bf16", "fp16", "fp32"),
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

    INT8WO, INT4 and NF4 are weight-only formats (W8A16: torchao int8 weight-only, EETQ,
    TensorRT-LLM W8A16; GPTQ/AWQ; bitsandbytes): the kernels dequantise the weights and multiply
    in 16 bit, so they run on the BF16 (else FP16) engine even where the device has INT8/INT4
    tensor cores (an ``int4_tops`` figure is for W4A4 kernels, which serving stacks do not use);
    a device without a 16-bit figure dequantises to its FP32 units (llama.cpp on Jetson).

    On a CPU they run at the FP32 rate, not on its BF16 units (:data:`CPU_WEIGHT_ONLY_NOTE`).

    >>> from aiadvisor.hardware import get
    >>> gemm_peak_tflops(get("RTX 4090"), "int4") == get("RTX 4090").bf16_tflops
    True
    >>> a100 = get("A100 80GB SXM")
    >>> gemm_peak_tflops(a100, "int8wo"), gemm_peak_tflops(a100, "int8")   # W8A16, W8A8
    (312.0, 624.0)
    """
    return _positive(spec.peak_tflops(compute_precision(spec, precision)))


def compute_precision(spec: HardwareSpec, precision: str) -> str:
    """The precision whose engine multiplies GEMMs in ``precision`` on ``spec``: itself, except
    for the weight-only formats, which dequantise to FP32 on a CPU
    (:data:`CPU_WEIGHT_ONLY_NOTE`) and to BF16 (else FP16, else FP32) elsewhere.

    >>> from aiadvisor.hardware import get
    >>> compute_precision(get("L4"), "int8wo"), compute_precision(get("Xeon 8480+"), "int4")
    ('bf16', 'fp32')
    """
    if precision not in WEIGHT_ONLY:
        return precision
    if spec.kind == "cpu":
        return "fp32"
    return next((p for p in ("bf16", "fp16") if _positive(spec.peak_tflops(p))), "fp32")


def attention_peak_tflops(spec: HardwareSpec, precision: str) -> float | None:
    """Dense peak the attention core runs at: the GEMM engine's, except under FP4, where it
    runs in 16 bit (:data:`ATTENTION_ACT_BYTES`): BF16 or FP16, else the vector peak."""
    if precision != "fp4":
        return gemm_peak_tflops(spec, precision)
    return (_positive(spec.bf16_tflops) or _positive(spec.fp16_tflops)
            or vector_peak_tflops(spec))


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


#: Why a precision is missing where its column is blank (default: no dense figure).
_MISSING = {
    "fp4": "no FP4 tensor cores (no dense fp4 figure in its spec; NVFP4/MXFP4 need NVIDIA "
           "Blackwell, AMD CDNA4 or AWS Trainium3)",
    "mxfp8": "no block-scaled (MX) tensor cores: MXFP8 needs NVIDIA Blackwell, AMD CDNA4 or "
             "AWS Trainium3 (a dense fp8 and fp4 figure in its spec)",
}


def check_precision(spec: HardwareSpec, precision: str) -> str:
    """Return ``precision`` if ``spec`` can run it, else raise with the nearest supported one.

    >>> from aiadvisor.hardware import get
    >>> check_precision(get("B200"), "fp4")
    'fp4'
    >>> check_precision(get("H100 SXM"), "fp4")
    Traceback (most recent call last):
    ...
    aiadvisor.errors.UnsupportedPrecisionError: precision='fp4' is not supported on 'NVIDIA H100
    SXM': it has no FP4 tensor cores ... Use precision='fp8' instead (or 'int4' for 4-bit weights
    computed in 16 bit).
    """
    check_choice("precision", precision, PRECISIONS)
    if gemm_peak_tflops(spec, precision):
        return precision
    supported = supported_precisions(spec)
    nearest = next((p for p in NEAREST[precision] if p in supported), None)
    fix = f" Use precision={nearest!r} instead" if nearest else ""
    if precision == "fp4" and nearest not in (None, "int4") and "int4" in supported:
        fix += " (or 'int4' for 4-bit weights computed in 16 bit)"
    if not supported:
        raise UnsupportedPrecisionError(
            f"precision={precision!r} cannot be priced on {spec.name!r}: its spec has no dense "
            "compute figure in any precision (the catalog leaves a figure blank when no primary "
            "source publishes it, rather than guess). On the device itself, "
            "hardware='local' benchmarks it; elsewhere pass a HardwareSpec with the figures "
            "you trust (aiadvisor.schema.HardwareSpec(..., fp16_tflops=...)).")
    why = _MISSING.get(precision, f"no {precision} engine (no dense {precision} figure in its "
                                  "spec)")
    raise UnsupportedPrecisionError(
        f"precision={precision!r} is not supported on {spec.name!r}: it has {why}. Supported "
        f"here: {', '.join(supported) or 'none'}.{fix}{'.' if fix else ''}"
    )


#: Why FP4 is not offered for training (the precision table's note, the errors).
FP4_TRAINING_NOTE = (
    "FP4 (NVFP4/MXFP4) is offered for inference and serving only: 4-bit training needs recipes "
    "that are not yet standard (random Hadamard transforms, stochastic rounding of gradients, "
    "some layers kept in bf16: NVIDIA's NVFP4 pretraining report, arXiv 2509.25149)")


def check_mode(mode: str, precision: str) -> None:
    """Raise when a ``mode="train"`` step asks for ``fp4`` (:data:`FP4_TRAINING_NOTE`).

    FP4 training is not yet a standard mixed-precision recipe: NVIDIA's NVFP4 pretraining
    ("Pretraining Large Language Models with NVFP4", arXiv 2509.25149) needs random Hadamard
    transforms, 2D weight scaling, stochastic rounding of gradients and some layers kept in
    BF16, and torchao lists its NVFP4/MXFP4 training as prototype. The weight-only formats
    are refused for training where memory is planned (:func:`aiadvisor.recommend.memory.
    state_bytes_per_param`).

    >>> check_mode("infer", "fp4")
    >>> check_mode("train", "fp4")
    Traceback (most recent call last):
    ...
    aiadvisor.errors.UnsupportedPrecisionError: precision='fp4' is not valid for training: ...
    """
    if mode == "train" and precision == "fp4":
        raise UnsupportedPrecisionError(
            f"precision='fp4' is not valid for training: {FP4_TRAINING_NOTE}. Train in "
            "'mxfp8', 'fp8' or 'bf16', then quantize to fp4 for serving.")


def weight_bytes_per_element(precision: str, spec: HardwareSpec | None = None) -> float:
    """Bytes per stored weight in ``precision``, block scales included
    (:data:`aiadvisor.units.WEIGHT_BYTES`, where the group sizes are derived); ``fp4`` on
    ``spec`` takes the device's format (NVFP4 4.5 bits, MXFP4 4.25).

    >>> from aiadvisor.hardware import get
    >>> weight_bytes_per_element("fp4"), weight_bytes_per_element("fp4", get("MI355X"))
    (0.5625, 0.53125)
    """
    if precision == "fp4" and spec is not None:
        from ..hardware.support import fp4_bits

        return fp4_bits(spec) / 8
    return WEIGHT_BYTES[precision]


def gemm_bytes_scale(spec: HardwareSpec, precision: str) -> float:
    """How ``spec``'s GEMM operand bytes at ``precision`` differ from :data:`GEMM_ACT_BYTES`
    (attention excepted): ``fp4`` on an MXFP4 device moves 4.25 / 4.5 of NVFP4's bytes; 1
    otherwise."""
    if precision != "fp4":
        return 1.0
    return weight_bytes_per_element("fp4", spec) / WEIGHT_BYTES["fp4"]


def block_format_note(spec: HardwareSpec, precision: str) -> str | None:
    """What a prediction in a block-scaled format assumes on ``spec`` (None for the others).

    >>> from aiadvisor.hardware import get
    >>> block_format_note(get("MI355X"), "fp4")[:60]
    'fp4 = MXFP4 on AMD Instinct MI355X (E2M1 values, one E8M0 sc'
    """
    from ..hardware.support import fp4_bits, fp4_format

    if precision == "fp4":
        fmt = fp4_format(spec)
        scales = ("one E4M3 scale per 16 and an FP32 scale per tensor" if fmt == "nvfp4"
                  else "one E8M0 scale per 32")
        return (f"fp4 = {(fmt or 'nvfp4').upper()} on {spec.name} (E2M1 values, {scales}: "
                f"{fp4_bits(spec):g} bits per element): linear-layer GEMMs W4A4 at the dense FP4 "
                "peak; attention, norms and the other ops in 16 bit.")
    if precision == "mxfp8":
        return (f"mxfp8 = FP8 (E4M3) with one E8M0 scale per 32 elements "
                f"({WEIGHT_BYTES['mxfp8'] * 8:g} bits): GEMMs at the dense FP8 peak on "
                "block-scaled tensor cores; the other ops in 16 bit.")
    return None
