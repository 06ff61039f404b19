"""Published maximum achievable matmul throughput (MAMF), BF16 and FP8 dense, TFLOP/s.

From the brute-force shape search in Stas Bekman's "Machine Learning Engineering"
(``stas00/ml-engineering@744d01e:compute/accelerator/README.md``, "Maximum Achievable Matmul
FLOPS comparison table", CC BY-SA 4.0; figures quoted in ``cost_model.md`` section 3.3; the B300
row and the FP8 (``float8_e4m3fn``) table from the same file's later version, torch 2.7-2.10,
read on 2026-12-06). Used as facts: a device's achievable fraction of its datasheet peak tells
how far its software stack is from the GPUs the GEMM curve was measured on (A100 and H100 in
FP16, Vidur).
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
    "NVIDIA B300": 1769.0,
    "AMD Instinct MI300X": 668.4,
    "AMD Instinct MI325X": 784.9,
    "AMD Instinct MI355X": 1565.0,
    "Intel Gaudi 2": 418.7,
    "Intel Gaudi 3": 1243.0,
}
#: Catalog name -> MAMF FP8 (e4m3) TFLOP/s. FP8 GEMMs reach a smaller share of their peak than
#: BF16 on the same GPU (H100 SXM: 1402.6 / 1978.9 = 70.9 % against 80.3 %).
MAMF_FP8_TFLOPS = {
    "NVIDIA H100 SXM": 1402.6,
    "NVIDIA H200 SXM": 1453.4,
    "NVIDIA GH200": 1535.0,
    "NVIDIA B200": 3432.5,
    "NVIDIA B300": 3353.3,
    "NVIDIA GB200": 3615.6,
    "Intel Gaudi 2": 826.5,
    "Intel Gaudi 3": 1289.5,
}
#: Catalog name -> (best TFLOP/s of ``torch.mm`` on square matrices of 1024-10240, the catalog
#: column it is a share of) from a public table of such runs on many GPUs
#: (``zzc0721/torch-performance-test-data@0785868:database.md`` and its issues #120, #140, #185;
#: 6 warm-up and 30 timed calls per size; each figure the median of the rows for that card,
#: 24 GB RTX 4090s only). Used where Stas Bekman's table has no row. The same quick benchmark
#: on the curve's GPUs reads A100 SXM 80GB 264.53 and H100 SXM 786.45 (789.24, 783.66) BF16
#: TFLOP/s, slightly under their MAMF: :data:`QUICK_REFERENCE_FRACTION` puts its fractions on
#: the same footing. GeForce cards exceed the BF16 rate their datasheet prints (the RTX 3090 at
#: 76.6 against 71.2): they boost above the rated clock. The power-limited T4 and L4 are left
#: out: their 36 calls per size end before a 70 W clock settles (the L4 ran 70.9 TFLOP/s at
#: 2048 and 54.9-59.4 at 4096-10240, issue #120), and their sustained slow-down comes from the
#: op data instead (``costmodel.predict.power_limited_compute``).
QUICK_MATMUL_TFLOPS = {
    "NVIDIA GeForce RTX 3090": (76.58, "bf16"),      # 76.34, 76.58, 76.68
    "NVIDIA GeForce RTX 4090": (166.58, "bf16"),     # 170.06, 173.31, 162.39, 163.09
    "NVIDIA GeForce RTX 5090": (239.11, "bf16"),     # 236.03, 242.18
    "NVIDIA L40S": (269.15, "bf16"),
    "NVIDIA A40": (122.29, "bf16"),                  # issue #185
    "NVIDIA RTX A6000": (123.34, "bf16"),
    "NVIDIA RTX PRO 6000 Blackwell": (417.98, "bf16"),   # the Workstation Edition's row
    "NVIDIA V100 SXM2 16GB": (97.36, "fp16"),        # issue #140 (Volta has no BF16 engine)
    "NVIDIA V100 SXM2 32GB": (97.36, "fp16"),        # the same GV100 SXM2 part and clocks
}
#: The quick benchmark's mean fraction on the curve's GPUs: (264.53 / 312 + 786.45 / 989.4) / 2.
QUICK_REFERENCE_FRACTION = (264.53 / 312.0 + 786.45 / 989.4) / 2
#: Precisions whose GEMMs read :data:`MAMF_FP8_TFLOPS`.
FP8_TABLE_PRECISIONS = ("fp8", "mxfp8")
#: Mean MAMF fraction of the GPUs behind the tensor-core GEMM curve (Vidur: A100 SXM 80GB,
#: 271.2/312 = 0.869; H100 SXM, 794.5/989.4 = 0.803).
REFERENCE_FRACTION = (271.2 / 312.0 + 794.5 / 989.4) / 2


def matmul_fraction(spec: HardwareSpec, precision: str = "bf16") -> float | None:
    """MAMF over the spec's dense peak, or None when no figure is published.

    ``fp8`` and ``mxfp8`` (8-bit float GEMMs, block scales or not) read the FP8 table against
    the FP8 peak where the device has an FP8 figure, else the BF16 one; every other precision
    (FP4 included: no FP4 figure is published) reads the BF16 table. A device in neither reads
    :data:`QUICK_MATMUL_TFLOPS`, put on the MAMF table's footing.

    >>> from aiadvisor.schema import HardwareSpec
    >>> h100 = HardwareSpec(name="NVIDIA H100 SXM", vendor="NVIDIA", kind="gpu",
    ...                     bf16_tflops=989.4, fp8_tflops=1978.9)
    >>> round(matmul_fraction(h100), 3), round(matmul_fraction(h100, "fp8"), 3)
    (0.803, 0.709)
    """
    found = _published_fraction(spec, precision)
    return None if found is None else found[0]


def matmul_source(spec: HardwareSpec, precision: str = "bf16") -> str | None:
    """What :func:`matmul_fraction` read, as a note says it: the published share of which peak,
    from which table.

    >>> from aiadvisor.hardware import get
    >>> matmul_source(get("RTX 3090"))
    '108% of its BF16 peak in a quick torch.mm benchmark table (boosting above its rated clock)'
    """
    found = _published_fraction(spec, precision)
    return None if found is None else found[1]


def _published_fraction(spec: HardwareSpec, precision: str) -> tuple[float, str] | None:
    """(fraction on the MAMF table's footing, source label), or None."""
    if precision in FP8_TABLE_PRECISIONS and spec.name in MAMF_FP8_TFLOPS and spec.fp8_tflops:
        fraction = MAMF_FP8_TFLOPS[spec.name] / spec.fp8_tflops
        return fraction, f"{fraction:.0%} of its FP8 peak; MAMF table"
    mamf = MAMF_BF16_TFLOPS.get(spec.name)
    if mamf is not None and spec.bf16_tflops:
        fraction = mamf / spec.bf16_tflops
        return fraction, f"{fraction:.0%} of its BF16 peak; MAMF table"
    measured = _quick_fraction(spec)
    if measured is None:
        return None
    column = QUICK_MATMUL_TFLOPS[spec.name][1].upper()
    label = f"{measured:.0%} of its {column} peak in a quick torch.mm benchmark table"
    if measured > 1:
        label += " (boosting above its rated clock)"
    # On the MAMF footing: the quick benchmark reads a little under MAMF on the same GPUs.
    return measured * REFERENCE_FRACTION / QUICK_REFERENCE_FRACTION, label


def _quick_fraction(spec: HardwareSpec) -> float | None:
    """The quick table's best rate over the rated peak it is a share of, where the device has
    a quick figure and no MAMF one (else None)."""
    quick = QUICK_MATMUL_TFLOPS.get(spec.name)
    peak = None if quick is None else getattr(spec, f"{quick[1]}_tflops")
    if quick is None or not peak or spec.name in MAMF_BF16_TFLOPS:
        return None
    return quick[0] / peak


def above_peak_log_ratio(spec: HardwareSpec) -> float:
    """``log(best published rate / rated peak)`` where a published rate exceeds the rated
    peak (a GeForce card past its rated boost clock), else 0. A clock speed-up: the same in
    every precision the card's tensor cores run.

    >>> from aiadvisor.hardware import get
    >>> round(math.exp(above_peak_log_ratio(get("RTX 5090"))), 3)   # 239.11 / 209.5
    1.141
    """
    measured = _quick_fraction(spec)
    return 0.0 if measured is None else max(math.log(measured), 0.0)


def matmul_log_adjustment(spec: HardwareSpec, precision: str = "bf16") -> float:
    """Extra log slow-down of tensor-core GEMMs on ``spec`` at ``precision`` relative to the
    training GPUs: ``log(reference fraction / device fraction)`` (0 without a published figure;
    negative, a speed-up, where the device does better than the curve's GPUs).

    >>> from aiadvisor.schema import HardwareSpec
    >>> mi300x = HardwareSpec(name="AMD Instinct MI300X", vendor="AMD", kind="gpu",
    ...                       bf16_tflops=1307.4)
    >>> round(math.exp(matmul_log_adjustment(mi300x)), 2)   # 0.836 / (668.4 / 1307.4)
    1.64
    """
    fraction = matmul_fraction(spec, precision)
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
