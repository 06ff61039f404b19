"""Published maximum achievable matmul throughput (MAMF), BF16 dense, TFLOP/s.

From the brute-force shape search in Stas Bekman's "Machine Learning Engineering"
(``stas00/ml-engineering@744d01e:compute/accelerator/README.md``, "Maximum Achievable Matmul
FLOPS comparison table", CC BY-SA 4.0; figures quoted in ``cost_model.md`` section 3.3). Used as
facts: a device's achievable fraction of its datasheet BF16 peak tells how far its software stack
is from the GPUs the GEMM curve was measured on (A100 and H100, Vidur).
"""

from __future__ import annotations

import math

from ..schema import HardwareSpec

#: Catalog name -> MAMF BF16 TFLOP/s.
MAMF_BF16_TFLOPS = {
    "NVIDIA A100 40GB SXM": 271.2,
    "NVIDIA A100 80GB SXM": 271.2,
    "NVIDIA A100 40GB PCIe": 252.9,
    "NVIDIA A100 80GB PCIe": 252.9,
    "NVIDIA H100 SXM": 794.5,
    "NVIDIA H200 SXM": 794.5,
    "NVIDIA GH200": 828.6,
    "NVIDIA B200": 1745.0,
    "NVIDIA GB200": 1822.0,
    "AMD Instinct MI300X": 668.4,
    "AMD Instinct MI325X": 784.9,
    "AMD Instinct MI355X": 1565.0,
    "Intel Gaudi 2": 418.7,
    "Intel Gaudi 3": 1243.0,
}
#: Mean MAMF fraction of the GPUs behind the tensor-core GEMM curve (Vidur: A100 SXM 80GB,
#: 271.2/312 = 0.869; H100 SXM, 794.5/989.4 = 0.803).
REFERENCE_FRACTION = (271.2 / 312.0 + 794.5 / 989.4) / 2


def matmul_fraction(spec: HardwareSpec) -> float | None:
    """MAMF over the spec's dense BF16 peak, or None when no figure is published."""
    mamf = MAMF_BF16_TFLOPS.get(spec.name)
    peak = spec.bf16_tflops
    if mamf is None or not peak:
        return None
    return min(mamf / peak, 1.0)


def matmul_log_adjustment(spec: HardwareSpec) -> float:
    """Extra log slow-down of tensor-core GEMMs on ``spec`` relative to the training GPUs:
    ``log(reference fraction / device fraction)`` (0 without a published figure).

    >>> from aiadvisor.schema import HardwareSpec
    >>> mi300x = HardwareSpec(name="AMD Instinct MI300X", vendor="AMD", kind="gpu",
    ...                       bf16_tflops=1307.4)
    >>> round(math.exp(matmul_log_adjustment(mi300x)), 2)   # 0.836 / (668.4 / 1307.4)
    1.64
    """
    fraction = matmul_fraction(spec)
    return 0.0 if fraction is None else math.log(REFERENCE_FRACTION / fraction)


#: Share of a CPU matrix unit's (AMX) BF16 peak that PyTorch's matmuls reach, relative to the
#: share AVX-512 FP32 matmuls reach of theirs. Measured on one machine, the 2-core Sapphire Rapids
#: VM this project is developed on (its own benchmark, ``aa.detect(benchmark=True)``): at n=2048
#: bf16 ran 2.77 TFLOP/s and fp32 0.44, 6.3x where the peaks (1024 vs 64 FLOP/cycle/core) are 16x
#: apart: 6.3 / 16 = 0.39. One CPU: an estimate, used only until the CPU is benchmarked; at
#: small sizes the measured share is lower still (n=256: 2.2x over fp32).
CPU_MATRIX_UNIT_FRACTION = 0.4
#: A CPU's bf16 peak over its fp32 peak above which its bf16 GEMMs run on a matrix unit: AMX is
#: 16x, AVX512-BF16 (a dot-product instruction on the FMA pipes) 2x.
CPU_MATRIX_UNIT_MIN_RATIO = 4.0


def cpu_matrix_log_adjustment(spec: HardwareSpec, precision: str) -> float:
    """Log slow-down of bf16 GEMMs on an unbenchmarked CPU with a matrix unit (AMX), from
    :data:`CPU_MATRIX_UNIT_FRACTION`; 0 elsewhere and once a benchmark has timed bf16.

    >>> from aiadvisor.schema import HardwareSpec
    >>> amx = HardwareSpec(name="x", vendor="Intel", kind="cpu", fp32_tflops=0.333,
    ...                    bf16_tflops=5.325)
    >>> round(math.exp(cpu_matrix_log_adjustment(amx, "bf16")), 2)   # 1 / 0.4
    2.5
    """
    from ..hardware.detection import BF16_ESTIMATE_MARK

    if spec.kind != "cpu" or precision != "bf16":
        return 0.0
    if spec.measured and BF16_ESTIMATE_MARK not in spec.notes:
        return 0.0  # the benchmark timed bf16
    if not (spec.bf16_tflops and spec.fp32_tflops):
        return 0.0
    if spec.bf16_tflops < CPU_MATRIX_UNIT_MIN_RATIO * spec.fp32_tflops:
        return 0.0
    return math.log(1.0 / CPU_MATRIX_UNIT_FRACTION)
