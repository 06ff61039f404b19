"""``aiadvisor hardware``: print the catalog (filterable) and the detected device."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, TextIO

from ..errors import AIAdvisorError, InvalidArgumentError, check_choice
from .spec_table import KINDS, SEGMENTS

__all__ = ["add_arguments", "format_table", "run"]

#: (column, header, format) of the printed table; blank cells print as "-" (unknown).
_TABLE = (
    ("name", "name", "{}"), ("kind", "kind", "{}"), ("segment", "segment", "{}"),
    ("memory_gb", "mem GB", "{:g}"),
    ("memory_bw_gbs", "mem GB/s", "{:g}"), ("fp32_tflops", "fp32", "{:g}"),
    ("bf16_tflops", "bf16", "{:g}"), ("fp16_tflops", "fp16", "{:g}"),
    ("fp8_tflops", "fp8", "{:g}"), ("int8_tops", "int8", "{:g}"), ("fp4_tflops", "fp4", "{:g}"),
    ("tdp_w", "W", "{:g}"),
    ("usd_purchase", "buy $", "{:g}"), ("usd_per_hour", "$/h", "{:g}"),
)
#: Printed after the others when a budget is given: the cost the budget was compared with.
_COST = ("cost_per_hour", "cost $/h", "{:.3g}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``aiadvisor hardware`` options to ``parser``."""
    parser.add_argument("--vendor", help="only this vendor (e.g. NVIDIA, AMD, Google)")
    parser.add_argument("--kind", help=f"only this kind: {', '.join(KINDS)}")
    parser.add_argument("--segment", help=f"only devices sold for: {', '.join(SEGMENTS)}")
    parser.add_argument("--min-memory-gb", type=float, default=None, metavar="GB",
                        help="only devices with at least this much memory")
    parser.add_argument("--max-usd-per-hour", type=float, default=None, metavar="USD",
                        help="only devices costing at most this per busy hour: the rental "
                             "price, else the purchase amortised over --years at "
                             "--utilisation plus power at --usd-per-kwh "
                             "(aiadvisor.hardware.hourly_cost); unpriced devices are left out")
    parser.add_argument("--own", action="store_true",
                        help="with --max-usd-per-hour: price a device sold both ways by its "
                             "amortised purchase, not its rental price")
    parser.add_argument("--years", type=float, default=None, metavar="Y",
                        help="years a purchase is written off over (default 3)")
    parser.add_argument("--utilisation", type=float, default=None, metavar="F",
                        help="share of hours an owned device is busy, in (0, 1] (default 0.5)")
    parser.add_argument("--usd-per-kwh", type=float, default=None, metavar="USD",
                        help="electricity price for owned devices (default 0.15)")
    parser.add_argument("--name", help="only names containing this text (case-insensitive)")
    parser.add_argument("--csv", metavar="PATH",
                        help="a user CSV that adds or overrides catalog rows")
    parser.add_argument("--no-detect", action="store_true",
                        help="do not detect the attached device")
    parser.add_argument("--benchmark", action="store_true",
                        help="benchmark the attached device (cached; 15-20 s on a 2-core CPU)")
    parser.add_argument("--refresh", action="store_true",
                        help="with --benchmark: ignore the cached result and measure again")


def _cell(value: Any, fmt: str) -> str:
    import pandas as pd

    if value is None or pd.isna(value):
        return "-"
    return fmt.format(value)


def format_table(table: Any) -> str:
    """The catalog rows as an aligned text table (dense TFLOP/s; '-' = unknown), with the cost
    per busy hour when the table has one (a budget filter adds it)."""
    spec = _TABLE + ((_COST,) if _COST[0] in table.columns else ())
    rows = [[header for _, header, _ in spec]]
    for _, record in table.iterrows():
        rows.append([_cell(record[column], fmt) for column, _, fmt in spec])
    widths = [max(len(r[i]) for r in rows) for i in range(len(spec))]
    lines = []
    for j, r in enumerate(rows):
        cells = [c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _filter(table: Any, args: argparse.Namespace) -> Any:
    from .spec_table import filter_catalog

    kind = args.kind
    if kind is not None:
        check_choice("--kind", kind.lower(), KINDS)
    segment = getattr(args, "segment", None)
    if segment is not None:
        check_choice("--segment", segment.lower(), SEGMENTS)
    budget = getattr(args, "max_usd_per_hour", None)
    if budget is not None and not budget >= 0:
        raise InvalidArgumentError(
            f"--max-usd-per-hour={budget!r} is not valid: expected a non-negative number of "
            "USD per device-hour.")
    return filter_catalog(table, kind=kind, segment=segment, vendor=args.vendor, name=args.name,
                          min_memory_gb=args.min_memory_gb, max_usd_per_hour=budget,
                          years=getattr(args, "years", None),
                          utilisation=getattr(args, "utilisation", None),
                          usd_per_kwh=getattr(args, "usd_per_kwh", None),
                          basis="own" if getattr(args, "own", False) else None)


def _print_device(args: argparse.Namespace, out: TextIO) -> None:
    from .detection import detect, probe

    device = probe()
    line = f"Detected device: {device.name} ({device.backend})"
    if device.catalog_name:
        line += f" -> catalog row {device.catalog_name!r}"
    out.write(line + "\n")
    if device.fallback_reason:
        out.write(f"  CPU fallback: {device.fallback_reason}\n")
    spec = device.spec
    if args.benchmark:
        spec = detect(benchmark=True, refresh=args.refresh)
    for label, value, unit in (("memory", spec.memory_gb, "GB"),
                               ("fp32", spec.fp32_tflops, "TFLOP/s"),
                               ("bf16", spec.bf16_tflops, "TFLOP/s"),
                               ("memory bandwidth", spec.memory_bw_gbs, "GB/s"),
                               ("launch overhead", spec.launch_overhead_us, "us")):
        if value is not None:
            out.write(f"  {label}: {value:.4g} {unit}\n")
    out.write(f"  {'measured' if spec.measured else 'not measured'}: {spec.notes[:300]}\n")


def calibration_text(result: Any) -> str:
    """The figures of a benchmark with its op grid, as plain text (``aiadvisor calibrate``)."""
    from ..costmodel.local import fit_optimizer_rates, fit_optimizers

    lines = [f"{result.device_name} ({result.backend}, torch {result.torch_version}, "
             f"{result.num_threads} threads), measured {result.date}"
             + (" (cached)" if result.from_cache else "")]
    for precision in result.precisions:
        curve = ", ".join(f"n={n}: {t * 1e3:.1f}" for n, t in result.curve(precision))
        lines.append(f"  matmul {precision} GFLOP/s  {curve}")
    lines.append("  memory bandwidth GB/s  " + ", ".join(
        f"{p.op} {p.num_bytes / 2**20:.0f} MiB: {p.gbs:.1f}" for p in result.bandwidth))
    lines.append(f"  per-op overhead  {result.launch_overhead_us:.1f} us")
    if result.ops:
        lines.append("  op grid (GB/s moved at each size; attention and GEMMs: GFLOP/s):")
        by_op: dict[tuple[str, str], list] = {}
        for p in result.ops:
            by_op.setdefault((p.op, p.dtype), []).append(p)
        for (op, dtype), points in by_op.items():
            cells = []
            for p in sorted(points, key=lambda p: p.num_bytes):
                if p.family == "first-touch":  # seconds is an extra cost, 0 when none was seen
                    cells.append(f"{p.num_bytes / 2**20:.0f} MiB "
                                 f"+{p.seconds * 1e6 / (p.num_bytes / 2**20):.1f} us/MiB")
                elif p.family == "sqrt-zero":  # an extra cost too
                    cells.append(f"{p.num_bytes / 4 / 2**20:.0f} M elements "
                                 f"+{p.seconds * 1e9 / (p.num_bytes / 4):.2f} ns an element")
                elif p.seconds <= 0.0:
                    cells.append(f"{p.num_bytes / 2**20:.2f} MiB too fast to time")
                elif p.family == "attention" or p.family.startswith("gemm-"):
                    cells.append(f"{p.flops / 1e6:.0f} MFLOP {p.flops / p.seconds / 1e9:.1f}")
                else:
                    cells.append(f"{p.num_bytes / 2**20:.2f} MiB "
                                 f"{p.num_bytes / p.seconds / 1e9:.1f}")
            name = op.removeprefix("aten.")
            lines.append(f"    {name:44s} {dtype:8s} {points[0].family:11s} " + ", ".join(cells))
    rates = fit_optimizer_rates(result.optimizer)
    for name, (per_tensor, per_element) in sorted(fit_optimizers(result.optimizer).items()):
        log_sizes, per_size = rates.get(name, ((), ()))
        larger = "".join(f", {math.exp(log_n) * 4 / 2**20:.0f} MiB tensors {rate * 1e9:.2f}"
                         for log_n, rate in list(zip(log_sizes, per_size))[1:])
        lines.append(f"  optimizer {name}: {per_tensor * 1e6:.1f} us per tensor + "
                     f"{per_element * 1e9:.2f} ns per element"
                     + (f" (FP32 tensors up to 1 MiB{larger})" if larger else ""))
    if result.skipped:
        lines.append("  not measured: " + "; ".join(f"{k} ({v})" for k, v in
                                                    result.skipped.items()))
    if result.cache_path:
        lines.append(f"  stored in {result.cache_path}")
    return "\n".join(lines)


def run_calibrate(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    """Run ``aiadvisor calibrate``: benchmark the attached device with its op grid, print the
    figures and, with ``--output``, write them as JSON."""
    import json

    from .bench import benchmark

    out = out or sys.stdout
    result = benchmark(refresh=args.refresh, progress=not args.quiet)
    out.write(calibration_text(result) + "\n")
    if args.output:
        Path(args.output).write_text(json.dumps(result.to_dict(), indent=1) + "\n",
                                     encoding="utf-8")
        out.write(f"  written to {args.output}\n")
    return 0


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
        ) -> int:
    """Run ``aiadvisor hardware``; returns the exit status (0 ok, 2 bad input)."""
    from .spec_table import catalog

    out = out or sys.stdout
    err = err or sys.stderr
    try:
        table = _filter(catalog(getattr(args, "csv", None)), args)
        out.write(format_table(table) + "\n")
        out.write(f"{len(table)} device(s). Figures are dense peaks from vendor datasheets "
                  "(see the 'source' and 'notes' columns of aiadvisor.hardware.catalog()); "
                  "'-' = unknown.\n")
        if "cost_per_hour" in table.columns:
            from .pricing import PriceRule

            assumptions = {k: v for k, v in (
                ("years", args.years), ("utilisation", args.utilisation),
                ("usd_per_kwh", args.usd_per_kwh)) if v is not None}
            rule = PriceRule(basis="own" if args.own else "rent", **assumptions)
            out.write(rule.describe() + " Prices have a source and a date in the catalog's "
                      "price_source and price_date columns; unpriced devices are left out.\n")
        out.write("\n")
        if not getattr(args, "no_detect", False):
            _print_device(args, out)
    except AIAdvisorError as exc:
        err.write(f"aiadvisor hardware: {exc}\n")
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m aiadvisor.hardware.cli``."""
    parser = argparse.ArgumentParser(prog="aiadvisor hardware", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
