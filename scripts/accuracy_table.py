"""Render the README's accuracy table from the bench summaries (issue #16).

Reads ``bench/results/*.json`` (written by the benches through ``bench/_results.py``), renders
one Markdown row per figure and rewrites the README between ``<!-- accuracy:begin -->`` and
``<!-- accuracy:end -->``. ``--check`` rewrites nothing and exits 1 when the README's block
differs from what the results render (a figure typed by hand, or a bench rerun whose table was
not regenerated).

Usage: ``python scripts/accuracy_table.py [--check] [--results DIR] [--readme PATH]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

from _results import RESULTS_DIR, load_summaries

from aiadvisor.errors import InvalidArgumentError

BEGIN = "<!-- accuracy:begin -->"
END = "<!-- accuracy:end -->"
HEADER = ("| Regime | Metric | aiadvisor | Baseline on the same metric | Compared with | n "
          "| Reproduce (measured on) |\n|---|---|---|---|---|---|---|")


def format_value(value: float, unit: str) -> str:
    """``0.123, "%"`` -> ``12.3 %``; ``"+%"`` keeps the sign; ``"x"`` -> ``1.45x``."""
    if unit == "%":
        return f"{value:.1%}".replace("%", " %")
    if unit == "+%":
        return f"{value:+.1%}".replace("%", " %")
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:.3g}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_row(row: dict, summary: dict) -> str:
    """One Markdown table row of a summary row."""
    baseline = "—"
    if row["baseline"] is not None:
        baseline = f"{row['baseline']}: {format_value(row['baseline_value'], row['unit'])}"
    anchor = row["anchor"]
    if row["anchor_value"] is not None:
        anchor += f" ({format_value(row['anchor_value'], row['anchor_unit'])})"
    machine = summary["machine"]
    where = f"{summary['date']}, {machine['processor']}"
    if machine.get("load_avg_1min") is not None:  # files written before it was recorded lack it
        where += f" ({machine.get('num_cpus')} CPUs, load {machine['load_avg_1min']})"
    where += f", torch {machine['torch']}"
    cells = (row["regime"], row["metric"], format_value(row["value"], row["unit"]), baseline,
             anchor, str(row["n"]), f"`{summary['command']}` ({where})")
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def render_table(summaries: list[dict]) -> str:
    """The Markdown table of every row of every summary, in file-name then row order."""
    if not summaries:
        raise InvalidArgumentError("no bench summaries to render: expected bench/results/*.json "
                                   "files; run the benches listed in the README first.")
    lines = [HEADER]
    for summary in sorted(summaries, key=lambda s: s["name"]):
        lines += [render_row(row, summary) for row in summary["rows"]]
    return "\n".join(lines)


def replace_block(readme: str, table: str) -> str:
    """The README text with the table between the accuracy markers."""
    begin, end = readme.find(BEGIN), readme.find(END)
    if begin < 0 or end < begin or readme.count(BEGIN) != 1 or readme.count(END) != 1:
        raise InvalidArgumentError(
            f"README: expected one {BEGIN!r} followed by one {END!r}; found {readme.count(BEGIN)}"
            f" and {readme.count(END)}. Add the pair where the table belongs.")
    return readme[:begin + len(BEGIN)] + "\n" + table + "\n" + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the README block differs from the rendered results")
    parser.add_argument("--results", default=str(RESULTS_DIR))
    parser.add_argument("--readme", default=str(REPO / "README.md"))
    args = parser.parse_args(argv)
    readme_path = Path(args.readme)
    readme = readme_path.read_text()
    updated = replace_block(readme, render_table(load_summaries(args.results)))
    if args.check:
        if updated != readme:
            print(f"{readme_path}: the accuracy table differs from {args.results}; run "
                  "python scripts/accuracy_table.py", file=sys.stderr)
            return 1
        print(f"{readme_path}: the accuracy table matches {args.results}")
        return 0
    readme_path.write_text(updated)
    print(f"{readme_path}: accuracy table rewritten from {args.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
