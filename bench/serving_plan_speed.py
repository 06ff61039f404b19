"""How long ``aa.plan_serving`` takes for a 70B model over the whole catalog (goal: under 1 s).

The model (Llama-3-70B shape, meta device) is captured once with ``aa.profile_generation``; the
plan is then timed ``--repeats`` times (median printed) for one device type and for every catalog
device, since a user moving a slider re-plans from the same capture.
Usage: ``python bench/serving_plan_speed.py [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import aiadvisor as aa
    from aiadvisor import examples

    model, _ = examples.build("llama-3-70b")
    t0 = time.perf_counter()
    gp = aa.profile_generation(model, prompt_len=1024)
    print(f"capture (profile_generation, meta device): {time.perf_counter() - t0:.2f} s")
    for label, kwargs in (("8 x H100 SXM", {"hardware": "H100 SXM", "num_devices": 8}),
                          ("whole catalog, 1 device", {"hardware": "catalog"}),
                          ("whole catalog, 8 devices", {"hardware": "catalog",
                                                         "num_devices": 8})):
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            plan = aa.plan_serving(gp, prompt_len=1024, output_len=256, max_tpot_s=0.05,
                                   **kwargs)
            times.append(time.perf_counter() - t0)
        best = plan.iloc[0]
        print(f"{label:26}: median {statistics.median(times):.2f} s over {args.repeats} "
              f"({len(plan)} rows; best: {best['hardware']} {best['weight_precision']} "
              f"tp{best['tp']} batch {best['batch_size']}, {best['tokens_per_s']:.0f} tok/s)")


if __name__ == "__main__":
    main()
