"""CPU training steps in fresh processes: glibc's default heap policy against two ``mallopt``
settings that keep the step's freed memory, side by side.

A diagnostic for issue #12. glibc raises its mmap threshold to the largest block freed so far
(up to 32 MiB) and returns the top of the heap to the kernel once more than twice that is
free. Depending on where a process's chunks fall, a training step's freed activations can be
returned at every step and faulted in again at the next, a step-time jump of up to about 25 %
for a small ResNet on the development CPU (2026-12-06). Setting ``M_MMAP_THRESHOLD`` to 32 MiB
and ``M_TRIM_THRESHOLD`` to 256 MiB (``mallopt``, before the model runs) keeps them.

For each model of ``costmodel_local_cpu.py`` (both sets) in training, ``--runs`` fresh
processes per policy each time 12 steps (forward, backward, AdamW) and report the median of
steps 5-12 and the minor page faults a step. Printed: per policy, the median and the range
over the runs, and the faults. Nothing is predicted or fitted.
Usage: ``python bench/cpu_heap_settings.py [--runs 5] [--models ResNet,CNN]`` (Linux with
glibc; about 15 s a process on 2 cores).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CHILD = r"""
import ctypes, resource, statistics, sys, time
sys.path.insert(0, {bench!r}); sys.path.insert(0, {repo!r})
if sys.argv[1] == "mallopt":
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(-3, 32 * 2**20)   # M_MMAP_THRESHOLD
    libc.mallopt(-1, 256 * 2**20)  # M_TRIM_THRESHOLD
import torch
import costmodel_local_cpu as b
name, model, x = [m for m in b.build_models() + b.build_held_out_models()
                  if m[0] == sys.argv[2]][0]
opt = torch.optim.AdamW(model.parameters())
res = []
for i in range(12):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    out = model(x)
    out = out if torch.is_tensor(out) else (out.logits if hasattr(out, "logits") else out[0])
    out.float().sum().backward()
    opt.step()
    opt.zero_grad()
    res.append((time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0))
tail = res[4:]
print(statistics.median(r[0] for r in tail), statistics.median(r[1] for r in tail) * 4096)
"""


def _names() -> list[str]:
    sys.path.insert(0, str(REPO / "bench"))
    sys.path.insert(0, str(REPO))
    import costmodel_local_cpu as b

    return [m[0] for m in b.build_models() + b.build_held_out_models()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per policy")
    parser.add_argument("--models", default="",
                        help="comma-separated prefixes of model names (default: all eleven)")
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        print("glibc's mallopt: Linux only")
        return 0
    child = _CHILD.format(bench=str(REPO / "bench"), repo=str(REPO))
    wanted = [p for p in args.models.split(",") if p]
    names = [n for n in _names() if not wanted or any(n.startswith(p) for p in wanted)]
    print(f"{'model':30s} {'policy':8s} {'median step':>11s} {'range over runs':>19s} "
          f"{'faults MiB/step (each run)'}")
    for name in names:
        for policy in ("default", "mallopt"):
            steps, faults = [], []
            for _ in range(args.runs):
                out = subprocess.run([sys.executable, "-c", child, policy, name],
                                     capture_output=True, text=True, check=True)
                step, fault = (float(v) for v in out.stdout.split()[-2:])
                steps.append(step)
                faults.append(fault / 2**20)
            print(f"{name:30s} {policy:8s} {statistics.median(steps) * 1e3:9.1f}ms "
                  f"{min(steps) * 1e3:8.1f}-{max(steps) * 1e3:6.1f}ms   "
                  + ", ".join(f"{f:.0f}" for f in faults), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
