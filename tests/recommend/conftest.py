"""Shared fixtures: hand-built profiles and real Llama-3 profiles (meta device, no weights)."""

from __future__ import annotations

import pytest

from aiadvisor.schema import HardwareSpec, MemoryBreakdown, ModelProfile, OpRecord

# NVIDIA H100 SXM datasheet: 80 GB HBM3, 3.35 TB/s, 989.4 dense BF16 TFLOPS, NVLink 4 900 GB/s.
H100 = HardwareSpec(name="NVIDIA H100 SXM", vendor="NVIDIA", kind="gpu", memory_gb=80,
                    memory_bw_gbs=3350, fp32_tflops=66.9, tf32_tflops=494.7, bf16_tflops=989.4,
                    fp16_tflops=989.4, fp8_tflops=1978.9, int8_tops=1978.9, tdp_w=700,
                    interconnect="NVLink4", interconnect_bw_gbs=900, usd_per_hour=2.99)


def make_profile(*, num_params: int, num_blocks: int = 0, block_params: int = 0,
                 block_act: int = 0, block_out: int = 0, other_act: int = 0, batch_size: int = 1,
                 seq_len: int | None = None, mode: str = "train", optimizer: str = "adamw",
                 trainable: int | None = None, inputs: int = 0) -> ModelProfile:
    """A profile with the memory figures given, bf16 parameters and compute (so no autocast
    weight copies), no scaling fit (activations count as growing with the batch)."""
    act = num_blocks * block_act + other_act
    trainable = num_params if trainable is None else trainable
    memory = MemoryBreakdown(weights_bytes=2 * num_params, grads_bytes=2 * trainable,
                             optimizer_bytes=4 * trainable, activations_bytes=act,
                             inputs_bytes=inputs, peak_bytes=8 * num_params + act)
    # One GEMM per block and phase: 2 FLOPs per parameter per sample forward, 4 backward.
    phases = [("forward", 2)] + ([("backward", 4)] if mode == "train" else [])
    ops = tuple(
        OpRecord(op="aten.mm", op_class="gemm", phase=phase, module="blocks", dtype="bfloat16",
                 count=max(1, num_blocks), flops=k * num_params * batch_size,
                 bytes_read=2 * num_params + act, bytes_written=act)
        for phase, k in phases
    )
    return ModelProfile(
        model_name="hand", model_type="Hand", mode=mode, precision="bf16", optimizer=optimizer,
        batch_size=batch_size, seq_len=seq_len, num_params=num_params,
        num_trainable_params=trainable, flops_forward=2 * num_params * batch_size,
        flops_backward=4 * num_params * batch_size if mode == "train" else 0,
        flops_optimizer=0, memory=memory, ops=ops, param_dtype="bfloat16",
        compute_dtype="bfloat16", num_blocks=num_blocks, block_param_bytes=2 * block_params,
        block_activation_bytes=block_act, block_output_bytes=block_out,
    )


def _llama(hidden: int, intermediate: int, layers: int, heads: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    # Llama-3 configs (Meta's params.json): vocab 128256, 8 KV heads, untied embeddings.
    config = LlamaConfig(hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192,
                         rope_theta=500000.0, tie_word_embeddings=False)
    with torch.device("meta"):
        return LlamaForCausalLM(config)


def _profile_llama(hidden, intermediate, layers, heads):
    import torch

    import aiadvisor as aa

    model = _llama(hidden, intermediate, layers, heads)
    tokens = torch.randint(0, 128256, (1, 2048), device="meta")  # batch 1 x 2048 per device
    return aa.profile(model, tokens, mode="train", optimizer="adamw", precision="bf16")


@pytest.fixture(scope="session")
def llama8b():
    return _profile_llama(4096, 14336, 32, 32)


@pytest.fixture(scope="session")
def llama70b():
    return _profile_llama(8192, 28672, 80, 64)
