"""Predicted vs measured training peak memory (fp32, AdamW, steady state) on this CPU.

Measured: a plain user-style loop on a deep copy of the model (copy, AdamW, two steps of forward,
loss, backward, step, zero_grad) with PyTorch's profiler recording every CPU allocation; the peak
is the high-water mark of the running sum of allocation sizes (weights of the copy included), which
the second step sets, when AdamW's state is resident. Predicted:
aiadvisor.profile(model, x).memory.peak_bytes, from fake tensors (nothing allocated).
Issue 2 floor: within 10 % for a BERT-style encoder, a GPT-style decoder, a ResNet and an MLP.
Run: .venv/bin/python bench/profile_memory.py [--sizes medium]
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiadvisor as aa
from aiadvisor.profiler.measure import cpu_peak_bytes
from tests.profiler import models

SIZES = {
    "small": {},
    "medium": {"bert": {"layers": 4, "hidden": 256, "batch": 8, "seq": 128},
               "gpt2": {"layers": 4, "hidden": 256, "batch": 8, "seq": 128},
               "llama": {"layers": 4, "hidden": 256, "batch": 4, "seq": 128},
               "vit": {"layers": 4, "hidden": 256, "batch": 8, "image": 64},
               "resnet": {"batch": 16, "image": 96}, "mlp": {"batch": 256},
               "t5": {"layers": 3, "hidden": 256, "batch": 4, "seq": 64},
               "lstm": {"batch": 16, "seq": 64}},
}


def first_float(out):
    if isinstance(out, torch.Tensor):
        return out
    logits = getattr(out, "logits", None)
    return logits if logits is not None else out[0]


def measured_peak(model, x) -> int:
    def step():
        m = copy.deepcopy(model)
        m.train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        for _ in range(2):  # the peak of a loop is step 2's: AdamW state is resident
            out = m(**x) if isinstance(x, dict) else m(x)
            first_float(out).sum().backward()
            opt.step()
            opt.zero_grad()

    peak, _ = cpu_peak_bytes(step)
    return peak


def measured_peak_cuda(model, x) -> int:
    """On a GPU: torch.cuda.max_memory_allocated over the same user-style step."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    m = copy.deepcopy(model).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    for _ in range(2):
        out = m(**x) if isinstance(x, dict) else m(x)
        first_float(out).sum().backward()
        opt.step()
        opt.zero_grad()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del m, opt, out
    return peak


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="medium", choices=sorted(SIZES))
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="cuda: compare with torch.cuda.max_memory_allocated")
    args = parser.parse_args()
    print(f"device: {args.device}")
    print(f"{'model':8}{'predicted MiB':>15}{'measured MiB':>15}{'error':>9}")
    errors = []
    for name, build in models.FAMILIES.items():
        model, x = build(**SIZES[args.sizes].get(name, {}))
        if args.device == "cuda":
            from torch.utils._pytree import tree_map

            model = model.cuda()
            x = tree_map(lambda t: t.cuda() if isinstance(t, torch.Tensor) else t, x)
            measured = measured_peak_cuda(model, x)
        else:
            measured = measured_peak(model, x)
        predicted = aa.profile(model, x, mode="train", optimizer="adamw").memory.peak_bytes
        err = predicted / measured - 1
        errors.append(abs(err))
        print(f"{name:8}{predicted / 2**20:15.2f}{measured / 2**20:15.2f}{err:+9.1%}")
    errors.sort()
    print(f"median |error| {errors[len(errors) // 2]:.1%}, max {errors[-1]:.1%} (floor: 10%)")


if __name__ == "__main__":
    main()
