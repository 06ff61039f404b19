"""How the training stack runs a parallel step, by hand: sequence parallelism (or not) for the
residual-stream ops under tensor parallel, the gradient-accumulation pass per extra
micro-batch, and when the data-parallel gradient reduction can hide (the last micro-batch's
backward, or not at all)."""

from __future__ import annotations

import dataclasses

import pytest

from aiadvisor.costmodel import predict
from aiadvisor.costmodel.model import load_model
from aiadvisor.errors import InvalidArgumentError
from aiadvisor.schema import ParallelConfig

from .conftest import make_profile, make_spec, op

BW = 3000e9       # the test GPU's memory bandwidth (conftest.make_spec)
LAUNCH = 4e-6     # and its launch overhead


def _in(module, record):
    return dataclasses.replace(record, module=module, repeat=4)


def test_residual_stream_ops_split_over_tp_only_with_sequence_parallel(spec, exact_model):
    # A block's own op (residual add, 8 GB) and one inside its MLP (4 GB), tp = 4.
    residual = _in("layers.*", op("aten.add", "memory", "forward", bytes_read=6e9,
                                  bytes_written=2e9))
    inner = _in("layers.*.mlp", op("aten.gelu", "memory", "forward", bytes_read=2e9,
                                   bytes_written=2e9))
    prof = make_profile([residual, inner])
    kw = {"hardware": spec, "precision": "fp32", "num_devices": 4, "model": exact_model}
    sp = predict(prof, parallel=ParallelConfig(tp_degree=4), **kw)
    no_sp = predict(prof, parallel=ParallelConfig(tp_degree=4, sequence_parallel=False), **kw)
    # With SP both are 1/4 per rank: (8 + 4) / 4 GB; without, the add is whole: 8 + 4 / 4 GB.
    assert sp.memory_s == pytest.approx(3e9 / BW)
    assert no_sp.memory_s == pytest.approx(9e9 / BW)
    # Without tensor parallel the flag changes nothing.
    one = ParallelConfig(sequence_parallel=False)
    assert predict(prof, parallel=one, **{**kw, "num_devices": 1}).memory_s == pytest.approx(
        12e9 / BW)
    assert ParallelConfig(tp_degree=4, sequence_parallel=False).label == "tp4+no-sp"


def _accum_profile():
    # 1e9 fp32 parameters in 10 tensors; the (fused) optimizer step moves 16 GB (5.3 ms, > its
    # host; PyTorch's default for-each step would move 20/7 of it).
    adam = op("optimizer.adamw[fused]", "optimizer", "optimizer", count=10, bytes_read=12e9,
              bytes_written=4e9)
    return make_profile([adam], mode="train", num_params=int(1e9), weights_bytes=int(4e9))


def test_gradient_accumulation_pass_per_extra_micro_batch(spec, exact_model):
    prof = _accum_profile()
    kw = {"hardware": spec, "precision": "fp32", "model": exact_model}
    base = predict(prof, num_devices=1, **kw)
    accum = predict(prof, num_devices=1, parallel=ParallelConfig(grad_accum_steps=4), **kw)
    # 3 extra micro-batches x 1e9 parameters x (read 4 + read 4 + write 4 bytes) = 36 GB,
    # in 3 x 10 calls (one per parameter tensor).
    assert accum.memory_s - base.memory_s == pytest.approx(36e9 / BW)
    assert accum.overhead_s - base.overhead_s == pytest.approx(30 * LAUNCH)
    # ZeRO-2 accumulates the reduced shard: 1/4 of it on 4 ranks (the reduction is comm).
    z2 = ParallelConfig(dp_degree=4, zero_stage=2, grad_accum_steps=4)
    z2_1 = ParallelConfig(dp_degree=4, zero_stage=2)
    shard = predict(prof, num_devices=4, parallel=z2, **kw)
    shard_1 = predict(prof, num_devices=4, parallel=z2_1, **kw)
    assert shard.memory_s - shard_1.memory_s == pytest.approx(9e9 / BW)
    # Pipeline micro-batches accumulate the same way (each stage holds 1/pp of the tensors).
    pp = ParallelConfig(pp_degree=2, num_microbatches=4)
    assert predict(prof, num_devices=2, parallel=pp, **kw).memory_s == pytest.approx(
        (16e9 / 2 + 3 * 1e9 / 2 * 12) / BW)


def _grad_profile():
    # 1e9 fp32 parameters (4 GB of gradients); backward: 8 GB moved = 0.5 GB per rank on 16.
    return make_profile([op("aten.add", "memory", "backward", bytes_read=6e9, bytes_written=2e9)],
                        mode="train", num_params=int(1e9), weights_bytes=int(4e9))


def test_gradient_reduction_hides_behind_the_last_micro_batch_only(spec, exact_model):
    # 16 devices = 2 nodes of 8; 400 Gb/s per device at 0.9 -> 45 GB/s across nodes (as in
    # test_multinode.test_ddp_across_nodes_by_hand).
    c = load_model().collectives
    intra = 450 * c.intra_node_efficiency
    ar = c.alpha_s["all_reduce"] + max(2 * 7 / 8 * 4e9 / (intra * 1e9),
                                       2 * 1 / 2 * (4e9 / 8) / 45e9)
    kw = {"hardware": spec, "precision": "fp32", "num_devices": 16, "model": exact_model,
          "fabric": {"gbps": 400, "latency_us": 0, "efficiency": 0.9}}
    # Accumulating 4 micro-batches: the backward runs 4 calls of 1/4 the size, plus the
    # accumulation pass (3 x 1e9 x 12 bytes in 3 calls: no optimizer record, one tensor);
    # the all-reduce can hide behind the last micro-batch only (1/4 of the backward's time).
    backward_s = 8e9 / 16 / BW + 4 * LAUNCH + 36e9 / BW + 3 * LAUNCH
    accum = predict(_grad_profile(), parallel=ParallelConfig(dp_degree=16, grad_accum_steps=4),
                    **kw)
    assert accum.communication_s == pytest.approx(ar - 0.8 * backward_s / 4, rel=1e-6)
    # A stack that reduces after the backward pays all of it.
    late = predict(_grad_profile(), parallel=ParallelConfig(dp_degree=16,
                                                            overlap_grad_reduce=False), **kw)
    assert late.communication_s == pytest.approx(ar, rel=1e-6)


def test_fsdp_reduce_scatters_in_every_accumulation_step(spec, exact_model):
    # FSDP over 16 devices, a short step: little hides, so the accumulation steps show.
    prof = make_profile([op("aten.add", "memory", "backward", bytes_read=6e9, bytes_written=2e9),
                         op("aten.add", "memory", "forward", bytes_read=3e9, bytes_written=1e9)],
                        mode="train", num_params=int(1e9), weights_bytes=int(4e9), num_blocks=24,
                        block_output_bytes=int(1e6))
    c = load_model().collectives
    nic = 8 * 400 * 0.92 / 8 / 8     # NDR: 46 GB/s per device across nodes
    intra = 450 * c.intra_node_efficiency

    def level(size):
        return max(7 / 8 * size / (intra * 1e9), 1 / 2 * size / 8 / (nic * 1e9))

    gather = c.alpha_s["all_gather"] + 2 * 1.5e-6 + level(4e9)
    rs = c.alpha_s["reduce_scatter"] + 2 * 1.5e-6 + level(4e9)
    for steps in (1, 2):
        window = 12e9 / 16 / BW + 2 * steps * LAUNCH      # forward + backward, all steps
        # + the accumulation pass of the second step: the 1/16 shard, 1e9 / 16 x 12 bytes,
        # one call per block (no optimizer record to count tensors by).
        window += (steps - 1) * (1e9 / 16 * 12 / BW + 24 * LAUNCH)
        pred = predict(prof, hardware=spec, precision="fp32", num_devices=16,
                       model=exact_model, fabric="NDR",
                       parallel=ParallelConfig(dp_degree=16, zero_stage=3,
                                               grad_accum_steps=steps))
        assert pred.communication_s == pytest.approx(
            steps * (2 * gather + rs) - 0.8 * window, rel=1e-6)


@pytest.mark.parametrize("name", ["sequence_parallel", "overlap_grad_reduce"])
def test_flags_must_be_booleans(name):
    with pytest.raises(InvalidArgumentError, match=rf"ParallelConfig.{name}='yes'.*True or False"):
        ParallelConfig(**{name: "yes"})


def test_activations_without_sequence_parallel_by_hand():
    from aiadvisor.recommend.memory import ActivationParts, activation_memory

    # 4 blocks of 34 GB each (no attention-score part), inputs 2 GB per block, tp = 2.
    parts = ActivationParts(batch_size=8, num_blocks=4, block_per_batch_bytes=34e9,
                            block_quadratic_bytes=0.0, block_input_bytes=2e9,
                            block_fixed_bytes=0.0, other_per_batch_bytes=0.0,
                            other_fixed_bytes=0.0, inputs_bytes=0.0, temporaries_bytes=0.0)

    def acts(**kw):
        return activation_memory(parts, ParallelConfig(tp_degree=2, **kw), micro_batch=8)[0]

    # With SP all of it halves: 4 x 34 / 2 = 68 GB. Without, 10 of each 34 GB stay whole:
    # 4 x (10 + 24 / 2) = 88 GB.
    assert acts() == pytest.approx(68e9)
    assert acts(sequence_parallel=False) == pytest.approx(88e9)
    # Full recompute keeps 4 inputs of 2 GB and one block being recomputed (34 GB): with SP
    # (8 + 34) / 2 = 21 GB; without, the inputs and 10 GB of the block stay whole: 8 + 10 +
    # 24 / 2 = 30 GB.
    assert acts(checkpointing="full") == pytest.approx(21e9)
    assert acts(checkpointing="full", sequence_parallel=False) == pytest.approx(30e9)


def test_full_checkpointing_recomputes_the_blocks_only(spec, exact_model):
    # Block forward 3 GB, head forward 6 GB: full recompute runs the block twice, the head once.
    block = _in("layers.*", op("aten.add", "memory", "forward", bytes_read=2e9,
                               bytes_written=1e9))
    head = dataclasses.replace(op("aten.mul", "memory", "forward", bytes_read=4e9,
                                  bytes_written=2e9), module="head")
    prof = make_profile([block, head], mode="train")
    kw = {"hardware": spec, "precision": "fp32", "num_devices": 1, "model": exact_model}
    full = predict(prof, parallel=ParallelConfig(checkpointing="full"), **kw)
    assert full.memory_s == pytest.approx((2 * 3e9 + 6e9) / BW)
    # A model without repeated blocks: checkpointing recomputes all of its forward.
    flat = make_profile([head], mode="train")
    assert predict(flat, parallel=ParallelConfig(checkpointing="full"), **kw).memory_s == \
        pytest.approx(2 * 6e9 / BW)


def test_multinode_band_widens_in_quadrature(monkeypatch, spec, exact_model):
    import importlib

    predict_module = importlib.import_module("aiadvisor.costmodel.predict")

    monkeypatch.setattr(predict_module, "MULTINODE_SPREAD", 0.1)
    # ln(1 / 0.9) = 0.10536 -> hypot with 0.1 = 0.14526; ln 1.2 = 0.18232 -> 0.20795.
    low, high = predict_module.stack_band(1.0, 0.9, 1.2, spans_nodes=True)
    assert low == pytest.approx(0.86480, abs=1e-5)
    assert high == pytest.approx(1.23114, abs=1e-5)
    assert predict_module.stack_band(1.0, 0.9, 1.2, spans_nodes=False) == (0.9, 1.2)
    # A step the learned model prices takes STEP_SPREAD (0.14) as well: hypot(0.10536, 0.14)
    # = 0.17522 and hypot(0.18232, 0.14) = 0.22987; with the 0.1 across nodes too, 0.20174
    # and 0.25068.
    assert predict_module.STEP_SPREAD == 0.14
    low, high = predict_module.stack_band(1.0, 0.9, 1.2, spans_nodes=False, learned=True)
    assert (low, high) == (pytest.approx(0.83928, abs=1e-5), pytest.approx(1.25844, abs=1e-5))
    low, high = predict_module.stack_band(1.0, 0.9, 1.2, spans_nodes=True, learned=True)
    assert (low, high) == (pytest.approx(0.81730, abs=1e-5), pytest.approx(1.28490, abs=1e-5))
    # Through predict, with no op spread (exact model) the raw band is the communication's
    # (x0.8 .. x1.5); 16 devices span 2 nodes of 8 and get the spread on top, 8 do not; both
    # are priced by the learned model.
    import math

    prof = _grad_profile()
    kw = {"hardware": spec, "precision": "fp32", "model": exact_model}
    for n, spans in ((8, False), (16, True)):
        pred = predict(prof, num_devices=n, **kw)
        step, comm = pred.step_time_s, pred.communication_s
        down, up = math.log(step / (step - 0.2 * comm)), math.log((step + 0.5 * comm) / step)
        down, up = math.hypot(down, 0.14), math.hypot(up, 0.14)
        if spans:
            down, up = math.hypot(down, 0.1), math.hypot(up, 0.1)
        assert pred.low_s == pytest.approx(step * math.exp(-down), rel=1e-9)
        assert pred.high_s == pytest.approx(step * math.exp(up), rel=1e-9)


def test_cpu_without_a_benchmark_widens_its_band(monkeypatch, exact_model):
    import importlib
    import math

    from aiadvisor.costmodel.api import predict_table

    predict_module = importlib.import_module("aiadvisor.costmodel.predict")
    # ESTIMATED_CPU_SPREAD (0.26) in quadrature: hypot(ln(1 / 0.9), 0.26) = 0.28054 and
    # hypot(ln 1.2, 0.26) = 0.31755; with STEP_SPREAD (0.14) too, 0.31353 and 0.34705.
    assert predict_module.ESTIMATED_CPU_SPREAD == 0.26
    low, high = predict_module.stack_band(1.0, 0.9, 1.2, spans_nodes=False, estimated_cpu=True)
    assert (low, high) == (pytest.approx(0.75538, abs=1e-5), pytest.approx(1.37376, abs=1e-5))
    low, high = predict_module.stack_band(1.0, 0.9, 1.2, spans_nodes=False, learned=True,
                                          estimated_cpu=True)
    assert (low, high) == (pytest.approx(0.73086, abs=1e-5), pytest.approx(1.41488, abs=1e-5))
    # Through predict and predict_table: a CPU priced from its estimated peaks takes it, the
    # same CPU benchmarked (measured=True) and a GPU do not.
    cpu = make_spec(name="Test CPU", vendor="AMD", kind="cpu", fp32_tflops=2.0,
                    bf16_tflops=4.0, tf32_tflops=None, fp16_tflops=None, fp8_tflops=None,
                    memory_bw_gbs=100.0, interconnect_bw_gbs=None)
    gpu = make_spec()
    prof = _grad_profile()
    bands = {}
    for spread in (0.0, 0.26):
        monkeypatch.setattr(predict_module, "ESTIMATED_CPU_SPREAD", spread)
        for name, hw in (("cpu", cpu), ("measured", dataclasses.replace(cpu, measured=True)),
                         ("gpu", gpu)):
            pred = predict(prof, hardware=hw, precision="fp32", model=exact_model)
            bands[name, spread] = (pred.step_time_s, pred.low_s, pred.high_s)
        table = predict_table(prof, specs=[cpu, gpu], precisions=["fp32"], model=exact_model)
        bands["table", spread] = tuple(table[["step_time_s", "low_s", "high_s"]].iloc[0])
    step, low0, high0 = bands["cpu", 0.0]
    _, low, high = bands["cpu", 0.26]
    assert bands["cpu", 0.26][0] == step
    assert math.log(step / low) == pytest.approx(math.hypot(math.log(step / low0), 0.26))
    assert math.log(high / step) == pytest.approx(math.hypot(math.log(high0 / step), 0.26))
    assert bands["table", 0.26] == pytest.approx(bands["cpu", 0.26], rel=1e-9)
    assert bands["measured", 0.26] == bands["measured", 0.0]
    assert bands["gpu", 0.26] == bands["gpu", 0.0]


def test_full_recompute_repeats_the_tensor_parallel_all_reduces(spec, exact_model):
    # 4 blocks, each output 8 MB in fp32 -> 4 MB in bf16, tp = 2, training: 2 all-reduces per
    # block forward and 2 backward = 16, each alpha + 2 * 1/2 * 4e6 / (450e9 * eff); full
    # checkpointing reruns the forward and its 8: 24.
    c = load_model().collectives
    one = c.alpha_s["all_reduce"] + 1.0 * 4e6 / (450e9 * c.intra_node_efficiency)
    prof = make_profile([op("aten.add", "memory", "forward", bytes_read=2e9, bytes_written=1e9)],
                        mode="train", num_blocks=4, block_output_bytes=8_000_000)
    kw = {"hardware": spec, "precision": "bf16", "num_devices": 2, "model": exact_model}
    plain = predict(prof, parallel=ParallelConfig(tp_degree=2), **kw)
    full = predict(prof, parallel=ParallelConfig(tp_degree=2, checkpointing="full"), **kw)
    selective = predict(prof, parallel=ParallelConfig(tp_degree=2, checkpointing="selective"),
                        **kw)
    assert plain.communication_s == pytest.approx(16 * one, rel=1e-6)
    assert full.communication_s == pytest.approx(24 * one, rel=1e-6)
    # Selective recompute reruns the attention core only, inside the TP region: no more.
    assert selective.communication_s == pytest.approx(16 * one, rel=1e-6)


def test_prediction_says_which_stack_it_assumed(spec, exact_model):
    prof = _grad_profile()
    kw = {"hardware": spec, "precision": "fp32", "model": exact_model}

    def stack(parallel):
        pred = predict(prof, num_devices=parallel.num_devices, parallel=parallel, **kw)
        return [n for n in pred.notes if n.startswith("Stack assumed")]

    notes = stack(ParallelConfig(dp_degree=2, tp_degree=2, sequence_parallel=False,
                                 overlap_grad_reduce=False, grad_accum_steps=2))
    assert len(notes) == 1
    assert "without sequence parallelism" in notes[0]
    assert "after the backward (not overlapped)" in notes[0]
    assert "accumulation pass" in notes[0]
    assert "with sequence parallelism" in stack(ParallelConfig(tp_degree=2))[0]
    assert stack(ParallelConfig()) == []
