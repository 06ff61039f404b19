"""What-if profiles: torch.compile's fusion across module boundaries (add + LayerNorm)."""

from __future__ import annotations

import torch

import aiadvisor as aa
from aiadvisor.recommend import transforms


class PostNormOutput(torch.nn.Module):
    """BERT's BertSelfOutput: ``LayerNorm(dense(h) + residual)``, the norm a child module."""

    def __init__(self) -> None:
        super().__init__()
        self.dense = torch.nn.Linear(16, 16)
        self.LayerNorm = torch.nn.LayerNorm(16)

    def forward(self, h):
        return self.LayerNorm(self.dense(h) + h)


class PreNormBlock(torch.nn.Module):
    """GPT-2's block: two residual adds in the block, two LayerNorm children."""

    def __init__(self) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(16), torch.nn.LayerNorm(16)
        self.attn, self.mlp = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

    def forward(self, h):
        h = h + self.attn(self.ln_1(h))
        return h + self.mlp(self.ln_2(h))


class RMSNorm(torch.nn.Module):
    """Llama's RMSNorm as transformers writes it: pow, mean, add, rsqrt and two multiplies,
    no op whose name says norm."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(16))

    def forward(self, h):
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6))


class LlamaBlock(torch.nn.Module):
    """Pre-norm block with Python RMSNorms named as Llama names them."""

    def __init__(self) -> None:
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
        self.attn, self.mlp = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

    def forward(self, h):
        h = h + self.attn(self.input_layernorm(h))
        return h + self.mlp(self.post_attention_layernorm(h))


class Wrap(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.out = inner

    def forward(self, h):
        return self.out(h)


def _memory_ops(prof):
    return {(op.module, op.op): op for op in prof.ops if op.op_class == "memory"}


def test_residual_add_and_child_layernorm_fuse_into_one_kernel():
    prof = aa.profile(Wrap(PostNormOutput()), torch.randn(2, 16), mode="infer")
    ops = _memory_ops(prof)
    add, norm = ops[("out", "aten.add")], ops[("out.LayerNorm", "aten.native_layer_norm")]
    # Batch 2 x 16 fp32: one activation is 128 bytes. The add reads two (256) and writes one
    # (128); the norm reads one plus its weight and bias (2 x 16 x 4 = 128), 256 in all, and
    # writes one plus its mean and rstd (2 x 4 bytes each), 144.
    assert (add.bytes_read, add.bytes_written, add.count) == (256, 128, 1)
    assert (norm.bytes_read, norm.bytes_written, norm.count) == (256, 144, 1)
    fused = [op for op in transforms.fuse_elementwise(prof).ops if op.op_class == "memory"]
    # One kernel a call (not two); it no longer reads the sum back: 256 + (256 - 144) = 368
    # read; writes the sum (kept, conservatively) and the norm's outputs: 128 + 144 = 272.
    assert len(fused) == 1
    assert (fused[0].count, fused[0].bytes_read, fused[0].bytes_written) == (1, 368, 272)
    # Everything else is untouched.
    others = [op for op in prof.ops if op.op_class != "memory"]
    assert [op for op in transforms.fuse_elementwise(prof).ops if op.op_class != "memory"] \
        == others


def test_pre_norm_block_keeps_one_kernel_per_residual():
    prof = aa.profile(Wrap(PreNormBlock()), torch.randn(2, 16), mode="infer")
    ops = _memory_ops(prof)
    assert ops[("out", "aten.add")].count == 2  # two residual adds, one record
    fused = [op for op in transforms.fuse_elementwise(prof).ops if op.op_class == "memory"]
    # 2 adds + 1 + 1 norms were 4 kernels; each norm fuses with an add: max(2, 1 + 1) = 2
    # (not 1: the two adds are separated by the attention and the MLP).
    assert len(fused) == 1 and fused[0].count == 2


def test_norm_without_a_parent_memory_op_stays_its_own_kernel():
    # A LayerNorm whose parent runs no memory-bound op of its own (it feeds a Linear, the
    # Linear's output is the parent's result) has nothing to fuse with.
    net = Wrap(torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 16)))
    prof = aa.profile(net, torch.randn(2, 16), mode="infer")
    before = [op for op in prof.ops if op.op_class == "memory"]
    after = [op for op in transforms.fuse_elementwise(prof).ops if op.op_class == "memory"]
    assert len(after) == len(before) == 1
    assert (after[0].count, after[0].bytes_read, after[0].bytes_written) == \
        (before[0].count, before[0].bytes_read, before[0].bytes_written)


def test_backward_norms_are_not_merged():
    prof = aa.profile(Wrap(PostNormOutput()), torch.randn(2, 16), mode="train")
    fused = transforms.fuse_elementwise(prof)
    backward = {op.module for op in fused.ops
                if op.op_class == "memory" and op.phase == "backward"}
    original = {op.module for op in prof.ops
                if op.op_class == "memory" and op.phase == "backward"}
    assert backward == original  # one fused kernel per module, as before the merge


class DropoutBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dense = torch.nn.Linear(16, 16)

    def forward(self, h):
        return torch.nn.functional.dropout(torch.relu(self.dense(h)), 0.1, training=True) + h


def test_cpu_fusion_keeps_dropout_random_numbers_apart():
    torch.manual_seed(0)
    prof = aa.profile(DropoutBlock(), torch.randn(8, 16), mode="train", scaling=False)
    rng = [op for op in prof.ops if op.op.startswith("aten.bernoulli")]
    assert rng, sorted(op.op for op in prof.ops)
    fused = transforms.fuse_elementwise(prof)
    kept = transforms.fuse_elementwise(prof, keep_rng=True)
    # GPU-style fusion folds the mask generation into the kernel; on a CPU the random numbers
    # are the cost, so the bernoulli_ record survives as it was, beside one fused kernel that
    # holds the module's other memory-bound ops (relu, the mask multiply, the residual add).
    assert not [op for op in fused.ops if op.op.startswith("aten.bernoulli")]
    assert [op for op in kept.ops if op.op.startswith("aten.bernoulli")] == rng
    fused_fwd = [op for op in kept.ops if op.op == "fused.forward"]
    assert len(fused_fwd) == 1
    others = [op for op in prof.ops if op.op_class == "memory" and op.phase == "forward"
              and op.module == "" and op not in rng]
    assert fused_fwd[0].flops == sum(op.flops for op in others)


def test_a_python_rmsnorm_named_as_a_norm_fuses_with_the_residual_add():
    # Llama's block: 2 residual adds, and 2 RMSNorms of 6 elementwise ops each (none named
    # *norm*) were 3 kernels a call (the block's, and one per norm); engines (vLLM's
    # fused_add_rms_norm) and Inductor run each norm with the add before it: max(2, 1 + 1) = 2.
    prof = aa.profile(Wrap(LlamaBlock()), torch.randn(2, 16), mode="infer")
    ops = [op for op in prof.ops if op.op_class == "memory"]
    assert {op.module for op in ops} == {"out", "out.input_layernorm",
                                         "out.post_attention_layernorm"}
    assert not any("norm" in op.op for op in ops)
    fused = [op for op in transforms.fuse_elementwise(prof).ops if op.op_class == "memory"]
    assert len(fused) == 1 and fused[0].module == "out" and fused[0].count == 2
