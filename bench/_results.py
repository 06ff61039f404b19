"""Summary figures of a bench run, written to ``bench/results/<name>.json`` (issue #16).

A bench calls :func:`write_summary` with the figures it already prints; the README's accuracy
table (``scripts/accuracy_table.py``) is rendered from these files only, so no figure in it is
typed by hand. One row is one figure::

    summary_row(regime="end-to-end training step, 8 NVIDIA GPUs", metric="median APE",
                value=0.12, unit="%", n=40, anchor="NeuSight measured step times",
                baseline="plain roofline", baseline_value=0.45)

``unit`` says how ``value`` (and ``baseline_value``) read: ``"%"`` a fraction shown as a
percentage (0.12 -> 12 %), ``"+%"`` the same with its sign, ``"x"`` a ratio, ``""`` a plain
number. ``anchor`` is what the figure is compared with (a measurement, a published figure);
``anchor_value`` is the anchor's own figure where it has one (e.g. a published MFU), in
``anchor_unit``. ``baseline`` is what a naive method scores on the same metric.

Files are JSON with sorted keys and a trailing newline, so a rerun that gives the same figures
gives the same bytes apart from ``date`` and ``machine``.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from aiadvisor.errors import InvalidArgumentError

RESULTS_DIR = REPO / "bench" / "results"
UNITS = ("%", "+%", "x", "")
ROW_KEYS = ("regime", "metric", "value", "unit", "n", "anchor", "anchor_value", "anchor_unit",
            "baseline", "baseline_value")
FILE_KEYS = ("name", "command", "date", "machine", "rows")


def _text(key: str, value, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(
            f"summary row {key}={value!r}: expected a non-empty string"
            + (" or None" if optional else "") + ".")
    return value


def _number(key: str, value, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value):
        raise InvalidArgumentError(
            f"summary row {key}={value!r}: expected a finite number"
            + (" or None" if optional else "") + ".")
    return float(value)


def _unit(key: str, value) -> str:
    if value not in UNITS:
        raise InvalidArgumentError(
            f"summary row {key}={value!r}: expected one of {', '.join(map(repr, UNITS))}.")
    return value


def summary_row(*, regime: str, metric: str, value: float, unit: str, n: int, anchor: str,
                anchor_value: float | None = None, anchor_unit: str = "",
                baseline: str | None = None, baseline_value: float | None = None) -> dict:
    """One validated figure of a bench summary (see the module docstring for the fields)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidArgumentError(f"summary row n={n!r}: expected a positive int (the number "
                                   "of cases the figure is computed over).")
    if (baseline is None) != (baseline_value is None):
        raise InvalidArgumentError(
            f"summary row baseline={baseline!r}, baseline_value={baseline_value!r}: give both "
            "or neither.")
    return {"regime": _text("regime", regime), "metric": _text("metric", metric),
            "value": _number("value", value), "unit": _unit("unit", unit), "n": n,
            "anchor": _text("anchor", anchor),
            "anchor_value": _number("anchor_value", anchor_value, optional=True),
            "anchor_unit": _unit("anchor_unit", anchor_unit),
            "baseline": _text("baseline", baseline, optional=True),
            "baseline_value": _number("baseline_value", baseline_value, optional=True)}


def cpu_label(cpuinfo: str) -> str | None:
    """The first processor's model name in ``/proc/cpuinfo`` text
    (:func:`aiadvisor.hardware.detection.parse_cpuinfo`; None without one). A name without a
    model number (a virtual machine's "AMD EPYC") gets the CPU family and model the text
    gives, so two generations under one name stay apart (Zen 3 and Zen 4 EPYCs are both
    family 25)."""
    from aiadvisor.hardware.detection import parse_cpuinfo

    if not re.search(r"^(model name|hardware|cpu model)\s*:", cpuinfo, re.M | re.I):
        return None
    info = parse_cpuinfo(cpuinfo)
    model = re.search(r"^model\s*:\s*(\d+)\s*$", cpuinfo.split("\n\n")[0], re.M)
    if not any(c.isdigit() for c in info.model) and info.family is not None and model:
        return f"{info.model} (family {info.family}, model {model.group(1)})"
    return info.model


def _cpu_name() -> str:
    """:func:`cpu_label` of this machine (``platform.processor()`` says only ``x86_64`` on
    Linux), else ``platform.processor()``."""
    try:
        name = cpu_label(Path("/proc/cpuinfo").read_text())
    except OSError:
        name = None
    return name or platform.processor() or platform.machine()


#: ``--tag`` help of the benches whose figures depend on the machine they run on.
TAG_HELP = ("a run on another machine than the one the shipped constants were fitted on: the "
            "summary goes to <name>_<TAG>.json and each regime names the processor, so its "
            "README rows stand beside the development machine's")


def tagged(name: str, regime: str, tag: str | None) -> tuple[str, str]:
    """``(summary name, regime)`` of a bench run under ``--tag`` (see :data:`TAG_HELP`):
    unchanged without a tag."""
    if tag is None:
        return name, regime
    if not tag.replace("_", "").isalnum():
        raise InvalidArgumentError(f"--tag {tag!r}: expected letters, digits and underscores, "
                                   "e.g. 'xeon'.")
    return f"{name}_{tag}", f"{regime}, on {_cpu_name()}"


def machine() -> dict:
    """What the figures were measured on: processor, CPU count and load, OS, Python and torch
    versions."""
    try:
        import torch

        torch_version, threads = torch.__version__, torch.get_num_threads()
    except ImportError:  # a bench that never imports torch
        torch_version, threads = None, None
    # Timed benches move with the machine's load: the 1-minute load average is kept with them.
    load = round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None
    return {"processor": _cpu_name(), "num_cpus": os.cpu_count(), "load_avg_1min": load,
            "platform": platform.platform(terse=True), "python": platform.python_version(),
            "torch": torch_version, "torch_threads": threads}


def write_summary(name: str, rows: list[dict], *, command: str,
                  directory: Path | str = RESULTS_DIR,
                  date: datetime.date | None = None) -> Path:
    """Write ``<directory>/<name>.json`` with the rows (made by :func:`summary_row`), the
    command that reproduces them, today's UTC date and the machine; return the path."""
    if not isinstance(name, str) or not name or not name.replace("_", "").isalnum():
        raise InvalidArgumentError(f"summary name={name!r}: expected letters, digits and "
                                   "underscores, e.g. 'costmodel_e2e_logo'.")
    if not rows:
        raise InvalidArgumentError(f"summary {name!r}: rows=[]: expected at least one row.")
    checked = [summary_row(**row) for row in rows]
    day = date or datetime.datetime.now(datetime.timezone.utc).date()
    data = {"name": name, "command": _text("command", command), "date": day.isoformat(),
            "machine": machine(), "rows": checked}
    path = Path(directory) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"summary written to {path}")
    return path


def load_summaries(directory: Path | str = RESULTS_DIR) -> list[dict]:
    """Every ``*.json`` summary of a directory, sorted by name, each row re-validated."""
    out = []
    for path in sorted(Path(directory).glob("*.json")):
        data = json.loads(path.read_text())
        missing = [k for k in FILE_KEYS if k not in data]
        if missing:
            raise InvalidArgumentError(f"{path}: missing {', '.join(missing)}; expected the "
                                       f"keys {', '.join(FILE_KEYS)} (see write_summary).")
        data["rows"] = [summary_row(**row) for row in data["rows"]]
        out.append(data)
    return out


def isolate_measurements() -> str:
    """Point this process's measurement store at a fresh temporary file and turn the per-device
    correction off, so a bench scores the cost model itself: neither the user's own records
    (``aa.verify``) nor those the bench's verify runs append move its predictions."""
    import tempfile

    path = os.path.join(tempfile.mkdtemp(prefix="aiadvisor-bench-"), "measurements.json")
    os.environ["AIADVISOR_MEASUREMENTS"] = path
    os.environ["AIADVISOR_MEASURED_CORRECTION"] = "0"
    return path


def median_seconds(fn, repeats: int, *, warmup: int = 0) -> float:
    """Median wall time of ``repeats`` calls of ``fn`` after ``warmup`` untimed ones (and the
    one :func:`aiadvisor.hardware.host._median_us` makes)."""
    from aiadvisor.hardware.host import _median_us

    for _ in range(warmup):
        fn()
    return _median_us(fn, 1, repeats=repeats) * 1e-6
