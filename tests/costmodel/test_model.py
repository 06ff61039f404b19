"""The shipped efficiency model: loads safely, stays bounded, fails loudly on a bad file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from aiadvisor.costmodel.model import (
    MAX_LOG_SLOWDOWN,
    EfficiencyModel,
    load_model,
    op_features,
)
from aiadvisor.errors import AIAdvisorError

REPO = Path(__file__).resolve().parents[2]


def test_shipped_model_has_every_table_and_provenance():
    model = load_model()
    assert set(model.tables) == {
        "gemm/simt", "gemm/tensor", "conv/simt", "elementwise/any", "norm/any", "embedding/any",
        "gemm/simt@lowpower", "conv/simt@lowpower", "elementwise/any@lowpower",
        "norm/any@lowpower"}
    # Power-limited boards (TDP <= 100 W) in the NeuSight data: L4, P4, T4.
    assert model.table("gemm/simt@lowpower").devices == ("NVIDIA_L4", "Tesla_P4", "Tesla_T4")
    assert model.provenance["upstream_commits"]["sitar-lab/NeuSight"].startswith("6945927d")
    assert model.provenance["upstream_commits"]["microsoft/vidur"].startswith("7d475133")
    # Vidur's tensor-core GEMMs were measured on A100, H100 and A40 only.
    assert model.table("gemm/tensor").devices == ("a100", "a40", "h100")


def test_efficiency_is_bounded_in_zero_one_everywhere():
    rng = np.random.default_rng(0)
    f1 = rng.uniform(-12, 3, 20000)   # far beyond the grid on both sides
    f2 = rng.uniform(-8, 6, 20000)
    for table in load_model().tables.values():
        for q in ("p10", "p50", "p90"):
            eff = np.exp(-table.log_slowdown(f1, f2, q))
            assert np.all(eff > 0) and np.all(eff <= 1.0)
            assert eff.min() >= np.exp(-MAX_LOG_SLOWDOWN) - 1e-12   # never below 1/20


def test_quantiles_are_ordered():
    f1, f2 = np.meshgrid(np.linspace(-8, 0, 40), np.linspace(-4, 2, 30))
    for table in load_model().tables.values():
        lo, mid, hi = (table.log_slowdown(f1, f2, q) for q in ("p10", "p50", "p90"))
        assert np.all(lo <= mid + 1e-9) and np.all(mid <= hi + 1e-9)


def test_large_tensor_core_gemm_efficiency_is_plausible():
    # A 8192^3 fp16 GEMM on an A100 (312 TF, 2039 GB/s) takes ~3.5 ms of roofline; cuBLAS
    # reaches 70-90 % of the datasheet peak there (cost_model.md section 3.3, MAMF 86.9 %).
    f1, f2 = op_features(2 * 8192.0**3, 3 * 2 * 8192.0**2, 312.0, 2039.0)
    eff = float(np.exp(-load_model().table("gemm/tensor").log_slowdown(f1, f2)))
    assert 0.6 <= eff <= 0.95


def test_features_by_hand():
    # 2 * 4096^3 FLOPs on 1000 TF = 137.4 us; 1.007e8 bytes on 3000 GB/s = 33.55 us.
    f1, f2 = op_features(2 * 4096.0**3, 6 * 4096.0**2, 1000.0, 3000.0)
    assert float(f1) == pytest.approx(np.log10(137.44e-6), abs=1e-4)
    assert float(f2) == pytest.approx(np.log10(137.44 / 33.554), abs=1e-4)


def test_wrong_format_is_refused(tmp_path):
    data = json.loads((REPO / "data" / "costmodel" / "efficiency_model.json").read_text())
    data["version"] = 99
    with pytest.raises(AIAdvisorError, match="version 1"):
        EfficiencyModel.from_dict(data)


def test_shipped_model_loads_without_shared_data(tmp_path):
    # A fresh interpreter that records every file it opens: loading the model and predicting
    # must not touch ../shared (users do not have it) and must not unpickle anything.
    script = textwrap.dedent(f"""
        import sys
        opened = []
        sys.addaudithook(lambda ev, args: opened.append(str(args[0]))
                         if ev == "open" and args and isinstance(args[0], str) else None)
        sys.path.insert(0, {str(REPO)!r})
        import pickle
        pickle.loads = pickle.load = None  # any unpickling would crash
        from aiadvisor.costmodel.model import load_model
        m = load_model()
        assert len(m.tables) == 10
        bad = [p for p in opened if "shared" in p.split("/") or p.endswith((".pkl", ".pickle"))]
        assert not bad, bad
        print("ok", [p for p in opened if p.endswith(".json")])
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "efficiency_model.json" in out.stdout
