"""Fit the efficiency model from measured op latencies (the ``opdata`` CSVs).

Used by ``scripts/train_costmodel.py`` and the benchmarks in ``bench/``; never at prediction time.
scikit-learn and pandas are imported inside the functions that need them.

Training rows: NeuSight FP32 kernels (SIMT sgemm, cuDNN conv, elementwise/LayerNorm/softmax) on
eight NVIDIA GPUs and Vidur FP16 ops (tensor-core GEMMs, norms, activations, embedding) on A100,
H100 and A40; collectives: Vidur's NCCL all-reduce and send/recv times.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .model import (
    LOW_POWER_SUFFIX,
    LOW_POWER_TDP_W,
    MAX_LOG_SLOWDOWN,
    MODEL_FORMAT,
    MODEL_VERSION,
    Grid,
    op_features,
)


@dataclass(frozen=True)
class TrainingDevice:
    """Datasheet figures of a GPU in the training data (dense, per GPU)."""

    name: str
    fp32_tflops: float
    tensor16_tflops: float | None
    """Dense FP16 tensor-core peak (None: no tensor cores)."""
    memory_bw_gbs: float
    tdp_w: float
    source: str


#: Keys are the ``gpu`` column of the opdata CSVs.
TRAINING_DEVICES = {
    "Tesla_P4": TrainingDevice("Tesla P4", 5.5, None, 192, 75, "NVIDIA Tesla P4 datasheet"),
    "Tesla_P100-PCIE-16GB": TrainingDevice(
        "Tesla P100 PCIe 16GB", 9.3, None, 732, 250, "NVIDIA Tesla P100 datasheet (PCIe)"),
    "Tesla_T4": TrainingDevice("Tesla T4", 8.1, 65.0, 320, 70, "NVIDIA T4 datasheet"),
    "Tesla_V100-PCIE-32GB": TrainingDevice(
        "Tesla V100 PCIe 32GB", 14.0, 112.0, 900, 250, "NVIDIA V100 datasheet (PCIe)"),
    "NVIDIA_A100-PCIE-40GB": TrainingDevice(
        "A100 PCIe 40GB", 19.5, 312.0, 1555, 250, "NVIDIA A100 datasheet (PCIe 40GB)"),
    "NVIDIA_A100_80GB_PCIe": TrainingDevice(
        "A100 PCIe 80GB", 19.5, 312.0, 1935, 300, "NVIDIA A100 datasheet (PCIe 80GB)"),
    "NVIDIA_H100_80GB_HBM3": TrainingDevice(
        "H100 SXM5 80GB", 67.0, 989.4, 3350, 700, "NVIDIA H100 datasheet (SXM5)"),
    "NVIDIA_L4": TrainingDevice("L4", 30.3, 121.0, 300, 72, "NVIDIA L4 datasheet"),
    # Vidur's profiling machines (data/profiling/compute/<gpu>): A100 80GB SXM, H100 SXM, A40,
    # with the figures cost_model.md section 6 used.
    "a100": TrainingDevice("A100 SXM4 80GB", 19.5, 312.0, 2039, 400,
                           "NVIDIA A100 datasheet (SXM 80GB)"),
    "h100": TrainingDevice("H100 SXM5 80GB", 67.0, 989.4, 3352, 700,
                           "NVIDIA H100 datasheet (SXM5)"),
    "a40": TrainingDevice("A40", 37.4, 149.7, 696, 300, "NVIDIA A40 datasheet"),
}

#: Vidur collectives: nominal per-direction NVLink bandwidth of each system's GPUs, GB/s
#: (A100 NVLink3 600 GB/s total, H100 NVLink4 900 GB/s total, both directions summed).
NVLINK_PER_DIRECTION_GBS = {"a100_dgx": 300.0, "h100_dgx": 450.0}
#: DGX A100: one 200 Gb/s HDR InfiniBand NIC per GPU = 25 GB/s per direction.
INTER_NODE_NOMINAL_GBS = 25.0

GRID = Grid(f1_start=-8.5, f1_step=0.1, f1_num=91, f2_start=-5.0, f2_step=0.2, f2_num=41)

#: Efficiency may only fall as an op gets bigger for the device (f1, monotonic), which keeps
#: the curves smooth where one GPU's quirks would otherwise be learned; small trees, 100 rounds.
#: (Chosen on the leave-one-GPU-out benchmark: bench/costmodel_ops_logo.py.)
HGB_PARAMS = {"max_iter": 100, "learning_rate": 0.1, "max_leaf_nodes": 15,
              "min_samples_leaf": 100, "l2_regularization": 1.0, "monotonic_cst": [-1, 0],
              "early_stopping": False, "random_state": 0}

UNARY_OPS = {"addu", "mulu", "divu", "powu", "tanh", "relu", "gelu"}
BINARY_OPS = {"add", "mul", "div", "pow"}
#: FLOPs per element of the vector ops (only sets where they sit below the ridge; never binding).
VECTOR_FLOPS_PER_ELEMENT = {"gelu": 8, "tanh": 8, "pow": 8, "powu": 8, "ln": 5, "softmax": 5}


# -- loading ---------------------------------------------------------------------------------

def _neusight_rows(opdata: Path):
    import pandas as pd

    k = pd.read_csv(opdata / "neusight_kernels.csv")
    k = k[(k.dtype == "float32") & k.gpu.isin(TRAINING_DEVICES)].copy()
    B, M, N, K = (k[c].astype(float) for c in ("B", "M", "N", "K"))
    H = k.H.astype(float)
    flops = np.full(len(k), np.nan)
    num_bytes = np.full(len(k), np.nan)
    cls = np.full(len(k), "elementwise", dtype=object)
    bmm, lin, conv = ((k.op == "bmm").to_numpy(), (k.op == "linear").to_numpy(),
                      (k.op == "conv").to_numpy())
    # NeuSight convention: reduction dim is N; out [B, M, K] (opdata README).
    flops[bmm | lin] = (2 * B * M * N * K)[bmm | lin]
    num_bytes[bmm] = (4 * B * (M * N + N * K + M * K))[bmm]
    num_bytes[lin] = (4 * (B * M * N + N * K + K + B * M * K))[lin]
    cls[bmm | lin] = "gemm"
    cin, cout, ks = k.conv_cin.astype(float), k.conv_cout.astype(float), k.conv_kernel.astype(float)
    hw, stride, pad = (k.conv_in_hw.astype(float), k.conv_stride.astype(float),
                       k.conv_pad.astype(float))
    out_hw = np.floor((hw + 2 * pad - ks) / stride) + 1
    flops[conv] = (2 * B * cout * out_hw**2 * cin * ks**2)[conv]
    num_bytes[conv] = (4 * (B * cin * hw**2 + cout * cin * ks**2 + B * cout * out_hw**2))[conv]
    cls[conv] = "conv"
    vec = ~(bmm | lin | conv)
    cls[vec & k.op.isin(["ln", "softmax"]).to_numpy()] = "norm"
    elements = B * H
    per_elem = k.op.map(lambda o: VECTOR_FLOPS_PER_ELEMENT.get(o, 1)).astype(float)
    flops[vec] = (elements * per_elem)[vec]
    # Unary ops read and write [B, H]; binary ops read two; LayerNorm also reads weight and bias.
    operands = np.where(k.op.isin(list(BINARY_OPS)), 3.0, 2.0)
    num_bytes[vec] = (4 * elements * operands + np.where(k.op == "ln", 8 * H, 0.0))[vec]
    latency_s = k.latency_ms.to_numpy() * 1e-3
    # NeuSight timed each call with CUDA events around the Python call: every row carries a
    # per-call floor (~25-35 us) of launch and event overhead. Take 0.9 x the GPU's fastest call.
    harness_s = k.gpu.map(pd.Series(latency_s).groupby(k.gpu.to_numpy()).min()).to_numpy() * 0.9
    return pd.DataFrame({
        "source": "neusight", "gpu": k.gpu.to_numpy(), "precision": "fp32",
        "group": np.where(np.isin(cls, ["gemm", "conv"]), "simt", "any"), "op_class": cls,
        "op": k.op.to_numpy(),
        "flops": flops, "bytes": num_bytes, "latency_s": latency_s, "harness_s": harness_s,
    })


def _vidur_rows(opdata: Path):
    import pandas as pd

    v = pd.read_csv(opdata / "vidur_ops.csv")
    v = v[v.gpu.isin(TRAINING_DEVICES)].copy()
    T = v.num_tokens.astype(float)
    H = v.n_embd.astype(float)
    tp = v.num_tensor_parallel_workers.astype(float)
    inter = v.n_expanded_embd.astype(float) / tp
    head_dim = H / v.n_head
    gated = v.use_gated_mlp.astype(str).str.lower().eq("true")
    gm, gn, gk = v.gemm_m.astype(float), v.gemm_n.astype(float), v.gemm_k.astype(float)
    is_gemm = v.gemm_m.notna().to_numpy()
    flops = np.where(is_gemm, 2 * gm * gn * gk, np.nan)
    num_bytes = np.where(is_gemm, 2 * (gm * gk + gk * gn + gm * gn), np.nan)  # fp16: 2 B/element
    op = v.op.to_numpy()
    qk = T * (v.n_head + v.n_kv_head) * head_dim / tp
    mem_elems = {
        # (elements read + written, flops per step) on [T, ...] fp16 tensors
        "input_layernorm": (2 * T * H + H, 5 * T * H),
        "post_attention_layernorm": (2 * T * H + H, 5 * T * H),
        "mlp_act": (np.where(gated, 3 * T * inter, 2 * T * inter), 8 * T * inter),
        # phi-2 (no post-attention norm) adds three operands: attention, MLP and residual.
        "add": (np.where(v.model.str.contains("phi-2"), 4, 3) * T * H, T * H),
        "attn_rope": (2 * qk, 6 * qk),
        "emb": (2 * T * H / tp + 4 * T, T * H / tp),
    }
    for name, (elems, fl) in mem_elems.items():
        sel = op == name
        num_bytes[sel] = (2 * np.asarray(elems, float))[sel]
        flops[sel] = np.asarray(fl, float)[sel]
    norm = np.isin(op, ["input_layernorm", "post_attention_layernorm"])
    cls = np.select([is_gemm, op == "emb", norm], ["gemm", "embedding", "norm"], "elementwise")
    return pd.DataFrame({
        "source": "vidur", "gpu": v.gpu.to_numpy(), "precision": "fp16",
        "group": np.where(is_gemm, "tensor", "any"), "op_class": cls, "op": op,
        "flops": flops, "bytes": num_bytes, "latency_s": v.time_median_ms.to_numpy() * 1e-3,
        # Vidur reports CUDA kernel time from the profiler (1 us resolution): no harness floor.
        "harness_s": 1e-6,
    })


def load_op_rows(opdata_dir):
    """One row per measured op call: class, engine group, FLOPs, bytes, latency, roofline.

    Adds ``peak_tflops`` and ``bw_gbs`` (from :data:`TRAINING_DEVICES`), ``roofline_s`` (without
    harness), the features ``f1``, ``f2`` and the target ``y = log(t / (roofline + harness))``.
    """
    import pandas as pd

    opdata = Path(opdata_dir)
    vidur = _vidur_rows(opdata)
    # Vidur's norms, activations, rotary and residual adds are custom fused kernels (vLLM-style)
    # timed as kernel time only; on the same chips they reach 0.35-0.6 of the bandwidth where
    # PyTorch's own kernels (NeuSight, what aiadvisor's users run) reach 0.6-0.9. Pooling the
    # two made every memory-bound curve worse on held-out GPUs (bench/costmodel_ops_logo.py), so
    # memory-bound tables use NeuSight only; Vidur keeps GEMMs and the embedding gather.
    vidur = vidur[vidur.op_class.isin(["gemm", "embedding"])]
    rows = pd.concat([_neusight_rows(opdata), vidur], ignore_index=True)
    rows = rows[np.isfinite(rows.flops) & np.isfinite(rows.bytes) & (rows.latency_s > 0)]
    dev = rows.gpu.map(TRAINING_DEVICES)
    tensor = rows.group.eq("tensor").to_numpy()
    rows = rows.assign(
        peak_tflops=np.where(tensor, dev.map(lambda d: d.tensor16_tflops or np.nan),
                             dev.map(lambda d: d.fp32_tflops)),
        bw_gbs=dev.map(lambda d: d.memory_bw_gbs).astype(float),
    )
    f1, f2 = op_features(rows.flops, rows.bytes, rows.peak_tflops, rows.bw_gbs)
    roofline_s = 10.0**f1
    y = np.log(rows.latency_s / (roofline_s + rows.harness_s))
    low_power = dev.map(lambda d: d.tdp_w <= LOW_POWER_TDP_W).to_numpy(bool)
    table = rows.op_class + "/" + rows.group + np.where(low_power, LOW_POWER_SUFFIX, "")
    rows = rows.assign(roofline_s=roofline_s, f1=f1, f2=f2,
                       y=np.clip(y, 0.0, MAX_LOG_SLOWDOWN), table=table)
    return rows.reset_index(drop=True)


# -- fitting ---------------------------------------------------------------------------------

def _weights(rows) -> np.ndarray:
    # Ops that dominate step time matter more: weight ~ sqrt(roofline time), normalised.
    w = np.sqrt(rows.roofline_s.to_numpy() + rows.harness_s.to_numpy())
    return w / w.mean()


def fit_regressor(rows, *, quantile: float | None = None):
    """One HistGradientBoostingRegressor on ``(f1, f2) -> y`` (quantile loss if given)."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    params = dict(HGB_PARAMS)
    if quantile is not None:
        params.update(loss="quantile", quantile=quantile)
    reg = HistGradientBoostingRegressor(**params)
    return reg.fit(rows[["f1", "f2"]].to_numpy(), rows.y.to_numpy(), sample_weight=_weights(rows))


def tabulate(reg, grid: Grid = GRID) -> np.ndarray:
    """A fitted regressor's predictions on the grid, clipped to ``[0, log 20]``."""
    f1, f2 = np.meshgrid(grid.f1, grid.f2, indexing="ij")
    pred = reg.predict(np.column_stack([f1.ravel(), f2.ravel()])).reshape(f1.shape)
    return np.clip(pred, 0.0, MAX_LOG_SLOWDOWN)


def weighted_quantile(values, weights, q: float) -> float:
    order = np.argsort(values)
    cum = np.cumsum(np.asarray(weights, float)[order])
    return float(np.asarray(values, float)[order][np.searchsorted(cum, cum[-1] * q)])


def weighted_median(values, weights) -> float:
    return weighted_quantile(values, weights, 0.5)


#: Candidate weights of the learned curve against the class constant.
SHRINK_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)


def harness_for(train, test) -> float:
    """The timing floor to assume for ``test``'s GPU: the median floor of the training GPUs
    measured the same way (nothing measured on the held-out GPU is used)."""
    same = train[train.source == test.source.iloc[0]]
    same = same if len(same) else train
    return float(np.median(same.groupby("gpu").harness_s.first()))


def choose_shrink(rows) -> float:
    """How far to trust the learned curve over the class constant, by leave-one-GPU-out.

    For each GPU of the table, the curve is fitted on the others and the held-out GPU predicted
    as ``c + lam * (f - c)`` (``c`` the others' median slow-down); the ``lam`` in
    :data:`SHRINK_GRID` with the lowest median (over GPUs) mean APE wins. 1 with one GPU.
    """
    devices = sorted(rows.gpu.unique())
    if len(devices) < 2:
        return 1.0
    scores = {lam: [] for lam in SHRINK_GRID}
    for gpu in devices:
        train, test = rows[rows.gpu != gpu], rows[rows.gpu == gpu]
        learned = np.clip(fit_regressor(train).predict(test[["f1", "f2"]].to_numpy()), 0,
                          MAX_LOG_SLOWDOWN)
        const = weighted_median(train.y, train.roofline_s)
        roof = test.roofline_s.to_numpy() + harness_for(train, test)
        meas = test.latency_s.to_numpy()
        for lam in SHRINK_GRID:
            pred = roof * np.exp(const + lam * (learned - const))
            scores[lam].append(float(np.mean(np.abs(pred / meas - 1))))
    return min(SHRINK_GRID, key=lambda lam: (np.median(scores[lam]), -lam))


def fit_table(rows, *, quantiles: bool = True, shrink: float | None = None,
              grid: Grid = GRID) -> dict:
    """Fit one table (P50, and P10/P90 if ``quantiles``) and return its JSON-able dict.

    The shipped curve is ``c_q + lam * (f_q - c_q)`` per quantile q, ``c_q`` the class's
    weighted quantile and ``lam`` chosen by :func:`choose_shrink` unless given.
    """
    lam = choose_shrink(rows) if shrink is None else shrink
    # Weighted by roofline time (how much an op should matter), not measured time (which would
    # favour the slowest, least efficient measurements).
    weights = rows.roofline_s.to_numpy()
    centre = {q: weighted_quantile(rows.y, weights, q) for q in (0.1, 0.5, 0.9)}

    def curve(quantile):
        c = centre[0.5 if quantile is None else quantile]
        return c + lam * (tabulate(fit_regressor(rows, quantile=quantile), grid) - c)

    reg = fit_regressor(rows)
    grid_table = tabulate(reg, grid)
    trees = np.clip(reg.predict(rows[["f1", "f2"]].to_numpy()), 0.0, MAX_LOG_SLOWDOWN)
    on_grid = grid.interpolate(grid_table, rows.f1.to_numpy(), rows.f2.to_numpy())
    p50 = np.clip(centre[0.5] + lam * (grid_table - centre[0.5]), 0.0, MAX_LOG_SLOWDOWN)
    if quantiles:
        p10 = np.clip(np.minimum(curve(0.1), p50), 0.0, MAX_LOG_SLOWDOWN)
        p90 = np.clip(np.maximum(curve(0.9), p50), 0.0, MAX_LOG_SLOWDOWN)
    else:
        p10 = p90 = p50
    peaks = np.log10(rows.peak_tflops.to_numpy())
    bws = np.log10(rows.bw_gbs.to_numpy())
    return {
        "p10": np.round(p10, 3).ravel().tolist(),
        "p50": np.round(p50, 3).ravel().tolist(),
        "p90": np.round(p90, 3).ravel().tolist(),
        "median_log_slowdown": round(centre[0.5], 4),
        "shrink_lambda": lam,
        # How closely the grid follows the trees at the training rows (log units): the grid is
        # coarser than the trees' splits, so it smooths them; benchmarks evaluate the grid.
        "grid_vs_trees_p90": round(float(np.percentile(np.abs(on_grid - trees), 90)), 4),
        "peak_log10_range": [round(float(peaks.min()), 4), round(float(peaks.max()), 4)],
        "bw_log10_range": [round(float(bws.min()), 4), round(float(bws.max()), 4)],
        "devices": sorted(rows.gpu.unique().tolist()),
        "precisions": sorted(rows.precision.unique().tolist()),
        "num_rows": len(rows),
    }


def fit_tables(rows, *, quantiles: bool = True) -> dict:
    """Fit every table present in ``rows`` (keys like ``gemm/tensor``)."""
    return {key: fit_table(part, quantiles=quantiles) for key, part in rows.groupby("table")}


# -- collectives -----------------------------------------------------------------------------

def load_collective_rows(opdata_dir):
    import pandas as pd

    c = pd.read_csv(Path(opdata_dir) / "vidur_collectives.csv")
    return c[c.same_data_as.isna()].reset_index(drop=True)


def _alpha_beta(size_bytes, time_s, bus_factor):
    """Least-squares ``t = alpha + bus_factor * size / bw`` with alpha, bw >= 0."""
    x = bus_factor * np.asarray(size_bytes, float)
    a = np.column_stack([np.ones_like(x), x])
    # Relative error matters at every size: weight each row by 1 / t.
    w = 1.0 / np.asarray(time_s, float)
    alpha, inv_bw = np.linalg.lstsq(a * w[:, None], np.asarray(time_s) * w, rcond=None)[0]
    return max(float(alpha), 0.0), 1.0 / max(float(inv_bw), 1e-15) / 1e9


def fit_collectives(coll) -> dict:
    """Alpha and bus-bandwidth efficiency of NCCL collectives on the DGX systems (NVSwitch)."""
    from ..estimate.collectives import BUS_FACTOR

    fits = []
    for (system, kind, n, per_node), part in coll.groupby(
            ["gpu_system", "collective", "world_size", "devices_per_node"]):
        if system not in NVLINK_PER_DIRECTION_GBS:
            continue
        alpha, bw = _alpha_beta(part.size_bytes, part.time_ms * 1e-3, BUS_FACTOR[kind](n))
        intra = per_node >= n
        nominal = NVLINK_PER_DIRECTION_GBS[system] if intra else INTER_NODE_NOMINAL_GBS
        fits.append({"system": system, "kind": kind, "world_size": int(n),
                     "devices_per_node": int(per_node), "alpha_s": alpha, "bus_bw_gbs": bw,
                     "efficiency": bw / nominal, "intra": intra})
    intra = [f for f in fits if f["intra"] and f["kind"] == "all_reduce" and f["world_size"] >= 4]
    inter = [f for f in fits if not f["intra"] and f["kind"] == "all_reduce"]
    p2p = [f for f in fits if f["kind"] == "send_recv" and f["intra"]]
    return {
        "alpha_s": {
            "all_reduce": round(float(np.median([f["alpha_s"] for f in intra])), 8),
            "all_gather": round(float(np.median([f["alpha_s"] for f in intra])), 8),
            "reduce_scatter": round(float(np.median([f["alpha_s"] for f in intra])), 8),
            "send_recv": round(float(np.median([f["alpha_s"] for f in p2p])), 8),
        },
        "intra_node_efficiency": round(float(np.median([f["efficiency"] for f in intra])), 4),
        "inter_node_bus_bw_gbs": round(float(np.median([f["bus_bw_gbs"] for f in inter])), 3),
        "devices_per_node": 8,
        "fits": [{k: (round(v, 8) if isinstance(v, float) else v) for k, v in f.items()}
                 for f in fits],
    }


# -- the whole model -------------------------------------------------------------------------

def build_model(opdata_dir, *, provenance: dict | None = None) -> dict:
    """Fit everything from the opdata directory and return the JSON-able model dict."""
    import sklearn

    rows = load_op_rows(opdata_dir)
    tables = fit_tables(rows)
    collectives = fit_collectives(load_collective_rows(opdata_dir))
    return {
        "format": MODEL_FORMAT,
        "version": MODEL_VERSION,
        "grid": {k: getattr(GRID, k) for k in ("f1_start", "f1_step", "f1_num", "f2_start",
                                               "f2_step", "f2_num")},
        "tables": tables,
        "collectives": collectives,
        "provenance": {
            "sklearn_version": sklearn.__version__,
            "hyperparameters": HGB_PARAMS,
            "training_devices": {k: vars(d) for k, d in TRAINING_DEVICES.items()},
            "num_rows": len(rows),
            **(provenance or {}),
        },
    }


def log_ratio_summary(pred_s, meas_s, weights=None) -> dict:
    """Mean, median, P90 and time-weighted absolute percentage error."""
    ape = np.abs(np.asarray(pred_s, float) / np.asarray(meas_s, float) - 1.0)
    w = np.asarray(meas_s, float) if weights is None else np.asarray(weights, float)
    return {"n": int(ape.size), "mean": float(ape.mean()), "median": float(np.median(ape)),
            "p90": float(np.percentile(ape, 90)), "time_weighted": float((ape * w).sum() / w.sum())}


__all__ = [
    "GRID", "TRAINING_DEVICES", "build_model", "fit_collectives", "fit_regressor", "fit_table",
    "fit_tables", "load_collective_rows", "load_op_rows", "log_ratio_summary",
]
