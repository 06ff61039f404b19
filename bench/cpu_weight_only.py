"""Weight-only GEMMs on this CPU: measured against ``aa.predict(..., hardware="local")``.

A Llama-style MLP (4096 -> 11008 -> 4096, bias-free) at 1, 8 and 64 rows, timed as PyTorch's
CPU weight-only kernels run it (what torchao's ``Int8WeightOnlyConfig`` and
``Int4WeightOnlyConfig`` call on a CPU): ``torch._weight_int8pack_mm`` with bf16 activations
and one bf16 scale per output channel, ``torch._weight_int4pack_mm_for_cpu`` with groups of
128, and, beside them, the same layers in fp32 and bf16 through ``nn.Linear``. Medians of
``--repeats`` timed calls after warm-up. The prediction prices weight-only GEMMs at the
CPU's FP32 matmul rate (``costmodel.precision.CPU_WEIGHT_ONLY_NOTE``).

Usage: ``.venv/bin/python bench/cpu_weight_only.py [--repeats 30]`` (benchmarks this CPU
first if ``hardware="local"`` has no cached calibration: a few minutes).
Last run (2026-12-06, 2-core Zen 5, torch 2.13), measured / predicted ms at 1, 8 and 64 rows:
int8wo 2.83 / 2.14, 6.28 / 6.53, 50.0 / 51.7 (-25, +4, +3 %); int4 1.22 / 1.34, 4.50 / 6.53,
35.8 / 51.7 (+9, +45, +44 %: its kernel computes 1.5x the FP32 matmul rate here). Priced at
the BF16 rate before, the int8wo prediction was 2.13, 2.15 and 15.5 ms (-66 % at 8 rows).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _results import median_seconds  # noqa: E402

import aiadvisor as aa  # noqa: E402

D, H, GROUP = 4096, 11008, 128


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(D, H, bias=False)
        self.down = torch.nn.Linear(H, D, bias=False)

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.up(x)))


def _median_s(fn, repeats: int) -> float:
    return median_seconds(fn, repeats, warmup=3)


def _int8(w: torch.Tensor):
    scale = w.abs().amax(1) / 127
    return (w / scale[:, None]).round().clamp(-128, 127).to(torch.int8), scale.bfloat16()


def _int4(out_features: int, in_features: int):
    codes = torch.randint(0, 16, (out_features, in_features), dtype=torch.int32)
    packed = torch._convert_weight_to_int4pack_for_cpu(codes, 1)
    scales_zeros = torch.randn(in_features // GROUP, out_features, 2).bfloat16()
    return packed, scales_zeros


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = MLP().eval()
    bf16 = MLP().eval()
    bf16.load_state_dict(model.state_dict())
    bf16 = bf16.bfloat16()
    up8, up8_scale = _int8(model.up.weight.detach())
    down8, down8_scale = _int8(model.down.weight.detach())
    up4, up4_sz = _int4(H, D)
    down4, down4_sz = _int4(D, H)
    silu = torch.nn.functional.silu
    print(f"{'rows':>5} {'format':8} {'measured ms':>12} {'predicted ms':>13} {'error':>8}")
    errors = []
    for rows in (1, 8, 64):
        x = torch.randn(rows, D)
        xb = x.bfloat16()
        with torch.no_grad():
            measured = {
                "fp32": _median_s(lambda x=x: model(x), args.repeats),
                "bf16": _median_s(lambda xb=xb: bf16(xb), args.repeats),
                "int8wo": _median_s(lambda xb=xb: torch._weight_int8pack_mm(
                    silu(torch._weight_int8pack_mm(xb, up8, up8_scale)), down8, down8_scale),
                    args.repeats),
                "int4": _median_s(lambda xb=xb: torch._weight_int4pack_mm_for_cpu(
                    silu(torch._weight_int4pack_mm_for_cpu(xb, up4, GROUP, up4_sz)), down4,
                    GROUP, down4_sz), args.repeats),
            }
        prof = aa.profile(model, x, mode="infer")
        for fmt, seconds in measured.items():
            predicted = aa.predict(prof, hardware="local", precision=fmt).step_time_s
            error = predicted / seconds - 1
            if fmt in ("int8wo", "int4"):
                errors.append(abs(error))
            print(f"{rows:5d} {fmt:8} {seconds * 1e3:12.2f} {predicted * 1e3:13.2f} "
                  f"{error:+8.0%}")
    print(f"weight-only formats: mean |error| {statistics.fmean(errors):.0%} over "
          f"{len(errors)} cases")


if __name__ == "__main__":
    main()
