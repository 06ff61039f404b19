"""The ``aiadvisor`` terminal command.

``aiadvisor demo``                       the full report for the embedded default model
``aiadvisor report --model gpt2 ...``    the same for a built-in example model
``aiadvisor profile --model ...``        only the profile (FLOPs, bytes, memory per module)
``aiadvisor hardware``                   the hardware catalog and the attached device
``aiadvisor calibrate``                  benchmark the attached device op by op (cached)
``aiadvisor models``                     the built-in example models
``aiadvisor measurements [--clear]``     the local measurement store (aa.verify's records)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .errors import AIAdvisorError
from .units import ADVISE_MODES, MODES, PRECISIONS


def _add_model_options(parser: argparse.ArgumentParser, *, default_model: str | None,
                       modes: tuple[str, ...] = ADVISE_MODES) -> None:
    from . import examples

    parser.add_argument("--model", default=default_model, required=default_model is None,
                        help=f"built-in example: {', '.join(examples.available())}")
    parser.add_argument("--batch", type=int, default=8, help="batch size (default 8)")
    parser.add_argument("--seq", type=int, default=None,
                        help="sequence length (decoders; default 512 or the model's maximum)")
    parser.add_argument("--mode", choices=modes, default="train",
                        help="train, infer" + (", or generate (a decoder's serving: prefill, "
                                               "decode, KV cache)" if "generate" in modes else ""))
    parser.add_argument("--precision", choices=PRECISIONS, default=None,
                        help="default: the best the device supports")
    parser.add_argument("--hardware", default=None,
                        help="catalog name (e.g. 'H100 SXM') or 'local' (the attached device, "
                        "benchmarked once and cached); default: the attached device as detected, "
                        "not benchmarked")
    parser.add_argument("--devices", type=int, default=None, help="number of devices")
    parser.add_argument("--fabric", default=None,
                        help="network between nodes: a fabric name (e.g. 'InfiniBand NDR "
                             "400G', 'RoCE 400G', 'p5') or NIC Gb/s per device (default: the "
                             "device's usual build)")
    parser.add_argument("--node-size", type=int, default=None, dest="node_size",
                        help="devices per node (--devices must fill whole nodes)")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text")


def _add_price_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--own", action="store_true",
                        help="rank hardware by owning it: the purchase price amortised where "
                             "a device has one (default: its rental price)")
    parser.add_argument("--years", type=float, default=None, metavar="Y",
                        help="years a purchase is written off over (default 3)")


def _build_parser() -> argparse.ArgumentParser:
    from .hardware import cli as hardware_cli

    parser = argparse.ArgumentParser(prog="aiadvisor", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="full report for the embedded default model")
    _add_model_options(demo, default_model="tiny-gpt")
    _add_price_options(demo)
    report = sub.add_parser("report", help="full report for a built-in example model")
    _add_model_options(report, default_model=None)
    _add_price_options(report)
    prof = sub.add_parser("profile", help="profile only (FLOPs, bytes, memory)")
    _add_model_options(prof, default_model="tiny-gpt", modes=MODES)
    hardware_cli.add_arguments(sub.add_parser("hardware", help="hardware catalog and device"))
    calibrate = sub.add_parser(
        "calibrate", help="time matmuls, bandwidth and an op grid on the attached device; "
        "hardware='local' predictions use the result")
    calibrate.add_argument("--refresh", action="store_true",
                           help="measure again instead of reusing the cached result")
    calibrate.add_argument("--output", metavar="PATH", help="also write the figures as JSON")
    calibrate.add_argument("--quiet", action="store_true", help="no progress bar")
    sub.add_parser("models", help="list the built-in example models")
    store = sub.add_parser(
        "measurements", help="list the local measurement store (what aa.verify measured) and "
        "the correction it gives each device's predictions")
    store.add_argument("--clear", action="store_true", help="empty the store")
    return parser


def _run_measurements(args: argparse.Namespace) -> int:
    from .costmodel import measurements
    from .costmodel.correction import correction_for

    path = measurements.store_path()
    if args.clear:
        print(f"Cleared {measurements.clear()} measurements from {path}.")
        return 0
    records, why = measurements.load(), measurements.problem()
    print(f"Measurement store: {path} ({len(records)} records)")
    if why:
        print(f"It cannot be read ({why}): predictions are not corrected from it (the next "
              "aa.verify keeps a corrupt or older file aside; a newer one is left alone).")
    for r in records:
        print(f"{r.timestamp}  {r.device:<28.28} {r.model:<16.16} {r.mode:<5} {r.precision:<4} "
              f"batch {r.batch_size:<4} predicted {r.predicted_step_s * 1e3:9.3f} ms  measured "
              f"{r.measured_step_s * 1e3:9.3f} ms  x{r.ratio:.2f}  ({r.source})")
    for key in dict.fromkeys(r.device_key for r in records):
        kind, name = key.split("/", 1)
        fix = correction_for(kind, name, path=path)
        if fix is None:
            print(f"{name}: no correction (records of another aiadvisor version, or "
                  "AIADVISOR_MEASURED_CORRECTION=0)")
        else:
            print(f"{name}: hardware='local' predictions {fix.note()}")
    return 0


def _run_report(args: argparse.Namespace, *, profile_only: bool) -> int:
    from . import examples

    model, x = examples.build(args.model, batch_size=args.batch, seq_len=args.seq)
    if profile_only:
        from .profiler import profile
        from .profiler.summary import profile_text

        prof = profile(model, x, mode=args.mode, precision=args.precision or "fp32",
                       model_name=args.model)
        print(profile_text(prof))
        return 0
    from .api import advise
    from .hardware.fabrics import fabric_from_text

    price = None
    if args.own or args.years is not None:
        price = {"basis": "own" if args.own else "rent",
                 **({"years": args.years} if args.years is not None else {})}
    fabric = fabric_from_text(args.fabric) if args.fabric is not None else None
    report = advise(model, x, mode=args.mode, hardware=args.hardware, num_devices=args.devices,
                    precision=args.precision, model_name="model", inputs_name="x", price=price,
                    fabric=fabric, node_size=args.node_size)
    if args.format == "json":
        print(report.to_json())
    elif args.format == "markdown":
        print(report.to_markdown())
    else:
        print(f"aiadvisor report: built-in example {args.model!r} "
              f"({examples.available()[args.model]})\n")
        print(report)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aiadvisor`` command; returns the exit status."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command in ("demo", "report", "profile"):
            return _run_report(args, profile_only=args.command == "profile")
        if args.command == "hardware":
            from .hardware import cli as hardware_cli

            return hardware_cli.run(args)
        if args.command == "calibrate":
            from .hardware import cli as hardware_cli

            return hardware_cli.run_calibrate(args)
        if args.command == "measurements":
            return _run_measurements(args)
        if args.command == "models":
            from . import examples

            for name, text in examples.available().items():
                print(f"{name:<14} {text}")
            return 0
    except AIAdvisorError as exc:
        print(f"aiadvisor: error: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
