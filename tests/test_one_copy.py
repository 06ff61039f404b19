"""One copy of each fact: the precision-to-column table, the support rule, the Pareto front."""

from __future__ import annotations

import ast
import pathlib

import pytest

import aiadvisor
from aiadvisor.hardware import all_specs, get, support_matrix
from aiadvisor.hardware.support import support_level
from aiadvisor.units import PRECISION_COLUMN, PRECISIONS

ROOT = pathlib.Path(aiadvisor.__file__).parent


def _trees():
    for path in sorted(ROOT.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), filename=str(path))


def test_precision_column_table_is_written_once():
    # Before: schema.HardwareSpec.peak_tflops, hardware/support.py, recommend/precision.py and
    # hardware/bench.py each spelled out {"fp32": "fp32_tflops", ...}.
    columns = {c for c in PRECISION_COLUMN.values() if c}
    where = [f"{name}:{node.lineno}" for name, tree in _trees() for node in ast.walk(tree)
             if isinstance(node, ast.Dict) and any(
                 isinstance(k, ast.Constant) and k.value in PRECISIONS
                 and isinstance(v, ast.Constant) and v.value in columns
                 for k, v in zip(node.keys, node.values))]
    assert len(where) == 1 and where[0].startswith("units.py:"), where


def test_one_function_computes_the_pareto_front():
    # Before: viz/plans.py's pareto_front and recommend/ranking.py's _pareto.
    where = [f"{name}:{node.name}" for name, tree in _trees() for node in ast.walk(tree)
             if isinstance(node, ast.FunctionDef) and "pareto" in node.name.lower()
             and not node.name.endswith("_chart")]
    assert where == ["recommend/ranking.py:pareto_front"]


def test_support_level_of_a_spec_agrees_with_the_catalog_matrix():
    matrix = support_matrix()
    for spec in all_specs():
        assert {p: support_level(spec, p) for p in PRECISIONS} == matrix.loc[spec.name].to_dict()


def test_support_levels_and_peaks_by_datasheet():
    # H100 SXM datasheet (dense = half the '* with sparsity' figures): FP8 1978.9 TFLOPS, BF16
    # 989.4, INT8 1978.9 TOPS. V100 (Volta) has no BF16 engine: BF16 runs through FP32.
    h100, v100 = get("H100 SXM"), get("V100 SXM2 32GB")
    assert support_level(h100, "fp8") == "full" and support_level(v100, "bf16") == "emulated"
    assert h100.peak_tflops("int8") == 1978.9
    assert h100.peak_tflops("nf4") == h100.peak_tflops("bf16") == 989.4  # NF4 computes in BF16


def test_support_level_names_the_valid_precisions():
    from aiadvisor.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=r"precision='fp64' is not valid: expected "
                                                    r"one of 'fp32', 'tf32'"):
        support_level(get("H100 SXM"), "fp64")
