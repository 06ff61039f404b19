"""Square GEMMs: the cost model's TFLOP/s against a public table of quick ``torch.mm`` runs.

``zzc0721/torch-performance-test-data`` (``database.md`` at commit 0785868 and its issues) lists,
per GPU and dtype, the best rate of ``torch.mm`` on n x n matrices, n = 1024, 2048, 4096, 8192,
10240 (6 warm-up and 30 timed calls per size, one ``synchronize`` around the 30). This bench
predicts the same calls (``aa.predict`` of one ``n x n`` linear layer without bias, inference,
the compute and memory parts of the step: no host time) and prints the predicted best rate
beside the published one, and the rate at the fast end of the prediction's P10-P90.

Which rows are independent of the model: the cost model reads this table's figure for the
devices in ``costmodel.facts.QUICK_MATMUL_TFLOPS`` (marked ``fact``: in-sample, their error
shows only what the learned curve does with the fraction), and Stas Bekman's MAMF figures for
the A100, H100, H200 and B200 (``mamf``: a different benchmark of the same quantity). The T4
and L4 rows (``held out``) are not read by the model at all: their tensor-core GEMMs are priced
with the power-limit slow-down taken from NeuSight's FP32 timings. A quick run of 36 calls per
size can finish before a 70 W board's clock settles (the L4's 2048 run, 7 ms in all, read 70.9;
its 0.5 s 8192 run 59.4), so for those two the sustained rate sits below the published best;
the prediction's P10 leaves the power-limit slow-down out, as a burst does.

Usage: ``python bench/matmul_published.py`` (a few seconds; prints only).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SIZES = (1024, 2048, 4096, 8192, 10240)
SOURCE = "zzc0721/torch-performance-test-data@0785868:database.md"
#: (catalog name, precision, published best TFLOP/s (median over the table's rows of the card),
#:  per-size figures where the source prints them, how the model uses it, where it was read).
ROWS = (
    ("NVIDIA A100 80GB SXM", "bf16", 264.53, None, "mamf", SOURCE),
    ("NVIDIA H100 SXM", "bf16", 786.45, None, "mamf", SOURCE + " (789.24, 783.66)"),
    ("NVIDIA H200 SXM", "bf16", 790.29, None, "mamf", SOURCE),
    ("NVIDIA B200", "bf16", 1696.03, None, "mamf", SOURCE),
    ("NVIDIA GeForce RTX 3090", "bf16", 76.58, None, "fact", SOURCE),
    ("NVIDIA GeForce RTX 4090", "bf16", 166.58, None, "fact", SOURCE + " (24 GB rows)"),
    ("NVIDIA GeForce RTX 5090", "bf16", 239.11, None, "fact", SOURCE),
    ("NVIDIA L40S", "bf16", 269.15, None, "fact", SOURCE),
    ("NVIDIA A40", "bf16", 122.29, None, "fact", "issue #185"),
    ("NVIDIA RTX A6000", "bf16", 123.34, None, "fact", SOURCE),
    ("NVIDIA RTX PRO 6000 Blackwell", "bf16", 417.98, None, "fact", SOURCE),
    ("NVIDIA V100 SXM2 16GB", "fp16", 97.36, (57.30, 78.23, 95.73, 97.36, 89.37), "fact",
     "issue #140"),
    ("NVIDIA T4", "fp16", 42.31, None, "held out", SOURCE + " (41.91 Colab, 42.71 Kaggle)"),
    ("NVIDIA L4", "bf16", 70.89, (54.42, 70.89, 54.91, 59.40, 56.90), "held out", "issue #120"),
)


def predicted_rates(hardware: str, precision: str) -> tuple[list[float], list[float]]:
    """Predicted TFLOP/s of ``torch.mm`` at each of :data:`SIZES` (device time only), and the
    fast end of each prediction's P10-P90 (the whole step's P10: one call is device-bound)."""
    import torch

    import aiadvisor as aa

    mid, fast = [], []
    for n in SIZES:
        layer = torch.nn.Linear(n, n, bias=False, device="meta")
        prof = aa.profile(layer, torch.empty(n, n, device="meta"), mode="infer",
                          precision=precision)
        pred = aa.predict(prof, hardware=hardware, precision=precision)
        mid.append(2 * n**3 / (pred.compute_s + pred.memory_s) / 1e12)
        fast.append(2 * n**3 / pred.low_s / 1e12)
    return mid, fast


def main() -> int:
    from _results import isolate_measurements

    isolate_measurements()
    print(f"{'device':31s} {'prec':5s} {'use':9s} {'published':>9s} {'predicted':>9s} "
          f"{'error':>7s} {'P10 end':>8s}  per size predicted (published)")
    errors = {"fact": [], "mamf": [], "held out": []}
    for name, precision, best, per_size, use, _where in ROWS:
        rates, fast = predicted_rates(name, precision)
        error = max(rates) / best - 1
        errors[use].append(error)
        sizes = "  ".join(
            f"{r:6.1f}" + (f" ({p:.1f})" if per_size else "")
            for r, p in zip(rates, per_size or rates))
        print(f"{name:31s} {precision:5s} {use:9s} {best:9.1f} {max(rates):9.1f} "
              f"{error:+7.1%} {max(fast):8.1f}  {sizes}")
    print()
    for use, errs in errors.items():
        errs = sorted(errs)
        print(f"{use:9s} n={len(errs)}  best-rate error: median {errs[len(errs) // 2]:+.1%}, "
              f"range {errs[0]:+.1%} .. {errs[-1]:+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
