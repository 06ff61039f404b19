"""LLM generation on a device: memory (weights, KV cache, concurrency), time to first token and
time per output token, priced by the same learned cost model as training and inference steps.

* **Prefill** is the prompt forward: the captured inference profile at ``batch x prompt_len``,
  priced by :func:`~aiadvisor.costmodel.predict` (compute-bound at any useful prompt length).
* **Decode** is one forward of one new token per sequence (the profile at ``seq_len=1``: every
  weight is read once per step, whatever the batch) plus the attention over the cache: the new
  token's query against ``c`` cached keys and values, ``c x kv_bytes_per_token`` read and
  ``c x 4 x heads x head_dim`` FLOPs per layer, priced as an attention op of that size. The cache
  grows over the output, so the time per output token is taken at the mean context
  ``prompt_len + output_len / 2`` (the step time is linear in the context). That is how a
  serving engine runs it (``engine="engine"``: a paged cache written in place, the memory-bound
  ops fused one kernel per module, q/k/v and gate/up as one GEMM each, the step replayed as a
  CUDA graph whose kernels keep their own fixed GPU cost; weight-only int8wo/int4/nf4 GEMMs
  multiply in 16 bit, nf4 through bitsandbytes' dequantise-then-GEMM path wherever a call has
  more than one row, and the prompt's logits are computed for its last token only). Plain PyTorch /
  transformers ``generate`` (``engine="eager"``) is priced on the model's own decode step as
  traced with its cache (:class:`~aiadvisor.schema.DecodeStep`): there each layer re-copies its
  whole cache with ``torch.cat`` every step (the built-in decoders, transformers'
  ``DynamicCache``) and builds its mask; the ops on the cache are priced as a benchmarked CPU
  timed them on a decode cache (cold in DRAM, a fresh output each step; measured on the
  development CPU at 4-8 GB/s where the same ``cat`` on a hot buffer ran at 25).
* **Memory**: an engine takes a fixed fraction of the device (:data:`ENGINE_MEMORY_FRACTION`)
  and fills what the weights and the working activations leave with cache blocks; concurrency is
  that space over one sequence's cache (``(prompt_len + output_len) x kv_bytes_per_token``).
* **Tensor parallel** splits weights, KV heads and every op over ``tp`` devices and adds the
  per-layer all-reduces (the cost model's tensor-parallel communication).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InvalidArgumentError, UnsupportedPrecisionError, check_choice
from ..hardware.calibrate import CACHE_SUFFIX
from ..schema import (
    GenerationPrediction,
    GenerationProfile,
    HardwareSpec,
    ModelProfile,
    OpRecord,
    ParallelConfig,
    Prediction,
)
from .api import _measured_curves, predict
from .devices import device_arrays
from .experts import active_expert_profile, expected_experts_touched
from .fusion import fuse_elementwise, fuse_projections
from .model import EfficiencyModel, load_model
from .ops import DeviceWork
from .precision import (
    DTYPE_BYTES,
    MEASURED_PRECISIONS,
    check_precision,
    gemm_peak_tflops,
    weight_bytes_per_element,
)
from .predict import op_times

#: Weight formats a served model may use (fp32 only where nothing narrower runs). ``fp4`` is
#: W4A4 in the device's 4-bit float format (NVFP4 on NVIDIA Blackwell, MXFP4 on AMD CDNA4 and
#: AWS Trainium3), where the device has FP4 tensor cores.
WEIGHT_PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "fp4", "int8", "int8wo", "int4", "nf4")
#: KV cache formats engines store (vLLM: auto/fp8; LMDeploy and TensorRT-LLM: int8 too).
KV_PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "int8")
KV_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
#: Share of device memory a serving engine takes for weights, activations and cache: vLLM's
#: default ``gpu_memory_utilization=0.9`` (vLLM engine arguments documentation).
ENGINE_MEMORY_FRACTION = 0.9
_CONFIDENCE_ORDER = ("low", "medium", "high")
#: Software stacks a prediction can assume. ``engine``: a serving engine (vLLM, TGI,
#: TensorRT-LLM) replaying each decode step as a CUDA graph; ``fused``: the same engine's fused
#: kernels and in-place paged cache, each kernel launched from Python without graph replay
#: (vLLM ``enforce_eager=True``, TGI ``--cuda-graphs 0``, and TGI before April 2024, whose CUDA
#: graphs were experimental and off by default until text-generation-inference PR #1703 of
#: 2024-04-04; experimental since PR #1428); ``eager``: plain
#: PyTorch/transformers ``generate``, every traced op dispatched from Python (CPUs always run
#: this way).
ENGINES = ("engine", "fused", "eager")
#: What replaying a CUDA graph saves per kernel against launching it from a stream: ~0.4 us
#: (NVIDIA, "Getting Started with CUDA Graphs", 2019: a 2.9 us kernel took 3.8 us per launch
#: from a stream and 3.4 us in a graph). The rest of a kernel's fixed cost is the GPU's own
#: (launch processing, ramp-up and tail): measured kernel times keep it (Vidur's vLLM kernels
#: at one to four tokens on A100/H100: a residual add 1-2 us, an activation 1-5 us, RMSNorm
#: 4-7 us, a 16 MB GEMV 9-15 us where its bytes take 5-8 us), and the learned per-op
#: overhead prices it.
GRAPH_SAVING_S = 0.4e-6
#: (P10, P50, P90) multiples of a graph-replayed step's per-kernel costs: the spread of Vidur's
#: measured small kernels (residual add, RMSNorm, activation, rotary embedding at 1-16 tokens on
#: A100, H100 and A40) around each one's median, P10 0.67 and P90 2.0.
KERNEL_COST_BAND = (0.67, 1.0, 2.0)


def _positive_int(name: str, value, *, hint: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidArgumentError(
            f"{name}={value!r} is not valid: expected an integer >= 1{hint}.")
    return int(value)


def default_kv_precision(spec: HardwareSpec, weight_precision: str) -> str:
    """The cache dtype an engine picks by default: the model's 16-bit activation dtype
    (BF16 where the device has it, else FP16), FP32 for an FP32 model. FP4 checkpoints are
    served with an FP8 cache where the device has FP8 (NVIDIA's NVFP4 checkpoints ship an FP8
    KV cache; TensorRT-LLM and vLLM read it from the checkpoint).

    >>> from aiadvisor.hardware import get
    >>> default_kv_precision(get("B200"), "fp4"), default_kv_precision(get("B200"), "bf16")
    ('fp8', 'bf16')
    """
    if weight_precision == "fp32":
        return "fp32"
    if weight_precision == "fp4" and spec.peak_tflops("fp8"):
        return "fp8"
    return "bf16" if spec.peak_tflops("bf16") else "fp16"


def check_kv_precision(spec: HardwareSpec, kv_precision: str) -> str:
    """``kv_precision`` if ``spec`` can store and read it, else an error with the choices."""
    check_choice("kv_precision", kv_precision, KV_PRECISIONS)
    if kv_precision == "bf16" and not spec.peak_tflops("bf16"):
        raise UnsupportedPrecisionError(
            f"kv_precision='bf16' is not supported on {spec.name!r}: it has no BF16 engine (no "
            "bf16 figure in its spec). Use kv_precision='fp16'.")
    if kv_precision in ("fp8", "int8") and spec.kind == "cpu":
        raise UnsupportedPrecisionError(
            f"kv_precision={kv_precision!r} is not supported on {spec.name!r}: CPU generation "
            "keeps the cache in the model's dtype. Use kv_precision='bf16', 'fp16' or 'fp32'.")
    return kv_precision


def _other_weight_bytes(spec: HardwareSpec, weight_precision: str) -> float:
    """Bytes per weight of what quantisation leaves alone (embeddings, norms, the head)."""
    if weight_precision == "fp32":
        return 4.0
    return 2.0


def weights_bytes(gp: GenerationProfile, spec: HardwareSpec, weight_precision: str) -> int:
    """The model's weights at ``weight_precision``: linear layers in that format (GPTQ/AWQ/
    bitsandbytes/FP8/NVFP4 quantise those; ``fp4`` at the device's format, NVFP4 4.5 or MXFP4
    4.25 bits), the rest in 16 bit (FP32 for an FP32 model)."""
    other = gp.prefill.num_params - gp.quantizable_params
    return int(gp.quantizable_params * weight_bytes_per_element(weight_precision, spec)
               + other * _other_weight_bytes(spec, weight_precision))


def _working_bytes(gp: GenerationProfile, prompt_len: int, weight_precision: str) -> float:
    """Activations of one prompt's forward in the serving dtype (the traced FP32 figure halved
    for 16-bit and narrower formats); in NF4, with the 16-bit copy bitsandbytes writes of the
    largest quantized weight before a prompt's GEMM (one layer at a time)."""
    act = gp.prefill.at(batch_size=1, seq_len=prompt_len).memory.activations_bytes
    working = act * (1.0 if weight_precision == "fp32" else 0.5)
    if weight_precision == "nf4" and prompt_len > 1:
        working += 2.0 * gp.largest_quantizable_params
    return working


def _kv_parts(gp: GenerationProfile, specs: list[HardwareSpec], precision: str, *, batch: int,
              context: float, kv_bytes_per_token: float, tp: int,
              model: EfficiencyModel) -> np.ndarray:
    """Seconds (P10, P50, P90) x device of the decode attention over ``context`` cached tokens."""
    layers = gp.kv.num_layers
    flops = batch * gp.attention_flops_per_context_token * context / tp
    num_bytes = batch * context * kv_bytes_per_token / tp
    work = DeviceWork(
        name=np.array(["aten._scaled_dot_product_attention"]),
        flops_per_call=np.array([flops / layers]), bytes_per_call=np.array([num_bytes / layers]),
        count=np.array([float(layers)]), feature_divisor=np.array([1.0]),
        op_class=np.array(["attention"]), phase=np.array(["forward"]),
        attention_core=np.array([False]), norm=np.array([False]))
    devs = device_arrays(specs, precision, model)
    cals = [_measured_curves(s, precision) for s in specs]
    parts = op_times(work, devs, model, measured_precision=precision in MEASURED_PRECISIONS,
                     curves=cals if any(c is not None for c in cals) else None)
    # Launches are already counted: the seq_len=1 forward has its own attention calls.
    return (parts["compute"] + parts["memory"]).sum(axis=2)


@dataclass(frozen=True)
class _Step:
    """One priced forward (P10/P50/P90 and the P50 breakdown), from predict() or a table row."""

    low: float
    mid: float
    high: float
    compute: float
    memory: float
    overhead: float
    communication: float
    confidence: str
    notes: tuple[str, ...] = ()
    host_bound: bool = False
    """Eager PyTorch's host time, not the device, sets the step (launched from Python)."""

    @classmethod
    def of(cls, pred: Prediction) -> _Step:
        return cls(pred.low_s, pred.step_time_s, pred.high_s, pred.compute_s, pred.memory_s,
                   pred.overhead_s, pred.communication_s, pred.confidence, pred.notes,
                   bool(pred.host_bound))

    @classmethod
    def row(cls, row) -> _Step:
        return cls(float(row.low_s), float(row.step_time_s), float(row.high_s),
                   float(row.compute_s), float(row.memory_s), float(row.overhead_s),
                   float(row.communication_s), str(row.confidence),
                   host_bound=bool(row.host_bound))

    @property
    def interval(self) -> np.ndarray:
        return np.array([self.low, self.mid, self.high])


def _forward(gp: GenerationProfile, batch: int, seq: int) -> ModelProfile:
    """The forward over ``batch x seq`` new tokens; a mixture of experts reads only the experts
    those tokens are routed to (:func:`~aiadvisor.costmodel.experts.active_expert_profile`)."""
    prof = gp.prefill.at(batch_size=batch, seq_len=seq)
    return active_expert_profile(prof, tokens=batch * seq)[0]


def _decode_forward(gp: GenerationProfile, batch: int, context: float,
                    engine: str) -> tuple[ModelProfile, bool]:
    """(the profile one decode step is priced on, whether it holds the attention over the
    cache). ``engine="eager"`` with a traced decode step: the model's own step at ``batch`` x
    ``context`` (its cache handling included, e.g. ``torch.cat`` re-copying every layer's
    cache each step, as transformers' ``DynamicCache`` and the built-in decoders do). Otherwise
    the prompt forward at one token, the attention over the cache priced apart
    (:func:`_kv_parts`): serving engines write each new token into a preallocated paged cache
    and read it in place."""
    if engine != "eager" or gp.decode is None:
        return _forward(gp, batch, 1), False
    base = gp.prefill.at(batch_size=batch, seq_len=1)
    prof = replace(base, ops=_decode_records(gp, batch, context), sdpa=(),
                   num_module_calls=gp.decode.num_module_calls,
                   num_view_ops_forward=gp.decode.view_ops(batch, context),
                   num_python_lines=gp.decode.num_python_lines or 0)
    return active_expert_profile(prof, tokens=batch)[0], True


def _decode_records(gp: GenerationProfile, batch: int, context: float) -> tuple:
    """The traced decode step's op records at ``batch`` x ``context``. Ops on the cache are
    priced as the calibration timed them on a cache (cold in DRAM, a fresh output each step),
    not as the same op on a hot buffer: the first op of each module to read it (the ``cat``
    appending the new token) and the attention over it. A copy the module then makes of what
    it just appended (e.g. ``repeat_interleave`` expanding grouped key/value heads) reads it
    back from cache: priced as a copy of a hot buffer at its size (on the development CPU
    the small Llama's 158 MB of such clones at batch 8 took 2.5 ms, 63 GB/s, where the cache
    ``cat`` rate gave 6.6 ms)."""
    records = []
    read = set()
    for op, rec in zip(gp.decode.ops, gp.decode.records(batch, context)):
        if op.on_cache:
            cold = rec.module not in read or op.op_class != "memory"
            read.add(rec.module)
            if cold:
                rec = replace(rec, op=rec.op + CACHE_SUFFIX)
        records.append(rec)
    return tuple(records)


def _graphs(spec: HardwareSpec, engine: str) -> bool:
    """Whether decode steps replay as CUDA graphs: a serving engine on an accelerator."""
    return engine == "engine" and spec.kind != "cpu"


def _fused(spec: HardwareSpec, engine: str) -> bool:
    """Whether the forwards run a serving engine's fused kernels (with or without graphs)."""
    return engine in ("engine", "fused") and spec.kind != "cpu"


def _engine_spec(spec: HardwareSpec) -> HardwareSpec:
    """``spec`` as a serving engine drives it: its kernels are not issued one by one from
    Python (decode steps replay CUDA graphs; TensorRT-LLM's runtime is C++, vLLM compiles and
    captures its forward), so eager PyTorch's host time per kernel does not bound the step."""
    return replace(spec, graph_replay=True)


def head_ops(prof: ModelProfile, vocab_size: int | None) -> tuple[OpRecord, ...]:
    """The vocabulary head's records in ``prof``: forward GEMMs outside the repeated blocks
    whose output is ``vocab_size`` wide for every token of the batch (written elements =
    batch x seq x vocab per call). Read off the output, not a module name, so a tied head
    (GPT-2's ``lm_head`` sharing the embedding) or one any module computes is found too; ()
    where the vocabulary is unknown."""
    tokens = prof.batch_size * (prof.seq_len or 1)
    if not vocab_size:
        return ()
    return tuple(
        op for op in prof.ops
        if op.op_class == "gemm" and op.phase == "forward" and op.repeat == 1 and op.count
        and DTYPE_BYTES.get(op.dtype) and math.isclose(
            op.bytes_written / DTYPE_BYTES[op.dtype] / op.count, tokens * vocab_size,
            rel_tol=1e-6))


def last_token_logits(gp: GenerationProfile, prof: ModelProfile) -> ModelProfile:
    """The prompt forward ``prof`` as a serving engine runs it: the vocabulary head over the
    last prompt token of each sequence only, the one whose logits are sampled (vLLM, TGI and
    TensorRT-LLM gather the last hidden states before the head; transformers ``generate``
    before ``logits_to_keep`` computed every position). Each head record becomes the same
    record at one token per sequence (the weight still read whole; FLOPs, activations and
    logits divided by the prompt length): for Llama-3-8B at a 512-token prompt,
    2 x 4096 x 128256 x 511 = 537 GFLOP (6.9 %) of the 7.8 TFLOP forward go."""
    seq = prof.seq_len or 1
    heads = head_ops(prof, gp.vocab_size)
    if seq == 1 or not heads:
        return prof
    one = gp.prefill.at(batch_size=prof.batch_size, seq_len=1)
    ones = {(op.module, op.op): op for op in head_ops(one, gp.vocab_size)}
    swap = {id(op): ones.get((op.module, op.op)) for op in heads}
    if any(rec is None for rec in swap.values()):
        return prof
    ops = tuple(swap.get(id(op), op) for op in prof.ops)
    removed = {}
    for op in heads:
        removed[op.module] = removed.get(op.module, 0.0) + op.flops - swap[id(op)].flops
    modules = tuple(replace(m, flops_forward=max(m.flops_forward - removed[m.name], 0.0))
                    if m.name in removed else m for m in prof.modules)
    return replace(prof, ops=ops, modules=modules,
                   flops_forward=prof.flops_forward - sum(removed.values()))


def _step_profiles(gp: GenerationProfile, batch: int, prompt_len: int, context: float,
                   engine: str, *, fused: bool) -> tuple[ModelProfile, ModelProfile, bool, float]:
    """(prefill profile, decode-step profile, whether the step holds the attention over the
    cache, kernels per decode step). ``fused``: as a serving engine runs them, the memory-bound
    ops of each module in one kernel (fused RMSNorm, residual add + norm, rotary embedding,
    activation x gate: :func:`~aiadvisor.costmodel.fusion.fuse_elementwise`) and the q/k/v and
    gate/up projections as one GEMM each (:func:`~aiadvisor.costmodel.fusion.
    fuse_projections`), in the prompt's forward and in each decode step, and the prompt's
    logits for its last token only (:func:`last_token_logits`); plain PyTorch runs every
    traced op, and the prompt's logits for its last token only where ``generate`` passes
    ``logits_to_keep=1`` (``gp.logits_to_keep``)."""
    step, traced = _decode_forward(gp, batch, context, engine)
    prefill = _forward(gp, batch, prompt_len)
    if fused or gp.logits_to_keep:
        prefill = last_token_logits(gp, prefill)
    if fused:
        prefill, step = (fuse_projections(fuse_elementwise(p)) for p in (prefill, step))
    return prefill, step, traced, float(sum(op.count for op in step.ops))


def _moe_note(gp: GenerationProfile, batch_size: int) -> str:
    moe = gp.prefill.moe
    touched = expected_experts_touched(moe.num_experts, moe.top_k, batch_size)
    return (f"Mixture of experts: all {moe.num_experts} experts per layer are resident; a decode "
            f"step of {batch_size} token(s) reads {touched:.3g} of them on average (E x (1 - (1 - "
            f"k/E)^tokens), top-{moe.top_k}, balanced routing).")


def _parallel(tp: int) -> ParallelConfig | None:
    return ParallelConfig(tp_degree=tp) if tp > 1 else None


def _predict(prof: ModelProfile, spec: HardwareSpec, precision: str, tp: int,
             model: EfficiencyModel) -> _Step:
    # No measured correction: aa.verify records whole training/inference steps, and decode
    # steps (priced without predict) would not get it, so prefill alone would be rescaled.
    # No autocast: engines and transformers' generate run the weights as loaded, in 16 bit.
    return _Step.of(predict(prof, hardware=spec, precision=precision, num_devices=tp,
                            parallel=_parallel(tp), model=model, correction=False,
                            autocast=False))


def check_request(gp: GenerationProfile, *, prompt_len, output_len, batch_size) -> tuple:
    prompt_len = _positive_int("prompt_len", prompt_len)
    output_len = _positive_int("output_len", output_len)
    batch_size = _positive_int("batch_size", batch_size, hint=" (concurrent sequences)")
    total = prompt_len + output_len
    if gp.max_positions is not None and total > gp.max_positions:
        raise InvalidArgumentError(
            f"prompt_len + output_len = {prompt_len} + {output_len} = {total} is not valid for "
            f"{gp.model_name}: expected at most {gp.max_positions} tokens "
            f"({gp.positions_source}). Shorten the prompt or the output.")
    return prompt_len, output_len, batch_size


def check_tp(gp: GenerationProfile, *, num_devices, tp) -> tuple[int, int]:
    num_devices = _positive_int("num_devices", num_devices)
    tp = num_devices if tp is None else _positive_int("tp", tp)
    if num_devices % tp:
        raise InvalidArgumentError(
            f"tp={tp} is not valid with num_devices={num_devices}: expected a divisor of "
            f"num_devices (each replica uses tp devices); choices: "
            f"{', '.join(str(d) for d in range(1, num_devices + 1) if num_devices % d == 0)}.")
    heads = gp.kv.kv_heads
    if heads is not None and tp > 1 and heads % tp:
        choices = [d for d in range(1, heads + 1) if heads % d == 0]
        raise InvalidArgumentError(
            f"tp={tp} is not valid for {gp.model_name}: its {heads} key/value heads cannot be "
            f"split over {tp} devices; expected a divisor of {heads}: "
            f"{', '.join(map(str, choices))}.")
    return num_devices, tp


def _check_config(gp, spec, *, num_devices, tp, weight_precision, kv_precision, prompt_len,
                  output_len, batch_size, engine):
    prompt_len, output_len, batch_size = check_request(
        gp, prompt_len=prompt_len, output_len=output_len, batch_size=batch_size)
    num_devices, tp = check_tp(gp, num_devices=num_devices, tp=tp)
    check_choice("weight_precision", weight_precision, WEIGHT_PRECISIONS)
    check_precision(spec, weight_precision)
    kv_precision = check_kv_precision(
        spec, kv_precision or default_kv_precision(spec, weight_precision))
    check_choice("engine", engine, ENGINES)
    return num_devices, tp, kv_precision, prompt_len, output_len, batch_size


def predict_generation(gp: GenerationProfile, spec: HardwareSpec, *, num_devices: int = 1,
                       tp: int | None = None, weight_precision: str = "bf16",
                       kv_precision: str | None = None, prompt_len: int = 512,
                       output_len: int = 128, batch_size: int = 1, engine: str = "engine",
                       model: EfficiencyModel | None = None,
                       cache: dict | None = None) -> GenerationPrediction:
    """Serving figures of ``gp`` on ``num_devices`` x ``spec`` (see the module docstring).

    ``engine="engine"`` assumes a serving engine that replays each decode step as a CUDA graph:
    the per-op launch cost of eager PyTorch becomes the graph's gap between kernels. CPUs and
    ``engine="eager"`` keep the eager launch cost of every traced op. ``cache`` (a dict the
    caller keeps) shares the priced forwards between calls that differ only in the KV format.
    """
    num_devices, tp, kv_precision, prompt_len, output_len, batch_size = _check_config(
        gp, spec, num_devices=num_devices, tp=tp, weight_precision=weight_precision,
        kv_precision=kv_precision, prompt_len=prompt_len, output_len=output_len,
        batch_size=batch_size, engine=engine)
    model = model or load_model()
    cache = {} if cache is None else cache
    context = prompt_len + output_len / 2
    key = (spec.name, weight_precision, tp, batch_size, prompt_len, output_len, engine)
    if key not in cache:
        prefill_prof, step, traced, kernels = _step_profiles(
            gp, batch_size, prompt_len, context, engine, fused=_fused(spec, engine))
        run_on = _engine_spec(spec) if _graphs(spec, engine) else spec
        cache[key] = (_predict(prefill_prof, run_on, weight_precision, tp, model),
                      _predict(step, run_on, weight_precision, tp, model), traced, kernels)
    prefill, decode, traced, kernels = cache[key]
    kv_per_token = gp.kv.elements_per_token * KV_BYTES[kv_precision]
    kv_s = np.zeros(3) if traced else _kv_parts(
        gp, [spec], weight_precision, batch=batch_size, context=context,
        kv_bytes_per_token=kv_per_token, tp=tp, model=model)[:, 0]
    return _assemble(gp, spec, num_devices=num_devices, tp=tp, weight_precision=weight_precision,
                     kv_precision=kv_precision, prompt_len=prompt_len, output_len=output_len,
                     batch_size=batch_size, engine=engine, prefill=prefill, decode=decode,
                     kv_s=kv_s, kernels=kernels)


def generation_table(gp: GenerationProfile, specs: list[HardwareSpec], *, num_devices: int,
                     tp: int, weight_precision: str, kv_precisions: tuple[str, ...],
                     prompt_len: int, output_len: int, batches: list[int], engine: str = "engine",
                     model: EfficiencyModel | None = None) -> list[GenerationPrediction]:
    """:func:`predict_generation` for many devices at once (one vectorised cost-model call per
    batch size instead of one per device); configurations a device cannot run are left out,
    and so are batches beyond what fits on it. The local-device calibration is not used here:
    plan a measured device with :func:`predict_generation`."""
    from .api import _table_for_precision
    from .devices import SpecColumns

    model = model or load_model()
    specs = [s for s in specs if gemm_peak_tflops(s, weight_precision)]
    out: list[GenerationPrediction] = []
    if not specs:
        return out
    parallel = _parallel(tp) or ParallelConfig()
    kv_ok = {s.name: [kv for kv in kv_precisions if _kv_ok(s, kv)] for s in specs}
    room = {(s.name, kv): _max_batch(gp, s, weight_precision, kv, prompt_len, output_len, tp)
            for s in specs for kv in kv_ok[s.name]}
    for batch in batches:
        if batch > 1 and all(m < batch for m in room.values()):
            break
        tables: list[dict[str, _Step]] = [{}, {}]
        kernels: dict[str, float] = {}
        for fused in (False, True):
            group = [i for i, s in enumerate(specs) if _fused(s, engine) == fused]
            if not group:
                continue
            *profs, traced, count = _step_profiles(gp, batch, prompt_len,
                                                   prompt_len + output_len / 2, engine,
                                                   fused=fused)
            sub = [_engine_spec(specs[i]) if _graphs(specs[i], engine) else specs[i]
                   for i in group]
            for table, prof in zip(tables, profs):
                # The vectorised core of predict_table, without building a DataFrame per batch.
                t = _table_for_precision(prof, sub, SpecColumns.of(sub), weight_precision,
                                         parallel, model, autocast=False)
                table.update({name: _Step(
                    float(t["low_s"][i]), float(t["step_time_s"][i]), float(t["high_s"][i]),
                    float(t["compute_s"][i]), float(t["memory_s"][i]),
                    float(t["overhead_s"][i]), float(t["communication_s"][i]),
                    str(t["confidence"][i])) for i, name in enumerate(t["hardware"])})
            kernels.update({s.name: count for s in sub})
        for kv in sorted({k for ks in kv_ok.values() for k in ks}):
            kv_specs = [s for s in specs if kv in kv_ok[s.name]
                        and (batch == 1 or room[(s.name, kv)] >= batch)]
            if not kv_specs:
                continue
            kv_s = np.zeros((3, len(kv_specs))) if traced else _kv_parts(
                gp, kv_specs, weight_precision, batch=batch,
                context=prompt_len + output_len / 2,
                kv_bytes_per_token=gp.kv.elements_per_token * KV_BYTES[kv], tp=tp, model=model)
            for d, spec in enumerate(kv_specs):
                out.append(_assemble(gp, spec, num_devices=num_devices, tp=tp,
                                     weight_precision=weight_precision, kv_precision=kv,
                                     prompt_len=prompt_len, output_len=output_len,
                                     batch_size=batch, engine=engine,
                                     prefill=tables[0][spec.name], decode=tables[1][spec.name],
                                     kv_s=kv_s[:, d], kernels=kernels[spec.name]))
    return out


def _max_batch(gp: GenerationProfile, spec: HardwareSpec, weight_precision: str,
               kv_precision: str, prompt_len: int, output_len: int, tp: int) -> int:
    """Sequences of ``prompt_len + output_len`` tokens whose cache fits beside the weights and
    one prompt's activations in the engine's share of one device (0 without a memory figure)."""
    if spec.memory_bytes is None:
        return 0
    per_seq = (prompt_len + output_len) * gp.kv.elements_per_token * KV_BYTES[kv_precision] / tp
    free = (spec.memory_bytes * ENGINE_MEMORY_FRACTION
            - (weights_bytes(gp, spec, weight_precision)
               + _working_bytes(gp, prompt_len, weight_precision)) / tp)
    return max(int(free // per_seq), 0)


def _kv_ok(spec: HardwareSpec, kv_precision: str) -> bool:
    try:
        check_kv_precision(spec, kv_precision)
    except UnsupportedPrecisionError:
        return False
    return True


def _assemble(gp: GenerationProfile, spec: HardwareSpec, *, num_devices: int, tp: int,
              weight_precision: str, kv_precision: str, prompt_len: int, output_len: int,
              batch_size: int, engine: str, prefill: _Step, decode: _Step,
              kv_s: np.ndarray, kernels: float) -> GenerationPrediction:
    notes: list[str] = []
    graphs = _graphs(spec, engine)
    fused = _fused(spec, engine)
    if engine != "eager" and not fused:
        notes.append("CPUs run no serving engine here: every traced op is launched eagerly "
                     "(engine='eager').")
    weights = weights_bytes(gp, spec, weight_precision)
    kv_per_token = gp.kv.elements_per_token * KV_BYTES[kv_precision]
    seq_total = prompt_len + output_len
    kv_bytes = batch_size * seq_total * kv_per_token
    working = _working_bytes(gp, prompt_len, weight_precision)
    memory = spec.memory_bytes
    usable = 0 if memory is None else memory * ENGINE_MEMORY_FRACTION
    max_batch = _max_batch(gp, spec, weight_precision, kv_precision, prompt_len, output_len, tp)
    fits = max_batch >= batch_size
    if memory is None:
        notes.append(f"{spec.name} has no memory figure in the catalog: it is not known to fit.")
    launches = decode.overhead
    if graphs:
        launches = max(decode.overhead - kernels * GRAPH_SAVING_S, 0.0)
        notes.append(f"Decode steps run as a serving engine runs them (vLLM, TGI, TensorRT-LLM): "
                     f"memory-bound ops fused, {kernels:.0f} kernels a step replayed as a CUDA "
                     f"graph, each at the GPU's own per-kernel cost ({launches * 1e3:.2f} ms a "
                     "step in all); engine='eager' prices plain transformers generate.")
    elif fused:
        notes.append(f"Decode steps run a serving engine's fused kernels ({kernels:.0f} a step: "
                     "memory-bound ops fused, q/k/v and gate/up one GEMM each) launched one by "
                     "one from Python without CUDA graphs (vLLM enforce_eager, TGI before 2.0): "
                     "each launch costs eager PyTorch's host time, so small batches are bound by "
                     "the host; engine='engine' prices the same engine with graph replay.")
    if graphs:
        # The forward's interval without its eager launches (known at P50 only): the P10/P90
        # keep their ratio to the P50, so no bound can go below zero; the graph's per-kernel
        # costs take their own band.
        body = decode.mid - decode.overhead
        tpot = (decode.interval * (body / decode.mid if decode.mid > 0 else 0.0)
                + launches * np.asarray(KERNEL_COST_BAND) + kv_s)
    else:  # eager: the step as priced, host time and its band included
        tpot = decode.interval + kv_s
    ttft = prefill.interval
    request_s = ttft + (output_len - 1) * tpot
    replicas = num_devices // tp
    breakdown = {"memory": decode.memory + float(kv_s[1]), "compute": decode.compute,
                 "overhead": float(launches), "communication": decode.communication}
    confidence = min(prefill.confidence, decode.confidence, key=_CONFIDENCE_ORDER.index)
    if weight_precision == "int4":
        notes.append("int4 is a weight-only format: GPTQ/AWQ kernels (Marlin, ExLlama, "
                     "tinygemm) read the 4-bit weights and multiply in 16 bit; embeddings, norms "
                     "and the vocabulary head stay in 16 bit.")
    elif weight_precision == "nf4":
        notes.append("nf4 is bitsandbytes' weight-only format: a one-token call (batch-1 decode) "
                     "runs its fused 4-bit GEMV; a prompt or a decode step at batch > 1 "
                     "dequantises each weight to 16 bit first (one more kernel per linear layer,"
                     " the 16-bit copy written and read). Embeddings, norms and the vocabulary "
                     "head stay in 16 bit.")
    elif weight_precision == "fp8":
        notes.append("fp8: weights and activations in 8 bit (W8A8 matmuls); embeddings, norms "
                     "and the vocabulary head stay in 16 bit.")
    elif weight_precision == "fp4":
        from ..hardware.support import fp4_bits, fp4_format

        notes.append(f"fp4: {(fp4_format(spec) or 'nvfp4').upper()} weights and activations "
                     f"({fp4_bits(spec):g} bits, W4A4 matmuls at the FP4 peak); attention, "
                     "embeddings, norms and the vocabulary head stay in 16 bit. Needs a "
                     "checkpoint quantized to that format (NVIDIA Model Optimizer, "
                     "llm-compressor, AMD Quark).")
    elif weight_precision == "int8":
        notes.append("int8: W8A8, weights and activations in int8 on the INT8 matmul engine "
                     "(SmoothQuant-style checkpoints: llm-compressor, TensorRT-LLM "
                     "W8A8_SQ); weight-only int8 (EETQ, GPTQ 8-bit, TensorRT-LLM W8A16) is "
                     "'int8wo', which decodes at about the same speed but prefills at the "
                     "16-bit rate. Embeddings, norms and the vocabulary head stay in 16 bit.")
    elif weight_precision == "int8wo":
        notes.append("int8wo is a weight-only format (W8A16: EETQ, GPTQ 8-bit, TensorRT-LLM "
                     "W8A16, torchao int8 weight-only, llama.cpp Q8_0): kernels read the 8-bit "
                     "weights and multiply in 16 bit, so prefill runs at the 16-bit rate. "
                     "Embeddings, norms and the vocabulary head stay in 16 bit.")
    if gp.prefill.moe is not None:
        notes.append(_moe_note(gp, batch_size))
    context = prompt_len + output_len / 2
    if engine == "eager" and gp.decode is not None:
        notes.append("Decode priced on the model's own decode step as traced with its cache "
                     "(e.g. torch.cat re-copying every layer's cache each step, the mask).")
    elif engine == "eager":
        notes.append("The model's own decode step could not be traced with a cache: decode is "
                     "priced as the prompt forward at one token plus the attention over the "
                     "cache, without what the model's cache handling costs (e.g. torch.cat "
                     "re-copying each layer's cache), so it is likely too fast.")
    notes.append(f"Decode priced at the mean context of {context:g} tokens; the engine takes "
                 f"{ENGINE_MEMORY_FRACTION:.0%} of device memory (vLLM's default) and the cache "
                 "fills what weights and one prompt's activations leave.")
    notes.append("Time to first token is the prefill of the batch's prompts together (a static "
                 "batch); "
                 + ("logits for the last prompt token of each sequence only, as engines compute "
                    "them." if fused else
                    "logits for the last prompt token of each sequence only, as transformers "
                    "generate asks the model's forward (logits_to_keep=1)." if gp.logits_to_keep
                    else "logits for every prompt token: the model's forward takes no "
                    "logits_to_keep (engines and transformers generate compute only the last "
                    "one where it does)."))
    notes.extend(n for n in decode.notes if n not in notes)
    return GenerationPrediction(
        hardware=spec.name, num_devices=num_devices, tp=tp, weight_precision=weight_precision,
        kv_precision=kv_precision, prompt_len=prompt_len, output_len=output_len,
        batch_size=batch_size, weights_bytes=int(weights), kv_bytes_per_token=int(kv_per_token),
        kv_bytes=int(kv_bytes), working_bytes=int(working), usable_bytes_per_device=int(usable),
        max_batch=max_batch, fits=bool(fits),
        ttft_s=float(ttft[1]), ttft_low_s=float(ttft[0]), ttft_high_s=float(ttft[2]),
        tpot_s=float(tpot[1]), tpot_low_s=float(tpot[0]), tpot_high_s=float(tpot[2]),
        tokens_per_s=float(replicas * batch_size * output_len / request_s[1]),
        tokens_per_s_per_user=float(1.0 / tpot[1]),
        # A step launched from Python that waits on the host is overhead-bound, whatever its
        # device parts weigh.
        bound=("overhead" if decode.host_bound and not graphs
               else max(breakdown, key=breakdown.get)),
        confidence=confidence, notes=tuple(notes),
    )


def batch_choices(max_batch: int, *, limit: int = 1024) -> list[int]:
    """Concurrency levels a plan tries: powers of two up to ``max_batch``, and ``max_batch``."""
    top = min(max_batch, limit)
    out = [2**k for k in range(int(math.log2(top)) + 1)] if top >= 1 else []
    if top >= 1 and top not in out:
        out.append(top)
    return out
