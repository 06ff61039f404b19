"""End-to-end step time on NeuSight's measured labels, leave-one-GPU-out.

NeuSight timed five Hugging Face models (BERT-large, GPT2-large, "GPT3-XL", OPT-1.3B,
"GPT3-2.7B"; FP32, eager attention, TF32 off) on 8 NVIDIA and 3 AMD GPUs: forward + backward
(``train``, no optimizer step) or forward under ``no_grad`` (``inf``). For each GPU, the cost
model is refitted without that GPU's kernels (and without Vidur's kernels of the same chip), the
models are profiled with ``aiadvisor.profile`` on the meta device (built from transformers
configs, as NeuSight's ``neusight/Tracing/trace.py`` builds them: BertForPreTraining /
BertForSequenceClassification, GPT2/OPT causal LMs, loss = cross-entropy on the logits) and the
step is predicted. Side by side, per held-out GPU: mean/median/P90 APE of

* ``roofline``: every op at ``max(F/P, B/W) + launch`` (efficiency 1),
* ``roof x c``: every op slowed by its class's time-weighted median (no size dependence),
* ``learned``: what aiadvisor predicts.

Multi-GPU rows (4x A100 SXM / H100 with DP, TP, PP) are predicted with the matching
ParallelConfig. Then the share of measured steps inside the learned prediction's P10-P90, and
the calibration of ``aiadvisor.costmodel.predict.STEP_SPREAD`` on these rows: the smallest
spread (0.01 grid) that puts 80 % of the NVIDIA rows inside, checked by choosing it on the
other GPUs' rows for each GPU in turn (2026-12-06: 53 % inside without it, 0.14, 75 % left
out; 80 % with it). Usage: ``python bench/costmodel_e2e_logo.py [OPDATA_DIR]``; profiles are cached
in ``$TMPDIR/aiadvisor-bench`` under a digest of the profiler's source (a few minutes the first
time on 2 cores, and again after the profiler changes).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aiadvisor.costmodel import predict
from aiadvisor.costmodel.model import MODEL_FORMAT, MODEL_VERSION, EfficiencyModel
from aiadvisor.costmodel.training import (
    GRID,
    TRAINING_DEVICES,
    fit_collectives,
    fit_tables,
    load_collective_rows,
    load_op_rows,
)
from aiadvisor.schema import (
    DropoutGroup,
    HardwareSpec,
    MemoryBreakdown,
    ModelProfile,
    OpRecord,
    ParallelConfig,
    SDPAGroup,
)

MODELS = ("bert_large", "gpt2_large", "gpt3_xl", "opt_13", "gpt3_27")
CATALOG_NAMES = {
    "NVIDIA_A100-PCIE-40GB": "NVIDIA A100 40GB PCIe",
    "NVIDIA_A100_80GB_PCIe": "NVIDIA A100 80GB PCIe",
    "NVIDIA_A100-SXM4-40GB": "NVIDIA A100 40GB SXM", "NVIDIA_H100_80GB_HBM3": "NVIDIA H100 SXM",
    "NVIDIA_L4": "NVIDIA L4", "Tesla_T4": "NVIDIA T4",
    "Tesla_V100-PCIE-32GB": "NVIDIA V100 PCIe 32GB",
    "AMD_Instinct_MI210": "AMD Instinct MI210",
}
#: Same chip in Vidur's data: held out together with the NeuSight GPU.
SAME_CHIP = {"NVIDIA_A100-PCIE-40GB": "a100", "NVIDIA_A100_80GB_PCIe": "a100",
             "NVIDIA_A100-SXM4-40GB": "a100", "NVIDIA_H100_80GB_HBM3": "h100"}


def hardware_spec(gpu: str, devices) -> HardwareSpec:
    """Catalog row of a NeuSight GPU; P100/P4/MI100/MI250 are not in the catalog: their
    datasheet figures (P100, P4) or NeuSight's device table (AMD, FP32 = MFMA peak, the MI250
    being one GCD = an MI210) are used."""
    from aiadvisor.hardware import get

    if gpu in CATALOG_NAMES:
        return get(CATALOG_NAMES[gpu])
    if gpu in TRAINING_DEVICES:
        d = TRAINING_DEVICES[gpu]
        return HardwareSpec(name=d.name, vendor="NVIDIA", kind="gpu", fp32_tflops=d.fp32_tflops,
                            memory_bw_gbs=d.memory_bw_gbs, source=d.source)
    row = devices.loc[gpu]
    return HardwareSpec(name=gpu, vendor="AMD", kind="gpu", memory_bw_gbs=float(row.mem_bw_gbs),
                        fp32_tflops=float(row.fp32_matrix_gflops) / 1e3,
                        source="NeuSight device config")


# -- profiles ----------------------------------------------------------------------------------

def build_model(name: str, e2e_row, train: bool):
    import torch
    from transformers import (
        AutoModelForCausalLM,
        BertConfig,
        BertForPreTraining,
        BertForSequenceClassification,
        GPT2Config,
        OPTConfig,
    )

    h, heads, layers = int(e2e_row.hidden_size), int(e2e_row.num_heads), int(e2e_row.num_layer)
    with torch.device("meta"):
        if name == "bert_large":
            cfg = BertConfig(hidden_size=h, num_attention_heads=heads, num_hidden_layers=layers,
                             intermediate_size=4 * h, vocab_size=int(e2e_row.vocab_size))
            cls = BertForPreTraining if train else BertForSequenceClassification
            model = cls._from_config(cfg, attn_implementation="eager")
        elif name == "opt_13":
            cfg = OPTConfig(hidden_size=h, num_attention_heads=heads, num_hidden_layers=layers,
                            ffn_dim=4 * h, vocab_size=int(e2e_row.vocab_size),
                            max_position_embeddings=2048)
            model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
        else:
            cfg = GPT2Config(n_embd=h, n_head=heads, n_layer=layers, n_positions=2048,
                             vocab_size=int(e2e_row.vocab_size))
            model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    return model.train() if train else model.eval()


def _from_json(d: dict) -> ModelProfile:
    d = dict(d)
    d["memory"] = MemoryBreakdown(**d["memory"])
    d["ops"] = tuple(OpRecord(**o) for o in d["ops"])
    d["sdpa"] = tuple(SDPAGroup(**g) for g in d.get("sdpa", ()))
    d["dropout"] = tuple(DropoutGroup(**{**g, "ops": tuple(tuple(o) for o in g["ops"])})
                         for g in d.get("dropout", ()))
    d["modules"] = ()
    d["notes"] = tuple(d.get("notes", ()))
    fields = {f.name for f in dataclasses.fields(ModelProfile)}
    return ModelProfile(**{k: v for k, v in d.items() if k in fields})


def _profiler_digest() -> str:
    """A digest of the profiler's and the schema's source: a cached profile is reused only by
    the profiler that wrote it."""
    import hashlib

    import aiadvisor

    root = Path(aiadvisor.__file__).parent
    h = hashlib.sha1()
    for path in sorted([*(root / "profiler").glob("*.py"), root / "schema.py"]):
        h.update(path.read_bytes())
    return h.hexdigest()[:10]


def get_profile(name: str, e2e_row, train: bool, cache: Path) -> ModelProfile:
    base = f"{name}-{'train' if train else 'inf'}-{int(e2e_row.seq_len)}-{int(e2e_row.batch_size)}"
    key = f"{base}-{_profiler_digest()}"
    path = cache / f"{key}.json"
    if path.exists():
        return _from_json(json.loads(path.read_text()))
    import torch

    import aiadvisor as aa

    model = build_model(name, e2e_row, train)
    ids = torch.ones(int(e2e_row.batch_size), int(e2e_row.seq_len), dtype=torch.long,
                     device="meta")
    # Causal LMs: labels = input_ids gives the model's own cross-entropy over the vocabulary,
    # as NeuSight's measure_e2e computes it; BERT pretraining: the sum of the outputs.
    inputs = {"input_ids": ids, "labels": ids} if (train and name != "bert_large") else ids
    prof = aa.profile(model, inputs, mode="train" if train else "infer", optimizer="none",
                      scaling=False, model_name=base)
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(prof.to_dict()))
    return prof


# -- models ----------------------------------------------------------------------------------

def fitted_model(rows, coll, exclude: set[str]) -> dict:
    # Only the P50 curves matter for the errors printed here (the intervals are not scored);
    # FP32 runs never use the tensor-core table: it is kept as shipped-shape filler.
    train = rows[~rows.gpu.isin(exclude) & (rows.table != "gemm/tensor")]
    tables = fit_tables(train, quantiles=False)
    tables["gemm/tensor"] = tables["gemm/simt"]
    return {"format": MODEL_FORMAT, "version": MODEL_VERSION,
            "grid": {k: getattr(GRID, k) for k in ("f1_start", "f1_step", "f1_num", "f2_start",
                                                   "f2_step", "f2_num")},
            "tables": tables, "collectives": coll}


def constant_variant(data: dict, *, use_median: bool) -> EfficiencyModel:
    """Baselines: every table flat at 0 (plain roofline) or at its class median."""
    out = json.loads(json.dumps(data))
    for t in out["tables"].values():
        value = t["median_log_slowdown"] if use_median else 0.0
        for q in ("p10", "p50", "p90"):
            t[q] = [value] * len(t[q])
        t["peak_log10_range"], t["bw_log10_range"] = [-9, 9], [-9, 9]
    return EfficiencyModel.from_dict(out)


def parallel_config(row) -> ParallelConfig:
    if row.parallel == "dp4":
        return ParallelConfig(dp_degree=4)
    if row.parallel == "tp4":
        return ParallelConfig(tp_degree=4)
    if row.parallel == "pp4_1":
        return ParallelConfig(pp_degree=4, num_microbatches=1)
    return ParallelConfig()


def summarize(label: str, preds: dict[str, list[float]], meas: list[float]) -> str:
    cells = []
    for p in preds.values():
        ape = np.abs(np.asarray(p) / np.asarray(meas) - 1)
        cells.append(f"{ape.mean():6.1%} {np.median(ape):6.1%} {np.percentile(ape, 90):6.1%}")
    return f"{label:28s} {len(meas):3d}   " + "   ".join(cells)


def summary_rows(label: str, preds: dict[str, list[float]], meas: list[float]) -> list[dict]:
    """Median and P90 APE of the learned model next to the roofline scaled by each op class's
    median slow-down (the stronger of the two baselines), for the README."""
    from _results import summary_row

    rows = []
    for metric, stat in (("median APE", np.median), ("P90 APE", lambda a: np.percentile(a, 90))):
        ape = {m: np.abs(np.asarray(preds[m]) / np.asarray(meas) - 1) for m in preds}
        rows.append(summary_row(
            regime=f"end-to-end FP32 step on a held-out GPU, {label}", metric=metric,
            value=float(stat(ape["learned"])), unit="%", n=len(meas),
            anchor="NeuSight's measured step times (5 Hugging Face models, train and inference)",
            baseline="roofline x class median", baseline_value=float(stat(ape["roof x c"]))))
    return rows


def _inside(bands, spread: float) -> list[bool]:
    """Whether each measured step is inside its band widened by ``spread`` (log units) in
    quadrature, the band first taken back to what it was before the shipped
    :data:`~aiadvisor.costmodel.predict.STEP_SPREAD` widened it."""
    from aiadvisor.costmodel.predict import STEP_SPREAD

    out = []
    for _, meas, pred, low, high in bands:
        down = np.sqrt(max(np.log(pred / low) ** 2 - STEP_SPREAD ** 2, 0.0))
        up = np.sqrt(max(np.log(high / pred) ** 2 - STEP_SPREAD ** 2, 0.0))
        out.append(pred * np.exp(-np.hypot(down, spread)) <= meas
                   <= pred * np.exp(np.hypot(up, spread)))
    return out


def _calibrated(bands, target: float = 0.8) -> float:
    """The smallest spread on a 0.01 grid that puts ``target`` of ``bands`` inside."""
    for k in range(301):
        if statistics.fmean(_inside(bands, k / 100)) >= target:
            return k / 100
    return 3.0


def print_band_calibration(bands) -> None:
    """Coverage of the learned model's P10-P90 band as shipped, the step spread that would
    make it 80 % on the NVIDIA rows (:data:`~aiadvisor.costmodel.predict.STEP_SPREAD`), and
    that choice checked leaving each GPU out of it."""
    from aiadvisor.costmodel.predict import STEP_SPREAD

    nvidia = [b for b in bands if b[0].startswith(("NVIDIA", "Tesla"))]
    shipped = statistics.fmean(_inside(nvidia, STEP_SPREAD))
    spread = _calibrated(nvidia)
    held = []
    for gpu in sorted({b[0] for b in nvidia}):
        rest = [b for b in nvidia if b[0] != gpu]
        held += _inside([b for b in nvidia if b[0] == gpu], _calibrated(rest))
    print(f"measured inside the learned model's P10-P90 (NVIDIA rows): {shipped:.0%} with "
          f"STEP_SPREAD = {STEP_SPREAD:g} as shipped ({statistics.fmean(_inside(nvidia, 0.0)):.0%}"
          f" without it); the smallest spread putting 80 % inside: {spread:.2f}; chosen on the "
          f"other GPUs' rows, it puts {statistics.fmean(held):.0%} of each left-out GPU's rows "
          f"inside; all rows (AMD too) at the shipped spread: "
          f"{statistics.fmean(_inside(bands, STEP_SPREAD)):.0%}.")


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("opdata", nargs="?",
                        default=str(REPO.parent / "shared" / "data" / "opdata"))
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "aiadvisor-bench"))
    args = parser.parse_args(argv)
    opdata = Path(args.opdata)
    e2e = pd.read_csv(opdata / "neusight_e2e.csv")
    e2e = e2e[e2e.model.isin(MODELS) & ~e2e.compiled].reset_index(drop=True)
    devices = pd.read_csv(opdata / "neusight_devices.csv").set_index("gpu")
    rows = load_op_rows(opdata)
    coll = fit_collectives(load_collective_rows(opdata))
    cache = Path(args.cache)

    methods = ("roofline", "roof x c", "learned")
    print(f"{'held-out GPU':28s} {'n':>3s}   " + "   ".join(f"{m + ' mean/med/p90':>20s}"
                                                          for m in methods))
    all_preds = {m: [] for m in methods}
    all_meas: list[float] = []
    nvidia_preds = {m: [] for m in methods}
    nvidia_meas: list[float] = []
    details = []
    bands: list[tuple[str, float, float, float, float]] = []
    for gpu, part in e2e.groupby("gpu", sort=True):
        exclude = {gpu} | ({SAME_CHIP[gpu]} if gpu in SAME_CHIP else set())
        data = fitted_model(rows, coll, exclude)
        models = {"roofline": constant_variant(data, use_median=False),
                  "roof x c": constant_variant(data, use_median=True),
                  "learned": EfficiencyModel.from_dict(data)}
        spec = hardware_spec(gpu, devices)
        preds = {m: [] for m in methods}
        meas = []
        for row in part.itertuples():
            prof = get_profile(row.model, row, row.mode == "train", cache)
            par = parallel_config(row)
            for m in methods:
                p = predict(prof, hardware=spec, precision="fp32", num_devices=par.num_devices,
                            parallel=par, model=models[m])
                preds[m].append(p.step_time_s)
                if m == "learned":
                    bands.append((gpu, row.e2e_ms / 1e3, p.step_time_s, p.low_s, p.high_s))
            meas.append(row.e2e_ms / 1e3)
            details.append((gpu, row.model, row.mode, row.batch_size, row.parallel,
                            row.e2e_ms, preds["learned"][-1] * 1e3))
        print(summarize(gpu, preds, meas))
        for m in methods:
            all_preds[m] += preds[m]
            if gpu.startswith(("NVIDIA", "Tesla")):
                nvidia_preds[m] += preds[m]
        all_meas += meas
        if gpu.startswith(("NVIDIA", "Tesla")):
            nvidia_meas += meas
    print(summarize("ALL NVIDIA rows", nvidia_preds, nvidia_meas))
    print(summarize("ALL rows (incl. AMD)", all_preds, all_meas))
    print_band_calibration(bands)
    from _results import write_summary

    num_nvidia = sum(g.startswith(("NVIDIA", "Tesla")) for g in e2e.gpu.unique())

    write_summary("costmodel_e2e_logo",
                  summary_rows(f"{num_nvidia} NVIDIA GPUs", nvidia_preds, nvidia_meas)
                  + summary_rows(f"{e2e.gpu.nunique()} NVIDIA and AMD GPUs", all_preds,
                                 all_meas),
                  command="python bench/costmodel_e2e_logo.py OPDATA_DIR")
    print("\nper row (learned): gpu, model, mode, batch, parallel, measured ms, predicted ms")
    for d in details:
        gpu, model, mode, batch, par, meas_ms, pred_ms = d
        print(f"  {gpu:24s} {model:10s} {mode:5s} {batch:3d} {par:6s} "
              f"{meas_ms:9.1f} {pred_ms:9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
