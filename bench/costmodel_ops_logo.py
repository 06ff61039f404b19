"""Leave-one-GPU-out accuracy of the op-level cost model on the opdata measurements.

For each table (``gemm/tensor``: Vidur FP16 tensor-core GEMMs on A100/H100/A40; ``gemm/simt``:
NeuSight FP32 sgemm on 8 GPUs; ``conv/simt``; ``elementwise/any``; ``norm/any``: LayerNorm,
softmax, RMSNorm) and each GPU in it, the table is
refitted on the other GPUs with the shipping code path (scikit-learn fit, tabulated on the grid,
read back by the shipped interpolator) and evaluated on the held-out GPU. Printed side by side,
per held-out device: mean, median and P90 absolute percentage error and the time-weighted APE
(weights = measured time) of

* ``roofline``: ``max(F/P, B/W) + launch``, the launch being the timing harness's floor,
* ``roof x c``: the roofline times the training GPUs' median slow-down (weighted by roofline
  time, the constant aiadvisor shrinks toward),
* ``learned``: the roofline times the learned efficiency, i.e. what aiadvisor predicts.

The held-out GPU's harness floor is the median floor of the training GPUs measured with the same
harness (NeuSight: CUDA events around each call; Vidur: kernel time), so nothing measured on it
is used. Usage: ``python bench/costmodel_ops_logo.py [OPDATA_DIR] [--tables gemm/tensor,...]``
(about two minutes on one core).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aiadvisor.costmodel.model import EfficiencyTable
from aiadvisor.costmodel.training import (
    GRID,
    fit_table,
    harness_for,
    load_op_rows,
    log_ratio_summary,
    weighted_median,
)

DEFAULT_TABLES = "gemm/tensor,gemm/simt,conv/simt,elementwise/any,norm/any"


def logo_table(rows, family: str, *, power_split: bool = True) -> list[dict]:
    """One result row per held-out GPU of a table family (``gemm/simt`` also covers
    ``gemm/simt@lowpower``: a held-out power-limited board is predicted from the other
    power-limited boards, as aiadvisor does; ``power_split=False`` pools them all)."""
    part = rows[rows.table.str.split("@").str[0] == family]
    out = []
    for gpu in sorted(part.gpu.unique()):
        test = part[part.gpu == gpu]
        key = test.table.iloc[0]
        train = part[(part.gpu != gpu) & ((part.table == key) | (not power_split))]
        if train.empty:
            continue
        # fit_table picks its shrink weight by an inner leave-one-GPU-out over the training GPUs.
        table = EfficiencyTable.from_dict(key, GRID, fit_table(train, quantiles=False))
        roof_s = test.roofline_s.to_numpy() + harness_for(train, test)
        learned_s = roof_s * np.exp(table.log_slowdown(test.f1, test.f2))
        const_s = roof_s * np.exp(weighted_median(train.y, train.roofline_s))
        meas_s = test.latency_s.to_numpy()
        out.append({"table": key, "gpu": gpu,
                    "roofline": log_ratio_summary(roof_s, meas_s),
                    "roof x c": log_ratio_summary(const_s, meas_s),
                    "learned": log_ratio_summary(learned_s, meas_s)})
    return out


def print_results(results: list[dict]) -> None:
    methods = ("roofline", "roof x c", "learned")
    head = " ".join(f"{m + ' mean/med/p90/tw':>28s}" for m in methods)
    print(f"{'table':21s} {'held-out GPU':24s} {'n':>5s} {head}")
    for r in results:
        cells = " ".join(
            "{mean:6.1%} {median:6.1%} {p90:6.1%} {time_weighted:6.1%}".format(**r[m])
            for m in methods)
        print(f"{r['table']:21s} {r['gpu']:24s} {r['learned']['n']:5d} {cells}")
    for key in dict.fromkeys(r["table"].split("@")[0] for r in results):
        sub = [r for r in results if r["table"].split("@")[0] == key]
        med = {m: np.median([r[m]["mean"] for r in sub]) for m in methods}
        print(f"{key:21s} median over held-out GPUs of the mean APE: "
              + ", ".join(f"{m} {v:.1%}" for m, v in med.items()))


def summary_rows(results: list[dict]) -> list[dict]:
    """Per table family, the median over held-out GPUs of the mean APE (as printed), learned
    next to the roofline scaled by the training GPUs' median slow-down, for the README."""
    from _results import summary_row

    rows = []
    for key in dict.fromkeys(r["table"].split("@")[0] for r in results):
        sub = [r for r in results if r["table"].split("@")[0] == key]
        rows.append(summary_row(
            regime=f"single op, {key}, on a held-out GPU ({len(sub)} GPUs)",
            metric="median over GPUs of the mean APE",
            value=float(np.median([r["learned"]["mean"] for r in sub])), unit="%",
            n=sum(r["learned"]["n"] for r in sub),
            anchor="measured kernel times (NeuSight, Vidur)",
            baseline="roofline x class median",
            baseline_value=float(np.median([r["roof x c"]["mean"] for r in sub]))))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("opdata", nargs="?",
                        default=str(REPO.parent / "shared" / "data" / "opdata"))
    parser.add_argument("--tables", default=DEFAULT_TABLES)
    parser.add_argument("--no-power-split", action="store_true",
                        help="pool power-limited boards with the others (ablation)")
    args = parser.parse_args(argv)
    rows = load_op_rows(args.opdata)
    results = [r for key in args.tables.split(",")
               for r in logo_table(rows, key, power_split=not args.no_power_split)]
    print_results(results)
    from _results import write_summary

    options = "" if args.tables == DEFAULT_TABLES else f" --tables {args.tables}"
    options += " --no-power-split" if args.no_power_split else ""
    write_summary("costmodel_ops_logo" + ("_ablation" if options else ""),
                  summary_rows(results),
                  command=f"python bench/costmodel_ops_logo.py OPDATA_DIR{options}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
