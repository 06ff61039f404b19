"""notebooks/course_costmodel.ipynb runs top to bottom in a real kernel (nbclient), with the
network blocked. The notebook asserts its own derivations; here its headline numbers are checked
once more, worked out independently in the comments."""

from __future__ import annotations

import re

import pytest

from .notebook_utils import NOTEBOOKS, cell_outputs, course_checks, output_text

pytestmark = pytest.mark.slow

NOTEBOOK = NOTEBOOKS / "course_costmodel.ipynb"


# committed, executed (its CPU benchmark cached in the session's temporary folder) and the
# shared checks
globals().update(course_checks(NOTEBOOK, timeout_s=400, benchmarks=True))


def test_the_gemm_roofline_exercise(executed):
    text = "\n".join(output_text(c.outputs) for c in executed.cells
                     if "solution" in c.metadata.get("tags", []))
    # 2 x 4096^3 / 989.4e12 = 138.9 us (compute-bound: memory 1.007e8 B / 3.35e12 = 30.0 us)
    assert "roofline 138.9 us (compute)" in text
    eff = int(re.search(r"P50 efficiency (\d+)%", text).group(1))
    assert 50 <= eff <= 100  # tensor-core GEMMs of this size reach most of the dense peak


def test_small_batches_are_overhead_bound(executed):
    text = output_text(cell_outputs(executed, "small = prof.at("))
    ratio = float(re.search(r"only ([\d.]+)x as fast", text).group(1))
    # 989.4 / 121 = 8.2x the peak and 3350 / 300 = 11x the bandwidth of the L4, yet < 2x
    assert ratio < 2


def test_the_prediction_is_checked_against_a_measurement(executed):
    text = output_text(cell_outputs(executed, "small_config = "))
    assert "(measured)" in text
    rows = [line for line in text.splitlines() if line.startswith(("train", "infer"))]
    assert len(rows) == 2
    for row in rows:
        measured, predicted = (float(v) for v in row.split()[1:3])
        assert measured > 0 and predicted > 0
