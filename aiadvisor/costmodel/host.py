"""The host side of an eager PyTorch step: Python and the dispatcher issue every op, autograd
records and runs a node per op, every ``nn.Module`` call costs a little.

* On a **CPU** the host thread also runs the kernels, so host work adds to the step. The op
  times of a benchmarked CPU (:mod:`aiadvisor.costmodel.local`) are timed from Python and already
  hold each op's dispatch; what they do not hold is added here from the host costs measured on
  the attached CPU (:mod:`aiadvisor.hardware.host`): the autograd node recorded per forward op
  and run per backward node (training), the module calls and the view ops.
* On an **accelerator** kernels run asynchronously: the host enqueues while the device works, so
  ``step = max(device, host)`` (plus the device's own per-kernel gaps, already in the device
  time). The host issues each kernel in :data:`EAGER_KERNEL_US` (Python, dispatcher, autograd
  and ``cudaLaunchKernel``), each module call and view op as measured on the development CPU.
  CUDA graphs (``torch.compile(mode="reduce-overhead")``) replay the whole step with one launch:
  the host part goes, the device part stays (``graphs_step_s``).
* On a **lazy-tensor** accelerator (TPU, NPU: PyTorch/XLA, Gaudi's lazy mode) the Python still
  traces every op each step while the device runs the previous graph: ``step = max(device,
  host)`` with the tracing time per op (:data:`LAZY_OP_US`); compiling the step removes it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

#: Host time per kernel of eager PyTorch on a GPU, microseconds (P10, P50, P90): Python, the
#: dispatcher, autograd and ``cudaLaunchKernel`` for each op, with the model's own Python
#: between ops (module calls, reshapes) spread over its kernels. P50: Hugging Face's ResNet-50
#: in eager FP32 on an A100 and a V100 took 6.48-6.66 ms at batch 1 and 4 (transformers docs,
#: perf_torch_compile.md), flat in the batch, host-bound: 27.5 us for each of its 227 kernels.
#: P90: MiniLM-L6 at batch 1 on a T4 and an RTX 3090, 4.68-5.44 ms for 124 kernels, 35-42 us
#: (ELS-RD transformer-deploy benchmarks). P10: a bare ``torch.matmul`` in a Python loop on a
#: GPU costs 8.3 us of host time a call (pytorch/pytorch#161822), before any module Python.
#: The host CPU moves it about 2x either way (bench/data/gpu_host_overhead_published.csv).
EAGER_KERNEL_US = (12.0, 27.5, 45.0)
#: Host time per op on a lazy-tensor accelerator (PyTorch/XLA on TPUs and Trainium, Gaudi's
#: lazy mode), microseconds (P10, P50, P90): the model's Python and the dispatcher still run
#: every op each step, recording it into the graph instead of launching a kernel ("tracing
#: time", PyTorch/XLA docs, "Tracing Time vs. Execution Time"), and the graph is hashed and
#: looked up each step. No published per-op figure was found: taken as
#: :data:`EAGER_KERNEL_US` (building an IR node assumed to cost about the launch it replaces).
LAZY_OP_US = EAGER_KERNEL_US
#: Per ``nn.Module`` call and per view op (no kernel), microseconds: measured on the
#: development CPU (aiadvisor.hardware.host.measure_host_costs: 0.9-1.1 and 0.74-0.80 us over
#: three runs); an accelerator's host CPU is assumed alike.
MODULE_CALL_US = 1.0
VIEW_OP_US = 0.8
#: How the model's ops are issued: ``eager`` (Python calls every module and op) or
#: ``torchscript`` (``torch.jit.trace``/``script``, run from Python or from C++ libtorch as
#: Triton Inference Server's PyTorch backend runs it): the graph interpreter issues each op with
#: no Python and no ``nn.Module`` call; the dispatcher and the launch stay.
RUNTIMES = ("eager", "torchscript")
#: Eager host time per kernel over TorchScript's: 64 ``nn.Linear`` layers (batch 128, width
#: 256) on a GPU ran 1.74x as fast traced as in eager PyTorch, host-bound ("TorchScript is also
#: 74% faster", dev-discuss.pytorch.org, "Overhead in nn.Module causing massive slowdowns
#: compared to raw CuBLAS or Torchscript", 2021). Applied to the per-kernel and view-op figures.
TORCHSCRIPT_SPEEDUP = 1.74


@dataclass(frozen=True)
class HostCounts:
    """Host events of one step on one device."""

    forward_ops: float
    backward_ops: float
    optimizer_ops: float
    module_calls: float
    view_ops: float
    python_lines: float = 0.0
    """Lines of the model's own Python in the forward (``ModelProfile.num_python_lines``)."""


def host_counts(prof, work) -> HostCounts:
    """Counts from the profile and one device's op work (after a parallel split)."""
    phase = work.phase
    return HostCounts(
        forward_ops=float(work.count[phase == "forward"].sum()),
        backward_ops=float(work.count[phase == "backward"].sum()),
        optimizer_ops=float(work.count[phase == "optimizer"].sum()),
        module_calls=float(getattr(prof, "num_module_calls", 0)),
        view_ops=float(getattr(prof, "num_view_ops_forward", 0)
                       + getattr(prof, "num_view_ops_backward", 0)),
        python_lines=float(getattr(prof, "num_python_lines", 0) or 0),
    )


def python_fixed_s(counts: HostCounts, costs) -> float:
    """Seconds of a step's host work on a benchmarked CPU that belong to no op: module calls,
    view ops and the model's own Python lines."""
    return (counts.module_calls * costs.module_us + counts.view_ops * costs.view_us
            + counts.python_lines * costs.python_line_us) * 1e-6


def cpu_host_extra_s(counts: HostCounts, costs, *, train: bool) -> tuple[float, float]:
    """(host seconds not in the measured op times, all host seconds) on a benchmarked CPU.

    Not in the op times: autograd's node per forward op (recorded, then run by the engine; the
    run's own dispatch is in the backward op's time), module calls, view ops and the model's
    own Python lines."""
    extra = python_fixed_s(counts, costs) * 1e6
    if train:
        extra += counts.forward_ops * (costs.autograd_us
                                       + max(costs.backward_node_us - costs.dispatch_us, 0.0))
    dispatch = (counts.forward_ops + counts.backward_ops) * costs.dispatch_us
    return extra * 1e-6, (extra + dispatch) * 1e-6


def without_python(counts: HostCounts) -> HostCounts:
    """``counts`` as TorchScript runs the step: no ``nn.Module`` calls and no lines of the
    model's own Python (its graph holds the ops they issued)."""
    return replace(counts, module_calls=0.0, python_lines=0.0)


def accelerator_host_s(counts: HostCounts, *, lazy: bool = False,
                       runtime: str = "eager") -> np.ndarray:
    """Host seconds (P10, P50, P90) that eager PyTorch spends issuing one step's kernels
    (``lazy``: that a lazy-tensor backend spends tracing its ops, :data:`LAZY_OP_US`;
    ``runtime="torchscript"``: that TorchScript's interpreter spends,
    :data:`TORCHSCRIPT_SPEEDUP` times less a kernel and view op, no module calls).

    The optimizer step is left out: on GPUs PyTorch's default for-each (or fused) AdamW
    launches a few kernels per group of tensors, not one per tensor. The model's own Python
    lines are not added: :data:`EAGER_KERNEL_US` was read from whole models' eager steps, so
    their Python is already spread over its kernels."""
    kernels = counts.forward_ops + counts.backward_ops
    if runtime == "torchscript" and not lazy:
        return (kernels * np.asarray(EAGER_KERNEL_US) + counts.view_ops * VIEW_OP_US) \
            * 1e-6 / TORCHSCRIPT_SPEEDUP
    fixed = counts.module_calls * MODULE_CALL_US + counts.view_ops * VIEW_OP_US
    per_op = LAZY_OP_US if lazy else EAGER_KERNEL_US
    return (kernels * np.asarray(per_op) + fixed) * 1e-6
