"""How long the cost model takes: ``predict_table`` (every catalog row x every precision for one
profile; goal <= 50 ms), one ``predict`` call and one planner ``step_time`` call.

Usage: ``python bench/costmodel_table_timing.py [--repeats 30]``. Prints medians (and the
fastest run: the machine may be shared) per built-in example model.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODELS = (("tiny-gpt", 8, 512), ("gpt2", 8, 1024), ("cnn", 64, None), ("llama-3-8b", 1, 4096))


def timed(fn, repeats: int) -> tuple[float, float]:
    fn()  # warm caches (op arrays, spec table)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main(argv: list[str] | None = None) -> int:
    import aiadvisor as aa
    from aiadvisor import examples
    from aiadvisor.costmodel import predict, predict_table, step_time
    from aiadvisor.hardware import all_specs, get
    from aiadvisor.schema import ParallelConfig
    from aiadvisor.units import PRECISIONS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    specs = all_specs()
    h100 = get("H100")
    cfg = ParallelConfig(dp_degree=2, tp_degree=4, zero_stage=3)
    print(f"{len(specs)} catalog rows x {len(PRECISIONS)} precisions; median (fastest) of "
          f"{args.repeats} runs")
    print(f"{'model':12s} {'op records':>10s} {'rows':>5s} {'predict_table':>22s} "
          f"{'predict':>18s} {'step_time':>18s}")
    for name, batch, seq in MODELS:
        model, inputs = examples.build(name, batch_size=batch, seq_len=seq,
                                       device="meta" if name.startswith("llama") else None)
        prof = aa.profile(model, inputs, mode="train", scaling=False)
        table_s = timed(lambda: predict_table(prof, specs=specs), args.repeats)  # noqa: B023
        one_s = timed(lambda: predict(prof, hardware=h100, precision="bf16"),  # noqa: B023
                      args.repeats)
        plan_s = timed(lambda: step_time(prof, h100, "bf16", cfg), args.repeats)  # noqa: B023
        rows = len(predict_table(prof, specs=specs))
        cells = "  ".join(f"{m * 1e3:8.1f} ms ({f * 1e3:5.1f})" for m, f in (table_s, one_s,
                                                                              plan_s))
        print(f"{name:12s} {len(prof.ops):10d} {rows:5d}  {cells}")
    print("goal: predict_table <= 50 ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
