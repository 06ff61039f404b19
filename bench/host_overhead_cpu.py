"""Host-bound CPU steps: predicted with and without the host model vs measured.

Tiny models at batch 1 whose steps are dominated by what eager PyTorch does around each kernel
(dispatch, autograd, module calls, views): a deep narrow MLP, a 4-layer GPT-style decoder on 8
tokens and the small CNN of ``aiadvisor.examples`` on one image, in training and inference.
Nothing is fitted on them: the host costs come from one-element-op microbenchmarks
(``aiadvisor.hardware.host``), the op times from the device benchmark (the cached one unless
``--refresh``). "without host" is the same prediction with every host cost set to zero.

The machine may be shared: everything is repeated ``--rounds`` times (host costs re-measured
each round) and the fastest round of each side is compared ("quiet"), besides the medians.
Usage: ``python bench/host_overhead_cpu.py [--rounds 3] [--refresh]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build():
    import torch
    from torch import nn

    from aiadvisor import examples

    torch.manual_seed(0)
    deep = nn.Sequential(*[m for _ in range(32) for m in (nn.Linear(32, 32), nn.ReLU())])
    gpt, ids = examples.build("tiny-gpt", batch_size=1, seq_len=8)
    cnn, image = examples.build("cnn", batch_size=1)
    return [("MLP 32 x (32-32)", deep, torch.randn(1, 32)), ("GPT 4x256, 8 tok", gpt, ids),
            ("CNN (3 blocks), 1 img", cnn, image)]


def main(argv=None) -> int:
    import aiadvisor as aa
    from aiadvisor.costmodel import predict
    from aiadvisor.hardware import detect, host

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--refresh", action="store_true", help="re-run the device benchmark")
    args = parser.parse_args(argv)
    spec = detect(benchmark=True, refresh=args.refresh, progress=False)
    zero = host.HostCosts(dispatch_us=0.0, autograd_us=0.0, backward_node_us=0.0,
                          module_us=0.0, view_us=0.0, source="zero")
    rows: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for r in range(args.rounds):
        host.host_costs.cache_clear()
        costs = host.host_costs()
        print(f"round {r + 1}: {costs}", flush=True)
        for name, model, x in build():
            for mode in ("train", "infer"):
                prof = aa.profile(model, x, mode=mode, measure=True, measure_steps=args.steps,
                                  scaling=False)
                with_host = predict(prof, hardware=spec, precision="fp32").step_time_s
                saved = host.host_costs
                host.host_costs = lambda: zero  # noqa: E731 - bench-only switch
                try:
                    without = predict(prof, hardware=spec, precision="fp32").step_time_s
                finally:
                    host.host_costs = saved
                rows.setdefault((name, mode), []).append(
                    (prof.measured_step_time_s, with_host, without))
    print(f"\n{'model':22s} {'mode':5s} {'measured':>9s} {'with host':>10s} {'err':>7s} "
          f"{'without':>9s} {'err':>7s}   (quiet: fastest round of each)")
    signed_with, signed_without = [], []
    for (name, mode), runs in rows.items():
        meas, pred, bare = (min(c) for c in zip(*runs))
        signed_with.append(pred / meas - 1)
        signed_without.append(bare / meas - 1)
        print(f"{name:22s} {mode:5s} {meas * 1e3:8.2f}ms {pred * 1e3:9.2f}ms "
              f"{signed_with[-1]:+7.1%} {bare * 1e3:8.2f}ms {signed_without[-1]:+7.1%}")
    for label, errs in (("with host", signed_with), ("without host", signed_without)):
        e = np.array(errs)
        print(f"{label:13s}: MAPE {np.mean(np.abs(e)):.1%} (median {np.median(np.abs(e)):.1%}), "
              f"signed mean {np.mean(e):+.1%}, predicted too fast in {int((e < 0).sum())}/"
              f"{len(e)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
