"""What bf16 autocast inference pays for fp32 weights on this CPU, and what the plan's code pays.

``torch.autocast`` casts each fp32 weight to bf16 on every forward (read 4 + write 2 bytes per
element); the plan's inference code (snippet ``autocast_infer``) stores the model in bf16 once
(``model.to(torch.bfloat16)``), so its forward casts no weights. This times, on the plan bench's
MLP (1024-4096-4096-1024, batch 256, 25.2 M weights), in turns as ``aa.verify_plan`` does:

* fp32 as you run it;
* autocast over the fp32 weights (what a per-call cast costs);
* the plan's code: bf16 weights under autocast;
* the weight casts alone (``w.to(torch.bfloat16)`` for every parameter);

and prints the cost model's bf16 prediction (``hardware="local"``) next to them. Printed only, no
summary file. Run: ``PYTHONPATH=. python bench/autocast_cast_cpu.py [--repeats 15]``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings

import torch

import aiadvisor as aa


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                               torch.nn.Linear(4096, 4096), torch.nn.GELU(),
                               torch.nn.Linear(4096, 1024)).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    model, x = mlp(), torch.randn(256, 1024)
    bf16_model = copy.deepcopy(model).to(torch.bfloat16)
    weights = list(model.parameters())
    bf16 = torch.bfloat16

    def fp32():
        with torch.inference_mode():
            model(x)

    def autocast_fp32_weights():
        with torch.inference_mode(), torch.autocast("cpu", dtype=bf16):
            model(x)

    def plan_code():
        with torch.inference_mode(), torch.autocast("cpu", dtype=bf16):
            bf16_model(x)

    def casts_only():
        with torch.inference_mode():
            for w in weights:
                w.to(bf16)

    runs = {"fp32 (as you run it)": fp32, "autocast, fp32 weights": autocast_fp32_weights,
            "plan's code: bf16 weights + autocast": plan_code, "weight casts alone": casts_only}
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(3):
        for fn in runs.values():
            fn()
    for _ in range(args.repeats):  # in turns: each run finds the caches as the others left them
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    median = {k: statistics.median(v) for k, v in times.items()}
    elements = sum(w.numel() for w in weights)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {elements:,} weights; "
          f"median of {args.repeats} in turns")
    for name, seconds in median.items():
        print(f"  {name:<38} {seconds * 1e3:7.2f} ms")
    cast_s = median["weight casts alone"]
    print(f"weight casts: {6 * elements / 1e6:.0f} MB moved (4 B read + 2 B written per weight) "
          f"in {cast_s * 1e3:.2f} ms = {6 * elements / cast_s / 1e9:.1f} GB/s")
    extra = median["autocast, fp32 weights"] - median["plan's code: bf16 weights + autocast"]
    print(f"autocast over fp32 weights costs {extra * 1e3:.2f} ms more per forward than the "
          f"plan's code, which casts no weights")
    prof = aa.profile(model, x, mode="infer")
    predicted = {p: aa.predict(prof, hardware="local", precision=p).step_time_s
                 for p in ("fp32", "bf16")}
    plan = median["plan's code: bf16 weights + autocast"]
    print(f"cost model (hardware='local'): fp32 {predicted['fp32'] * 1e3:.2f} ms "
          f"({predicted['fp32'] / median['fp32 (as you run it)'] - 1:+.0%}), bf16 "
          f"{predicted['bf16'] * 1e3:.2f} ms ({predicted['bf16'] / plan - 1:+.0%} vs the plan's "
          f"code; with the casts priced it would read {(predicted['bf16'] + cast_s) * 1e3:.2f} ms, "
          f"{(predicted['bf16'] + cast_s) / plan - 1:+.0%})")


if __name__ == "__main__":
    main()
