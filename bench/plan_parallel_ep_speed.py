"""How long ``aa.plan_parallel`` takes for a DeepSeek-V3-sized model on 64 H100s, with
expert-parallel plans (goal: under 2 s).

The model is transformers' ``DeepseekV3Config()`` defaults (the published DeepSeek-V3 shape: 61
layers, hidden 7168, 256 routed experts of 2048 + 1 shared, top-8, the first 3 layers dense),
built on the meta device and profiled once (bf16 training, AdamW, ``--batch`` x ``--seq``
tokens per device); the plan is then timed ``--repeats`` times and the median printed, since a
user moving a slider re-plans from the same profile. The first call is the goal's figure (it
computes what later calls reuse); pandas and the hardware catalog are loaded before timing.
Usage: ``python bench/plan_parallel_ep_speed.py [--repeats 5] [--seq 4096] [--mode train]``.
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
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--mode", default="train", choices=("train", "infer"))
    args = parser.parse_args()

    import torch
    import transformers

    import aiadvisor as aa

    with torch.device("meta"):
        model = transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config())
    model = model.to(torch.bfloat16)
    inputs = {"input_ids": torch.zeros(args.batch, args.seq, dtype=torch.long)}
    t0 = time.perf_counter()
    prof = aa.profile(model, inputs, mode=args.mode, precision="bf16")
    print(f"profile ({prof.path}, {args.mode}, {args.batch} x {args.seq}): "
          f"{time.perf_counter() - t0:.1f} s; {prof.num_params / 1e9:.1f}B parameters, "
          f"{prof.num_active_params / 1e9:.1f}B active, {prof.moe.num_experts} experts "
          f"top-{prof.moe.top_k} in {prof.moe.num_moe_layers} layers")
    # One-time costs of the session, not of planning: importing pandas and reading the catalog
    # (about 0.6 s together), paid by whatever the user called first.
    import pandas  # noqa: F401

    aa.hardware.get("H100 SXM")
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        df = aa.plan_parallel(prof, hardware="H100 SXM", num_devices=64, precision="bf16")
        times.append(time.perf_counter() - t0)
    ep = df[df["ep"] > 1]
    median = statistics.median(times)
    # The first call also computes the activation split (a few prof.at rescalings) and the
    # predictions that later calls on the same profile reuse: the one a user waits for.
    print(f"plan_parallel, 64 x H100 SXM: first call {times[0]:.3f} s, median {median:.3f} s "
          f"over {args.repeats} (max {max(times):.3f}); goal 2 s for the first call: "
          f"{'met' if times[0] < 2 else 'MISSED'}")
    print(f"{len(df)} plans, {len(ep)} with expert parallelism "
          f"(degrees {sorted(set(ep['ep']))}), {int(df['fits'].sum())} fit")
    cols = ["strategy", "ep", "memory_per_device_bytes", "fits", "step_time_s"]
    print(df[cols].head(12).to_string())
    if df.attrs.get("advice"):
        print("advice:", df.attrs["advice"])


if __name__ == "__main__":
    main()
