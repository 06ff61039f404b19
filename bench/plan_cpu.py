"""The stacked plan on this CPU, applied and measured (issue #14).

For a conv net, a transformer and an MLP (random weights, configs only): ``aa.advise`` on the
benchmarked CPU (``hardware="local"``), then :func:`aiadvisor.verify_plan` applies the plan's
generated code to copies of the model one step at a time and times each step against the one
before it, in turns (median of several steps each). Prints predicted vs measured per step and
cumulative.

Goal (issue #14): a measured speedup of at least 1.3x on two of the three workloads, and
predicted cumulative gains within 25 % of the measured ones.

Run: ``PYTHONPATH=. python bench/plan_cpu.py [--mode infer|train] [--repeats 9]``;
``--held-out`` runs a small ViT instead (validation on a workload not used while fixing the
tactics; printed, no summary). The machine
is shared: timings move with its load; the turns keep the ratios steadier than the times.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

import aiadvisor as aa

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_results.py


def conv_net(batch: int):
    from transformers import ResNetConfig, ResNetForImageClassification

    torch.manual_seed(0)
    config = ResNetConfig(embedding_size=32, hidden_sizes=[32, 64, 128, 256],
                          depths=[1, 1, 1, 1], layer_type="basic", num_labels=10)
    return ResNetForImageClassification(config), torch.randn(batch, 3, 112, 112)


def transformer(batch: int):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=1024, vocab_size=8000)
    return BertModel(config), torch.randint(0, 8000, (batch, 128))


def mlp(batch: int):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                              torch.nn.Linear(4096, 4096), torch.nn.GELU(),
                              torch.nn.Linear(4096, 1024))
    return net, torch.randn(batch, 1024)


def vit(batch: int):
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(hidden_size=192, num_hidden_layers=4, num_attention_heads=3,
                       intermediate_size=768, image_size=112, patch_size=16)
    return ViTModel(config), torch.randn(batch, 3, 112, 112)


#: Held out (``--held-out``): not used while fixing the tactics; reported apart, no summary.
HELD_OUT = {"ViT (4 layers, 112 px)": (vit, 16)}

WORKLOADS = {"conv net (ResNet, 4 stages)": (conv_net, 16),
             "transformer (BERT, 4 layers)": (transformer, 8),
             "MLP (1024-4096-4096-1024)": (mlp, 256)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="infer", choices=("infer", "train"))
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--held-out", action="store_true",
                        help="run the held-out workloads instead (no summary written)")
    args = parser.parse_args()
    from _results import isolate_measurements

    isolate_measurements()  # verify runs record into a temporary store, no correction
    warnings.filterwarnings("ignore")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, mode={args.mode}")
    summary = []
    for name, (build, batch) in (HELD_OUT if args.held_out else WORKLOADS).items():
        model, x = build(batch)
        start = time.perf_counter()
        report = aa.advise(model, x, mode=args.mode, hardware="local")
        result = aa.verify_plan(model, x, report, warmup=args.warmup, repeats=args.repeats)
        print(f"\n== {name}, batch {batch}: {len(report.recommendations)} steps "
              f"({time.perf_counter() - start:.0f} s)")
        print(result)
        measured, predicted = result.measured_cumulative, result.predicted_cumulative
        error = predicted / measured - 1
        summary.append((name, measured, predicted, error))
    print("\nworkload                          measured  predicted  predicted/measured - 1")
    for name, measured, predicted, error in summary:
        print(f"{name:<33} {measured:7.2f}x  {predicted:8.2f}x  {error:+8.0%}")
    hits = sum(m >= 1.3 for _, m, _, _ in summary)
    close = sum(abs(e) <= 0.25 for *_, e in summary)
    print(f"\nmeasured >= 1.3x: {hits} of {len(summary)} (goal 2); predicted within 25 % of "
          f"measured: {close} of {len(summary)} (goal {len(summary)})")
    if not args.held_out:
        write_plan_summary(summary, args=args)


def write_plan_summary(summary: list[tuple], *, args) -> None:
    """Signed and absolute error of the predicted cumulative speedup, for the README."""
    from _results import summary_row, write_summary

    measured = [m for _, m, _, _ in summary]
    errors = [e for *_, e in summary]
    regime = f"stacked plan on this CPU ({args.mode}: conv net, transformer, MLP)"
    anchor = "speedup measured by aa.verify_plan (in turns); value: median of the workloads"
    n = len(summary)
    rows = [
        summary_row(regime=regime, metric="signed mean error of the predicted speedup",
                    value=statistics.mean(errors), unit="+%", n=n, anchor=anchor,
                    anchor_value=statistics.median(measured), anchor_unit="x"),
        summary_row(regime=regime, metric="max abs error of the predicted speedup",
                    value=max(abs(e) for e in errors), unit="%", n=n, anchor=anchor,
                    anchor_value=statistics.median(measured), anchor_unit="x"),
    ]
    write_summary(f"plan_cpu_{args.mode}", rows,
                  command=f"PYTHONPATH=. python bench/plan_cpu.py --mode {args.mode} "
                          f"--repeats {args.repeats}")


if __name__ == "__main__":
    main()
