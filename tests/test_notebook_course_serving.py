"""notebooks/course_serving.ipynb runs top to bottom in a real kernel (nbclient), with the
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

NOTEBOOK = NOTEBOOKS / "course_serving.ipynb"


globals().update(course_checks(NOTEBOOK))  # committed, executed and the shared checks


def test_kv_cache_per_token_gqa_vs_mha(executed):
    text = output_text(cell_outputs(executed, "gqa = aa.profile_generation("))
    # 2 x 32 layers x 8 heads x 128 dims x 2 B = 131,072; with 32 heads 524,288;
    # x 640 tokens = 83.89 MB and 335.54 MB
    assert re.search(r"GQA \(8 KV heads\)\s+131072\.0\s+83\.89", text)
    assert re.search(r"MHA \(32 KV heads\)\s+524288\.0\s+335\.54", text)


def test_concurrency_on_an_h100(executed):
    text = output_text(cell_outputs(executed, "rows = {}\nfor name, gp in"))
    # (0.9 x 80 GiB - 16.06 GB weights - 0.14 GB working) / (131,072 B x 640) = 728;
    # MHA: (77.31 - 17.67 - 0.14) GB / (524,288 x 640) = 177; fp8 KV halves the bytes: 1457
    assert re.search(r"GQA bf16\s+131072\s+728", text)
    assert re.search(r"MHA bf16\s+524288\s+177", text)
    assert re.search(r"fp8\s+65536\s+1457", text)


def test_the_70b_seed_claim_is_bounded_by_bandwidth(executed):
    text = "\n".join(output_text(c.outputs) for c in executed.cells
                     if "solution" in c.metadata.get("tags", []))
    # 8-bit weights of ~72.7 GB (16-bit embeddings and head) / 4.8 TB/s = 15.1 ms: <= 66 tok/s
    most = int(re.search(r"at most (\d+) tokens/s for one stream", text).group(1))
    assert most < 70
