"""Code templates, one per tactic. Constants only: nothing here is read from data files.

Placeholders: ``$model``, ``$inputs``, ``$optimizer``, ``$loss_fn``, ``$dataset`` (the user's
names), ``$call`` (``model(x)``, ``model(*x)`` or ``model(**x)``), ``$args``/``$kwargs`` (the
inputs as positional/keyword arguments) and ``$v_<key>`` (a value, written with ``repr``).
A literal dollar sign is ``$$``.

Each snippet starts with a line saying what it assumes exists: the user's model, inputs,
optimizer and a ``loss_fn(output) -> scalar`` (for training snippets).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Snippet:
    template: str
    requires: tuple[str, ...] = ()
    """pip packages the snippet needs besides torch."""
    needs_cuda: bool = False
    launcher: str = "notebook"
    """``notebook`` (run in place) or ``torchrun`` (save as a script, launch one process per
    device)."""


_REMAKE_OPTIMIZER = '''
def _same_optimizer(old, params, **overrides):
    # Same class and settings as the existing optimizer (param-group options are not kept).
    accepted = inspect.signature(type(old).__init__).parameters
    settings = {k: v for k, v in old.defaults.items() if k in accepted and k not in overrides}
    return type(old)(params, **settings, **overrides)
'''

_TO_DEVICE = '''
def _to_device(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    return value
'''

TF32 = '''\
# TF32 tensor cores for float32 matmuls and convolutions (fp32 range, 10-bit mantissa).
import torch

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("high")
'''

AUTOCAST_TRAIN = '''\
# Assumes: $model, $inputs, $optimizer and $loss_fn(output) -> scalar loss.
# Mixed precision: matmuls in $v_dtype, fp32 master weights and optimizer state.
import torch

amp_dtype = getattr(torch, $v_dtype)
device_type = $v_device_type
# fp16 has a narrow exponent range: scale the loss so small gradients do not flush to zero.
scaler = torch.amp.GradScaler(device_type, enabled=amp_dtype is torch.float16)


def train_step():
    with torch.autocast(device_type=device_type, dtype=amp_dtype):
        output = $call
        loss = $loss_fn(output)
    scaler.scale(loss).backward()
    scaler.step($optimizer)
    scaler.update()
    $optimizer.zero_grad(set_to_none=True)
    return loss.detach()

# Call train_step() in your training loop.
'''

AUTOCAST_INFER = '''\
# Assumes: $model and $inputs. Inference in $v_dtype (no gradients, no fp32 master copy needed):
# the weights are stored in $v_dtype once (half the memory, no cast on every call); autocast
# keeps the ops that need fp32 (softmax, norms) in fp32 and casts float inputs.
import torch

amp_dtype = getattr(torch, $v_dtype)
$model = $model.to(amp_dtype).eval()  # in place: the module itself now holds $v_dtype weights
with torch.inference_mode(), torch.autocast(device_type=$v_device_type, dtype=amp_dtype):
    output = $call
'''

FP8_TORCHAO = '''\
# Assumes: $model on an FP8-capable GPU (compute capability >= 8.9), trained under bf16 autocast.
# pip install torchao   (alternative: NVIDIA Transformer Engine, te.Linear + te.fp8_autocast)
import torch
from torchao.float8 import Float8LinearConfig, convert_to_float8_training


def _fp8_eligible(module, fqn):
    # FP8 GEMMs need both dimensions divisible by 16; small layers gain less than the
    # scaling costs, so they stay in bf16.
    return (
        isinstance(module, torch.nn.Linear)
        and module.in_features % 16 == 0
        and module.out_features % 16 == 0
        and min(module.in_features, module.out_features) >= $v_min_features
    )


config = Float8LinearConfig.from_recipe_name($v_recipe)
convert_to_float8_training($model, config=config, module_filter_fn=_fp8_eligible)
$model.compile()  # fuses the amax/scale computations into neighbouring kernels
'''

FP8_INFER = '''\
# Assumes: $model and $inputs, inference on an FP8-capable GPU (compute capability >= 8.9:
# Ada, Hopper, Blackwell). pip install torchao. Linear weights stored in float8 (e4m3) with one
# scale per row, activations quantized per row on the fly: FP8 tensor-core GEMMs, half the
# bf16 weight bytes. Check accuracy on your data.
import torch
from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_

$model = $model.to(torch.bfloat16).eval()
quantize_($model, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))
with torch.inference_mode():
    output = $call
'''

MXFP8_TE = '''\
# Assumes: $model on a GPU with block-scaled tensor cores (NVIDIA Blackwell, compute capability
# >= 10.0), $inputs, $optimizer and $loss_fn(output) -> scalar loss, trained under bf16 autocast.
# pip install transformer_engine[pytorch]. MXFP8: FP8 (E4M3) values with one power-of-two (E8M0)
# scale per 32, computed on the fly (Transformer Engine's MXFP8BlockScaling recipe). Eligible
# Linear layers become te.Linear (weights copied); the optimizer is rebuilt over them. Do this
# before training starts (the new optimizer has empty state).
import inspect

import torch
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import MXFP8BlockScaling
''' + _REMAKE_OPTIMIZER + '''

def _to_te_linear(module):
    # MX blocks run along both GEMM dimensions: both must be multiples of 32. Small layers gain
    # less than the quantization costs: they stay in bf16.
    for name, child in module.named_children():
        if (
            isinstance(child, torch.nn.Linear)
            and child.in_features % 32 == 0
            and child.out_features % 32 == 0
            and min(child.in_features, child.out_features) >= $v_min_features
        ):
            new = te.Linear(child.in_features, child.out_features, bias=child.bias is not None,
                            params_dtype=child.weight.dtype, device=child.weight.device)
            with torch.no_grad():
                new.weight.copy_(child.weight)
                if child.bias is not None:
                    new.bias.copy_(child.bias)
            setattr(module, name, new)
        else:
            _to_te_linear(child)


_to_te_linear($model)
$optimizer = _same_optimizer($optimizer, $model.parameters())
recipe = MXFP8BlockScaling()


def _mxfp8():
    # te.autocast in current Transformer Engine; older releases call it fp8_autocast.
    if hasattr(te, "autocast"):
        return te.autocast(enabled=True, recipe=recipe)
    return te.fp8_autocast(enabled=True, fp8_recipe=recipe)


def train_step():
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16), _mxfp8():
        output = $call
        loss = $loss_fn(output)
    loss.backward()
    $optimizer.step()
    $optimizer.zero_grad(set_to_none=True)
    return loss.detach()

# Call train_step() in your training loop.
'''

FP4_INFER = '''\
# Assumes: $model and $inputs, inference on an NVIDIA Blackwell GPU (FP4 tensor cores, compute
# capability >= 10.0). pip install torchao (prototype API, checked against torchao 0.18; older
# releases call the config NVFP4InferenceConfig). W4A4 NVFP4: weights and activations in E2M1
# with an E4M3 scale per 16 values and an FP32 scale per tensor (4.5 bits each); attention and
# norms stay bf16. 4-bit activations cost accuracy: evaluate on your data, or serve an NVFP4
# checkpoint calibrated with NVIDIA Model Optimizer or llm-compressor.
import torch
from torchao.prototype.mx_formats import NVFP4DynamicActivationNVFP4WeightConfig
from torchao.quantization import quantize_


def _fp4_eligible(module, fqn):
    # NVFP4 GEMMs need both weight dimensions divisible by 16.
    return (
        isinstance(module, torch.nn.Linear)
        and module.in_features % 16 == 0
        and module.out_features % 16 == 0
    )


$model = $model.to(torch.bfloat16).eval()
# use_triton_kernel=True fuses the activation quantization (needs the MSLK package).
quantize_($model, NVFP4DynamicActivationNVFP4WeightConfig(use_triton_kernel=False),
          filter_fn=_fp4_eligible)
$model = torch.compile($model, fullgraph=True)
with torch.inference_mode():
    output = $call
'''

INT8_GPU = '''\
# Assumes: $model and $inputs, inference on a GPU with int8 tensor cores. pip install torchao.
# Linear weights in int8 (one scale per channel), activations quantized per token on the fly
# (W8A8): int8 tensor-core GEMMs, half the bf16 weight bytes. Check accuracy on your data
# (SmoothQuant-style calibration helps models with activation outliers).
import torch
from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

$model = $model.to(torch.bfloat16).eval()
quantize_($model, Int8DynamicActivationInt8WeightConfig())
with torch.inference_mode():
    output = $call
'''

CHANNELS_LAST = '''\
# Assumes: $model (a convolutional network) and $inputs.
# NHWC layout: tensor-core convolutions without NCHW<->NHWC transposes around every conv.
import torch


def _channels_last(value):
    if isinstance(value, torch.Tensor):
        return value.contiguous(memory_format=torch.channels_last) if value.dim() == 4 else value
    if isinstance(value, dict):
        return {k: _channels_last(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_channels_last(v) for v in value)
    return value


$model = $model.to(memory_format=torch.channels_last)
$inputs = _channels_last($inputs)  # convert every batch the same way
'''

TORCH_COMPILE = '''\
# Assumes: $model. TorchInductor fuses chains of elementwise/normalization ops into single
# kernels (fewer round trips through memory). The first call compiles (seconds to minutes).
import torch

$model.compile(mode=$v_mode)  # in place: state_dict keys stay the same
'''

CUDA_GRAPHS = '''\
# Assumes: $model. The "cudagraphs" backend records CUDA graphs: the whole step replays with one
# launch instead of one per kernel, the kernels themselves unchanged (a torch.compile step
# after this one adds kernel fusion with mode="reduce-overhead", graphs included).
# Keep input shapes fixed (drop_last=True or pad the last batch).
import torch

$model.compile(backend="cudagraphs")
'''

SDPA = '''\
# Assumes: $model. Fused attention (FlashAttention / memory-efficient kernels): the
# (sequence x sequence) score matrix is never stored, so it costs no activation memory.
import torch.nn.functional as F

if hasattr($model, "set_attn_implementation"):  # Hugging Face transformers models
    $model.set_attn_implementation("sdpa")


# In your own attention module, replace softmax(q @ k.transpose(-2, -1) / sqrt(d)) @ v with:
def attention(q, k, v, causal=$v_causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
'''

CHECKPOINTING = '''\
# Assumes: $model with a stack of repeated blocks (an nn.ModuleList).
# Activation checkpointing: backward recomputes what forward did not keep.
# selective=True recomputes only the attention (Korthikanti et al. 2022); False, whole blocks.
import functools

import torch
from torch.utils.checkpoint import checkpoint

selective = $v_selective


def _checkpoint_forward(module):
    forward = module.forward

    @functools.wraps(forward)
    def checkpointed(*args, **kwargs):
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    module.forward = checkpointed


block_lists = [m for m in $model.modules() if isinstance(m, torch.nn.ModuleList)]
blocks = max(block_lists, key=len, default=[])
if not selective and hasattr($model, "gradient_checkpointing_enable"):  # Hugging Face models
    $model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
else:
    for block in blocks:
        targets = [block]
        if selective:
            targets = [m for m in block.modules() if "attention" in type(m).__name__.lower()]
        for target in targets:
            _checkpoint_forward(target)
'''

DISTRIBUTED_TRAIN = '''\
# Assumes: $model, $inputs, $optimizer and $loss_fn(output) -> scalar loss, built above.
# Save as train.py and launch one process per device:
#     torchrun --nproc_per_node=$v_nproc train.py
import gc
import inspect
import os

import torch
import torch.distributed as dist

strategy = $v_strategy  # "ddp", "fsdp" or "fsdp+offload"
use_cuda = torch.cuda.is_available()
dist.init_process_group("nccl" if use_cuda else "gloo")
rank, local_rank = dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0))
device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
if use_cuda:
    torch.cuda.set_device(device)
$model = $model.to(device)

if strategy == "ddp":
    # Every device holds the whole model; gradients are all-reduced. gradient_as_bucket_view:
    # the gradients live in DDP's all-reduce buckets instead of beside them (saves one copy).
    from torch.nn.parallel import DistributedDataParallel

    $model = DistributedDataParallel($model, device_ids=[local_rank] if use_cuda else None,
                                     gradient_as_bucket_view=True)
else:
    # FSDP (ZeRO-3): parameters, gradients and optimizer state sharded over the devices;
    # each block's parameters are all-gathered just before use and freed after.
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    options = {}
    if use_cuda and $v_bf16:
        options["mp_policy"] = MixedPrecisionPolicy(
            param_dtype=torch.bfloat16, reduce_dtype=torch.float32
        )
    if strategy.endswith("offload"):
        options["offload_policy"] = CPUOffloadPolicy()
    # True (FSDP's default): each block's weights are freed after its forward and gathered
    # again for its backward. False: kept until backward, one all-gather per block instead
    # of two, at the cost of holding the unsharded weights through the step.
    reshard_after_forward = $v_reshard_after_forward
    block_lists = [m for m in $model.modules() if isinstance(m, torch.nn.ModuleList)]
    blocks = list(max(block_lists, key=len, default=[]))
    for block in blocks:
        fully_shard(block, reshard_after_forward=reshard_after_forward, **options)
    fully_shard($model, reshard_after_forward=reshard_after_forward, **options)
    # Prefetch one block ahead in both passes (FSDP2 does this implicitly; explicit, it also
    # holds when the CPU runs behind). FSDP1's equivalents: forward_prefetch=True,
    # backward_prefetch=BackwardPrefetch.BACKWARD_PRE, limit_all_gathers=True.
    for current, following in zip(blocks, blocks[1:]):
        current.set_modules_to_forward_prefetch([following])
        following.set_modules_to_backward_prefetch([current])
''' + _REMAKE_OPTIMIZER + _TO_DEVICE + '''

# The optimizer must see the wrapped (sharded) parameters.
$optimizer = _same_optimizer($optimizer, $model.parameters())
# Each rank should read its own part of the data (torch.utils.data.DistributedSampler).
$inputs = _to_device($inputs, device)
for step in range($v_num_steps):
    output = $call
    loss = $loss_fn(output)
    loss.backward()
    $optimizer.step()
    $optimizer.zero_grad(set_to_none=True)
    if rank == 0:
        print(f"step {step}: loss {loss.item():.4f}")
dist.barrier()  # every rank done with its collectives before the group is torn down
# Drop what holds the group (the wrapped model and its optimizer) first: left to the
# interpreter's shutdown, gloo's threads can abort the process ("terminate called ...").
del $model, $optimizer, output, loss
gc.collect()  # and free them now, while the group still exists
dist.destroy_process_group()
'''

DEEPSPEED_ZERO = '''\
# Assumes: $model, $inputs, $optimizer and $loss_fn(output) -> scalar loss.
# pip install deepspeed; launch with:  deepspeed --num_gpus=$v_nproc train.py
import deepspeed

offload = $v_offload
zero = {"stage": $v_stage, "overlap_comm": True, "contiguous_gradients": True}
if offload:
    zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if $v_stage == 3:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
ds_config = {
    "train_micro_batch_size_per_gpu": $v_micro_batch,
    "gradient_accumulation_steps": $v_accum_steps,
    "bf16": {"enabled": $v_bf16},
    "zero_optimization": zero,
}
$model, $optimizer, _, _ = deepspeed.initialize(
    model=$model, optimizer=$optimizer, config=ds_config
)
output = $call
loss = $loss_fn(output)
$model.backward(loss)
$model.step()
'''

TENSOR_PARALLEL = '''\
# Assumes: $model, a transformer whose blocks are an nn.ModuleList. Launch with
#     torchrun --nproc_per_node=$v_nproc train.py
# Megatron-style tensor parallel over $v_tp devices (within one node: NVLink), data parallel
# (FSDP) over $v_dp groups. Attention modules must use num_heads // $v_tp local heads
# (Hugging Face models: from_pretrained(..., tp_plan="auto") does this for you).
import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

device_type = "cuda" if torch.cuda.is_available() else "cpu"
mesh = init_device_mesh(device_type, ($v_dp, $v_tp), mesh_dim_names=("dp", "tp"))
COLWISE = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "c_fc", "fc1", "query", "key",
           "value", "w1", "w3")
ROWWISE = ("o_proj", "down_proj", "c_proj", "fc2", "out_proj", "w2")
block_lists = [m for m in $model.modules() if isinstance(m, torch.nn.ModuleList)]
blocks = max(block_lists, key=len, default=[])
for block in blocks:
    plan = {}
    for name, sub in block.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if isinstance(sub, torch.nn.Linear) and leaf in COLWISE:
            plan[name] = ColwiseParallel()  # split output features: no communication
        elif isinstance(sub, torch.nn.Linear) and leaf in ROWWISE:
            plan[name] = RowwiseParallel()  # split input features: one all-reduce
    parallelize_module(block, mesh["tp"], plan)
if $v_dp > 1:
    for block in blocks:
        fully_shard(block, mesh=mesh["dp"])
    fully_shard($model, mesh=mesh["dp"])
# After training: torch.distributed.barrier(), then `del $model, mesh` and gc.collect(), then
# torch.distributed.destroy_process_group(). Sharded parameters and a mesh left to the
# interpreter's shutdown can abort the process there (gloo: "terminate called ...").
'''

EXPERT_PARALLEL = '''\
# Assumes: $model (a mixture-of-experts model whose experts modules stack their weights on
# dim 0 and are called as experts(tokens, top_k_index, top_k_weights): transformers 5's
# Mixtral, Qwen-MoE, DeepSeek-V3, ...), $inputs, $optimizer and $loss_fn(output) -> scalar.
# Save as train.py and launch one process per device ($v_dp x $v_ep in all; on more than one
# node add --nnodes=N --rdzv-endpoint=HOST:PORT):
#     torchrun --nproc_per_node=$v_nproc train.py
# Expert parallel over $v_ep devices: each keeps num_experts / $v_ep experts of every MoE
# layer; tokens go to the device holding their expert and back (two all-to-alls per layer and
# pass). The rest of the model is replicated; each expert is replicated over the $v_dp
# devices holding the same experts ("dp" below). Gradients are averaged explicitly after
# backward, so the split is easy to read; shard the dense part with FSDP for large models.
import inspect
import os

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
from torch.distributed.device_mesh import init_device_mesh

use_cuda = torch.cuda.is_available()
local_rank = int(os.environ.get("LOCAL_RANK", 0))
device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
if use_cuda:
    torch.cuda.set_device(device)
mesh = init_device_mesh(device.type, ($v_dp, $v_ep), mesh_dim_names=("dp", "ep"))
ep_group, dp_group = mesh["ep"].get_group(), mesh["dp"].get_group()
ep_rank, ep_size = mesh["ep"].get_local_rank(), $v_ep


def _is_experts(module):
    # The profiler's rule: an integer num_experts, every own weight stacked that many times.
    num = getattr(module, "num_experts", None)
    own = list(module.parameters(recurse=False))
    return (isinstance(num, int) and num >= 2 and bool(own) and not hasattr(module, "top_k")
            and all(p.dim() >= 2 and p.shape[0] == num for p in own))


def _exchange(values, splits_out, splits_in):
    # all-to-all of rows; differentiable (backward sends the gradients the other way)
    out = values.new_empty((sum(splits_out), *values.shape[1:]))
    return dist_fn.all_to_all_single(out, values.contiguous(), splits_out, splits_in,
                                     group=ep_group)


def _expert_parallel(experts):
    """Keep this device's slice of the stacked experts; route tokens with all-to-alls."""
    total = experts.num_experts
    if total % ep_size:
        raise ValueError(f"{total} experts cannot be split over {ep_size} devices")
    local = total // ep_size
    first = ep_rank * local
    for name, param in list(experts.named_parameters(recurse=False)):
        sliced = torch.nn.Parameter(param.detach()[first:first + local].clone())
        sliced.aiadvisor_expert = True
        setattr(experts, name, sliced)
    experts.num_experts = local
    forward = experts.forward

    def ep_forward(hidden_states, top_k_index, top_k_weights):
        top_k = top_k_index.shape[1]
        flat = top_k_index.reshape(-1)
        order = torch.argsort(torch.div(flat, local, rounding_mode="floor"), stable=True)
        send = torch.bincount(torch.div(flat, local, rounding_mode="floor"),
                              minlength=ep_size)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send, group=ep_group)  # how many rows come from whom
        send, recv = send.tolist(), recv.tolist()
        token_of = torch.div(order, top_k, rounding_mode="floor")
        tokens = _exchange(hidden_states[token_of], recv, send)
        weights = _exchange(top_k_weights.reshape(-1, 1)[order], recv, send)
        index = flat.new_empty(sum(recv))
        dist.all_to_all_single(index, flat[order].contiguous(), recv, send, group=ep_group)
        # The model's own expert code on the rows sent here (one expert slot each), with the
        # global expert ids turned into this device's slots.
        out = forward(tokens, (index - first).unsqueeze(-1), weights.to(top_k_weights.dtype))
        back = _exchange(out, send, recv)
        combined = torch.zeros_like(hidden_states)
        return combined.index_add(0, token_of, back.to(combined.dtype))

    experts.forward = ep_forward


for module in list($model.modules()):
    if _is_experts(module):
        _expert_parallel(module)
$model = $model.to(device)
''' + _REMAKE_OPTIMIZER + _TO_DEVICE + '''

def _average_gradients():
    world = dist.get_world_size()
    for param in $model.parameters():
        if param.grad is None:
            continue
        # Dense weights: summed over every device. Experts: over the devices holding the same
        # experts; their gradients already hold all of the ep group's tokens (all-to-all).
        group = dp_group if getattr(param, "aiadvisor_expert", False) else None
        dist.all_reduce(param.grad, group=group)
        param.grad.div_(world)


$optimizer = _same_optimizer($optimizer, $model.parameters())
$inputs = _to_device($inputs, device)  # each rank should read its own part of the data
for step in range($v_num_steps):
    loss = $loss_fn($call)
    loss.backward()
    _average_gradients()
    $optimizer.step()
    $optimizer.zero_grad(set_to_none=True)
    if dist.get_rank() == 0:
        print(f"step {step}: loss {loss.item():.4f}")
dist.barrier()  # every rank done with its all-to-alls before the groups are torn down
# Drop the mesh's groups first: left to the interpreter's shutdown, gloo's threads are
# destroyed after Python is gone and the process can abort ("terminate called ...").
del mesh, ep_group, dp_group
dist.destroy_process_group()
'''

PIPELINE_PARALLEL = '''\
# Assumes: $model (blocks in an nn.ModuleList), $inputs (one micro-batch) and
# $loss_fn(output) -> scalar loss. Launch with  torchrun --nproc_per_node=$v_pp train.py
# $v_pp stages x $v_microbatches micro-batches (1F1B): idle "bubble" = (pp - 1) / (m + pp - 1).
import os

import torch
import torch.distributed as dist
from torch.distributed.pipelining import Schedule1F1B, SplitPoint, pipeline

num_stages, num_microbatches = $v_pp, $v_microbatches
dist.init_process_group()
rank = dist.get_rank()
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
named_lists = [(n, m) for n, m in $model.named_modules() if isinstance(m, torch.nn.ModuleList)]
blocks_name, blocks = max(named_lists, key=lambda item: len(item[1]))
per_stage = len(blocks) // num_stages
split_spec = {f"{blocks_name}.{i * per_stage}": SplitPoint.BEGINNING for i in range(1, num_stages)}
pipe = pipeline($model, mb_args=$args, mb_kwargs=$kwargs, split_spec=split_spec)
stage = pipe.build_stage(rank, device)
schedule = Schedule1F1B(
    stage, n_microbatches=num_microbatches, loss_fn=lambda output, target: $loss_fn(output)
)
full_batch = torch.cat([$inputs] * num_microbatches) if rank == 0 else None
if rank == 0:
    schedule.step(full_batch)
elif rank == num_stages - 1:
    losses = []
    schedule.step(target=torch.zeros(num_microbatches), losses=losses)
else:
    schedule.step()
dist.destroy_process_group()
'''

OPTIMIZER_8BIT = '''\
# Assumes: $model and $optimizer (before training starts). pip install bitsandbytes (CUDA).
# Optimizer moments in 8 bits with block-wise scales (Dettmers et al. 2022).
import bitsandbytes as bnb

defaults = $optimizer.defaults
$optimizer = getattr(bnb.optim, $v_class_name)(
    $model.parameters(),
    lr=defaults["lr"],
    weight_decay=defaults.get("weight_decay", 0.0),
    **({"betas": defaults["betas"]} if "betas" in defaults else {}),
)
'''

FUSED_OPTIMIZER = '''\
# Assumes: $model and $optimizer (do this before training starts: the new optimizer has
# empty state). One fused kernel updates every parameter instead of several kernels per tensor.
import inspect

import torch
''' + _REMAKE_OPTIMIZER + '''

$optimizer = _same_optimizer($optimizer, $model.parameters(), fused=True, foreach=None)
'''

FUSED_OPTIMIZER_FOREACH = '''\
# Assumes: $model and $optimizer (do this before training starts: the new optimizer has
# empty state). foreach=True: one multi-tensor kernel per operation instead of one per tensor.
import inspect

import torch
''' + _REMAKE_OPTIMIZER + '''

$optimizer = _same_optimizer($optimizer, $model.parameters(), foreach=True, fused=None)
'''

CPU_THREADS = '''\
# Assumes: $model and $inputs. Intra-op threads for the $v_threads cores this process can use
# (PyTorch runs $v_current now).
# Run it before the model's first call; in a script, export OMP_NUM_THREADS=$v_threads before
# Python starts instead (it also sizes OpenMP and MKL pools that torch does not manage).
import os
import time

import torch

os.environ["OMP_NUM_THREADS"] = str($v_threads)  # inherited by processes started from here
torch.set_num_threads($v_threads)  # the threads each matmul/convolution is split over
try:
    # Eager PyTorch runs one op at a time: one inter-op thread avoids idle pools competing
    # for the same cores (used by TorchScript forks and some async ops).
    torch.set_num_interop_threads(1)
except RuntimeError:
    pass  # only settable before the first parallel work: restart the kernel to change it

# Time one forward to compare with the setting before (eval mode, then the mode it had).
was_training = $model.training
$model.eval()
with torch.inference_mode():
    $call  # warm-up
    start = time.perf_counter()
    $call
print(f"{torch.get_num_threads()} threads: forward {time.perf_counter() - start:.4f} s")
$model.train(was_training)
'''

DATALOADER = '''\
# Assumes: $dataset, a torch.utils.data.Dataset yielding tensors (or tuples/dicts of them).
# Worker processes prepare batches in parallel, pinned (page-locked) memory lets the
# host-to-device copy run asynchronously, and prefetching keeps batches queued.
import os

import torch
from torch.utils.data import DataLoader

num_workers = min($v_num_workers, os.cpu_count() or 1)
loader = DataLoader(
    $dataset,
    batch_size=$v_batch_size,
    shuffle=True,
    num_workers=num_workers,
    pin_memory=torch.cuda.is_available(),
    prefetch_factor=$v_prefetch if num_workers > 0 else None,
    persistent_workers=num_workers > 0,
    drop_last=True,  # fixed shapes: no recompilation, CUDA graphs stay valid
)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
''' + _TO_DEVICE + '''

def batches():
    for batch in loader:
        yield _to_device(batch, device)  # non_blocking copy overlaps with compute
'''

GRAD_ACCUMULATION = '''\
# Assumes: $model, $inputs (one batch), $optimizer and $loss_fn(output) -> scalar loss
# (a mean over the batch). $v_accum_steps micro-batches are accumulated before each optimizer
# step: the update equals one step on the whole batch, with 1/$v_accum_steps of the activations.
import torch

accum_steps = $v_accum_steps


def _split(value, n):
    if isinstance(value, torch.Tensor) and value.dim() > 0:
        return list(value.chunk(n))
    if isinstance(value, dict):
        parts = {k: _split(v, n) for k, v in value.items()}
        return [{k: parts[k][i] for k in parts} for i in range(n)]
    if isinstance(value, (list, tuple)):
        parts = [_split(v, n) for v in value]
        return [type(value)(p[i] for p in parts) for i in range(n)]
    return [value] * n


def _micro_step($inputs):
    output = $call
    loss = $loss_fn(output) / accum_steps
    loss.backward()
    return loss.detach()


def train_step(batch):
    loss = sum(_micro_step(micro) for micro in _split(batch, accum_steps))
    $optimizer.step()
    $optimizer.zero_grad(set_to_none=True)
    return loss

# Call train_step(batch) with a batch of $v_effective_batch samples.
'''

LARGER_BATCH = '''\
# Assumes: $dataset. Feed $v_batch_size samples per step instead of $v_old_batch_size:
# bigger GEMMs use the device better. Scale the learning rate with care (linear scaling
# with warm-up is the usual starting point).
from torch.utils.data import DataLoader

batch_size = $v_batch_size
loader = DataLoader($dataset, batch_size=batch_size, shuffle=True, drop_last=True)
'''

LARGER_BATCH_INFER = '''\
# Assumes: $model and `requests`, a list of inputs each shaped like $inputs (one request).
# Throughput serving: run $v_batch_size requests per call instead of $v_old_batch_size. Each call
# takes longer and a request waits for its batch to fill: latency rises with throughput.
import torch

batch_size = $v_batch_size


def _cat(items):
    first = items[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(items)  # requests of one length (pad variable-length ones)
    if isinstance(first, dict):
        return {k: _cat([item[k] for item in items]) for k in first}
    return type(first)(_cat(list(parts)) for parts in zip(*items))


def serve(requests):
    with torch.inference_mode():
        for start in range(0, len(requests), batch_size):
            $inputs = _cat(requests[start:start + batch_size])
            yield $call
'''

DYNAMIC_INT8 = '''\
# Assumes: $model and $inputs, inference on a CPU. Linear weights stored in int8, activations
# quantized on the fly per batch (fbgemm / oneDNN kernels). Check accuracy on your data.
# (torch.ao.quantization is deprecated in favour of torchao; this API still works.)
import torch
from torch.ao.quantization import quantize_dynamic

quantized_$model = quantize_dynamic($model, {torch.nn.Linear}, dtype=torch.qint8)  # a copy
quantized_$model.eval()


def _infer($model):
    with torch.inference_mode():
        return $call


output = _infer(quantized_$model)
'''

EMBEDDING_INT8 = '''\
# Assumes: $model and $inputs, inference. Embedding tables in 8 bits with a per-row scale and
# offset: a quarter of the fp32 size (half of bf16).
import torch
from torch.ao.quantization import float_qparams_weight_only_qconfig, quantize_dynamic

# The 8-bit lookup returns fp32: a model already in bf16/fp16 gets its rows back in its own dtype
# (its next op, e.g. a LayerNorm with bf16 weights, rejects fp32 on the CPU).
_table_dtypes = {name: module.weight.dtype for name, module in $model.named_modules()
                 if isinstance(module, torch.nn.Embedding)}
quantized_$model = quantize_dynamic(
    $model, {torch.nn.Embedding: float_qparams_weight_only_qconfig}, dtype=torch.quint8
)
quantized_$model.eval()
for _name, _module in quantized_$model.named_modules():
    if isinstance(_module, torch.ao.nn.quantized.Embedding):
        # The 8-bit lookup needs contiguous indices; expanded ones (e.g. HF BERT's
        # token_type_ids, a stride-0 expand of a buffer) are copied first.
        _module.register_forward_pre_hook(
            lambda _mod, args: tuple(a.contiguous() if torch.is_tensor(a) else a for a in args))
        if _table_dtypes.get(_name, torch.float32) != torch.float32:
            _module.register_forward_hook(
                lambda _mod, args, out, _dtype=_table_dtypes[_name]: out.to(_dtype))


def _infer($model):
    with torch.inference_mode():
        return $call


output = _infer(quantized_$model)
'''

WEIGHT_ONLY_INT4 = '''\
# Assumes: $model on a CUDA GPU, inference. Weights in 4 bits with one scale per group of
# $v_group_size, computed in bf16: weight reads (what bounds decoding) shrink about 4x vs bf16.
# pip install torchao.  For calibrated checkpoints use GPTQ or AWQ instead, e.g.
#   transformers' GPTQConfig(bits=4, dataset="c4") or an AWQ-quantized model from the Hub.
import torch
from torchao.quantization import Int4WeightOnlyConfig, quantize_

$model = $model.to(torch.bfloat16).eval()
quantize_($model, Int4WeightOnlyConfig(group_size=$v_group_size))
'''

WEIGHT_ONLY_INT8 = '''\
# Assumes: $model on a CUDA GPU, inference. Weights in int8 with one scale per output channel,
# activations and the multiply in bf16 (W8A16): weight reads (what bounds decoding) halve vs
# bf16, with no calibration data; a long prompt's prefill runs at the bf16 rate. pip install
# torchao.
import torch
from torchao.quantization import Int8WeightOnlyConfig, quantize_

$model = $model.to(torch.bfloat16).eval()
quantize_($model, Int8WeightOnlyConfig())
'''

WEIGHT_ONLY_NF4 = '''\
# Assumes: $model is a Hugging Face transformers model, inference on CUDA.
# pip install bitsandbytes. NF4: 4-bit NormalFloat weights with block-wise scales (QLoRA),
# double quantization of the scales, compute in bf16.
import torch
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

$model.save_pretrained("aiadvisor_checkpoint")
quantization = BitsAndBytesConfig(
    load_in_4bit=True,
    bnb_4bit_quant_type="nf4",
    bnb_4bit_use_double_quant=True,
    bnb_4bit_compute_dtype=torch.bfloat16,
)
$model = AutoModelForCausalLM.from_pretrained(
    "aiadvisor_checkpoint", quantization_config=quantization, device_map="auto"
)
'''

SPARSITY_24 = '''\
# Assumes: $model on an NVIDIA Ampere-or-newer GPU, inference in fp16/bf16.
# 2:4 semi-structured sparsity: two of every four weights are zero and the sparse tensor cores
# skip them. Pruning costs accuracy: fine-tune afterwards (e.g. SparseGPT, or torchao's
# sparsity tools) and check on your data.
import torch
from torch.sparse import to_sparse_semi_structured


def _prune_2_4(weight):
    # Keep the 2 largest-magnitude weights of every 4 consecutive ones.
    groups = weight.detach().reshape(-1, 4)
    keep = groups.abs().topk(2, dim=1).indices
    mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, keep, True)
    return (groups * mask).reshape(weight.shape)


$model = $model.to(device="cuda", dtype=getattr(torch, $v_dtype)).eval()
for module in $model.modules():
    if isinstance(module, torch.nn.Linear) and min(module.weight.shape) >= 64:
        sparse = to_sparse_semi_structured(_prune_2_4(module.weight))
        module.weight = torch.nn.Parameter(sparse, requires_grad=False)
'''

SERVING = '''\
# Assumes: $model is a Hugging Face causal LM (save its tokenizer next to it too).
# Serve with continuous batching and a paged KV cache instead of one request at a time.
# pip install vllm.  Or Hugging Face TGI:  text-generation-launcher --model-id ./aiadvisor_serving
# KV cache per sequence of $v_seq_len tokens: $v_kv_cache_gib GiB (bf16).
from vllm import LLM, SamplingParams

$model.save_pretrained("aiadvisor_serving")
llm = LLM(model="aiadvisor_serving", max_num_seqs=$v_max_num_seqs, gpu_memory_utilization=0.9)
prompts = ["Hello, my name is"]
outputs = llm.generate(prompts, SamplingParams(max_tokens=$v_max_tokens))
'''

ONNX_EXPORT = '''\
# Assumes: $model and $inputs. pip install onnx onnxscript onnxruntime (onnxruntime-gpu on CUDA).
# TensorRT: trtexec --onnx=aiadvisor_model.onnx --fp16  builds a fused engine from the same file.
import onnxruntime as ort
import torch

$model.eval()
program = torch.onnx.export($model, $args, kwargs=$kwargs, dynamo=True)
program.save("aiadvisor_model.onnx")
session = ort.InferenceSession(
    "aiadvisor_model.onnx",
    providers=["CUDAExecutionProvider", "CPUExecutionProvider"],
)
'''

DISTILL_PRUNE = '''\
# Assumes: $model and $inputs. For edge devices: a smaller student learns from the original
# (teacher). 1) Structured pruning removes the $v_prune_percent% lowest-norm output channels of
# each conv/linear layer (zeros; shrink the layers, e.g. with torch-pruning, to get the speedup).
# 2) Distillation trains the pruned model to match the teacher's outputs.
import copy

import torch
import torch.nn.functional as F
import torch.nn.utils.prune as prune

teacher = copy.deepcopy($model).eval()
student = $model
layers = [m for m in student.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
for layer in layers[:-1]:  # keep the output layer whole
    prune.ln_structured(layer, name="weight", amount=$v_amount, n=2, dim=0)
    prune.remove(layer, "weight")


def distillation_loss(student_logits, teacher_logits, temperature=$v_temperature):
    soft_teacher = F.softmax(teacher_logits / temperature, dim=-1)
    log_student = F.log_softmax(student_logits / temperature, dim=-1)
    return F.kl_div(log_student, soft_teacher, reduction="batchmean") * temperature**2
'''

_SERVING_MODEL = '''\
model_id = $v_model_id
if $v_save_first:  # $model.config names no Hub id: save the live model (and its tokenizer) here
    $model.save_pretrained(model_id)
'''

_ESTIMATE = '''\
# aiadvisor's estimate for this configuration (predicted, not measured):
estimate = {"tokens_per_s": $v_tokens_per_s, "tpot_s": $v_tpot_s}
'''

SERVE_VLLM = '''\
# Assumes: $model is a Hugging Face causal LM. pip install vllm (NVIDIA/AMD GPU).
# quantization "awq"/"gptq" load a checkpoint quantized that way (e.g. the model's -AWQ or
# -GPTQ repo); "fp8" and "bitsandbytes" quantize the 16-bit weights while loading.
from vllm import LLM, SamplingParams

''' + _SERVING_MODEL + _ESTIMATE + '''\
engine = LLM(
    model=model_id,
    dtype=$v_dtype,
    tensor_parallel_size=$v_tp,
    quantization=$v_quantization,
    kv_cache_dtype=$v_kv_cache_dtype,
    max_num_seqs=$v_max_num_seqs,
    max_model_len=$v_max_model_len,
    gpu_memory_utilization=0.9,
)
outputs = engine.generate(["Hello, my name is"], SamplingParams(max_tokens=$v_max_tokens))
print(outputs[0].outputs[0].text)
'''

SERVE_VLLM_SERVER = '''\
# Assumes: $model is a Hugging Face causal LM. pip install vllm (NVIDIA/AMD GPU).
# Starts `vllm serve` (an OpenAI-compatible server on port 8000) from the notebook; the same
# command runs in a terminal. Stop it with server.terminate().
import shlex
import subprocess

''' + _SERVING_MODEL + _ESTIMATE + '''\
flags = $v_flags
command = ["vllm", "serve", model_id, *flags]
print(shlex.join(command))
server = subprocess.Popen(command)
'''

SERVE_SGLANG = '''\
# Assumes: $model is a Hugging Face causal LM. pip install "sglang[all]" (NVIDIA/AMD GPU).
# Starts SGLang's OpenAI-compatible server (port 30000) from the notebook; the same command runs
# in a terminal. --quantization fp8 quantizes 16-bit weights while loading; awq, gptq and
# w8a8_int8 need a checkpoint quantized that way. Stop it with server.terminate().
import shlex
import subprocess

''' + _SERVING_MODEL + _ESTIMATE + '''\
flags = $v_flags
command = ["python", "-m", "sglang.launch_server", "--model-path", model_id, *flags]
print(shlex.join(command))
server = subprocess.Popen(command)
'''

SERVE_TGI = '''\
# Assumes: $model is a Hugging Face causal LM and TGI's launcher is installed (or run the same
# flags in its container: docker run --gpus all ghcr.io/huggingface/text-generation-inference
# --model-id ...). --quantize awq needs an AWQ checkpoint; fp8, eetq and bitsandbytes-nf4
# quantize while loading. Stop it with server.terminate().
import shlex
import subprocess

''' + _SERVING_MODEL + _ESTIMATE + '''\
flags = $v_flags
command = ["text-generation-launcher", "--model-id", model_id, *flags]
print(shlex.join(command))
server = subprocess.Popen(command)
'''

SERVE_TENSORRT_LLM = '''\
# Assumes: $model is a Hugging Face causal LM. pip install tensorrt_llm (NVIDIA GPU).
# QuantConfig quantizes a 16-bit checkpoint when the engine is built; a checkpoint already
# quantized by NVIDIA Model Optimizer (e.g. nvidia/...-FP8) needs no quant_config.
from tensorrt_llm import LLM, SamplingParams
from tensorrt_llm.llmapi import KvCacheConfig, QuantAlgo, QuantConfig

''' + _SERVING_MODEL + _ESTIMATE + '''\
quant_algo = $v_quant_algo
engine = LLM(
    model=model_id,
    tensor_parallel_size=$v_tp,
    quant_config=QuantConfig(quant_algo=QuantAlgo[quant_algo]) if quant_algo else None,
    kv_cache_config=KvCacheConfig(dtype=$v_kv_dtype),
    max_batch_size=$v_max_batch_size,
)
outputs = engine.generate(["Hello, my name is"], SamplingParams(max_tokens=$v_max_tokens))
print(outputs[0].outputs[0].text)
'''

GENERATE_STATIC_COMPILED = '''\
# Assumes: $model is a Hugging Face causal LM on the GPU and $inputs its token ids (a tensor,
# or the tokenizer's dict). A static KV cache keeps every decode step the same shape, so
# torch.compile (mode="reduce-overhead": CUDA graphs) captures it once and replays it.
import torch

''' + _ESTIMATE + '''\
$model.to(dtype=getattr(torch, $v_dtype)).eval()
$model.generation_config.cache_implementation = "static"
$model.forward = torch.compile($model.forward, mode="reduce-overhead", fullgraph=True)
with torch.inference_mode():
    output_ids = $model.generate(
        *$args, **($kwargs or {}), max_new_tokens=$v_max_new_tokens, do_sample=False,
        cache_implementation="static",
    )
'''

SNIPPETS: dict[str, Snippet] = {
    "tf32": Snippet(template=TF32),
    "autocast_train": Snippet(template=AUTOCAST_TRAIN),
    "autocast_infer": Snippet(template=AUTOCAST_INFER),
    "fp8": Snippet(template=FP8_TORCHAO, requires=("torchao",), needs_cuda=True),
    "fp8_infer": Snippet(template=FP8_INFER, requires=("torchao",), needs_cuda=True),
    "mxfp8": Snippet(template=MXFP8_TE, requires=("transformer_engine",), needs_cuda=True),
    "fp4_infer": Snippet(template=FP4_INFER, requires=("torchao",), needs_cuda=True),
    "int8_gpu": Snippet(template=INT8_GPU, requires=("torchao",), needs_cuda=True),
    "channels_last": Snippet(template=CHANNELS_LAST),
    "torch_compile": Snippet(template=TORCH_COMPILE),
    "cuda_graphs": Snippet(template=CUDA_GRAPHS, needs_cuda=True),
    "sdpa": Snippet(template=SDPA),
    "checkpointing": Snippet(template=CHECKPOINTING),
    "distributed": Snippet(template=DISTRIBUTED_TRAIN, launcher="torchrun"),
    "deepspeed": Snippet(template=DEEPSPEED_ZERO, requires=("deepspeed",), needs_cuda=True,
                         launcher="torchrun"),
    "tensor_parallel": Snippet(template=TENSOR_PARALLEL, launcher="torchrun"),
    "expert_parallel": Snippet(template=EXPERT_PARALLEL, launcher="torchrun"),
    "pipeline_parallel": Snippet(template=PIPELINE_PARALLEL, needs_cuda=True, launcher="torchrun"),
    "optimizer_8bit": Snippet(template=OPTIMIZER_8BIT, requires=("bitsandbytes",),
                              needs_cuda=True),
    "fused_optimizer": Snippet(template=FUSED_OPTIMIZER),
    "foreach_optimizer": Snippet(template=FUSED_OPTIMIZER_FOREACH),
    "dataloader": Snippet(template=DATALOADER),
    "cpu_threads": Snippet(template=CPU_THREADS),
    "grad_accumulation": Snippet(template=GRAD_ACCUMULATION),
    "larger_batch": Snippet(template=LARGER_BATCH),
    "larger_batch_infer": Snippet(template=LARGER_BATCH_INFER),
    "dynamic_int8": Snippet(template=DYNAMIC_INT8),
    "embedding_int8": Snippet(template=EMBEDDING_INT8),
    "weight_only_int4": Snippet(template=WEIGHT_ONLY_INT4, requires=("torchao",),
                                needs_cuda=True),
    "weight_only_int8": Snippet(template=WEIGHT_ONLY_INT8, requires=("torchao",),
                                needs_cuda=True),
    "weight_only_nf4": Snippet(template=WEIGHT_ONLY_NF4,
                               requires=("transformers", "bitsandbytes"), needs_cuda=True),
    "sparsity_24": Snippet(template=SPARSITY_24, needs_cuda=True),
    "serving": Snippet(template=SERVING, requires=("vllm",), needs_cuda=True),
    "serve_vllm": Snippet(template=SERVE_VLLM, requires=("vllm",), needs_cuda=True),
    "serve_vllm_server": Snippet(template=SERVE_VLLM_SERVER, requires=("vllm",),
                                 needs_cuda=True),
    "serve_sglang": Snippet(template=SERVE_SGLANG, requires=("sglang",), needs_cuda=True),
    "serve_tgi": Snippet(template=SERVE_TGI, requires=("text-generation-inference",),
                         needs_cuda=True),
    "serve_tensorrt_llm": Snippet(template=SERVE_TENSORRT_LLM, requires=("tensorrt_llm",),
                                  needs_cuda=True),
    "generate_static_compiled": Snippet(template=GENERATE_STATIC_COMPILED,
                                        requires=("transformers",), needs_cuda=True),
    "onnx_export": Snippet(template=ONNX_EXPORT, requires=("onnx", "onnxscript", "onnxruntime")),
    "distill_prune": Snippet(template=DISTILL_PRUNE),
}
