"""Where a CPU inference step's time goes, next to what the local cost model predicts.

A diagnostic for issue #12 (CPU steps predicted too fast). For the six models of
``costmodel_local_cpu.py`` (``--set held-out``: its five held-out ones) in inference (forward
under ``no_grad``), one run prints:

* **plain**: the median forward, called as a user calls it (no mode, no hooks);
* **in model**: the summed time of the model's aten ops, each timed inside a dispatch mode
  from before its kernel to after it (the mode's own overhead is outside these windows);
* **replayed**: the same ops run again on clones of their own arguments, each op by itself
  three times in a row and the fastest kept: the op as a calibration times it (hot caches,
  nothing before it);
* **rest**: plain - in model: the model's Python between ops and the dispatch above the mode
  (argument parsing, module calls);
* **predicted**: ``aa.predict(prof, hardware=<the benchmarked CPU>)``.

``in model / replayed`` > 1 means ops run slower inside the model than alone (their inputs
and the host's working set evicted by the ops before them); ``predicted / replayed`` < 1 means
the calibration's curves price the ops below what they take alone. Medians of ``--repeats``
forwards. Nothing is fitted. The mode's windows are themselves a little longer than the bare
kernels, so "rest" can read low.
Usage: ``python bench/cpu_step_anatomy.py [--repeats 9]`` (about a minute on 2 cores with a
cached device benchmark).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _timing_mode(record: bool):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map

    class Windows(TorchDispatchMode):
        """Seconds inside each aten op (by name); with ``record``, each call's op and cloned
        arguments, for replaying."""

        def __init__(self) -> None:
            super().__init__()
            self.seconds: dict[str, float] = defaultdict(float)
            self.calls: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if record:
                def clone(t):
                    return t.clone() if isinstance(t, torch.Tensor) else t
                self.calls.append((func, tree_map(clone, args), tree_map(clone, kwargs)))
            start = time.perf_counter()
            out = func(*args, **kwargs)
            self.seconds[str(func.overloadpacket)] += time.perf_counter() - start
            return out

    return Windows


def replayed_seconds(calls) -> dict[str, float]:
    """Each recorded call run three times in a row on its cloned arguments: the fastest."""
    out: dict[str, float] = defaultdict(float)
    for func, args, kwargs in calls:
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            func(*args, **kwargs)
            best = min(best, time.perf_counter() - start)
        out[str(func.overloadpacket)] += best
    return out


def main(argv: list[str] | None = None) -> int:
    import torch
    from costmodel_local_cpu import build_held_out_models, build_models

    import aiadvisor as aa
    from aiadvisor.costmodel import predict
    from aiadvisor.hardware import detect

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--top", type=int, default=4, help="op kinds listed per model")
    parser.add_argument("--set", choices=("tune", "held-out"), default="tune",
                        help="costmodel_local_cpu.py's six tuned models or its five held out")
    args = parser.parse_args(argv)
    from _results import isolate_measurements

    isolate_measurements()  # the cost model itself, without a measured correction
    spec = detect(benchmark=True, progress=False)
    print(f"{'model':24s} {'plain':>8s} {'in model':>9s} {'replayed':>9s} {'rest':>7s} "
          f"{'predicted':>9s} {'pred/plain':>10s} {'model/replay':>12s}")
    models = build_held_out_models() if args.set == "held-out" else build_models()
    for name, model, x in models:
        prof = aa.profile(model, x, mode="infer", scaling=False, precision="fp32")
        pred = predict(prof, hardware=spec, precision="fp32").step_time_s
        flags = [(m, m.training) for m in model.modules()]
        model.eval()
        try:
            with torch.no_grad():
                for _ in range(2):
                    model(x)
                plain, inside = [], []
                per_op: dict[str, list[float]] = defaultdict(list)
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    model(x)
                    plain.append(time.perf_counter() - start)
                    mode = _timing_mode(record=False)()
                    with mode:
                        model(x)
                    inside.append(sum(mode.seconds.values()))
                    for op, s in mode.seconds.items():
                        per_op[op].append(s)
                recorder = _timing_mode(record=True)()
                with recorder:
                    model(x)
                replay = replayed_seconds(recorder.calls)
        finally:
            for m, flag in flags:
                m.training = flag
        plain_s, inside_s = statistics.median(plain), statistics.median(inside)
        replay_s = sum(replay.values())
        print(f"{name:24s} {plain_s * 1e3:7.2f}m {inside_s * 1e3:8.2f}m {replay_s * 1e3:8.2f}m "
              f"{(plain_s - inside_s) * 1e3:6.2f}m {pred * 1e3:8.2f}m {pred / plain_s:10.2f} "
              f"{inside_s / replay_s:12.2f}", flush=True)
        worst = sorted(per_op, key=lambda op: statistics.median(per_op[op]) - replay[op],
                       reverse=True)[:args.top]
        print("    slower in the model than alone: " + ", ".join(
            f"{op.removeprefix('aten.')} {statistics.median(per_op[op]) * 1e3:.2f} vs "
            f"{replay[op] * 1e3:.2f} ms" for op in worst))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
