"""Unit constants and formatting. Bytes are ints internally; GiB = 1024**3, GB = 1000**3."""

from __future__ import annotations

KiB = 1024
MiB = 1024**2
GiB = 1024**3
GB = 1000**3
TERA = 1e12

#: Block (group) size of the 4-bit formats: weights sharing one set of quantization constants.
#: int4: torchao ``Int4WeightOnlyConfig(group_size=128)``, the snippet this package emits, and
#: the usual GPTQ/AWQ checkpoint setting; nf4: bitsandbytes' fixed 4-bit blocksize of 64.
QUANT_GROUP_SIZE = {"int4": 128, "nf4": 64}

#: Elements sharing one scale in the block-scaled float formats (microscaling).
#:
#: * MX formats (OCP "Microscaling Formats (MX) v1.0" specification): one 8-bit power-of-two
#:   scale (E8M0) per block of 32 elements; MXFP8 elements are FP8 E4M3 or E5M2, MXFP4 elements
#:   FP4 E2M1 (TransformerEngine "MXFP8" recipe page: "a local E8M0 scaling factor shared by a
#:   block of 32 elements").
#: * NVFP4 (NVIDIA technical blog "Introducing NVFP4 for Efficient and Accurate Low-Precision
#:   Inference", 2025; Intel Neural Compressor's NVFP4 table): FP4 E2M1 elements, one FP8 E4M3
#:   scale per block of 16 and one FP32 scale per tensor.
MX_BLOCK_SIZE = 32
NVFP4_BLOCK_SIZE = 16

#: Bits per element of each 4-bit float format, block scales included (the FP32 per-tensor
#: scale of NVFP4 is 32 bits for a whole tensor: under 1e-5 bit per element).
#: NVFP4 4 + 8/16 = 4.5 bits; MXFP4 4 + 8/32 = 4.25 bits.
FP4_FORMAT_BITS = {"nvfp4": 4 + 8 / NVFP4_BLOCK_SIZE, "mxfp4": 4 + 8 / MX_BLOCK_SIZE}

#: Bits per stored weight, quantization constants included (what weight memory and weight reads
#: are sized with, everywhere: profiler, planner, cost model, tactics):
#:
#: * fp8, int8 and int8wo (per-tensor or per-output-channel scales): one 16- or 32-bit scale
#:   per row of thousands of weights, under 0.01 bit each: 8 bits.
#: * mxfp8: 8 bits + one E8M0 scale per 32: 8 + 8/32 = 8.25 bits.
#: * fp4: the device's 4-bit float format; NVFP4 (NVIDIA Blackwell: TensorRT-LLM, Transformer
#:   Engine, vLLM) at 4.5 bits here, the larger of the two. MXFP4 devices (AMD CDNA4, AWS
#:   Trainium3) store 4.25 bits: :func:`aiadvisor.hardware.support.fp4_bits` gives a device's
#:   figure, which serving memory and the cost model's GEMM bytes use.
#: * int4: 4 bits + one bf16 scale and one bf16 zero point per group of 128 (torchao tinygemm
#:   layout, ``scales_and_zeros``): 4 + 32/128 = 4.25 bits. GPTQ/AWQ checkpoints pack the zero
#:   point in 4 bits (fp16 scale + 4-bit zero = 20 bits per group): 4.16 bits, 2 % less.
#: * nf4: 4 bits + one absmax per block of 64 (bitsandbytes), double-quantized as the emitted
#:   ``BitsAndBytesConfig(bnb_4bit_use_double_quant=True)`` does: each absmax in 8 bits plus one
#:   fp32 constant per 256 absmax values: 4 + 8/64 + 32/(64*256) = 4.127 bits (QLoRA paper,
#:   Dettmers et al. 2023, section 3 "Double Quantization": 0.5 -> 0.127 bit per parameter).
WEIGHT_BITS = {
    "fp32": 32.0,
    "tf32": 32.0,
    "bf16": 16.0,
    "fp16": 16.0,
    "fp8": 8.0,
    "mxfp8": 8 + 8 / MX_BLOCK_SIZE,
    "fp4": FP4_FORMAT_BITS["nvfp4"],
    "int8": 8.0,
    "int8wo": 8.0,
    "int4": 4 + (16 + 16) / QUANT_GROUP_SIZE["int4"],
    "nf4": 4 + 8 / QUANT_GROUP_SIZE["nf4"] + 32 / (QUANT_GROUP_SIZE["nf4"] * 256),
}

#: Bytes per stored weight (``WEIGHT_BITS / 8``): mxfp8 1.03125, fp4 0.5625, int4 0.53125,
#: nf4 0.51587.
WEIGHT_BYTES = {p: bits / 8 for p, bits in WEIGHT_BITS.items()}

#: ``mxfp8``: FP8 with MX block scales (the TransformerEngine ``MXFP8BlockScaling`` recipe),
#: at the FP8 peak on block-scaled tensor cores. ``fp4``: W4A4 in the device's 4-bit float
#: format (NVFP4 or MXFP4), inference and serving only. ``int8`` is W8A8 (weights and
#: activations in int8, on the INT8 matrix engine: SmoothQuant, torchao's dynamic int8);
#: ``int8wo`` is weight-only int8 (W8A16: torchao ``Int8WeightOnlyConfig``, TensorRT-LLM W8A16,
#: EETQ, GPTQ 8-bit, llama.cpp Q8_0), which reads 8-bit weights and multiplies in 16 bit, like
#: the 4-bit weight-only formats int4 and nf4.
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "fp4", "int8", "int8wo", "int4",
              "nf4")
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
#: The traffic above is a fused step's (``fused=True``: one kernel reads and writes each tensor
#: once). PyTorch's default on a CPU is the for-loop implementation (on CUDA the foreach one,
#: same ops over tensor lists): each update op reads and writes whole tensors, so per element
#: it moves this many tensors (torch 2.13 ``_single_tensor_adam``: ``param.mul_`` 2,
#: ``exp_avg.lerp_`` 3, ``exp_avg_sq.mul_`` 2, ``addcmul_`` 3, ``sqrt`` 2, ``/`` 2, ``add_`` 2,
#: ``param.addcdiv_`` 4 = 20; Adam has no decoupled decay: 18; ``_single_tensor_sgd`` with
#: momentum: ``buf.mul_`` 2, ``add_`` 3, ``param.add_`` 3 = 8; plain: ``param.add_`` 3).
UNFUSED_OPTIMIZER_TENSORS = {"adamw": 20, "adam": 18, "sgd_momentum": 8, "sgd": 3}
#: New tensors the for-loop step allocates per parameter tensor, each of the parameter's size
#: (torch 2.13 ``_single_tensor_adam``: ``denom = (exp_avg_sq.sqrt() / c).add_(eps)``, the
#: sqrt and the division; every other update op works in place, as do both SGD loops after
#: the first step). On a CPU an allocation above glibc's mmap threshold lands on fresh pages.
UNFUSED_OPTIMIZER_TEMPORARIES = {"adamw": 2, "adam": 2, "sgd_momentum": 0, "sgd": 0}
#: Suffix of an optimizer record whose step runs fused (``optimizer.adamw[fused]``).
FUSED_SUFFIX = "[fused]"

#: Hardware-spec column holding each precision's dense peak (TFLOP/s; TOP/s for the integer
#: formats). The one copy: the schema, the catalog, the support levels and the benchmark read it.
#: NF4 and INT8WO have no engine of their own (weights are dequantised to 16 bit), so they
#: have no column. MXFP8
#: runs at the FP8 peak, but only on block-scaled (MX) tensor cores: :data:`PRECISION_REQUIRES`.
PRECISION_COLUMN = {
    "fp32": "fp32_tflops", "tf32": "tf32_tflops", "bf16": "bf16_tflops",
    "fp16": "fp16_tflops", "fp8": "fp8_tflops", "mxfp8": "fp8_tflops", "fp4": "fp4_tflops",
    "int8": "int8_tops", "int8wo": None, "int4": "int4_tops", "nf4": None,
}
#: A second column that must hold a figure before a precision counts as native. MXFP8 needs the
#: block-scaled matrix engine that every device with a dense FP4 figure in the catalog has:
#: NVIDIA Blackwell ("native hardware acceleration on Blackwell GPUs (SM 10.0+)",
#: TransformerEngine MXFP8 recipe page), AMD CDNA4 (MI355X: MXFP8/MXFP6/MXFP4 in its f8f6f4
#: MFMA instructions; torchao's mx_formats README runs MXFP8 training on MI355X through
#: hipBLASLt) and AWS Trainium3 ("2,517 MXFP8/MXFP4 TFLOPS", Neuron architecture guide).
#: Hopper and Ada have FP8 but no block-scaled engine: MXFP8 is not native there.
PRECISION_REQUIRES = {"mxfp8": PRECISION_COLUMN["fp4"]}


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


def fmt_params(prof) -> str:
    """A profile's parameter count; for a mixture of experts, total (all experts, what memory
    holds) and active (what one token goes through, what FLOPs follow).

    >>> from types import SimpleNamespace as P
    >>> fmt_params(P(num_params=1000, num_active_params=1000, moe=None))
    '1,000 parameters'
    >>> moe = P(num_experts=8, top_k=2)
    >>> fmt_params(P(num_params=46_702_792_704, num_active_params=12_879_925_248, moe=moe))
    '46,702,792,704 parameters (12,879,925,248 active per token: top-2 of 8 experts)'
    """
    text = f"{prof.num_params:,} parameters"
    moe = getattr(prof, "moe", None)
    if moe is None:
        return text
    return (f"{text} ({prof.num_active_params:,} active per token: top-{moe.top_k} of "
            f"{moe.num_experts} experts)")
