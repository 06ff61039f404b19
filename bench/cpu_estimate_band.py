"""The P10-P90 band of a CPU prediction without a benchmark, against measured steps (issue #12).

What a user sees first on a CPU-only machine (a Binder demo, ``%advise model x`` with default
arguments) is the attached CPU *not* benchmarked: peaks estimated from its ISA flags and clock,
ops priced with efficiency curves learned on NVIDIA GPUs, and a "likely" range beside the
figure. This bench checks that range. The eleven models of ``bench/costmodel_local_cpu.py``
(its six tuned ones and its five held out), each in training (AdamW) and inference, are timed
on the attached CPU (``aa.profile(..., measure=True)``: the median of real steps) and predicted
on ``detect(benchmark=False)``, the spec the default report uses, in FP32.

Printed per configuration: measured, predicted, its band without and with
:data:`aiadvisor.costmodel.predict.ESTIMATED_CPU_SPREAD` (the spread added in quadrature to the
band of every CPU priced without a benchmark), and whether the measured step is inside. Then
the spread the rule of ``STEP_SPREAD`` picks on this run (the smallest value on a 0.01 grid that
puts >= 80 % of the configurations inside their band) and the leave-one-configuration-out
coverage of picking it that way (each configuration's band takes the spread picked on the
other 21). The shipped constant is what this bench picked on 2026-12-06 (0.26, in two runs:
one round and two); a run on a noisier moment can pick another.

Second CPU (``--tag xeon``, a 2-core Intel Xeon VM with AMX, 2026-12-07), where the spread was
not picked: MAPE 20.9 %, signed +1.6 %, 36/44 inside with 0.26 (32 without), picked 0.19. Then
``predict.CPU_SLOW_OP_BANDWIDTH`` (max pool and training batch norm at the share of the
bandwidth the EPYC's calibration measured; chosen after seeing that run): MAPE 17.3 %, signed
+8.2 %, 41/44 inside (38 without), picked 0.00.

Third and fourth CPUs, held out from every constant: a 2-core Zen 3 EPYC VM (AVX2, no BF16;
``--tag epyc_avx2``): MAPE 13.2 %, signed +7.8 %, 44/44 inside. A 2-core Zen 4 EPYC VM
(``--tag epyc_zen4``, 2026-12-07): MAPE 28.8 %, signed +26.8 % (every model but two predicted
slow, the MLP +45 %), 36/44 inside: /proc/cpuinfo's 2596 MHz is the nominal clock, and a
512 x 512 matmul ran 1.41x faster than the cost model priced it at the estimated peak. Then
``detection.anchored_cpu_spec`` (the peaks scaled by that quick matmul, timed in the user's
process): against the same measured steps 10.6 % (signed +0.9 %); the bench rerun with it
12.3 % (signed -8.2 %, on a slower moment of the VM: the same steps measured up to 1.5x
slower than in the first run), 43/44 inside (42 without the spread), and again with three
rounds 14.7 % (signed -11.2 %, 66/66 inside, 62 without; the GPT decoder's inference measured
207-210 ms where the first run measured 161-171 and the calibrated bench 142). The quick
matmul is timed at one moment and the steps at another: on a VM whose speed moves by 1.3-1.5x
from minute to minute, the estimate moves with it.

Back on the Xeon VM with the quick matmul (2026-12-07, 2 rounds): MAPE 18.1 % (was 17.3 %
before it), signed -2.6 %, 40/44 inside (37 without the spread); the matmul there ran 1.65x
faster than priced at the estimated peaks. Left on it: the LSTM 31-36 % fast (oneDNN's fused
layer priced as one GEMM at its per-step size on the GPU-learned curve: 73 % of the anchored
peak, where it ran at 43 %), the GRU 52-73 % slow (its ~2,300 small per-step ops at the
default 5 us launch each, measured 1.8 us), the batch-norm ResNet 23-32 % fast. Then
``detection.recurrent_anchor`` (an LSTM layer timed at batch 8 and 64 against its price, its
factor applied to fused recurrent layers): 17.2 %, signed +0.0 %, the LSTM +5 / +7 %, 40/44
inside; and the anchored spec's per-op cost timed (a one-element add: 2.0 us, for the default
5): 14.5 %, signed -8.3 % (the 5 us had hidden ops priced fast: BERT, GPT, ViT, the encoder
and the batch-norm ResNet 11-32 % fast; alone, on their own inputs, their elementwise ops and
norms ran at or below the curves' price, dropout's draws 16x above it), the GRU +14 /
+22 %, 44/44 inside (41 without the spread); and dropout's ``bernoulli_`` at the rate a
quick one ran here (``detection.bernoulli_anchor``, 4.8 ns an element): 14.1 %, signed
-4.8 %, 44/44 inside (39 without), BERT-style training -22 -> -10 %, the encoder's -28 ->
-6 %. Left: the batch-norm ResNet 31-33 % fast (its convolutions took about twice their
price), the small CNN's inference 28 % slow (its max pools priced at the EPYC's share).
Rerun after a training forward's outputs were priced as written out of the caches
(``predict._cpu_kept_outputs``) and the page faults timed on new pages (2026-12-07, 2 rounds):
13.8 %, signed -10.6 %, 43/44 inside (39 without the spread). The inference steps, which
neither change touches, read slow too (GPT -20 %, ViT -26 %): the steps measured 10-25 %
slower than in the calibrated bench run just before, while the quick matmul was timed at a
faster moment. The batch-norm ResNet read 33 / 48 % fast (train / infer). Then two quick
convolutions against their price (``detection.conv_anchor``, 1.5-2.3x; its factor applied to
each convolution by FLOPs per byte): 12.0 %, signed -8.9 %, 44/44 inside (43 without the
spread); the ResNet -17 / -7 %, the small CNN -5 / +10 %; the transformers still read 11-31 %
fast on a slow moment (the GPT decoder's inference measured 121 ms).
Usage: ``python bench/cpu_estimate_band.py [--rounds 2] [--steps 7]`` (about three minutes a
round on 2 cores).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _results import TAG_HELP  # noqa: E402

#: Share of configurations the picked spread must put inside their band (the P10-P90 goal).
COVERAGE_GOAL = 0.8
GRID = np.round(np.arange(0.0, 1.001, 0.01), 2)


def widened(step: float, low0: float, high0: float, spread: float) -> tuple[float, float]:
    """The band ``(low0, high0)`` around ``step`` widened by ``spread`` in quadrature (as
    :func:`aiadvisor.costmodel.predict.stack_band`)."""
    down = np.hypot(np.log(step / low0), spread)
    up = np.hypot(np.log(high0 / step), spread)
    return step * np.exp(-down), step * np.exp(up)


def inside(row: dict, spread: float) -> bool:
    low, high = widened(row["pred"], row["low0"], row["high0"], spread)
    return bool(low <= row["meas"] <= high)


def pick_spread(rows: list[dict]) -> float:
    """The smallest spread on :data:`GRID` putting >= :data:`COVERAGE_GOAL` of ``rows`` inside."""
    for s in GRID:
        if sum(inside(r, s) for r in rows) >= COVERAGE_GOAL * len(rows):
            return float(s)
    return float(GRID[-1])


def leave_one_out(rows: list[dict]) -> int:
    """Rows inside the band whose spread was picked on the other configurations' rows (every
    round of the left-out configuration is left out)."""
    def key(r: dict) -> tuple:
        return r["model"], r["mode"]

    return sum(inside(r, pick_spread([o for o in rows if key(o) != key(r)])) for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=7, help="measured steps per configuration")
    parser.add_argument("--rounds", type=int, default=2,
                        help="measure every configuration this many times; the spread is "
                        "picked on all rounds' rows (a shared machine's steps move between runs)")
    parser.add_argument("--tag", default=None, help=TAG_HELP)
    args = parser.parse_args(argv)
    import importlib

    from _results import isolate_measurements, summary_row, tagged, write_summary
    from costmodel_local_cpu import build_held_out_models, build_models

    import aiadvisor as aa
    from aiadvisor.hardware import detect

    # The module (``aiadvisor.costmodel.predict`` the attribute is the function).
    predict_module = importlib.import_module("aiadvisor.costmodel.predict")
    isolate_measurements()  # the cost model itself, without a measured correction
    spec = detect(benchmark=False)
    if spec.kind != "cpu" or spec.measured:
        parser.error(f"the attached device is {spec.name} (measured={spec.measured}): this "
                     "bench checks a CPU priced without a benchmark")
    shipped = predict_module.ESTIMATED_CPU_SPREAD
    rows: list[dict] = []
    print(f"{'set':5s} {'model':28s} {'mode':5s} {'measured':>9s} {'predicted':>9s} "
          f"{'band without':>19s} {'band shipped':>19s} {'err':>7s} in0 in")
    models = [("tuned", *m) for m in build_models()] + \
        [("held", *m) for m in build_held_out_models()]
    for _round in range(args.rounds):
        for which, name, model, x in models:
            for mode in ("train", "infer"):
                prof = aa.profile(model, x, mode=mode, optimizer="adamw", measure=True,
                                  measure_steps=args.steps, scaling=False, precision="fp32")
                pred = aa.predict(prof, hardware=spec, precision="fp32")
                predict_module.ESTIMATED_CPU_SPREAD = 0.0
                try:
                    bare = aa.predict(prof, hardware=spec, precision="fp32")
                finally:
                    predict_module.ESTIMATED_CPU_SPREAD = shipped
                row = {"set": which, "model": name, "mode": mode,
                       "meas": prof.measured_step_time_s, "pred": pred.step_time_s,
                       "low0": bare.low_s, "high0": bare.high_s, "low": pred.low_s,
                       "high": pred.high_s}
                rows.append(row)
                print(f"{which:5s} {name:28s} {mode:5s} {row['meas'] * 1e3:8.2f}m "
                      f"{row['pred'] * 1e3:8.2f}m ({row['low0'] * 1e3:7.2f}-"
                      f"{row['high0'] * 1e3:8.2f}) ({row['low'] * 1e3:7.2f}-"
                      f"{row['high'] * 1e3:8.2f}) {row['pred'] / row['meas'] - 1:+7.1%} "
                      f"{'y' if inside(row, 0.0) else 'n':3s} "
                      f"{'y' if row['low'] <= row['meas'] <= row['high'] else 'n'}", flush=True)
    n = len(rows)
    apes = [abs(r["pred"] / r["meas"] - 1) for r in rows]
    signed = [r["pred"] / r["meas"] - 1 for r in rows]
    bare_in = sum(inside(r, 0.0) for r in rows)
    shipped_in = sum(r["low"] <= r["meas"] <= r["high"] for r in rows)
    held = [r for r in rows if r["set"] == "held"]
    picked, loo = pick_spread(rows), leave_one_out(rows)
    print(f"\nestimate (no benchmark): MAPE {np.mean(apes):.1%}, median {np.median(apes):.1%}, "
          f"signed mean {np.mean(signed):+.1%}")
    print(f"inside P10-P90: {bare_in}/{n} without the spread, {shipped_in}/{n} with the shipped "
          f"{shipped:.2f} (held-out models {sum(r['low'] <= r['meas'] <= r['high'] for r in held)}"
          f"/{len(held)})")
    print(f"spread picked on this run: {picked:.2f}; leave-one-configuration-out coverage of "
          f"picking it that way: {loo}/{n}")
    regime = (f"CPU steps priced without a benchmark (default report), 11 models x train/infer"
              f" x {args.rounds} rounds")
    anchor = "median of real steps measured on the same CPU"
    name, regime = tagged("cpu_estimate_band", regime, args.tag)
    write_summary(name, [
        summary_row(regime=regime, metric="MAPE of the step time", value=float(np.mean(apes)),
                    unit="%", n=n, anchor=anchor),
        summary_row(regime=regime, metric="measured inside predicted P10-P90",
                    value=shipped_in / n, unit="%", n=n, anchor=anchor,
                    baseline="the band without the estimated-CPU spread",
                    baseline_value=bare_in / n),
        summary_row(regime=regime, metric="inside P10-P90, spread picked leaving each "
                    "configuration out", value=loo / n, unit="%", n=n, anchor=anchor),
    ], command=f"python bench/cpu_estimate_band.py --rounds {args.rounds}"
       + (f" --tag {args.tag}" if args.tag else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
