"""Rebuild the shipped efficiency model from the opdata CSVs, deterministically.

Usage::

    python scripts/train_costmodel.py [OPDATA_DIR] [--out data/costmodel/efficiency_model.json]

``OPDATA_DIR`` defaults to ``../shared/data/opdata`` relative to the repository. The fit is
seeded (``random_state=0``, no early stopping) and the JSON is written with sorted keys and
rounded numbers, so the same data and scikit-learn version give a byte-identical file. Takes
about a minute on one CPU core.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aiadvisor.costmodel.training import build_model

DATA_FILES = ("neusight_kernels.csv", "vidur_ops.csv", "vidur_collectives.csv")


def _upstream_commits(opdata: Path) -> dict[str, str]:
    """Upstream repositories and commits named in the opdata README's table."""
    readme = (opdata / "README.md").read_text(encoding="utf-8")
    found = re.findall(r"\[([\w-]+/[\w-]+)\]\([^)]*\) \| MIT[^|]*\| `([0-9a-f]{40})`", readme)
    return dict(found)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("opdata", nargs="?",
                        default=str(REPO.parent / "shared" / "data" / "opdata"))
    parser.add_argument("--out", default=str(REPO / "data" / "costmodel" / "efficiency_model.json"))
    args = parser.parse_args(argv)
    opdata = Path(args.opdata)
    provenance = {
        "data": "opdata subsamples of sitar-lab/NeuSight and microsoft/vidur (MIT licensed)",
        "upstream_commits": _upstream_commits(opdata),
        "data_sha256": {name: _sha256(opdata / name) for name in DATA_FILES},
        "script": "scripts/train_costmodel.py",
    }
    model = build_model(opdata, provenance=provenance)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(model, sort_keys=True, separators=(",", ":")) + "\n",
                   encoding="utf-8")
    sizes = {k: t["num_rows"] for k, t in model["tables"].items()}
    shrink = {k: t["shrink_lambda"] for k, t in model["tables"].items()}
    print(f"wrote {out} ({out.stat().st_size / 1e3:.0f} kB)\nrows per table: {sizes}\n"
          f"shrink weight of the learned curve per table (leave-one-GPU-out): {shrink}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
