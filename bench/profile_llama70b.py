"""Llama-3-70B (meta device, train, batch 1 x 2048): aiadvisor.profile vs FlopCounterMode.

Prints, side by side in one process: wall time of our profiler vs FlopCounterMode over one
forward+backward of the same model (median of --repeats), total FLOPs of both, and the peak RSS
of a fresh process that only builds the model and profiles it.

Issue 2 floors: time ratio <= 0.25, FLOPs within 1 %, peak RSS <= 1.5 GB.
Run: .venv/bin/python bench/profile_llama70b.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def build(layers: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    # Llama-3-70B shape (Meta's published config): 80 layers, hidden 8192, MLP 28672,
    # 64 heads, 8 KV heads, vocab 128256.
    cfg = LlamaConfig(hidden_size=8192, intermediate_size=28672, num_hidden_layers=layers,
                      num_attention_heads=64, num_key_value_heads=8, vocab_size=128256,
                      max_position_embeddings=8192, rope_theta=500000.0)
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    return model, torch.randint(0, 128256, (1, 2048))


def ours(model, x):
    import aiadvisor as aa

    t = time.perf_counter()
    prof = aa.profile(model, x, mode="train")
    return time.perf_counter() - t, prof


def reference(model, x):
    from torch.utils.flop_counter import FlopCounterMode

    t = time.perf_counter()
    with FlopCounterMode(display=False) as counter:
        out = model(x.to("meta"))
        out.logits.sum().backward()
    elapsed = time.perf_counter() - t
    model.zero_grad(set_to_none=True)
    return elapsed, counter.get_total_flops()


def rss_child(layers: int) -> None:
    import resource

    model, x = build(layers)
    _, prof = ours(model, x)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_rss_bytes": peak_kib * 1024, "flops": prof.flops_per_step}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=80)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rss-child", action="store_true")
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.layers)
        return
    model, x = build(args.layers)
    ours(model, x)  # warm-up: first-call imports and dispatch caches
    ours_times, ref_times = [], []
    for _ in range(args.repeats):
        t_ours, prof = ours(model, x)
        t_ref, ref_flops = reference(model, x)
        ours_times.append(t_ours)
        ref_times.append(t_ref)
    child = subprocess.run([sys.executable, __file__, "--rss-child", "--layers", str(args.layers)],
                           capture_output=True, text=True, check=True)
    rss = json.loads(child.stdout.strip().splitlines()[-1])["peak_rss_bytes"]
    ours_flops = prof.flops_forward + prof.flops_backward
    t_o, t_r = statistics.median(ours_times), statistics.median(ref_times)
    print(f"model: Llama-3-70B shape, {args.layers} layers, meta device, train, batch 1 x 2048")
    print(f"{'':28}{'aiadvisor':>16}{'FlopCounterMode':>18}{'ratio':>10}")
    print(f"{'time (median s)':28}{t_o:16.3f}{t_r:18.3f}{t_o / t_r:10.3f}   floor <= 0.25")
    print(f"{'fwd+bwd FLOPs':28}{ours_flops:16.4e}{ref_flops:18.4e}{ours_flops / ref_flops:10.4f}"
          "   floor within 1%")
    print(f"{'peak RSS (GB, own process)':28}{rss / 1e9:16.3f}{'':18}{'':10}   floor <= 1.5 GB")
    print(f"profile path: {prof.path}; notes: {'; '.join(prof.notes)}")
    print(f"memory: weights {prof.memory.weights_bytes / 1e9:.1f} GB, activations "
          f"{prof.memory.activations_bytes / 1e9:.1f} GB, "
          f"peak {prof.memory.peak_bytes / 1e9:.1f} GB")


if __name__ == "__main__":
    main()
