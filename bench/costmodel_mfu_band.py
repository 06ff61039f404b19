"""Sanity band: large dense transformers trained in BF16 on datacenter GPUs should land at
25-65 % MFU (published: 36-54 % for Megatron-LM, PaLM, Llama 3; cost_model.md section 3.3).

Profiles GPT-2 XL (1.6B), Llama-3-8B and a Llama-2-13B-shaped decoder (built-in examples and
one extra config, meta device, SDPA attention, traced under autocast) and predicts one
training step (AdamW) on 8 devices with FSDP (ZeRO-3) on each datacenter GPU of the catalog.
Prints the predicted MFU, whether it is inside the band, and the prediction's own flag (the
notes must flag exactly the rows outside the band).

Usage: ``python bench/costmodel_mfu_band.py`` (about a minute).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GPUS = ("NVIDIA A100 80GB SXM", "NVIDIA H100 SXM", "NVIDIA H200 SXM", "NVIDIA B200",
        "AMD Instinct MI300X")


def models():
    import torch

    from aiadvisor import examples
    from aiadvisor.examples import DecoderConfig, _build_decoder

    out = []
    for name, batch, seq in (("gpt2-xl", 16, 1024), ("llama-3-8b", 8, 4096)):
        model, ids = examples.build(name, batch_size=batch, seq_len=seq, device="meta")
        out.append((name, model, ids))
    cfg = DecoderConfig(vocab_size=32000, hidden_size=5120, num_layers=40, num_heads=40,
                        intermediate_size=13824, style="llama", max_positions=4096)
    with torch.device("meta"):
        model = _build_decoder(cfg)
    out.append(("llama-2-13b shape", model, torch.randint(0, 32000, (8, 4096), device="meta")))
    return out


def main() -> int:
    import aiadvisor as aa
    from aiadvisor.costmodel import MFU_BAND, predict
    from aiadvisor.hardware import get
    from aiadvisor.schema import ParallelConfig

    lo, hi = MFU_BAND
    cfg = ParallelConfig(dp_degree=8, zero_stage=3)
    print(f"{'model':20s} {'GPU':22s} {'step s':>8s} {'MFU':>6s} {'in band':>8s} "
          f"{'flagged':>8s} {'bound':>13s} {'confidence':>10s}")
    inside = total = consistent = 0
    mfus = []
    for name, model, ids in models():
        prof = aa.profile(model, ids, mode="train", precision="bf16", optimizer="adamw",
                          scaling=False)
        for gpu in GPUS:
            pred = predict(prof, hardware=get(gpu), precision="bf16", num_devices=8,
                           parallel=cfg)
            in_band = lo <= pred.mfu <= hi
            flagged = any("MFU" in n and "outside" in n for n in pred.notes)
            inside += in_band
            mfus.append(pred.mfu)
            total += 1
            consistent += flagged != in_band
            print(f"{name:20s} {gpu:22s} {pred.step_time_s:8.3f} {pred.mfu:6.1%} "
                  f"{'yes' if in_band else 'NO':>8s} {'yes' if flagged else 'no':>8s} "
                  f"{pred.bound:>13s} {pred.confidence:>10s}")
    print(f"{inside}/{total} predictions inside the {lo:.0%}-{hi:.0%} band; the notes flag "
          f"{'every' if consistent == total else 'NOT every'} row outside it.")
    write_band_summary(mfus, inside=inside, band=(lo, hi))
    return 0


def write_band_summary(mfus: list[float], *, inside: int, band: tuple[float, float]) -> None:
    """The median predicted MFU and the share inside the sanity band, for the README."""
    import statistics

    from _results import summary_row, write_summary

    lo, hi = band
    regime = f"BF16 training, 3 dense LLMs x {len(GPUS)} datacenter GPUs, 8-way FSDP"
    anchor = "published MFU of large dense BF16 training, 36-54 % (Megatron-LM, PaLM, Llama 3)"
    write_summary("costmodel_mfu_band", [
        summary_row(regime=regime, metric="median predicted MFU",
                    value=statistics.median(mfus), unit="%", n=len(mfus), anchor=anchor),
        summary_row(regime=regime, metric=f"share of predictions inside {lo:.0%}-{hi:.0%} MFU",
                    value=inside / len(mfus), unit="%", n=len(mfus), anchor=anchor),
    ], command="python bench/costmodel_mfu_band.py")


if __name__ == "__main__":
    raise SystemExit(main())
