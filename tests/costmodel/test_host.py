"""The host side of eager PyTorch: counts in the profile, CPU host costs, max(device, host) on
accelerators and what CUDA graphs remove."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa
from aiadvisor.costmodel.host import (
    EAGER_KERNEL_US,
    MODULE_CALL_US,
    TORCHSCRIPT_SPEEDUP,
    VIEW_OP_US,
    HostCounts,
    accelerator_host_s,
    cpu_host_extra_s,
)
from aiadvisor.hardware.host import HostCosts, measure_host_costs


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64))


def test_profile_counts_module_calls_and_view_ops():
    prof = aa.profile(_mlp(), torch.randn(2, 64), mode="infer", scaling=False)
    # Sequential + Linear + ReLU + Linear: 4 calls; each Linear on 2-D input transposes its
    # weight (aten.t, a view) for addmm: 2 views.
    assert prof.num_module_calls == 4
    assert prof.num_view_ops_forward == 2
    assert prof.num_view_ops_backward == 0


def test_repeated_blocks_multiply_module_calls():
    from aiadvisor import examples

    model, ids = examples.build("tiny-gpt", batch_size=1, seq_len=16)
    once = aa.profile(model, ids, mode="infer", scaling=False, repeated_blocks=False)
    traced_one = aa.profile(model, ids, mode="infer", scaling=False)
    assert traced_one.num_module_calls == once.num_module_calls
    assert traced_one.num_view_ops_forward == once.num_view_ops_forward


def test_cpu_host_extra_by_hand():
    costs = HostCosts(dispatch_us=1.0, autograd_us=0.5, backward_node_us=3.0, module_us=2.0,
                      view_us=0.8)
    counts = HostCounts(forward_ops=10, backward_ops=20, optimizer_ops=4, module_calls=5,
                        view_ops=10)
    extra, total = cpu_host_extra_s(counts, costs, train=True)
    # modules 5 x 2 + views 10 x 0.8 + forward ops 10 x (0.5 autograd + (3 - 1) engine) = 43 us
    assert extra == pytest.approx(43e-6)
    # plus the dispatch already inside the measured op times: (10 + 20) x 1 us
    assert total == pytest.approx(73e-6)
    extra_infer, _ = cpu_host_extra_s(counts, costs, train=False)
    assert extra_infer == pytest.approx(18e-6)   # no autograd in inference


def test_accelerator_host_by_hand():
    counts = HostCounts(forward_ops=100, backward_ops=200, optimizer_ops=50, module_calls=40,
                        view_ops=60)
    low, mid, high = accelerator_host_s(counts)
    fixed = 40 * MODULE_CALL_US + 60 * VIEW_OP_US
    assert mid == pytest.approx((300 * EAGER_KERNEL_US[1] + fixed) * 1e-6)
    assert low < mid < high


def test_small_batch_gpu_step_is_host_bound_and_graphs_remove_it():
    prof = aa.profile(_mlp(), torch.randn(1, 64), mode="infer")
    small = aa.predict(prof, hardware="H100", precision="bf16")
    # 3 kernels x 27.5 us + 4 module calls x 1 us + 2 views x 0.8 us = 88.1 us of host time,
    # more than the device needs for three tiny kernels.
    assert small.host_s == pytest.approx(88.1e-6)
    assert small.host_bound
    assert small.step_time_s == pytest.approx(small.host_s)
    assert small.graphs_step_s < small.step_time_s
    assert small.low_s <= small.step_time_s <= small.high_s
    assert any("CUDA graphs" in n for n in small.notes)
    big = aa.predict(prof.at(batch_size=2**22), hardware="H100", precision="bf16")
    # The host work does not grow with the batch; the device's does.
    assert big.host_s == pytest.approx(small.host_s)
    assert not big.host_bound
    assert big.graphs_step_s == pytest.approx(big.step_time_s)


def test_measured_host_costs_are_positive_and_ordered():
    costs = measure_host_costs(num_ops=50)
    for name in ("dispatch_us", "backward_node_us", "view_us"):
        assert 0 < getattr(costs, name) < 1000, name
    # Running a backward node dispatches its op and more: never cheaper than a bare dispatch
    # (medians of repeated timings; a 2x margin for a busy machine).
    assert costs.backward_node_us > 0.5 * costs.dispatch_us
    assert "measured" in costs.source


def test_measured_optimizer_loop_costs_follow_the_update_ops():
    costs = measure_host_costs(num_ops=50)
    adamw, sgd_m, sgd = (costs.optimizer_us(n) for n in ("adamw", "sgd_momentum", "sgd"))
    # Per tensor, AdamW's loop runs 8 update ops (mul_, lerp_, mul_, addcmul_, sqrt, div, add_,
    # addcdiv_) and its bias corrections; SGD with momentum 3 (mul_, add_, add_); plain SGD 1.
    # Each op costs at least a dispatch, so the order holds with room for a busy machine.
    assert adamw > sgd_m > sgd > 0
    assert adamw > 4 * costs.dispatch_us
    assert costs.optimizer_us("adam") == adamw      # Adam runs the same loop as AdamW
    assert costs.optimizer_us("lion") is None


def _optimizer_work(name: str, count: float, flops_per_call: float):
    from types import SimpleNamespace

    import numpy as np
    return SimpleNamespace(op_class=np.array(["gemm", "optimizer"], dtype=object),
                           name=np.array(["aten.mm", name], dtype=object),
                           count=np.array([1.0, count]),
                           flops_per_call=np.array([1e6, flops_per_call]))


def _parts(memory_s: float, overhead_s: float):
    import numpy as np
    return {"compute": np.zeros((3, 1, 2)),
            "memory": np.full((3, 1, 2), memory_s),
            "overhead": np.full((3, 1, 2), overhead_s)}


def test_cpu_prices_the_default_for_loop_optimizer_by_hand():
    from types import SimpleNamespace

    from aiadvisor.costmodel.predict import _default_optimizer_steps

    costs = HostCosts(dispatch_us=1.0, autograd_us=0.5, backward_node_us=3.0, module_us=2.0,
                      view_us=0.8, optimizer_tensor_us=(("adamw", 20.0), ("sgd", 2.0)))
    cpu = SimpleNamespace(specs=[SimpleNamespace(kind="cpu")])
    # AdamW over 4 tensors, profiled at the fused traffic (7 tensors an element) taking 1 ms:
    # the for-loop streams 20 tensors an element (1 ms x 20/7) and its loop costs 4 x 20 us.
    parts = _parts(1e-3, 5e-6)
    _default_optimizer_steps(parts, _optimizer_work("optimizer.adamw", 4, 1e6), cpu, None, [costs])
    assert parts["memory"][1, 0, 1] == pytest.approx(1e-3 * 20 / 7)
    assert parts["overhead"][1, 0, 1] == pytest.approx(80e-6)
    assert parts["memory"][1, 0, 0] == pytest.approx(1e-3)       # the GEMM is untouched
    # Plain SGD: param.add_(grad) is the fused traffic already (3 tensors).
    parts = _parts(1e-3, 5e-6)
    _default_optimizer_steps(parts, _optimizer_work("optimizer.sgd", 4, 1e6), cpu, None, [costs])
    assert parts["memory"][1, 0, 1] == pytest.approx(1e-3)
    assert parts["overhead"][1, 0, 1] == pytest.approx(8e-6)
    # A fused step keeps its bytes and its one launch, on a CPU and on a GPU.
    gpu = SimpleNamespace(specs=[SimpleNamespace(kind="gpu")])
    for name, devs in (("optimizer.adamw[fused]", cpu), ("optimizer.adamw[fused]", gpu)):
        parts = _parts(1e-3, 5e-6)
        _default_optimizer_steps(parts, _optimizer_work(name, 4, 1e6), devs, None, [costs])
        assert parts["memory"][1, 0, 1] == pytest.approx(1e-3)
        assert parts["overhead"][1, 0, 1] == pytest.approx(5e-6)
    # A GPU's default for-each AdamW runs the loop's ops over tensor lists: 20 tensor passes
    # an element (1 ms x 20/7), its launches as fitted (no Python loop per tensor).
    parts = _parts(1e-3, 5e-6)
    _default_optimizer_steps(parts, _optimizer_work("optimizer.adamw", 4, 1e6), gpu, None,
                             [costs])
    assert parts["memory"][1, 0, 1] == pytest.approx(1e-3 * 20 / 7)
    assert parts["overhead"][1, 0, 1] == pytest.approx(5e-6)


def test_calibrated_fused_optimizer_scales_the_timed_loop_by_tensor_passes():
    from aiadvisor.costmodel.local import LocalCalibration

    # The grid timed AdamW's default loop at 22 us a tensor + 1.7 ns an element.
    cal = LocalCalibration(optimizer={"adamw": (22e-6, 1.7e-9)})
    elements = 1_000_000
    flops = 14.0 * elements                        # AdamW: 14 FLOPs an element (units.py)
    assert cal.optimizer_seconds("optimizer.adamw", 4, flops) == pytest.approx(
        4 * 22e-6 + 1.7e-9 * elements)
    # Fused: one tensor's fixed cost, and 7 of the loop's 20 tensor passes per element.
    assert cal.optimizer_seconds("optimizer.adamw[fused]", 1, flops) == pytest.approx(
        22e-6 + 1.7e-9 * 7 / 20 * elements)


def test_cpu_fresh_outputs_over_the_mmap_threshold_pay_page_faults_by_hand():
    from types import SimpleNamespace

    import numpy as np

    from aiadvisor.costmodel.predict import _cpu_fresh_outputs
    from aiadvisor.hardware.host import FRESH_OUTPUT_BYTES

    assert FRESH_OUTPUT_BYTES == 32 * 2**20     # glibc's largest mmap threshold
    mib = 2**20
    work = SimpleNamespace(
        name=np.array(["aten.mm", "aten.add_", "aten.relu", "aten.gelu"], dtype=object),
        op_class=np.array(["gemm", "memory", "memory", "memory"], dtype=object),
        count=np.array([2.0, 2.0, 2.0, 3.0]),
        written_per_call=np.array([64.5 * mib, 64.5 * mib, 31.0 * mib, 80.0 * mib]))
    costs = HostCosts(dispatch_us=1.0, autograd_us=0.5, backward_node_us=3.0, module_us=2.0,
                      view_us=0.8, fresh_us_per_mib=150.0)
    cpu = SimpleNamespace(specs=[SimpleNamespace(kind="cpu")])

    def parts():
        return {"compute": np.zeros((3, 1, 4)), "memory": np.zeros((3, 1, 4)),
                "overhead": np.zeros((3, 1, 4))}

    # Unbenchmarked: the GEMM's two 64.5 MiB outputs (2 x 64.5 x 150 us = 19.35 ms) and the
    # GELU's three 80 MiB ones (36 ms); not the in-place add_ nor the 31 MiB ReLU.
    p = parts()
    _cpu_fresh_outputs(p, work, cpu, None, [costs])
    assert p["memory"][1, 0].tolist() == pytest.approx([19.35e-3, 0.0, 0.0, 36e-3])
    # Benchmarked: its calibration's first-touch figure (0.1 ns a byte) instead, same rows:
    # 2 x 64.5 MiB and 3 x 80 MiB at 0.1 ns a byte.
    p = parts()
    _cpu_fresh_outputs(p, work, cpu, [SimpleNamespace(first_touch_s_per_byte=1e-10)], [costs])
    assert p["memory"][1, 0].tolist() == pytest.approx(
        [2 * 64.5 * mib * 1e-10, 0.0, 0.0, 3 * 80 * mib * 1e-10])
    # A calibration from before the first touch was timed adds nothing (not the host figure).
    p = parts()
    _cpu_fresh_outputs(p, work, cpu, [SimpleNamespace(first_touch_s_per_byte=0.0)], [costs])
    assert p["memory"][1, 0].tolist() == [0.0, 0.0, 0.0, 0.0]


def test_training_forward_outputs_pay_a_pass_of_the_bandwidth_by_hand():
    from types import SimpleNamespace

    import numpy as np

    from aiadvisor.costmodel.predict import KEPT_OUTPUT_PASSES, _cpu_kept_outputs

    assert KEPT_OUTPUT_PASSES == 1.0
    mib = 2**20
    # Forward: a GEMM writing 3 MiB twice, an in-place add_, a 40 MiB GELU output (pays page
    # faults instead), an optimizer row; backward: a 3 MiB gradient. Only the forward's two
    # GEMM outputs are kept: 2 x 3 MiB at 25 GB/s (unbenchmarked: the spec's bandwidth)
    # = 6 x 1048576 / 25e9 = 251.66 us; a calibration's measured 20 GB/s: 314.57 us.
    work = SimpleNamespace(
        name=np.array(["aten.mm", "aten.add_", "aten.gelu", "optimizer.adamw", "aten.mm"],
                      dtype=object),
        op_class=np.array(["gemm", "memory", "memory", "optimizer", "gemm"], dtype=object),
        phase=np.array(["forward", "forward", "forward", "optimizer", "backward"],
                       dtype=object),
        count=np.array([2.0, 2.0, 1.0, 1.0, 2.0]),
        written_per_call=np.array([3.0 * mib, 3.0 * mib, 40.0 * mib, 3.0 * mib, 3.0 * mib]))
    cpu = SimpleNamespace(specs=[SimpleNamespace(kind="cpu")], bw_gbs=np.array([[25.0]]))
    gpu = SimpleNamespace(specs=[SimpleNamespace(kind="gpu")], bw_gbs=np.array([[3000.0]]))

    def parts():
        return {"compute": np.zeros((3, 1, 5)), "memory": np.zeros((3, 1, 5))}

    p = parts()
    _cpu_kept_outputs(p, work, cpu, None)
    assert p["memory"][1, 0].tolist() == pytest.approx([6 * mib / 25e9, 0, 0, 0, 0])
    p = parts()
    _cpu_kept_outputs(p, work, cpu, [SimpleNamespace(bw_gbs=20.0)])
    assert p["memory"][1, 0].tolist() == pytest.approx([6 * mib / 20e9, 0, 0, 0, 0])
    p = parts()
    _cpu_kept_outputs(p, work, gpu, None)   # a GPU's caching allocator: nothing
    assert not p["memory"].any()


def test_adam_square_roots_of_a_zero_second_moment_by_hand():
    from types import SimpleNamespace

    import numpy as np

    from aiadvisor.costmodel.predict import _cpu_zero_state
    from aiadvisor.units import OPTIMIZER_TRAFFIC

    # An AdamW record of 10 M elements (14 FLOPs an element as profiled), an SGD one, and a
    # fused AdamW: 40 % of the trainable elements have a zero second moment; the CPU takes
    # 0.7 ns more for the square root of a zero: 0.4 x 10e6 x 0.7e-9 = 2.8 ms, on AdamW only.
    assert OPTIMIZER_TRAFFIC["adamw"][1] == 14
    work = SimpleNamespace(
        name=np.array(["optimizer.adamw", "optimizer.sgd", "optimizer.adamw[fused]"],
                      dtype=object),
        op_class=np.array(["optimizer"] * 3, dtype=object),
        count=np.array([1.0, 1.0, 1.0]), flops_per_call=np.array([14e7, 2e7, 14e7]))
    cpu = SimpleNamespace(specs=[SimpleNamespace(kind="cpu", name="local CPU")])
    cal = SimpleNamespace(zero_sqrt_s_per_element=0.7e-9)
    parts = {k: np.zeros((3, 1, 3)) for k in ("compute", "memory", "overhead")}
    notes: list[str] = []
    _cpu_zero_state(parts, work, cpu, [cal], 0.4, notes)
    assert parts["memory"][:, 0].ravel().tolist() == pytest.approx([2.8e-3, 0.0, 0.0] * 3)
    assert len(notes) == 1 and "4 M second-moment elements" in notes[0] and "2.8 ms" in notes[0]
    # An unbenchmarked CPU (no calibration), a calibration from before it was timed, a GPU, or
    # no zero state: nothing.
    for curves, devs, fraction in (([None], cpu, 0.4), ([SimpleNamespace(
            zero_sqrt_s_per_element=0.0)], cpu, 0.4), ([cal], SimpleNamespace(
            specs=[SimpleNamespace(kind="gpu", name="A100")]), 0.4), ([cal], cpu, 0.0)):
        parts = {k: np.zeros((3, 1, 3)) for k in ("compute", "memory", "overhead")}
        _cpu_zero_state(parts, work, devs, curves, fraction, [])
        assert not parts["memory"].any()


def test_measured_fresh_output_cost_is_positive_whatever_the_heap_holds():
    # A copy into 128 MiB of new pages faults in 32768 pages of 4 KiB; even a fast machine
    # spends > 5 us a MiB faulting and zeroing them (the development CPU: 150-200 us a MiB).
    # Read here, late in a long test process: when the fresh output was a clone(), 2 of 6 runs
    # of tests/hardware + tests/costmodel read under 1 us a MiB (memory the process already
    # held); new pages are new whatever the heap holds.
    from aiadvisor.hardware.host import _fresh_output_us_per_mib

    blocks = [torch.empty(2**22) for _ in range(16)]   # 256 MiB of heap freed first
    keep = torch.empty(2**16)
    del blocks
    assert _fresh_output_us_per_mib() > 5
    del keep


def test_refill_seconds_interpolates_and_scales_by_the_host_work_that_follows():
    import numpy as np

    costs = HostCosts(dispatch_us=1.0, autograd_us=0.5, backward_node_us=3.0, module_us=2.0,
                      view_us=0.8, refill_us=((1.0, 10.0), (4.0, 40.0), (16.0, 100.0)),
                      refill_block_us=50.0)
    mib = 2**20
    # 0.5 MiB: half-way from (0, 0) to (1, 10) = 5 us; 2.5 MiB: half-way 10 -> 40 = 25 us;
    # 64 MiB: flat beyond the largest size = 100 us. 50 us of host work follows: the full block.
    got = costs.refill_seconds(np.array([0.5, 2.5, 64.0]) * mib, 50e-6)
    assert got.tolist() == pytest.approx([5e-6, 25e-6, 100e-6])
    # 12.5 us follows: sqrt(12.5 / 50) = half the block's refill; more than the block: capped
    # at the block's.
    assert costs.refill_seconds(4 * mib, 12.5e-6) == pytest.approx(20e-6)
    assert costs.refill_seconds(4 * mib, 500e-6) == pytest.approx(40e-6)
    # Not measured: nothing.
    bare = HostCosts(dispatch_us=1.0, autograd_us=0.5, backward_node_us=3.0, module_us=2.0,
                     view_us=0.8)
    assert bare.refill_seconds(np.array([4.0 * mib]), 1e-3).tolist() == [0.0]


def test_cpu_refill_charges_runs_of_streaming_gemms_by_hand():
    from types import SimpleNamespace

    import numpy as np

    from aiadvisor.costmodel.predict import _cpu_refill

    mib = 2**20
    # In trace order, inside two repeated blocks: two back-to-back streaming GEMMs (8 and 2
    # MiB a call, 2 calls each: one run, twice), an elementwise op, a 16 MiB GEMM (a second
    # run), a 0.5 MiB GEMM (below the 1 MiB floor: not streaming); outside the blocks a 4 MiB
    # head GEMM (a third run, nothing after it); then the optimizer (another phase).
    work = SimpleNamespace(
        name=np.array(["aten.mm", "aten.mm", "aten.add", "aten.mm", "aten.mm", "aten.mm",
                       "optimizer.adamw"], dtype=object),
        op_class=np.array(["gemm", "gemm", "memory", "gemm", "gemm", "gemm", "optimizer"],
                          dtype=object),
        phase=np.array(["forward"] * 6 + ["optimizer"], dtype=object),
        count=np.array([2.0, 2.0, 6.0, 2.0, 4.0, 1.0, 1.0]),
        bytes_per_call=np.array([8.0, 2.0, 4.0, 16.0, 0.5, 4.0, 64.0]) * mib)
    in_block = np.array([True] * 5 + [False, False])
    costs = HostCosts(dispatch_us=1.0, autograd_us=0.5, backward_node_us=3.0, module_us=2.0,
                      view_us=0.8,
                      refill_us=((1.0, 10.0), (4.0, 40.0), (16.0, 100.0), (32.0, 120.0)),
                      refill_block_us=50.0)
    counts = HostCounts(forward_ops=17, backward_ops=0, optimizer_ops=1, module_calls=6,
                        view_ops=5)

    def parts():
        p = {k: np.zeros((3, 1, 7)) for k in ("compute", "memory", "overhead")}
        p["memory"][1, 0] = [1e-3, 1e-4, 24e-6, 2e-3, 20e-6, 5e-4, 5e-3]
        p["overhead"][1, 0] = [2e-6, 1e-6, 6e-6, 2e-6, 4e-6, 1e-6, 1e-6]
        return p

    cpu = SimpleNamespace(specs=[SimpleNamespace(kind="cpu")])
    p, notes = parts(), []
    p["overhead"][0, 0] = p["overhead"][2, 0] = p["overhead"][1, 0]
    _cpu_refill(p, work, cpu, [costs], counts, notes, in_block=in_block, num_blocks=2)
    # Streamed in the blocks: 2 x 8 + 2 x 2 + 2 x 16 = 52 MiB, 26 MiB a block; in the whole
    # forward, 56 MiB. Module calls and views: 6 x 2 + 5 x 0.8 = 16 us over 5 streams (2 + 2
    # + 1 calls) = 3.2 us each.
    # Run 1 (rows 0-1), 26 MiB since its followers last ran: 100 + 20 x 10/16 = 112.5 us of
    # refill; followed by the add (30 us over 2 calls) + 3.2 us: x sqrt(18.2 / 50), twice,
    # split between its two records by calls.
    # Run 2 (row 3): also 112.5 us; followed by the small GEMM (24 us over 2) + 3.2 us.
    # Run 3 (row 5, outside the blocks): 56 MiB since (flat beyond 32 MiB: 120 us); 3.2 us.
    run1 = 2 * 112.5e-6 * (18.2 / 50) ** 0.5
    run2 = 2 * 112.5e-6 * (15.2 / 50) ** 0.5
    run3 = 120e-6 * (3.2 / 50) ** 0.5
    got = p["overhead"][1, 0]
    assert got[0] == pytest.approx(2e-6 + run1 / 2)
    assert got[1] == pytest.approx(1e-6 + run1 / 2)
    assert got[3] == pytest.approx(2e-6 + run2)
    assert got[5] == pytest.approx(1e-6 + run3)
    assert got[[2, 4, 6]].tolist() == pytest.approx([6e-6, 4e-6, 1e-6])
    # P10 and P90: half and one and a half times the refill.
    assert p["overhead"][0, 0, 3] == pytest.approx(2e-6 + 0.5 * run2)
    assert p["overhead"][2, 0, 3] == pytest.approx(2e-6 + 1.5 * run2)
    assert len(notes) == 1 and "5 stream(s)" in notes[0]
    # Without blocks, every run lost what the whole forward streamed (56 MiB: 120 us).
    p = parts()
    _cpu_refill(p, work, cpu, [costs], counts, [])
    assert p["overhead"][1, 0, 3] == pytest.approx(2e-6 + 2 * 120e-6 * (15.2 / 50) ** 0.5)
    # An accelerator (or a CPU without measured refill) is left alone.
    gpu = SimpleNamespace(specs=[SimpleNamespace(kind="gpu")])
    p = parts()
    _cpu_refill(p, work, gpu, [costs], counts, [], in_block=in_block, num_blocks=2)
    assert all((p[k] == parts()[k]).all() for k in p)


def test_measured_refill_after_a_large_stream_is_positive():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    costs = measure_host_costs(num_ops=50)
    assert torch.equal(torch.get_rng_state(), state)   # the user's random state is untouched
    mib, us = zip(*costs.refill_us)
    assert mib == (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
    assert costs.refill_block_us > 0
    # Never less after a larger stream (kept monotone), and a 32 MiB GEMV evicts any core's
    # L2 (at most a few MiB on current CPUs): the block then pays something to refetch its
    # working set (the development CPU: about +100 us on a 45-51 us block).
    assert list(us) == sorted(us)
    assert us[-1] > 0


def test_default_adamw_step_pays_fresh_pages_for_tensors_over_the_threshold_by_hand():
    from types import SimpleNamespace

    import numpy as np

    from aiadvisor.costmodel.predict import _cpu_fresh_outputs

    mib = 2**20
    work = SimpleNamespace(
        name=np.array(["optimizer.adamw", "optimizer.adamw[fused]", "optimizer.sgd_momentum"],
                      dtype=object),
        op_class=np.array(["optimizer"] * 3, dtype=object), count=np.array([3.0, 1.0, 3.0]),
        written_per_call=np.array([1.0, 1.0, 1.0]))
    costs = HostCosts(dispatch_us=1.0, autograd_us=0.5, backward_node_us=3.0, module_us=2.0,
                      view_us=0.8, fresh_us_per_mib=150.0)
    cpu = SimpleNamespace(specs=[SimpleNamespace(kind="cpu")])
    parts = {k: np.zeros((3, 1, 3)) for k in ("compute", "memory", "overhead")}
    # An MLP's 4096 x 4096 FP32 weight (64 MiB) and two 16 MiB ones: only the 64 MiB tensor
    # is over glibc's 32 MiB mmap threshold. The for-loop AdamW step makes its sqrt and its
    # division anew each step: 2 x 64 MiB x 150 us a MiB = 19.2 ms. The fused step works in
    # place, and SGD with momentum makes no temporaries.
    _cpu_fresh_outputs(parts, work, cpu, None, [costs], (64 * mib, 16 * mib, 16 * mib))
    assert parts["memory"][1, 0].tolist() == pytest.approx([19.2e-3, 0.0, 0.0])


def test_training_profiles_list_their_large_parameter_tensors():
    net = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.Linear(1024, 256))
    prof = aa.profile(net, torch.randn(4, 1024), mode="train")
    # 1024 x 1024 x 4 bytes = 4 MiB and 256 x 1024 x 4 = 1 MiB; the biases are under 1 MiB.
    assert prof.large_param_bytes == (4 * 2**20, 2**20)
    assert aa.profile(net, torch.randn(4, 1024), mode="infer").large_param_bytes == ()
    # One device's optimizer updates each large tensor split over tensor parallel ranks, and
    # over data parallel ranks with ZeRO: 1024 x 1024 and 256 x 1024 elements over 2 x 2.
    import numpy as np

    from aiadvisor.costmodel.api import _ops
    from aiadvisor.costmodel.ops import device_work
    from aiadvisor.schema import ParallelConfig

    ops = _ops(prof)
    ones = np.ones(len(ops))
    assert device_work(prof, ops, ones, 0.0, ParallelConfig()).optimizer_large_elements == \
        (1024 * 1024, 256 * 1024)
    split = device_work(prof, ops, ones, 0.0, ParallelConfig(dp_degree=2, zero_stage=1,
                                                              tp_degree=2))
    assert split.optimizer_large_elements == (1024 * 1024 / 4, 256 * 1024 / 4)


def test_lazy_tensor_accelerators_trace_every_op_on_the_host():
    from aiadvisor.costmodel.host import EAGER_KERNEL_US, LAZY_OP_US

    # PyTorch/XLA and Gaudi's lazy mode run the model's Python every step, recording each op
    # instead of launching it: priced as the eager per-kernel figure.
    assert LAZY_OP_US == EAGER_KERNEL_US
    prof = aa.profile(_mlp(), torch.randn(1, 64), mode="infer")
    tpu = aa.predict(prof, hardware="TPU v5e", precision="bf16")
    # 3 ops x 27.5 us + 4 module calls x 1 us + 2 views x 0.8 us = 88.1 us
    assert tpu.host_s == pytest.approx(88.1e-6)
    assert tpu.host_bound and any("Lazy-tensor" in n for n in tpu.notes)
    gpu = aa.predict(prof, hardware="H100", precision="bf16")
    assert gpu.host_s == pytest.approx(tpu.host_s)  # 27.5 us a kernel with its launch


def test_catalog_cpus_pay_the_host_side_too():
    # A small model's step on a 128-core catalog CPU is priced with the attached CPU's host
    # costs (dispatch, autograd, the optimizer loop), not at the roofline's microseconds.
    prof = aa.profile(_mlp(), torch.randn(32, 64), mode="train", optimizer="adamw")
    big = aa.predict(prof, hardware="AMD EPYC 9755", precision="fp32")
    assert big.host_s > 0
    assert big.step_time_s >= big.host_s


def test_torchscript_host_by_hand():
    counts = HostCounts(forward_ops=100, backward_ops=0, optimizer_ops=0, module_calls=40,
                        view_ops=60)
    host = accelerator_host_s(counts, runtime="torchscript")
    # No module calls; 100 kernels and 60 view ops at eager's figures over 1.74.
    assert TORCHSCRIPT_SPEEDUP == 1.74
    expected = (100 * EAGER_KERNEL_US[1] + 60 * VIEW_OP_US) / 1.74 * 1e-6
    assert host[1] == pytest.approx(expected)
    eager = accelerator_host_s(counts)
    assert eager[1] == pytest.approx((100 * EAGER_KERNEL_US[1] + 40 * MODULE_CALL_US
                                      + 60 * VIEW_OP_US) * 1e-6)


def test_torchscript_runtime_issues_a_small_batch_faster_and_says_so():
    prof = aa.profile(_mlp(), torch.randn(2, 64), mode="infer", scaling=False)
    eager = aa.predict(prof, hardware="A100 80GB SXM", precision="fp32")
    script = aa.predict(prof, hardware="A100 80GB SXM", precision="fp32", runtime="torchscript")
    # Both host-bound at batch 2; the host loses its 4 module calls and runs 1.74x faster.
    assert eager.host_bound and script.host_bound
    assert script.host_s == pytest.approx((eager.host_s - 4 * MODULE_CALL_US * 1e-6) / 1.74)
    assert script.step_time_s == pytest.approx(script.host_s)
    assert script.stack.startswith("TorchScript") and eager.stack.startswith("eager")
    assert any("TorchScript's interpreter" in n for n in script.notes)
    # The device side does not change: CUDA graphs remove the host either way.
    assert script.graphs_step_s == pytest.approx(eager.graphs_step_s)


def test_unknown_runtime_is_a_clear_error():
    prof = aa.profile(_mlp(), torch.randn(2, 64), mode="infer", scaling=False)
    with pytest.raises(aa.AIAdvisorError, match=r"runtime='jit'.*'eager', 'torchscript'"):
        aa.predict(prof, hardware="A100 80GB SXM", runtime="jit")


def test_tensor_parallel_all_reduces_are_host_launches_in_eager_pytorch():
    from aiadvisor import examples
    from aiadvisor.schema import ParallelConfig

    model, ids = examples.build("tiny-gpt", batch_size=1, seq_len=16)
    prof = aa.profile(model, ids, mode="infer", scaling=False)
    assert prof.num_blocks > 0
    one = aa.predict(prof, hardware="H100 SXM", precision="bf16")
    two = aa.predict(prof, hardware="H100 SXM", precision="bf16", num_devices=2,
                     parallel=ParallelConfig(tp_degree=2))
    # Each device still issues every kernel; tensor parallel adds two all-reduce calls per
    # block (after attention and after the MLP), each an eager call from Python.
    assert two.host_s - one.host_s == pytest.approx(
        2 * prof.num_blocks * EAGER_KERNEL_US[1] * 1e-6, rel=1e-6)


def test_fresh_output_cost_is_the_median_of_pairs_timed_in_turn(monkeypatch):
    import sys
    import types

    from aiadvisor.hardware import calibrate, host

    # A fake clock and fake tensors: each copy_ into the reused tensor takes 1 ms; the untimed
    # first copy into new pages 0.02 ms, then copies of 1 ms + the fresh-page cost, with two
    # spikes (guest pages faulted in again) among nine pairs. Per 1 MiB: diffs in ms are
    # 0.15, 1.5, 0.16, 0.15, 0.9, 0.17, 0.15, 0.16, 0.15 -> median 0.16 ms = 160 us a MiB.
    clock = [0.0]
    fresh = iter([0.02e-3] + [(1 + d) * 1e-3 for d in
                              (0.15, 1.5, 0.16, 0.15, 0.9, 0.17, 0.15, 0.16, 0.15)])
    mapped = []

    class Fake:
        def __init__(self, new_pages=False):
            self.new_pages = new_pages

        def copy_(self, other):
            clock[0] += next(fresh) if self.new_pages else 1e-3

    def fake_write_fresh(torch, num_bytes, write):
        mapped.append(num_bytes)
        write(Fake(new_pages=True))

    fake_torch = types.SimpleNamespace(ones=lambda n: Fake(), empty=lambda n: Fake())
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(calibrate, "write_fresh", fake_write_fresh)
    monkeypatch.setattr(host, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    assert host._fresh_output_us_per_mib(mib=1) == pytest.approx(160.0)
    with pytest.raises(StopIteration):   # every fresh copy was used: one untimed, nine timed
        next(fresh)
    # Each copy had its own 1 MiB of new pages.
    assert mapped == [2**20] * 10
