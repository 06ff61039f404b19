"""Hand-built profiles, specs and a constant-efficiency model for cost-model tests."""

from __future__ import annotations

import numpy as np
import pytest

from aiadvisor.costmodel.model import (
    CollectiveFit,
    EfficiencyModel,
    EfficiencyTable,
    Grid,
    load_model,
)
from aiadvisor.costmodel.training import GRID
from aiadvisor.schema import HardwareSpec, MemoryBreakdown, ModelProfile, OpRecord

TABLE_KEYS = ("gemm/simt", "gemm/tensor", "conv/simt", "elementwise/any", "norm/any",
              "embedding/any")


def make_spec(**overrides) -> HardwareSpec:
    """A made-up NVIDIA GPU: 1000 TFLOP/s bf16/fp16, 60 fp32, 3000 GB/s, NVLink 900 GB/s."""
    fields = {"name": "Test GPU", "vendor": "NVIDIA", "kind": "gpu", "memory_gb": 80,
                  "memory_bw_gbs": 3000, "fp32_tflops": 60, "tf32_tflops": 500,
                  "bf16_tflops": 1000, "fp16_tflops": 1000, "fp8_tflops": 2000,
                  "interconnect_bw_gbs": 900, "launch_overhead_us": 4.0}
    fields.update(overrides)
    return HardwareSpec(**fields)


def op(op_name, op_class, phase, *, flops=0.0, bytes_read=0.0, bytes_written=0.0, count=1,
       dtype="float32") -> OpRecord:
    return OpRecord(op=op_name, op_class=op_class, phase=phase, module="m", dtype=dtype,
                    count=count, flops=flops, bytes_read=bytes_read, bytes_written=bytes_written)


def make_profile(ops, *, mode="infer", batch_size=8, num_params=1000, weights_bytes=4000,
                 num_blocks=0, block_output_bytes=0, optimizer="none", **overrides) -> ModelProfile:
    fwd = sum(o.flops for o in ops if o.phase == "forward")
    bwd = sum(o.flops for o in ops if o.phase == "backward")
    memory = MemoryBreakdown(weights_bytes=weights_bytes, grads_bytes=0, optimizer_bytes=0,
                             activations_bytes=0, inputs_bytes=0, peak_bytes=weights_bytes)
    fields = {"model_name": "hand", "model_type": "Hand", "mode": mode, "precision": "fp32",
                  "optimizer": optimizer, "batch_size": batch_size, "seq_len": None,
                  "num_params": num_params, "num_trainable_params": num_params,
                  "flops_forward": fwd, "flops_backward": bwd, "flops_optimizer": 0.0,
                  "memory": memory, "ops": tuple(ops), "num_blocks": num_blocks,
                  "block_output_bytes": block_output_bytes}
    fields.update(overrides)
    return ModelProfile(**fields)


def constant_model(log_slowdown: float = 0.0, *, spread: float = 0.0) -> EfficiencyModel:
    """Every table predicts the same slow-down (P10/P90 at -/+ spread); training ranges cover
    any device, so nothing is shrunk. Collective constants are the shipped ones."""
    grid: Grid = GRID
    shape = (grid.f1_num, grid.f2_num)
    tables = {
        key: EfficiencyTable(
            key=key, grid=grid, p10=np.full(shape, max(log_slowdown - spread, 0.0)),
            p50=np.full(shape, log_slowdown), p90=np.full(shape, log_slowdown + spread),
            median_log_slowdown=log_slowdown, peak_log10_range=(-5.0, 5.0),
            bw_log10_range=(-5.0, 6.0), devices=("any",), precisions=("fp32", "fp16"))
        for key in TABLE_KEYS
    }
    shipped: CollectiveFit = load_model().collectives
    return EfficiencyModel(tables=tables, collectives=shipped)


@pytest.fixture
def spec() -> HardwareSpec:
    return make_spec()


@pytest.fixture
def exact_model() -> EfficiencyModel:
    """Efficiency 1 everywhere: predictions are the bare roofline plus launch overhead."""
    return constant_model(0.0)
