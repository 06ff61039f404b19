"""How many transformers families profile and advise on the meta device (goal: at least 95 %).

Every family of the test matrices (tests/profiler: test_families.py, test_families_more.py,
test_moe.py, test_meta_fallbacks.py), built from tiny configs on the meta device, goes through
``aa.profile`` and ``aa.advise`` in training and in inference on H100 SXM; a family passes a mode
when both return with forward FLOPs > 0 and at least one plan. Prints one line per family and
the pass fractions; ``--families`` limits the run to a comma-separated list.
Usage: ``python bench/families_meta.py [--families Bert,Mixtral]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _cases():
    import torch

    from tests.profiler import test_families as base
    from tests.profiler import test_families_more as more
    from tests.profiler import test_meta_fallbacks as fallbacks
    from tests.profiler import test_moe as moe

    for family, model_class, inputs in base.FAMILIES:
        yield family, (lambda f=family, c=model_class: base._tiny(f, c)), inputs
    for family, model_class, inputs, overrides in more.FAMILIES_MORE:
        yield family, (lambda f=family, c=model_class, o=overrides: more._build(
            c, more._config(f, o), "meta")), inputs
    ids = {"input_ids": torch.zeros(1, moe.SEQ, dtype=torch.long)}
    for name, (build, _flops) in sorted(moe.MODELS.items()):
        yield name, build, ids
    yield "Whisper", (lambda: fallbacks._on_meta(
        "WhisperConfig", "WhisperForConditionalGeneration", **fallbacks.WHISPER)[0]), {
        "input_features": torch.zeros(1, 80, 32),
        "decoder_input_ids": torch.zeros(1, 8, dtype=torch.long)}
    yield "Hubert", (lambda: fallbacks._on_meta("HubertConfig", "HubertModel",
                                                **fallbacks.SPEECH)[0]), {
        "input_values": torch.zeros(1, 400)}
    yield "Longformer", (lambda: fallbacks._on_meta(
        "LongformerConfig", "LongformerModel", hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, vocab_size=256, attention_window=8,
        max_position_embeddings=64)[0]), {"input_ids": torch.full((1, 16), 5,
                                                                  dtype=torch.long)}


def _try(build, inputs, mode):
    import aiadvisor as aa

    try:
        report = aa.advise(build(), inputs, mode=mode, hardware="H100 SXM")
    except Exception as exc:  # noqa: BLE001 - a failure is what this counts
        return False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:140]}"
    prof = report.profile
    ok = prof.flops_forward > 0 and len(report.parallel) > 0
    return ok, f"{prof.path}, {prof.flops_forward:.3g} FLOPs forward"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="")
    args = parser.parse_args()
    wanted = {f.strip() for f in args.families.split(",") if f.strip()}
    seen, passed = set(), {"train": 0, "infer": 0}
    t0 = time.perf_counter()
    for family, build, inputs in _cases():
        if family in seen or (wanted and family not in wanted):
            continue
        seen.add(family)
        line = []
        for mode in ("train", "infer"):
            ok, detail = _try(build, inputs, mode)
            passed[mode] += ok
            line.append(f"{mode} {'ok' if ok else 'FAIL'} ({detail})")
        print(f"{family:16s} " + "; ".join(line), flush=True)
    n = len(seen)
    both = f"{n} families in {time.perf_counter() - t0:.0f} s: "
    print(both + ", ".join(f"{mode} {k}/{n} = {k / n:.1%}" for mode, k in passed.items())
          + " profile and advise on meta (goal 95 %)")


if __name__ == "__main__":
    main()
