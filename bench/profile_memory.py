"""Predicted vs measured training peak memory (fp32, AdamW, steady state) on this CPU.

Measured: a plain user-style loop on a deep copy of the model (copy, AdamW, two steps of forward,
loss, backward, step, zero_grad) with PyTorch's profiler recording every CPU allocation; the peak
is the high-water mark of the running sum of allocation sizes (weights of the copy included), which
the second step sets, when AdamW's state is resident. Predicted:
aiadvisor.profile(model, x).memory.peak_bytes, from fake tensors (nothing allocated).
Issue 2 floor: within 10 % for a BERT-style encoder, a GPT-style decoder, a ResNet and an MLP.
Run: .venv/bin/python bench/profile_memory.py [--sizes medium]

``--rss``: memory as the process shows it (issue 12). Each case runs in a fresh subprocess: build
the model (ResNet-50, GPT-2 small, BERT-base, ViT-Base/16 from transformers configs with random
weights; the MLPs and the LSTM tagger of tests/profiler/models.py), ``aa.profile`` it
(``memory.process_bytes``, the predicted resident set), then reset the peak resident set
(``/proc/self/clear_refs`` 5, Linux) and run two user-style steps (training: forward, backward,
optimizer step, zero_grad; inference: forward under no_grad); measured = ``VmHWM`` after them,
the median over :data:`RSS_RUNS` fresh processes (the spread is printed).
Goal: within 10 % in every case, no sign bias. The 8 ``RSS_CASES`` are the ones the model was
developed against; the 4 ``HOLDOUT_CASES`` (LSTM, ViT, a 4096-wide MLP trained with SGD) were
added after it and not tuned on. Writes ``bench/results/profile_memory_rss.json``
(``--tag TAG``: ``profile_memory_rss_TAG.json``, for a machine other than the development one).
The "model heap" column is the same prediction with the heap replayed through the model of
glibc's policy (``GlibcHeap``) instead of this machine's glibc (``aiadvisor.profiler.
heap_replay``, what the profile uses on Linux): both against the same measured figure.
Last run (2026-12-06 18:40 UTC, 2-core shared development machine, torch 2.13): tuned-on
errors +3.3, -9.8 (ResNet-50 infer, train), -6.7, -8.6 (GPT-2), -1.5, -7.9 (BERT-base), -1.2,
-2.8 % (MLP): mean |error| 5.2 % (policy model's heap: 6.1 %), signed mean -4.4 %, 8/8 within
10 % (7/8); held out +8.2 (LSTM train), -4.1, -4.5 (ViT infer, train), -1.3 % (MLP, SGD): mean
4.5 % (5.3 %), signed -0.4 %, 4/4 within 10 % (4/4). Without the heap replay, the library
probe and the first-step pages (the resident set before profiling plus the step's tensors):
mean 10.0 % and 6.4 %. The measured side moves by up to ~12 % between fresh processes
(ResNet-50 inference: 623-696 MiB in six) and by several per cent between runs (ResNet-50 training:
1609, 1641 and 1688 MiB today; it read -11.5 % in the run before this one).
On the 2-core Intel Xeon VM (``--tag xeon``, 2026-12-07, not tuned on): tuned-on cases -1.4,
-7.2 (ResNet-50), -6.7, -7.1 (GPT-2), -1.1, -8.8 (BERT-base), -1.1, -2.9 % (MLP), 8/8 within 10 %
and inside P10-P90; held out +8.3 (LSTM train), -2.2, -6.1 (ViT), -1.2 % (MLP, SGD), 4/4 within
10 %, 3/4 inside. Training resident sets read low there too (-6 to -9 %), as on every CPU.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiadvisor as aa
from aiadvisor.profiler.measure import cpu_peak_bytes
from tests.profiler import models

SIZES = {
    "small": {},
    "medium": {"bert": {"layers": 4, "hidden": 256, "batch": 8, "seq": 128},
               "gpt2": {"layers": 4, "hidden": 256, "batch": 8, "seq": 128},
               "llama": {"layers": 4, "hidden": 256, "batch": 4, "seq": 128},
               "vit": {"layers": 4, "hidden": 256, "batch": 8, "image": 64},
               "resnet": {"batch": 16, "image": 96}, "mlp": {"batch": 256},
               "t5": {"layers": 3, "hidden": 256, "batch": 4, "seq": 64},
               "lstm": {"batch": 16, "seq": 64}},
}


def first_float(out):
    if isinstance(out, torch.Tensor):
        return out
    logits = getattr(out, "logits", None)
    return logits if logits is not None else out[0]


def measured_peak(model, x) -> int:
    def step():
        m = copy.deepcopy(model)
        m.train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        for _ in range(2):  # the peak of a loop is step 2's: AdamW state is resident
            out = m(**x) if isinstance(x, dict) else m(x)
            first_float(out).sum().backward()
            opt.step()
            opt.zero_grad()

    peak, _ = cpu_peak_bytes(step)
    return peak


def measured_peak_cuda(model, x) -> int:
    """On a GPU: torch.cuda.max_memory_allocated over the same user-style step."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    m = copy.deepcopy(model).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    for _ in range(2):
        out = m(**x) if isinstance(x, dict) else m(x)
        first_float(out).sum().backward()
        opt.step()
        opt.zero_grad()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del m, opt, out
    return peak


RSS_CASES = [("resnet50", "infer"), ("resnet50", "train"), ("gpt2", "infer"),
             ("gpt2", "train"), ("bert", "infer"), ("bert", "train"), ("mlp", "infer"),
             ("mlp", "train")]
#: Held out (issue 12): families the process model was not tuned on, reported separately. The
#: large MLP trains with SGD with momentum (one state tensor per parameter), the others AdamW.
HOLDOUT_CASES = [("lstm", "train"), ("vit", "infer"), ("vit", "train"), ("mlp_big", "train")]
OPTIMIZER = {"mlp_big": "sgd_momentum"}


def _rss_model(case: str):
    from transformers import (
        BertConfig,
        BertForMaskedLM,
        GPT2Config,
        GPT2LMHeadModel,
        ResNetConfig,
        ResNetForImageClassification,
    )

    torch.manual_seed(0)
    if case == "resnet50":  # ResNetConfig's defaults are ResNet-50 (bottleneck, 3-4-6-3)
        return ResNetForImageClassification(ResNetConfig()), torch.randn(8, 3, 224, 224)
    if case == "gpt2":
        return GPT2LMHeadModel(GPT2Config()), torch.randint(0, 50257, (2, 256))
    if case == "bert":
        return BertForMaskedLM(BertConfig()), torch.randint(0, 30522, (4, 128))
    if case == "vit":  # ViTConfig's defaults are ViT-Base/16 at 224 x 224
        from transformers import ViTConfig, ViTForImageClassification

        return ViTForImageClassification(ViTConfig()), torch.randn(4, 3, 224, 224)
    if case == "lstm":  # a 2-layer LSTM tagger, 512 wide, on 32 sequences of 128 tokens
        return (models.LSTMTagger(vocab=10000, emb=256, hidden=512, layers=2),
                torch.randint(0, 10000, (32, 128)))
    if case == "mlp_big":  # 4096-wide MLP (about 38 M parameters)
        return models.MLP(sizes=(1024, 4096, 4096, 4096, 1000)), torch.randn(256, 1024)
    return models.mlp(batch=512)


def _vm_hwm(field: str = "VmHWM") -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _vm_rss() -> int:
    return _vm_hwm("VmRSS")


def rss_child(case: str, mode: str) -> None:
    """One case in this (fresh) process; prints one JSON line."""
    import gc
    import json

    from aiadvisor.estimate import process_memory as pm
    from aiadvisor.profiler import process

    model, x = _rss_model(case)
    optimizer = OPTIMIZER.get(case, "adamw")
    # Side by side: the heap replayed through the model of glibc's policy as well, for the
    # same step (the profile uses this machine's glibc where it can: ``heap_replay``).
    heap = {}
    shipped = process._heap_peak

    def both(events, device, state, temporaries):
        heap["model"] = pm.replay_steps(events, persistent_after_first=state,
                                        update_temporaries=temporaries)
        found = shipped(events, device, state, temporaries)
        heap["shipped"] = found
        return found

    process._heap_peak = both
    gc.collect()
    rss_before = _vm_rss()
    prof = aa.profile(model, x, mode=mode, optimizer=optimizer, scaling=False)
    process._heap_peak = shipped
    m = prof.memory
    transient = max(0, m.peak_bytes - m.weights_bytes - m.inputs_bytes)
    model_peak, live = heap["model"]
    shipped_peak, shipped_live, how = heap["shipped"]
    with_model = m.process_bytes + transient * (model_peak / live - shipped_peak / shipped_live)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := the current resident set
    if mode == "train":
        opt = (torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
               if optimizer == "sgd_momentum" else torch.optim.AdamW(model.parameters(), lr=1e-3))
        for _ in range(2):
            first_float(model(x)).sum().backward()
            opt.step()
            opt.zero_grad()
    else:
        with torch.no_grad():
            for _ in range(2):
                first_float(model(x))
    print(json.dumps({"predicted": prof.memory.process_bytes, "measured": _vm_hwm(),
                      "with_model": int(with_model), "heap_replay": how,
                      "peak": prof.memory.peak_bytes, "low": prof.memory.process_low_bytes,
                      "high": prof.memory.process_high_bytes,
                      # No replay: the resident set before profiling + the step's new
                      # tensors, nothing retained, no library pages.
                      "no_replay": rss_before + prof.memory.peak_bytes
                      - prof.memory.weights_bytes - prof.memory.inputs_bytes}))


#: Fresh processes per case: the measured peak moves by up to ~10 % between runs of the same
#: case (ResNet-50 inference on the 2026-12-06 CPU: 654, 724 and 703 MB), so the median of
#: three is compared.
RSS_RUNS = 3


def _rss_row(case: str, mode: str) -> dict:
    import json
    import statistics
    import subprocess

    runs = []
    for _ in range(RSS_RUNS):
        out = subprocess.run([sys.executable, __file__, "--rss-child", case, mode],
                             capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    r = dict(runs[0])
    r["measured"] = statistics.median(x["measured"] for x in runs)
    r["predicted"] = statistics.median(x["predicted"] for x in runs)
    r["with_model"] = statistics.median(x["with_model"] for x in runs)
    r["model_error"] = r["with_model"] / r["measured"] - 1
    r["runs"] = [x["measured"] for x in runs]
    r["error"] = r["predicted"] / r["measured"] - 1
    r["naive_error"] = r["no_replay"] / r["measured"] - 1
    r["inside"] = r["low"] <= r["measured"] <= r["high"]
    band = f"{r['predicted'] / 2**20:.0f} ({r['low'] / 2**20:.0f}-{r['high'] / 2**20:.0f})"
    spread = (max(r["runs"]) - min(r["runs"])) / r["measured"]
    print(f"{case:10}{mode:7}{r['peak'] / 2**20:15.1f}{band:>26}"
          f"{r['measured'] / 2**20:14.1f}{r['error']:+9.1%}{r['model_error']:+12.1%}"
          f"{r['naive_error']:+10.1%}{spread:8.0%}  ({r['heap_replay']})", flush=True)
    return r


def _rss_stats(rows: list[dict], label: str) -> dict:
    errors = [r["error"] for r in rows]
    ape = sorted(abs(e) for e in errors)
    stats = {"mean": sum(ape) / len(ape), "max": ape[-1], "signed": sum(errors) / len(errors),
             "within": sum(a <= 0.10 for a in ape), "inside": sum(r["inside"] for r in rows),
             "naive": sum(abs(r["naive_error"]) for r in rows) / len(rows), "n": len(rows),
             "model": sum(abs(r["model_error"]) for r in rows) / len(rows),
             "model_within": sum(abs(r["model_error"]) <= 0.10 for r in rows)}
    print(f"{label}: mean |error| {stats['mean']:.1%}, median {ape[len(ape) // 2]:.1%}, max "
          f"{stats['max']:.1%}, signed mean {stats['signed']:+.1%}; within 10 % in "
          f"{stats['within']}/{len(ape)} (goal: all); measured inside P10-P90 in "
          f"{stats['inside']}/{len(ape)}; with the policy model's heap instead: mean |error| "
          f"{stats['model']:.1%}, within 10 % in {stats['model_within']}/{len(ape)}; 'no "
          f"replay' mean |error| {stats['naive']:.1%}.")
    return stats


def rss_main(tag: str | None = None) -> None:
    print(f"{'model':10}{'mode':7}{'allocator MiB':>15}{'predicted RSS (P10-P90)':>26}"
          f"{'measured RSS':>14}{'error':>9}{'model heap':>12}{'no replay':>10}{'spread':>8}")
    tuned = [_rss_row(case, mode) for case, mode in RSS_CASES]
    print("held out (not tuned on):")
    held = [_rss_row(case, mode) for case, mode in HOLDOUT_CASES]
    stats = {"tuned on": _rss_stats(tuned, "RSS, the 8 cases tuned on"),
             "held out": _rss_stats(held, "RSS, held out")}
    print("'no replay': the resident set at profile time plus the step's tensors, no heap "
          "retention, no library probe and no first-step pages.")
    from _results import summary_row, tagged, write_summary

    anchor = "peak resident set (VmHWM) of two user-style steps in a fresh process, this CPU"
    rows = []
    for which, st in stats.items():
        regime = tagged("", f"CPU peak resident set (RSS), {which} ({st['n']} cases)", tag)[1]
        rows += [
            summary_row(regime=regime, metric="mean |error| of memory.process_bytes",
                        value=st["mean"], unit="%", n=st["n"], anchor=anchor,
                        baseline="resident set at profile time + the step's tensors",
                        baseline_value=st["naive"]),
            summary_row(regime=regime, metric="max |error|", value=st["max"], unit="%",
                        n=st["n"], anchor=anchor),
            summary_row(regime=regime, metric="signed mean error", value=st["signed"],
                        unit="+%", n=st["n"], anchor=anchor),
            summary_row(regime=regime, metric="cases within 10 % (goal: all)",
                        value=st["within"] / st["n"], unit="%", n=st["n"], anchor=anchor),
        ]
    write_summary(tagged("profile_memory_rss", "", tag)[0], rows,
                  command="python bench/profile_memory.py --rss"
                  + (f" --tag {tag}" if tag else ""))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--rss-child":
        rss_child(sys.argv[2], sys.argv[3])
        return
    if "--rss" in sys.argv[1:]:
        from _results import TAG_HELP

        rss = argparse.ArgumentParser()
        rss.add_argument("--rss", action="store_true")
        rss.add_argument("--tag", default=None, help=TAG_HELP)
        rss_main(tag=rss.parse_args().tag)
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="medium", choices=sorted(SIZES))
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="cuda: compare with torch.cuda.max_memory_allocated")
    args = parser.parse_args()
    print(f"device: {args.device}")
    print(f"{'model':8}{'predicted MiB':>15}{'measured MiB':>15}{'error':>9}")
    errors = []
    for name, build in models.FAMILIES.items():
        model, x = build(**SIZES[args.sizes].get(name, {}))
        if args.device == "cuda":
            from torch.utils._pytree import tree_map

            model = model.cuda()
            x = tree_map(lambda t: t.cuda() if isinstance(t, torch.Tensor) else t, x)
            measured = measured_peak_cuda(model, x)
        else:
            measured = measured_peak(model, x)
        predicted = aa.profile(model, x, mode="train", optimizer="adamw").memory.peak_bytes
        err = predicted / measured - 1
        errors.append(abs(err))
        print(f"{name:8}{predicted / 2**20:15.2f}{measured / 2**20:15.2f}{err:+9.1%}")
    errors.sort()
    print(f"median |error| {errors[len(errors) // 2]:.1%}, max {errors[-1]:.1%} (floor: 10%)")


if __name__ == "__main__":
    main()
