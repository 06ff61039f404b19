"""Public entry points: ``predict`` (one device type, one precision, one parallel layout),
``predict_table`` (every device x precision at once) and ``step_time`` (for planners)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ..errors import InvalidArgumentError, check_choice
from ..hardware.fabrics import Network, network_for
from ..schema import HardwareSpec, ModelProfile, ParallelConfig, Prediction
from ..units import PRECISIONS, fmt_bytes
from .attention import (
    attention_backend,
    fused_memory_saving_bytes,
    fused_op_arrays,
    has_sdpa,
    runs_cuda_kernels,
)
from .devices import SpecColumns, device_arrays, familiarity
from .dropout import has_dropout
from .facts import (
    CPU_MATRIX_UNIT_FRACTION,
    cpu_matrix_log_adjustment,
    matmul_fraction,
    matmul_source,
)
from .host import RUNTIMES, TORCHSCRIPT_SPEEDUP
from .layout import (
    nchw_convs,
    transposed_bytes,
    transposes_nchw_convs,
    with_layout_transposes,
)
from .local import LocalCalibration
from .model import LOW_POWER_TDP_W, EfficiencyModel, load_model
from .ops import NF4_DEQUANT_BYTES, OpArrays, nf4_dequantizes, op_arrays
from .precision import (
    CPU_WEIGHT_ONLY_NOTE,
    DTYPE_BYTES,
    GEMM_ACT_BYTES,
    MEASURED_PRECISIONS,
    MEMORY_ACT_BYTES,
    WEIGHT_ONLY,
    block_format_note,
    check_mode,
    check_precision,
    compute_precision,
    gemm_peak_tflops,
    uses_matrix_engine,
)
from .predict import CPU_IN_STEP_FACTOR, StepParts, stack_band, step_parts

#: MFU band of large dense transformers trained on datacenter GPUs (cost_model.md section 3.3:
#: 36-54 % reported for Megatron, PaLM, Llama 3; the band leaves room on both sides).
MFU_BAND = (0.25, 0.65)

_OPS_CACHE: dict[tuple[int, bool, bool], tuple[ModelProfile, OpArrays]] = {}


def _ops(prof: ModelProfile, *, fused: bool = False, transposes: bool = False) -> OpArrays:
    """Op arrays of ``prof``, cached by identity (planners call many times per profile);
    ``fused``: as an NVIDIA/AMD GPU runs them, each SDPA call one fused kernel
    (:mod:`.attention`) and each training dropout call one ``native_dropout``
    (:mod:`.dropout`); ``transposes``: each NCHW convolution with the layout transposes
    cuDNN runs around it on the tensor cores (:mod:`.layout`)."""
    fused = fused and (has_sdpa(prof) or has_dropout(prof))
    transposes = transposes and bool(nchw_convs(prof))
    key = (id(prof), fused, transposes)
    hit = _OPS_CACHE.get(key)
    if hit is not None and hit[0] is prof:
        return hit[1]
    if len(_OPS_CACHE) >= 16:
        _OPS_CACHE.pop(next(iter(_OPS_CACHE)))
    run = with_layout_transposes(prof) if transposes else prof
    arrays = fused_op_arrays(run) if fused else op_arrays(run)
    _OPS_CACHE[key] = (prof, arrays)
    return arrays


def _backend(prof: ModelProfile, spec: HardwareSpec, precision: str) -> str:
    return attention_backend(spec, precision) if has_sdpa(prof) else "none"


def resolve_hardware(hardware: str | HardwareSpec) -> HardwareSpec:
    """A HardwareSpec from a catalog name, a spec or ``"local"`` (benchmarked once)."""
    from ..hardware import resolve

    return resolve(hardware)


def unpriced_reason(spec: HardwareSpec, mode: str) -> str | None:
    """Why a ``mode`` step cannot be priced on ``spec`` at all (None: it can): training on an
    inference-only device, or a device whose memory bandwidth no source publishes (every op's
    memory time needs it; the catalog leaves it blank rather than guess). Rankings and tables
    leave such a device unpriced with this reason; :func:`predict` raises with it.

    >>> from aiadvisor.hardware import get
    >>> unpriced_reason(get("Inferentia2"), "train")
    "inference-only device (its vendor's software does not train on it)"
    >>> unpriced_reason(get("Inferentia2"), "infer") is None
    True
    >>> unpriced_reason(get("Ascend 910C"), "infer")
    'no published memory bandwidth'
    """
    if mode == "train" and spec.inference_only:
        return INFERENCE_ONLY
    if not spec.memory_bw_gbs:
        return NO_BANDWIDTH
    return None


INFERENCE_ONLY = "inference-only device (its vendor's software does not train on it)"
NO_BANDWIDTH = "no published memory bandwidth"


def check_priceable(spec: HardwareSpec, mode: str) -> None:
    """Raise when :func:`unpriced_reason` gives a reason, saying what to do instead."""
    from ..errors import MissingHardwareFigureError, UnsupportedWorkloadError

    reason = unpriced_reason(spec, mode)
    if reason == INFERENCE_ONLY:
        raise UnsupportedWorkloadError(
            f"mode='train' cannot be priced on {spec.name!r}: it is an inference-only device "
            "(its vendor's software runs inference only on it; the catalog's notes give the "
            "source). Use mode='infer' for it, or a training device (hardware=None ranks the "
            "catalog's).")
    if reason == NO_BANDWIDTH:
        raise MissingHardwareFigureError(
            f"{spec.name!r} cannot be priced: its spec has no memory bandwidth (the catalog "
            "leaves a figure blank when no primary source publishes it, rather than guess), and "
            "every op's memory time needs one. On the device itself, hardware='local' measures "
            "it; elsewhere pass a HardwareSpec with the figure you trust "
            "(dataclasses.replace(spec, memory_bw_gbs=...)).")


def _check_profile(prof: ModelProfile) -> None:
    if not isinstance(prof, ModelProfile):
        raise InvalidArgumentError(
            f"prof of type {type(prof).__name__} is not valid: expected the ModelProfile returned "
            "by aiadvisor.profile(model, inputs)."
        )


def _parallel_for(num_devices: int, parallel: ParallelConfig | None) -> ParallelConfig:
    if not isinstance(num_devices, (int, np.integer)) or isinstance(num_devices, bool) \
            or num_devices < 1:
        raise InvalidArgumentError(
            f"num_devices={num_devices!r} is not valid: expected an integer >= 1 (1 for a single "
            "device, e.g. 8 for one 8-GPU node)."
        )
    if parallel is None:
        return ParallelConfig(dp_degree=int(num_devices))
    if parallel.num_devices != num_devices and num_devices != 1:
        raise InvalidArgumentError(
            f"num_devices={num_devices} does not match parallel={parallel.label!r}, which uses "
            f"dp x tp x pp = {parallel.num_devices} devices: pass num_devices="
            f"{parallel.num_devices} or leave it out."
        )
    return parallel


#: Precisions whose calibrated CPU predictions missed by more than the +-20 % band on average
#: (bench/costmodel_local_cpu.py --precision bf16: 24 % MAPE over 12 configurations).
CPU_LOW_CONFIDENCE_PRECISIONS = ("bf16", "fp16")
#: What the name of a detected (attached) CPU carries (:mod:`aiadvisor.hardware.detection`).
LOCAL_CPU_MARK = "(local CPU,"

_CURVES: dict[tuple, tuple[object, LocalCalibration | None, str | None]] = {}


def _measured_curves(spec: HardwareSpec, precision: str) -> LocalCalibration | None:
    """The measurements behind ``spec`` when it is a benchmark of the attached device: its
    matmul curve at ``precision`` and its op-grid curves (see :func:`_calibration`)."""
    return _calibration(spec, precision)[0]


def measured_calibration(spec: HardwareSpec, precision: str) -> LocalCalibration | None:
    """The benchmark of the attached device behind ``spec`` at ``precision`` (its op grid,
    matmul curve, convolution and optimizer timings), or None when ``spec`` is not one."""
    return _measured_curves(spec, precision)


def _calibration(spec: HardwareSpec, precision: str) -> tuple[LocalCalibration | None,
                                                               str | None]:
    """(calibration, note) for ``spec`` at ``precision``.

    The calibration comes from the benchmark that produced ``spec`` in this process, else from
    the on-disk cache (each read once per process). Nothing is measured here: benchmarking
    belongs to ``hardware="local"`` / ``detect(benchmark=True)`` / ``aiadvisor calibrate``.
    The note (None when calibrated, or when ``spec`` was never meant to be) says why a
    prediction runs on the spec's peaks instead.
    """
    if not spec.measured:
        from ..hardware.detection import benchmark_failure_for

        failure = benchmark_failure_for(spec)
        if failure is None:
            return None, None
        return None, (f"Calibration of this device failed ({failure}): predicted from its "
                      "detected figures (datasheet or estimated peaks) with the learned "
                      "efficiency curves, not from measurements.")
    from ..hardware.bench import cached_measurement_for

    result = cached_measurement_for(spec)
    key = (id(result) if result is not None else None, spec.name, spec.notes, precision)
    if key not in _CURVES:
        cal, note = None, None
        if result is None:
            note = ("This spec is marked measured, but its benchmark is neither in this process "
                    "nor in the benchmark cache: predicted from its peaks (matmul, bandwidth, "
                    "launch overhead) with the learned efficiency curves. Pass "
                    "hardware='local' to calibrate.")
        else:
            try:
                cal = LocalCalibration.from_benchmark(result, compute_precision(spec, precision))
            except (ValueError, KeyError, TypeError) as exc:
                note = (f"The benchmark of this device could not be read ({type(exc).__name__}:"
                        f" {exc}): predicted from its peaks with the learned efficiency curves.")
            if cal is not None and not (cal.matmul or cal.curves):
                cal = None
        # The result is kept with its calibration so that its id is not reused.
        _CURVES[key] = (result, cal, note)
    return _CURVES[key][1], _CURVES[key][2]


def _confidence(spec: HardwareSpec, precision: str, parallel: ParallelConfig, w: float,
                measured: bool) -> tuple[str, list[str]]:
    notes = []
    if measured:
        level = "medium"
        notes.append("Calibrated with this device's own benchmark: matmul throughput per size, "
                     "memory bandwidth and per-op overhead, and where timed, each op's and "
                     "optimizer step's measured time per size and dtype."
                     + (f" On a CPU the op times are raised x{CPU_IN_STEP_FACTOR:.2f}: ops inside "
                        "a step ran slower than alone on the development CPU (a factor fitted "
                        "there, not measured here)." if spec.kind == "cpu" else ""))
        if spec.kind == "cpu" and precision in CPU_LOW_CONFIDENCE_PRECISIONS:
            level = "low"
            notes.append(f"{precision} steps on a CPU: kernels vary more with shape than in "
                         "FP32 (e.g. attention backward at odd sequence lengths); on a 2-core "
                         "Xeon with AMX such predictions were 12-15 % off on average and up "
                         "to 36 % fast, FP32 ones 4-11 % (bench/costmodel_local_cpu.py).")
    elif spec.kind == "cpu" and LOCAL_CPU_MARK in spec.name:
        level = "low"
        notes.append("This CPU was not benchmarked: predicted from its estimated peaks (ISA "
                     "flags and clock, scaled by one quick matmul timed here) with efficiency "
                     "curves learned on NVIDIA GPUs (low confidence; on the three CPUs last "
                     "checked such estimates were 12-15 % off on average, single models up "
                     "to 35 %, so the likely range is wide). hardware='local' (CLI: "
                     "--hardware local) times its "
                     "matmuls, bandwidth and ops (once: cached on disk for later sessions) and "
                     "predicts from them.")
    elif spec.vendor.upper() != "NVIDIA" or spec.kind != "gpu":
        level = "low"
        notes.append(f"No measured op data for {spec.vendor} {spec.kind}s: efficiency shrunk "
                     "toward the median of NVIDIA GPUs (low confidence).")
    elif precision not in MEASURED_PRECISIONS:
        level = "low"
        notes.append(f"No measured {precision} op data: the {precision} curve is the FP16 tensor-"
                     f"core curve at the {precision} peak (low confidence).")
    elif w < 0.5:
        level = "medium"
        notes.append("Device outside the peak/bandwidth range of the measured GPUs: efficiency "
                     "shrunk toward the class median.")
    else:
        level = "high"
    if level == "high" and (parallel.tp_degree > 1 or parallel.pp_degree > 1 or parallel.offload):
        level = "medium"
    return level, notes


def _parts(prof, spec, precision, parallel, model, network, autocast: bool = True,
           runtime: str = "eager") -> tuple[StepParts, bool, str | None]:
    devs = device_arrays([spec], precision, model)
    cal = _measured_curves(spec, precision)
    note = None if cal is not None else _calibration(spec, precision)[1]
    host = None

    if spec.kind == "cpu":
        # A catalog CPU is priced with the attached CPU's host costs (the same PyTorch
        # dispatching the same ops; its cores may be faster or slower): eager PyTorch's
        # per-op work is there on every CPU, and without it a big CPU would run a small
        # model's step in the roofline's microseconds.
        from ..hardware.host import host_costs

        host = [host_costs()]
    fused = runs_cuda_kernels(spec)
    ops = _ops(prof, fused=fused, transposes=transposes_nchw_convs(spec, precision))
    parts = step_parts(prof, ops, precision, parallel, devs, model,
                       measured_precision=precision in MEASURED_PRECISIONS,
                       curves=[cal] if cal else None, networks=[network], host_costs=host,
                       autocast=autocast, runtime=runtime)
    return parts, cal is not None, note


def _network(spec: HardwareSpec, fabric, node_size, num_devices: int) -> Network:
    """The cluster ``num_devices`` of ``spec`` sit on (see :func:`aiadvisor.hardware.fabrics.
    network_for`); errors name the bad fabric or node size."""
    return network_for(spec, fabric=fabric, node_size=node_size, num_devices=num_devices)


def _mfu(prof: ModelProfile, step_s, peak_tflops, num_devices):
    model_flops = prof.flops_forward + prof.flops_backward
    return model_flops / (np.asarray(step_s) * peak_tflops * 1e12 * num_devices)


def _mfu_note(prof: ModelProfile, spec: HardwareSpec, precision: str, mfu: float) -> str | None:
    large = prof.num_blocks >= 8 and prof.num_params >= 1e8 and prof.mode == "train"
    if not large or spec.kind != "gpu" or precision == "fp32":
        return None
    lo, hi = MFU_BAND
    if lo <= mfu <= hi:
        return None
    return (f"Predicted MFU {mfu:.0%} is outside the {lo:.0%}-{hi:.0%} band published for large "
            "dense transformers on datacenter GPUs: treat this prediction with caution.")


def _conversion_note(prof: ModelProfile, precision: str) -> str | None:
    traced = DTYPE_BYTES.get(prof.compute_dtype, 4.0)
    if traced == GEMM_ACT_BYTES[precision] == MEMORY_ACT_BYTES[precision]:
        return None
    return (f"Traced in {prof.compute_dtype}; bytes converted to {precision} by element size "
            "(estimated; profile with precision=" f"{precision!r} to trace the real casts).")


def predict(prof: ModelProfile, *, hardware: str | HardwareSpec, precision: str = "bf16",
            num_devices: int = 1, parallel: ParallelConfig | None = None,
            model: EfficiencyModel | None = None, fabric: str | dict | Network | None = None,
            node_size: int | None = None, correction: bool = True,
            autocast: bool = True, runtime: str = "eager") -> Prediction:
    """Predict the time of one step of ``prof`` on ``num_devices`` of ``hardware``.

    Parameters
    ----------
    prof : ModelProfile
        From :func:`aiadvisor.profile`; FLOPs and bytes are per step for the whole batch.
    hardware : str or HardwareSpec
        A catalog name (``"H100"``), a spec, or ``"local"`` (the attached device, benchmarked
        once; its measured matmul curve and bandwidth replace the learned efficiency).
    precision : str
        Compute precision: one of fp32, tf32, bf16, fp16, fp8, mxfp8, fp4, int8 (W8A8, on the
        INT8 engine), int8wo, int4, nf4 (weight-only formats, computed in 16 bit). The
        profile's bytes are converted from its traced dtype (see
        :mod:`aiadvisor.costmodel.precision`); GEMMs use that precision's dense peak. ``fp4``
        (W4A4 in NVFP4 or MXFP4, the device's format) is for inference only.
    num_devices : int
        Devices in total; without ``parallel`` the batch is split data-parallel (DDP).
    parallel : ParallelConfig, optional
        Layout (dp/tp/pp degrees, ZeRO stage, offload, checkpointing, micro-batches).
    model : EfficiencyModel, optional
        Another fitted model (default: the shipped one).
    fabric : str or dict, optional
        The network between nodes: a name from ``data/fabrics.csv`` (``"InfiniBand NDR 400G"``,
        ``"RoCE 400G"``, ``"p5"``, ...) or ``{"gbps": NIC Gb/s per device, "latency_us": ...,
        "efficiency": ...}``. Default: the device's usual build (``data/node_configs.csv``,
        e.g. 8 x 400 Gb/s NDR per H100 node). Collectives run hierarchically: inside the
        NVLink-class domain, then across nodes over the NICs.
    node_size : int, optional
        Devices per node; ``num_devices`` must then fill whole nodes.
    correction : bool
        On a benchmarked device (``hardware="local"``), multiply by the correction that
        ``aa.verify``'s measurements of this device support (:mod:`aiadvisor.costmodel.
        correction`; the notes say by how much and from how many). No records, no correction;
        ``False`` or ``$AIADVISOR_MEASURED_CORRECTION=0`` turns it off. Generation
        predictions (prefill + decode) are not corrected.
    autocast : bool
        Inference of a model stored in FP32 at ``bf16``/``fp16`` runs as the recommended code
        runs it: weights converted once, the forward under ``torch.autocast``, which on
        NVIDIA/AMD GPUs runs softmax, norms and losses in FP32 with a cast kernel on each side
        (:func:`aiadvisor.costmodel.ops.autocast_islands`; the notes say so). ``False``
        prices plain 16-bit inference (``model.to(dtype)`` without autocast), as serving
        engines and a model stored in 16 bit run it.
    runtime : str
        How the host issues the step's ops: ``"eager"`` (the default: Python calls every
        module and op) or ``"torchscript"`` (the model traced or scripted with ``torch.jit``
        and run by its interpreter, from Python or from C++ libtorch: no Python and no module
        call per op, the host time of each kernel and view op :data:`~aiadvisor.costmodel.
        host.TORCHSCRIPT_SPEEDUP` times eager's). ``prediction.stack`` says which.

    Returns
    -------
    Prediction
        Step time with a P10-P90 interval, throughput, the dominant bound, a confidence label,
        the breakdown, the MFU and the network assumed (``network``, also in the notes);
        ``correction`` is the measured factor applied (None: none).

    Raises
    ------
    UnknownHardwareError, InvalidArgumentError, UnsupportedPrecisionError, UnknownFabricError,
    InvalidFabricError, NodeLayoutError, UnsupportedWorkloadError (training on an
    inference-only device), MissingHardwareFigureError (no memory bandwidth in the spec)

    Examples
    --------
    >>> import torch, aiadvisor as aa
    >>> prof = aa.profile(torch.nn.Linear(1024, 1024), torch.randn(32, 1024))
    >>> pred = aa.predict(prof, hardware="H100", precision="bf16")
    >>> pred.hardware, pred.low_s <= pred.step_time_s <= pred.high_s
    ('NVIDIA H100 SXM', True)
    """
    _check_profile(prof)
    check_choice("runtime", runtime, RUNTIMES)
    parallel = _parallel_for(num_devices, parallel)
    spec = resolve_hardware(hardware)
    check_precision(spec, precision)
    check_mode(prof.mode, precision)
    check_priceable(spec, prof.mode)
    model = model or load_model()
    network = _network(spec, fabric, node_size, parallel.num_devices)
    parts, measured, calibration_note = _parts(prof, spec, precision, parallel, model, network,
                                               autocast=autocast, runtime=runtime)
    w = float(familiarity(device_arrays([spec], precision, model), model)[0])
    confidence, notes = _confidence(spec, precision, parallel, w, measured)
    if calibration_note and not measured:
        notes.insert(0, calibration_note)
    fraction = matmul_fraction(spec, precision)
    engine = uses_matrix_engine(spec, precision)
    if fraction is not None and engine and not measured:
        notes.append(f"GEMM efficiency scaled by the published achievable-matmul fraction of "
                     f"this device ({matmul_source(spec, precision)}).")
    if engine and not measured and spec.kind == "gpu" and spec.tdp_w is not None \
            and spec.tdp_w <= LOW_POWER_TDP_W:
        notes.append(f"Power-limited board ({spec.tdp_w:g} W): under a sustained load its "
                     "tensor-core GEMMs compute as much slower as the power limit makes FP32 "
                     "GEMMs on the T4, L4 and P4 in the measured op data (1.6-2.2x once "
                     "compute-bound; memory-bound GEMVs keep their bandwidth); the fast end of "
                     "the interval is a short burst, before the clock settles. Assumed: no "
                     "tensor-core timing of such a board was in the training data.")
    if cpu_matrix_log_adjustment(spec, precision) > 0:
        notes.append(f"bf16 GEMMs on this CPU's matrix unit (AMX) at {CPU_MATRIX_UNIT_FRACTION:.0%}"
                     " of the share of peak FP32 GEMMs reach (estimated from one measured CPU;"
                     " benchmark it, hardware='local', to measure).")
    if spec.kind == "cpu" and precision in WEIGHT_ONLY:
        notes.append(CPU_WEIGHT_ONLY_NOTE)
    format_note = block_format_note(spec, precision)
    if format_note:
        notes.append(format_note)
    if nf4_dequantizes(prof, precision):
        notes.append(f"nf4 as bitsandbytes runs it: a call of more than one row ({prof.batch_size}"
                     f" x {prof.seq_len or 1} here) dequantises each weight to 16 bit before its "
                     "GEMM (matmul_4bit -> dequantize_4bit + linear): one more kernel per linear "
                     f"layer, {NF4_DEQUANT_BYTES:.2f} bytes a weight moved, and the GEMM reads "
                     "16-bit weights. Only a one-token call runs the fused 4-bit GEMV.")
    pred = _to_prediction(prof, spec, precision, parallel, parts, confidence, notes, network,
                          runtime=runtime)
    return _corrected(pred, spec) if correction and spec.measured else pred


def _corrected(pred: Prediction, spec: HardwareSpec) -> Prediction:
    """``pred`` times the measured correction of ``spec``'s device, if the store has one."""
    from .correction import correction_for

    fix = correction_for(spec.kind, spec.name)
    if fix is None:
        return pred
    step_s, low_s, high_s = fix.apply(pred.step_time_s, pred.low_s, pred.high_s)
    f = fix.factor
    return dataclasses.replace(
        pred, step_time_s=step_s, low_s=low_s, high_s=high_s, throughput=pred.throughput / f,
        compute_s=pred.compute_s * f, memory_s=pred.memory_s * f,
        communication_s=pred.communication_s * f, overhead_s=pred.overhead_s * f,
        mfu=None if pred.mfu is None else pred.mfu / f, correction=f,
        amp_cast_s=pred.amp_cast_s * f,
        correction_records=fix.num_records,
        notes=(f"Step time {fix.note()}", *pred.notes))


def _to_prediction(prof, spec, precision, parallel, parts: StepParts, confidence, notes,
                   network: Network, runtime: str = "eager"):
    total = parts.total_s[:, 0]
    step_s = float(total[1])
    breakdown = {"compute": float(parts.compute_s[1, 0]), "memory": float(parts.memory_s[1, 0]),
                 "communication": float(parts.communication_s[1, 0]),
                 "overhead": float(parts.overhead_s[1, 0])}
    mfu = float(_mfu(prof, step_s, gemm_peak_tflops(spec, precision), parallel.num_devices))
    all_notes = list(notes) + parts.notes
    conversion = _conversion_note(prof, precision)
    if conversion:
        all_notes.append(conversion)
    mfu_note = _mfu_note(prof, spec, precision, mfu)
    if mfu_note:
        all_notes.append(mfu_note)
    stack = _stack_note(prof, parallel)
    if stack:
        all_notes.append(stack)
    described = network.describe(parallel.num_devices) if parallel.num_devices > 1 else None
    if described:
        all_notes.append(described)
    host_s = float(parts.host_s[1, 0]) if parts.host_s is not None else 0.0
    graphs = float(parts.graphs_s[1, 0]) if parts.graphs_s is not None else float("nan")
    host_bound = bool(np.isfinite(graphs) and host_s > graphs)
    all_notes.append(_host_note(spec, host_s, graphs, host_bound, runtime))
    backend = _backend(prof, spec, precision)
    note = _attention_note(prof, backend)
    if note:
        all_notes.append(note)
    if transposes_nchw_convs(spec, precision) and nchw_convs(prof):
        moved = transposed_bytes(prof, precision)
        calls = sum(op.count for op in nchw_convs(prof))
        all_notes.append(f"Convolutions: {calls:.0f} NCHW convolution calls a step, each "
                         "priced with the NCHW <-> NHWC transposes cuDNN runs around its "
                         f"tensor-core kernels ({fmt_bytes(moved)} moved a step); a "
                         "channels_last model and input "
                         "(.to(memory_format=torch.channels_last)) skip them.")
    if has_dropout(prof) and runs_cuda_kernels(spec):
        calls = sum(g.calls for g in prof.dropout)
        all_notes.append(f"Dropout: {calls} training dropout call{'s' * (calls != 1)} costed as "
                         "PyTorch's fused "
                         "native_dropout kernel on this GPU (one kernel, a one-byte mask), not "
                         f"the composite the {prof.device} trace ran (mask in the input's "
                         "dtype, three kernels).")
    low_s, high_s = stack_band(step_s, float(min(total[0], step_s)),
                               float(max(total[2], step_s)),
                               spans_nodes=parallel.num_devices > network.node_size,
                               learned=_learned(spec), estimated_cpu=_estimated_cpu(spec))
    return Prediction(
        hardware=spec.name, precision=precision, num_devices=parallel.num_devices,
        step_time_s=step_s, throughput=prof.batch_size / step_s,
        low_s=low_s, high_s=high_s,
        bound=max(breakdown, key=breakdown.get), confidence=confidence,
        compute_s=breakdown["compute"], memory_s=breakdown["memory"],
        communication_s=breakdown["communication"], overhead_s=breakdown["overhead"],
        mfu=mfu, notes=tuple(all_notes), network=described,
        host_s=host_s, host_bound=host_bound,
        graphs_step_s=None if np.isnan(graphs) else graphs,
        stack=("TorchScript (no Python per op)" if runtime == "torchscript"
               else "eager PyTorch (as you run it)"), attention_backend=backend,
        amp_cast_s=float(parts.amp_cast_s[1, 0]) if parts.amp_cast_s is not None else 0.0,
    )


def _learned(spec: HardwareSpec) -> bool:
    """Whether ``spec``'s steps are priced by the learned model alone: an accelerator that was
    not benchmarked here (its band takes :data:`~.predict.STEP_SPREAD`)."""
    return spec.kind != "cpu" and not spec.measured


def _estimated_cpu(spec: HardwareSpec) -> bool:
    """Whether ``spec`` is a CPU priced without a benchmark of its own (estimated or datasheet
    peaks, GPU-learned curves): its band takes :data:`~.predict.ESTIMATED_CPU_SPREAD`."""
    return spec.kind == "cpu" and not spec.measured


def _stack_note(prof: ModelProfile, parallel: ParallelConfig) -> str | None:
    """What the prediction assumes of the training stack's parallel runtime (None when no
    choice applies)."""
    if prof.mode != "train":
        return None
    parts = []
    if parallel.tp_degree > 1:
        parts.append("tensor parallel with sequence parallelism (norms and residual adds split "
                     "over the TP ranks)" if parallel.sequence_parallel else
                     "tensor parallel without sequence parallelism (every TP rank runs the "
                     "norms and residual adds on the whole sequence)")
    if parallel.dp_degree > 1 and parallel.zero_stage < 3:
        parts.append("gradient reduction overlapped with the last micro-batch's backward"
                     if parallel.overlap_grad_reduce else
                     "gradient reduction after the backward (not overlapped)")
    if parallel.num_microbatches * parallel.grad_accum_steps > 1:
        parts.append("one gradient accumulation pass per micro-batch after the first")
    if not parts:
        return None
    return ("Stack assumed: " + "; ".join(parts) + " (ParallelConfig sequence_parallel / "
            "overlap_grad_reduce).")


def _attention_note(prof: ModelProfile, backend: str) -> str | None:
    if backend == "none":
        return None
    calls = sum(g.calls for g in prof.sdpa)
    if backend == "as traced":
        return (f"Attention: {calls} scaled_dot_product_attention calls costed as traced "
                f"({prof.path} trace on {prof.device}).")
    saving = fused_memory_saving_bytes(prof)
    memory = (f"; it does not keep the math path's T x T tensors, {saving / 2**20:.3g} MiB "
              "fewer saved for backward than the trace counts" if saving > 0 else "")
    return (f"Attention: {calls} scaled_dot_product_attention calls costed as PyTorch's "
            f"{backend} kernel on this GPU (one fused op per call, no T x T scores in memory)"
            f"{memory}.")


def _host_note(spec: HardwareSpec, host_s: float, graphs_s: float, host_bound: bool,
               runtime: str = "eager") -> str:
    if np.isfinite(graphs_s) and spec.kind in ("tpu", "npu"):
        what = ("host-bound: the device waits for Python to trace the step" if host_bound else
                "the device is the bottleneck; the host keeps up")
        return (f"Lazy-tensor PyTorch (PyTorch/XLA, Gaudi's lazy mode) traces the step's ops in "
                f"{host_s * 1e3:.3g} ms of host time each step ({what}; estimated: the "
                f"published eager per-op figure). Compiled "
                f"(torch.compile with the device's backend) the step would take about "
                f"{graphs_s * 1e3:.3g} ms.")
    if np.isfinite(graphs_s) and runtime == "torchscript":
        what = ("host-bound: the device waits for the interpreter to issue kernels"
                if host_bound else "the device is the bottleneck; the host keeps up")
        return (f"TorchScript's interpreter issues the step's kernels in {host_s * 1e3:.3g} ms "
                f"of host time ({what}; estimated: eager PyTorch's published per-kernel figure "
                f"over {TORCHSCRIPT_SPEEDUP:g}, no Python or module call per op). With CUDA "
                f"graphs the step would take about {graphs_s * 1e3:.3g} ms.")
    if np.isfinite(graphs_s):
        what = ("host-bound: the device waits for Python to issue kernels" if host_bound else
                "the device is the bottleneck; the host keeps up")
        return (f"Eager PyTorch issues the step's kernels in {host_s * 1e3:.3g} ms of host time "
                f"({what}; published per-kernel figure, estimated). With CUDA graphs "
                f"(torch.compile(mode=\"reduce-overhead\")) the step would take about "
                f"{graphs_s * 1e3:.3g} ms.")
    if spec.kind == "cpu" and host_s > 0:
        return (f"Host work on this CPU (dispatch, autograd, module calls, views and the "
                f"model's own Python lines, measured per event): {host_s * 1e3:.3g} ms of the "
                "step, on the same threads as the kernels.")
    return "No host-side model for this device (graph-compiled, or no measured host costs)."


def step_time(prof: ModelProfile, spec: HardwareSpec, precision: str,
              parallel: ParallelConfig, *, model: EfficiencyModel | None = None,
              fabric: str | dict | Network | None = None,
              node_size: int | None = None) -> Prediction:
    """Planner helper: :func:`predict` for an already resolved spec and a ParallelConfig.

    Skips name resolution and reuses the profile's cached op arrays: about a millisecond per
    call, so a planner can score every layout it considers.
    """
    return predict(prof, hardware=spec, precision=precision, num_devices=parallel.num_devices,
                   parallel=parallel, model=model, fabric=fabric, node_size=node_size)


def predict_table(prof: ModelProfile, *, specs: Sequence[HardwareSpec] | None = None,
                  precisions: Sequence[str] | None = None, num_devices: int = 1,
                  parallel: ParallelConfig | None = None, model: EfficiencyModel | None = None,
                  fabric: str | dict | None = None, node_size: int | None = None,
                  autocast: bool = True):
    """Predict every device x precision at once (vectorised), as a pandas DataFrame.

    The same numbers as :func:`predict` for each row (but no notes): one call instead of one
    per device and precision, for rankings and planners.

    Parameters
    ----------
    prof : ModelProfile
    specs : sequence of HardwareSpec, optional
        Devices (default: every catalog row, :func:`aiadvisor.hardware.all_specs`).
    precisions : sequence of str, optional
        Default: all of ``fp32, tf32, bf16, fp16, fp8, mxfp8, fp4, int8, int8wo, int4,
        nf4`` (fp4 left out for a training profile).
    num_devices : int
        Devices per configuration; without ``parallel`` the batch is split data-parallel (DDP).
    parallel : ParallelConfig, optional
        One layout for every row (dp/tp/pp degrees, ZeRO stage, offload, checkpointing), as in
        :func:`predict`; ``num_devices`` may then be left out.
    model : EfficiencyModel, optional
        Another fitted model (default: the shipped one).
    fabric, node_size : optional
        The network between nodes, for every row, as in :func:`predict` (default: each
        device's usual build).
    autocast : bool
        As in :func:`predict`.

    Returns
    -------
    pandas.DataFrame
        One row per (device, precision) the device supports: ``hardware, vendor, kind,
        precision, num_devices, step_time_s, low_s, high_s, throughput, bound, confidence,
        compute_s, memory_s, communication_s, overhead_s, mfu, fabric`` (the scale-out fabric
        assumed). Unsupported pairs are left out, and so are devices :func:`unpriced_reason`
        names (training on an inference-only device, no published memory bandwidth).
    """
    import pandas as pd

    _check_profile(prof)
    parallel = _parallel_for(num_devices, parallel)
    if specs is None:
        from ..hardware import all_specs

        specs = all_specs()
    # FP4 is not offered for training (check_mode): left out unless asked for, refused if so.
    precisions = list(precisions or [p for p in PRECISIONS
                                     if not (prof.mode == "train" and p == "fp4")])
    for p in precisions:
        if p not in PRECISIONS:
            from ..errors import check_choice

            check_choice("precision", p, PRECISIONS)
        check_mode(prof.mode, p)
    model = model or load_model()
    specs = [s for s in specs if unpriced_reason(s, prof.mode) is None]
    if not specs:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    networks = [_network(s, fabric, node_size, parallel.num_devices) for s in specs]
    cols = SpecColumns.of(specs)
    parts = [_table_for_precision(prof, specs, cols, p, parallel, model, networks,
                                  autocast=autocast)
             for p in precisions]
    parts = [p for p in parts if p is not None]
    if not parts:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    columns = {c: np.concatenate([p[c] for p in parts]) for c in TABLE_COLUMNS}
    return pd.DataFrame(columns)


TABLE_COLUMNS = ["hardware", "vendor", "kind", "precision", "num_devices", "step_time_s", "low_s",
                 "high_s", "throughput", "bound", "confidence", "compute_s", "memory_s",
                 "communication_s", "overhead_s", "mfu", "fabric", "host_s", "host_bound"]


def _table_parts(prof, specs, precision, parallel, devs, model, networks=None,
                 autocast: bool = True) -> StepParts:
    """Step parts of every device; NVIDIA/AMD GPUs get the op arrays as their kernels run
    (fused attention and dropout; on NVIDIA, NCHW convolutions' layout transposes:
    :func:`_ops`), the others the traced ones."""
    kinds = [(runs_cuda_kernels(s), transposes_nchw_convs(s, precision)) for s in specs]
    measured = precision in MEASURED_PRECISIONS
    hosts = _cpu_host_costs(specs)
    if len(set(kinds)) == 1:
        fused, transposes = kinds[0]
        return step_parts(prof, _ops(prof, fused=fused, transposes=transposes), precision,
                          parallel, devs, model, measured_precision=measured,
                          networks=networks, host_costs=hosts, autocast=autocast)
    out = None
    for kind in sorted(set(kinds)):
        idx = np.flatnonzero([k == kind for k in kinds])
        sub = step_parts(prof, _ops(prof, fused=kind[0], transposes=kind[1]), precision,
                         parallel,
                         _device_subset(devs, idx), model, measured_precision=measured,
                         networks=None if networks is None else [networks[i] for i in idx],
                         host_costs=None if hosts is None else [hosts[i] for i in idx],
                         autocast=autocast)
        if out is None:
            shape = (sub.compute_s.shape[0], len(specs))
            out = StepParts(*(np.zeros(shape) for _ in range(4)), notes=[],
                            host_s=np.zeros(shape), graphs_s=np.full(shape, np.nan),
                            amp_cast_s=np.zeros(shape))
        for name in ("compute_s", "memory_s", "overhead_s", "communication_s", "host_s",
                     "graphs_s", "amp_cast_s"):
            getattr(out, name)[:, idx] = getattr(sub, name)
    return out


def _cpu_host_costs(specs) -> list | None:
    """Per device, the attached CPU's measured host costs for the CPUs among ``specs`` (as
    :func:`_parts` prices a single CPU), None for the others; None when there is no CPU."""
    if not any(s.kind == "cpu" for s in specs):
        return None
    from ..hardware.host import host_costs

    costs = host_costs()
    return [costs if s.kind == "cpu" else None for s in specs]


def _device_subset(devs, idx):
    """The devices ``idx`` of a :class:`~.devices.DeviceArrays`."""
    import dataclasses

    values = {}
    for f in dataclasses.fields(devs):
        v = getattr(devs, f.name)
        if isinstance(v, tuple):
            values[f.name] = tuple(v[i] for i in idx)
        elif isinstance(v, dict):
            values[f.name] = {k: a[idx] for k, a in v.items()}
        else:
            values[f.name] = None if v is None else v[idx]
    return type(devs)(**values)


def _table_for_precision(prof, specs, cols, precision, parallel, model, networks=None, *,
                         autocast: bool = True) -> dict | None:
    """Columns of :func:`predict_table` for one precision (numpy arrays), None if no spec
    supports it."""
    keep = np.array([bool(gemm_peak_tflops(s, precision)) for s in specs])
    if not keep.any():
        return None
    specs = [s for s, k in zip(specs, keep) if k]
    if networks is None:  # each device's usual build
        networks = [network_for(s, num_devices=parallel.num_devices) for s in specs]
    else:
        networks = [n for n, k in zip(networks, keep) if k]
    cols = SpecColumns(**{f: getattr(cols, f)[keep] for f in cols.__dataclass_fields__})
    devs = device_arrays(specs, precision, model, cols)
    parts = _table_parts(prof, specs, precision, parallel, devs, model, networks=networks,
                         autocast=autocast)
    total = parts.total_s
    step = total[1]
    breakdown = np.stack([parts.compute_s[1], parts.memory_s[1], parts.communication_s[1],
                          parts.overhead_s[1]])
    bound = np.array(["compute", "memory", "communication", "overhead"])[breakdown.argmax(axis=0)]
    w = familiarity(devs, model)
    other = np.array([s.vendor.upper() != "NVIDIA" or s.kind != "gpu" for s in specs])
    # As _confidence: a layout beyond data parallel caps the confidence at medium.
    best = "medium" if parallel.tp_degree > 1 or parallel.pp_degree > 1 or parallel.offload \
        else "high"
    confidence = np.where(other | (precision not in MEASURED_PRECISIONS), "low",
                          np.where(w < 0.5, "medium", best))
    n = len(specs)
    spans = np.array([parallel.num_devices > net.node_size for net in networks])
    low, high = np.minimum(total[0], step), np.maximum(total[2], step)
    low, high = stack_band(step, low, high, spans_nodes=spans,
                           learned=np.array([_learned(s) for s in specs]),
                           estimated_cpu=np.array([_estimated_cpu(s) for s in specs]))
    return {
        "hardware": np.array([s.name for s in specs], dtype=object),
        "vendor": np.array([s.vendor for s in specs], dtype=object),
        "kind": np.array([s.kind for s in specs], dtype=object),
        "precision": np.full(n, precision, dtype=object),
        "num_devices": np.full(n, parallel.num_devices), "step_time_s": step,
        "low_s": low, "high_s": high,
        "throughput": prof.batch_size / step, "bound": bound.astype(object),
        "confidence": confidence.astype(object),
        "compute_s": parts.compute_s[1], "memory_s": parts.memory_s[1],
        "communication_s": parts.communication_s[1], "overhead_s": parts.overhead_s[1],
        "mfu": _mfu(prof, step, devs.gemm_peak_tflops[:, 0], parallel.num_devices),
        "fabric": np.array([n.fabric for n in networks], dtype=object),
        "host_s": parts.host_s[1],
        # As _to_prediction: the host bounds the step when it takes longer than the device.
        "host_bound": np.isfinite(parts.graphs_s[1]) & (parts.host_s[1] > parts.graphs_s[1]),
    }
