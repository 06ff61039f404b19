"""Hugging Face ``model.generate`` on the attached CPU, measured vs predicted (issue #13).

What a CPU user runs: a transformers causal LM (random weights from a config, FP32) and
``model.generate(ids, max_new_tokens=n, do_sample=False)``. Measured, per run: ``generate``
with ``n`` new tokens and with one (time to first token, the request's setup included); time
per output token = the difference over ``n - 1``; the median of ``--repeats`` runs after a
warm-up. Predicted: ``aa.predict_generation(aa.profile_generation(model),
hardware=<this CPU, benchmarked>, weight_precision="fp32", engine="eager")``, and beside it the
same prediction without the model's own Python lines (``DecodeStep.num_python_lines`` and the
prefill's set to 0: the host price before they were counted).

The per-line cost (``aiadvisor.hardware.host.PYTHON_LINE_MODULE_CALLS``) was fitted on Llama and
GPT-2 decoders 64 wide, 8 layers (a manual decode loop, not ``generate``): GPT-2 124M here is
that family at another size; OPT, GPT-NeoX, Phi, Qwen2 and Gemma were fitted on in no way.
Goal: tokens/s within 25 % (issue #13, "CPU generate within 25 % of measured").
On the 2-core Xeon VM (``--tag xeon``, 2026-12-07, on a new calibration after the page faults
were timed on new pages, load average 1.7): 9 of 9 within 25 % (median 11 %, max 17 %, TPOT
-7 % on average), TPOT inside the band in 9/9.

Usage: ``python bench/serving_cpu_transformers.py [--repeats 3] [--cached] [--no-summary]``
(about two minutes on 2 cores, the device benchmark included).

Runs on 2026-12-06 (the 2-core AMD EPYC development VM, transformers 5.25), each with a fresh
device benchmark: tokens/s APE median 9-13 %, max 18-27 %, 8-9 of 9 within 25 %; without the
Python lines median 13-19 %, max 26-37 %. Time per output token is predicted 9-11 % fast on
average. Two runs reusing a benchmark another bench had cached read median 21 % and 26 %
(their predictions 3 % lower, the measured steps up to 10 % slower): the machine is shared and
its speed moves. Time to first token at batch 1 is predicted up to 30 % fast (the prompt
forward itself; ``generate``'s own setup, about 10,000 lines, measured at 0.1-1.7 ms).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _results import TAG_HELP  # noqa: E402

#: (name, batch, prompt, new tokens)
CASES = [
    ("gpt2-124m", 1, 64, 32), ("gpt2-124m", 4, 128, 16),
    ("opt-512x6", 1, 128, 64), ("opt-512x6", 4, 256, 32),
    ("gpt-neox-512x6", 1, 128, 64),
    ("phi-512x6", 1, 128, 64),
    ("qwen2-512x8-gqa", 1, 128, 64), ("qwen2-512x8-gqa", 4, 256, 32),
    ("gemma-512x8", 1, 96, 48),
]


def build(name: str):
    """A transformers causal LM with random weights (no download)."""
    import torch
    import transformers as T

    torch.manual_seed(0)
    vocab = 32000
    if name == "gpt2-124m":  # GPT2Config's defaults are GPT-2 small
        return T.GPT2LMHeadModel(T.GPT2Config())
    if name == "opt-512x6":
        return T.OPTForCausalLM(T.OPTConfig(
            hidden_size=512, ffn_dim=2048, num_hidden_layers=6, num_attention_heads=8,
            vocab_size=vocab, word_embed_proj_dim=512))
    if name == "gpt-neox-512x6":
        return T.GPTNeoXForCausalLM(T.GPTNeoXConfig(
            hidden_size=512, intermediate_size=2048, num_hidden_layers=6,
            num_attention_heads=8, vocab_size=vocab))
    if name == "phi-512x6":
        return T.PhiForCausalLM(T.PhiConfig(
            hidden_size=512, intermediate_size=2048, num_hidden_layers=6,
            num_attention_heads=8, vocab_size=vocab))
    if name == "qwen2-512x8-gqa":
        return T.Qwen2ForCausalLM(T.Qwen2Config(
            hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
            num_attention_heads=8, num_key_value_heads=2, vocab_size=vocab))
    if name == "gemma-512x8":
        return T.GemmaForCausalLM(T.GemmaConfig(
            hidden_size=512, intermediate_size=2048, num_hidden_layers=8,
            num_attention_heads=8, num_key_value_heads=2, head_dim=64, vocab_size=vocab))
    raise ValueError(name)


def measure(model, batch: int, prompt: int, new: int, repeats: int) -> tuple[float, float]:
    """(time to first token, time per output token) of ``generate``: medians of ``repeats``."""
    import torch

    ids = torch.randint(0, model.config.vocab_size, (batch, prompt))
    mask = torch.ones_like(ids)

    def run(n: int) -> float:
        start = time.perf_counter()
        model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                       do_sample=False, pad_token_id=0)
        return time.perf_counter() - start

    firsts, pers = [], []
    with torch.no_grad():
        run(2)
        for _ in range(repeats):
            one, full = run(1), run(new)
            firsts.append(one)
            pers.append((full - one) / (new - 1))
    return statistics.median(firsts), statistics.median(pers)


def without_lines(gp):
    """``gp`` with the model's own Python lines left out (the host price before they were
    counted)."""
    prefill = dataclasses.replace(gp.prefill, num_python_lines=0)
    decode = dataclasses.replace(gp.decode, num_python_lines=0) if gp.decode else None
    return dataclasses.replace(gp, prefill=prefill, decode=decode)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cached", action="store_true",
                        help="reuse this device's cached benchmark instead of re-measuring")
    parser.add_argument("--no-summary", action="store_true",
                        help="print only; leave bench/results untouched")
    parser.add_argument("--tag", default=None, help=TAG_HELP)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import torch
    import transformers

    import aiadvisor as aa

    transformers.logging.set_verbosity_error()
    spec = aa.hardware.detect(benchmark=True, refresh=not args.cached)
    print(f"device: {spec.name} (benchmarked: {spec.measured}); torch threads "
          f"{torch.get_num_threads()}; transformers {transformers.__version__}; load average "
          f"{os.getloadavg()[0]:.2f}")
    header = (f"{'model':16} {'b':>2} {'in':>4} {'out':>4} | {'TTFT meas':>9} {'pred':>7} | "
              f"{'TPOT meas':>9} {'pred':>7} {'P10-P90':>13} {'no lines':>8} | {'tok/s meas':>10} "
              f"{'pred':>7} {'APE':>5} {'no lines':>8} | {'lines/step':>10}")
    print(header)
    print("-" * len(header))
    rows, profiles = [], {}
    for name, batch, prompt, new in CASES:
        if name not in profiles:
            model = build(name).eval()
            profiles[name] = (model, aa.profile_generation(model, prompt_len=256))
        model, gp = profiles[name]
        ttft, tpot = measure(model, batch, prompt, new, args.repeats)
        kw = dict(hardware=spec, weight_precision="fp32", prompt_len=prompt, output_len=new,
                  batch_size=batch, engine="eager")
        g = aa.predict_generation(gp, **kw)
        g0 = aa.predict_generation(without_lines(gp), **kw)
        meas_tps = batch * new / (ttft + (new - 1) * tpot)
        row = {"ape": abs(g.tokens_per_s / meas_tps - 1),
               "ape0": abs(g0.tokens_per_s / meas_tps - 1),
               "tpot_ratio": g.tpot_s / tpot, "inside": g.tpot_low_s <= tpot <= g.tpot_high_s,
               "batch": batch}
        rows.append(row)
        print(f"{name:16} {batch:>2} {prompt:>4} {new:>4} | {ttft * 1e3:7.1f}ms "
              f"{g.ttft_s * 1e3:5.1f}ms | {tpot * 1e3:7.2f}ms {g.tpot_s * 1e3:5.2f}ms "
              f"{g.tpot_low_s * 1e3:5.2f}-"
              f"{g.tpot_high_s * 1e3:5.2f}ms {g0.tpot_s * 1e3:6.2f}ms | {meas_tps:10.1f} "
              f"{g.tokens_per_s:7.1f} {row['ape']:5.0%} {row['ape0']:8.0%} | "
              f"{gp.decode.num_python_lines if gp.decode else 0:>10}", flush=True)
    apes = [r["ape"] for r in rows]
    apes0 = [r["ape0"] for r in rows]
    ratios = [r["tpot_ratio"] for r in rows]
    inside = sum(r["inside"] for r in rows)
    within = sum(a <= 0.25 for a in apes)
    print(f"tokens/s APE: median {statistics.median(apes):.0%}, max {max(apes):.0%}, within 25 % "
          f"in {within}/{len(rows)} (without the Python lines: median "
          f"{statistics.median(apes0):.0%}, max {max(apes0):.0%}); TPOT predicted/measured - 1: "
          f"mean {statistics.mean(ratios) - 1:+.0%}; measured TPOT inside P10-P90 in "
          f"{inside}/{len(rows)}. Load average after: {os.getloadavg()[0]:.2f}")
    if args.no_summary:
        return
    from _results import summary_row, tagged, write_summary

    name, regime = tagged(
        "serving_cpu_transformers",
        "transformers generate on this CPU (GPT-2 124M; held out: OPT, GPT-NeoX, Phi, Qwen2, "
        "Gemma; batch 1 and 4; FP32)", args.tag)
    anchor = "model.generate timed on the same CPU (median of runs)"
    n = len(rows)
    base = "the same without the model's own Python lines"
    out = [
        summary_row(regime=regime, metric="median tokens/s APE", value=statistics.median(apes),
                    unit="%", n=n, anchor=anchor, baseline=base,
                    baseline_value=statistics.median(apes0)),
        summary_row(regime=regime, metric="max tokens/s APE", value=max(apes), unit="%", n=n,
                    anchor=anchor, baseline=base, baseline_value=max(apes0)),
        summary_row(regime=regime, metric="signed mean TPOT error (predicted/measured - 1)",
                    value=statistics.mean(ratios) - 1, unit="+%", n=n, anchor=anchor),
        summary_row(regime=regime, metric="measured TPOT inside predicted P10-P90",
                    value=inside / n, unit="%", n=n, anchor=anchor),
    ]
    write_summary(name, out,
                  command=f"python bench/serving_cpu_transformers.py --repeats {args.repeats}"
                  + (f" --tag {args.tag}" if args.tag else ""))


if __name__ == "__main__":
    main()
