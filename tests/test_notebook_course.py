"""notebooks/course_step_anatomy.ipynb runs top to bottom in a real kernel (nbclient), with the
network blocked, and its hand checks hold. The notebook asserts its own derivations; here the
headline numbers are checked once more, worked out independently in the comments."""

from __future__ import annotations

import os
import re

import pytest

from .notebook_utils import (
    NOTEBOOKS,
    cell_outputs,
    error_outputs,
    execute_notebook,
    output_text,
    shared_cache_dir,
)

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("torch")

pytestmark = pytest.mark.slow

NOTEBOOK = NOTEBOOKS / "course_step_anatomy.ipynb"


@pytest.fixture(scope="module")
def committed():
    return nbformat.read(NOTEBOOK, as_version=4)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    # Section 5 benchmarks this machine (aa.verify): its cache goes to a temporary folder, not
    # the user's ~/.cache (the kernel inherits this environment), shared by the notebook tests.
    old = os.environ.get("AIADVISOR_CACHE_DIR")
    os.environ["AIADVISOR_CACHE_DIR"] = str(shared_cache_dir(tmp_path_factory))
    try:
        return execute_notebook(NOTEBOOK, timeout_s=300, offline=True)
    finally:
        if old is None:
            os.environ.pop("AIADVISOR_CACHE_DIR", None)
        else:
            os.environ["AIADVISOR_CACHE_DIR"] = old


def test_every_cell_runs_without_error_and_offline(executed):
    assert error_outputs(executed) == []
    assert output_text(executed.cells[-1].outputs).startswith("blocked by the offline guard")


def test_committed_notebook_has_no_outputs(committed):
    code = [c for c in committed.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


def test_each_solution_sits_under_a_collapsed_heading_and_runs(committed, executed):
    headings = [i for i, c in enumerate(committed.cells) if c.source.startswith("#### Solution")]
    assert len(headings) == 4  # one per exercise
    for i in headings:
        assert committed.cells[i].metadata["jp-MarkdownHeadingCollapsed"] is True
        answer = committed.cells[i + 1]
        assert answer.cell_type == "code" and "solution" in answer.metadata["tags"]
    answers = [c for c in executed.cells if "solution" in c.metadata.get("tags", [])]
    assert len(answers) == 4 and all(c.outputs for c in answers)


def test_forward_gemm_flops_match_the_hand_count(executed):
    # tiny-gpt: 4 blocks x 12 x 256^2 weights + a 256 x 8192 head = 5,242,880 matmul weights;
    # 4 x 128 = 512 tokens: 2 x 512 x 5,242,880 = 5,368,709,120 FLOPs.
    text = output_text(cell_outputs(executed, "d, L, V = 256, 4, 8192"))
    assert "by hand:    5,368,709,120 FLOPs" in text
    assert "profile:    5,368,709,120 FLOPs" in text


def test_zero_arithmetic_for_llama_3_8b(executed):
    # 8,030,261,248 parameters x 16 B = 128.5 GB (> 80 GB: DDP cannot fit), plus autocast's bf16
    # weight copies 2 B x N = 16.1 GB; / 8 = 16.1 GB (FSDP).
    text = output_text(cell_outputs(executed, "n = 8"))
    ddp = text.splitlines()[0]
    assert ddp.startswith("ddp    16.00 B/param:  128.5 +") and ddp.endswith("too big")
    assert "+ 16.1 = " in ddp  # the weight copies, among the buffers
    fsdp = [line for line in text.splitlines() if line.startswith("fsdp")]
    assert (fsdp and fsdp[0].startswith("fsdp    2.00 B/param:   16.1 +")
            and fsdp[0].endswith("fits"))


def test_crossover_lengths(executed):
    # attention = linear when S = W_lin / (2 d L): 5,242,880 / 2,048 = 2,560 (tiny-gpt);
    # 7,504,658,432 / 262,144 = 28,628.3 (Llama-3-8B).
    text = output_text(cell_outputs(executed, "# Equal when 2 S d L = W_lin"))
    assert text == "{'tiny-gpt': 2560, 'llama-3-8b': 28628}"


def test_the_estimate_is_checked_on_this_machine(executed):
    # Section 5: the calibrated prediction for the attached CPU beside a measured step and the
    # plain roofline; the notebook itself asserts the ratio lies within 0.5-2.
    text = output_text(cell_outputs(executed, "check = aa.verify("))
    measured = float(re.search(r"measured step\s+([\d.]+) ms", text).group(1))
    predicted = float(re.search(r"predicted\s+([\d.]+) ms", text).group(1))
    assert measured > 0 and predicted > 0
    assert "(measured)" in text and "medium confidence" in text
