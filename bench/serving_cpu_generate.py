"""Measured vs predicted generation speed on the attached CPU (``hardware="local"``).

GPT-2-sized decoders (the built-in ``gpt2`` shape, 124M parameters, and the 5M ``tiny-gpt``),
random weights, greedy decoding with a KV cache (the built-in decoder's own cache: one prefill
forward, then one forward per new token, as transformers ``generate`` runs it), batch 1 and 8,
several prompt/output lengths, in FP32 (the dtype CPU users run). Measured: median over
``--repeats`` runs of time to first token (the prefill forward) and time per output token (the
decode steps). Predicted: ``aa.predict_generation(model, hardware="local", engine="eager")``
after the device is benchmarked once. Printed: both, the ratio and the APE; goal: tokens/s
within 25 %.

Usage: ``python bench/serving_cpu_generate.py [--repeats 3]`` (about two minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CASES = [  # (model, batch, prompt, output)
    ("tiny-gpt", 1, 128, 64), ("tiny-gpt", 8, 128, 64),
    ("gpt2", 1, 64, 32), ("gpt2", 1, 256, 32), ("gpt2", 8, 64, 32), ("gpt2", 8, 256, 16),
]


def measure(model, batch: int, prompt: int, output: int, repeats: int) -> tuple[float, float]:
    """(median time to first token, median time per output token) of greedy decoding."""
    import torch

    ids = torch.randint(0, model.aiadvisor_config.vocab_size, (batch, prompt))
    ttfts, tpots = [], []
    with torch.no_grad():
        for _ in range(repeats + 1):  # the first run warms up the allocator and caches
            t0 = time.perf_counter()
            logits, cache = model(ids, use_cache=True)
            nxt = logits[:, -1:].argmax(-1)
            t1 = time.perf_counter()
            for _ in range(output - 1):
                logits, cache = model(nxt, past_key_values=cache, use_cache=True)
                nxt = logits[:, -1:].argmax(-1)
            t2 = time.perf_counter()
            ttfts.append(t1 - t0)
            tpots.append((t2 - t1) / max(output - 1, 1))
    return statistics.median(ttfts[1:]), statistics.median(tpots[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    import aiadvisor as aa
    from aiadvisor import examples

    torch.set_grad_enabled(True)
    spec = aa.hardware.detect(benchmark=True, refresh=True)
    print(f"device: {spec.name} (benchmarked: {spec.measured}); torch threads "
          f"{torch.get_num_threads()}")
    header = (f"{'model':9} {'b':>2} {'in':>4} {'out':>4} | {'TTFT meas':>9} {'pred':>8} | "
              f"{'TPOT meas':>9} {'pred':>8} {'P10-P90':>15} | {'tok/s meas':>10} {'pred':>8} "
              f"{'APE':>5}")
    print(header)
    print("-" * len(header))
    apes, inside, tpot_ratios = [], 0, []
    profiles = {}
    for name, batch, prompt, output in CASES:
        model, _ = examples.build(name, batch_size=1)
        model.eval()
        if name not in profiles:
            profiles[name] = aa.profile_generation(model, prompt_len=256)
        ttft, tpot = measure(model, batch, prompt, output, args.repeats)
        g = aa.predict_generation(profiles[name], hardware=spec, weight_precision="fp32",
                                  prompt_len=prompt, output_len=output, batch_size=batch,
                                  engine="eager")
        meas_tps = batch * output / (ttft + (output - 1) * tpot)
        ape = abs(g.tokens_per_s - meas_tps) / meas_tps
        apes.append(ape)
        inside += g.tpot_low_s <= tpot <= g.tpot_high_s
        tpot_ratios.append(g.tpot_s / tpot)
        print(f"{name:9} {batch:>2} {prompt:>4} {output:>4} | {ttft * 1e3:8.1f}ms "
              f"{g.ttft_s * 1e3:6.1f}ms | {tpot * 1e3:8.2f}ms {g.tpot_s * 1e3:6.2f}ms "
              f"{g.tpot_low_s * 1e3:6.2f}-{g.tpot_high_s * 1e3:6.2f}ms | {meas_tps:10.1f} "
              f"{g.tokens_per_s:8.1f} {ape:5.0%}")
    print(f"\ntokens/s APE: mean {statistics.mean(apes):.0%}, median "
          f"{statistics.median(apes):.0%}, max {max(apes):.0%} (goal: within 25 %); measured TPOT "
          f"inside the P10-P90 interval in {inside}/{len(CASES)} cases.")
    write_generate_summary(apes, tpot_ratios, inside=inside, repeats=args.repeats)


def write_generate_summary(apes: list[float], tpot_ratios: list[float], *, inside: int,
                           repeats: int) -> None:
    """Tokens/s APE and the TPOT interval's coverage, for the README."""
    from _results import summary_row, write_summary

    regime = "LLM generation on this CPU (GPT-2 124M and 5M, FP32, batch 1 and 8)"
    anchor = "greedy decoding measured on the same CPU (median of runs)"
    n = len(apes)
    write_summary("serving_cpu_generate", [
        summary_row(regime=regime, metric="median tokens/s APE", value=statistics.median(apes),
                    unit="%", n=n, anchor=anchor),
        summary_row(regime=regime, metric="max tokens/s APE", value=max(apes), unit="%", n=n,
                    anchor=anchor),
        summary_row(regime=regime, metric="signed mean TPOT error (predicted/measured - 1)",
                    value=statistics.mean(tpot_ratios) - 1, unit="+%", n=n, anchor=anchor),
        summary_row(regime=regime, metric="measured TPOT inside predicted P10-P90",
                    value=inside / n, unit="%", n=n, anchor=anchor),
    ], command=f"python bench/serving_cpu_generate.py --repeats {repeats}")


if __name__ == "__main__":
    main()
