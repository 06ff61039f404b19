"""notebooks/course_precision.ipynb runs top to bottom in a real kernel (nbclient), with the
network blocked. The notebook asserts its own derivations; here its headline numbers are checked
once more, worked out independently in the comments."""

from __future__ import annotations

import re

import pytest

from .notebook_utils import (
    NOTEBOOKS,
    cell_outputs,
    course_checks,
    output_text,
)

pytestmark = pytest.mark.slow

NOTEBOOK = NOTEBOOKS / "course_precision.ipynb"


globals().update(course_checks(NOTEBOOK))  # committed, executed and the shared checks


def test_casts_overflow_and_underflow_as_the_formats_say(executed):
    text = output_text(cell_outputs(executed, "x = torch.tensor([70000.0"))
    rows = {line.split()[0] + (" " + line.split()[1] if line.startswith("fp8") else ""): line
            for line in text.splitlines()[1:]}
    # fp16: max 65504, so 70000 -> inf; 1e-8 is below its smallest subnormal 6e-8 -> 0
    assert rows["fp16"].split()[1:3] == ["inf", "0.000000e+00"]
    # bf16: 8 significant bits, 70000 = 1.0681 x 2^16 rounds to 1.0703 x 2^16 = 70144
    assert rows["bf16"].split()[1] == "70144.0"
    # e4m3 saturates at 448
    assert rows["fp8 e4m3"].split()[2] == "448.0" and rows["fp8 e4m3"].split()[4] == "448.0"


def test_rounding_errors_follow_the_step_sizes(executed):
    text = output_text(cell_outputs(executed, "torch.manual_seed(0)"))
    rms = {name: float(re.search(rf"^{re.escape(name)}\s+([\d.]+)", text, re.M).group(1))
           for name in ("bf16", "fp16", "int4, group 128")}
    # 0.4247 x 2^-8 = 0.00166 (bf16), 0.4247 x 2^-11 = 0.000207 (fp16); int4: the group range of
    # 128 normals is ~5 sigma, step 5/15 sigma, RMS step/sqrt(12) = 0.096 sigma
    assert abs(rms["bf16"] - 0.00166) < 0.0001 and abs(rms["fp16"] - 0.000207) < 0.00001
    assert 0.09 < rms["int4, group 128"] < 0.11


def test_serving_weights_match_the_hand_count(executed):
    text = output_text(cell_outputs(executed, "gp = aa.profile_generation(llama"))
    # bf16: 2 x 1,235,814,400 B = 2.47 GB; int4: 973,078,528 x 4.25 / 8 + 262,735,872 x 2 = 1.04 GB;
    # floors on an L4 (300 GB/s): 8.24 ms and 3.47 ms
    assert re.search(r"^bf16\s+2\.47\s+8\.24", text, re.M)
    assert re.search(r"^int4\s+1\.04\s+3\.47", text, re.M)


def test_the_llama_8b_int4_exercise(executed):
    text = "\n".join(output_text(c.outputs) for c in executed.cells
                     if "solution" in c.metadata.get("tags", []))
    assert "5,809,643,520 B = 5.41 GiB" in text  # 5,809,643,520 / 2^30 = 5.41
