"""Memory as a GPU would show it, from a trace taken on a CPU or meta tensors."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa

transformers = pytest.importorskip("transformers")


def _bert(layers=2):
    config = transformers.BertConfig(hidden_size=128, num_hidden_layers=layers,
                                     num_attention_heads=4, intermediate_size=512,
                                     vocab_size=1000, attn_implementation="sdpa")
    with torch.device("meta"):
        return transformers.BertForMaskedLM(config)


def test_gpu_peak_leaves_out_the_attention_math_paths_score_tensors():
    # BERT with attention dropout in training: a meta trace runs SDPA's math path, which saves
    # T x T probabilities and the dropout mask for backward; a GPU's fused kernel keeps query,
    # key, value, output and the log-sum-exp only.
    prof = aa.profile(_bert(), torch.randint(0, 1000, (2, 256), device="meta"), mode="train",
                      optimizer="none")
    saving = sum(g.saved_bytes - g.io_bytes - g.lse_bytes for g in prof.sdpa)
    # 2 layers x 4 heads x 2 x 256 x 256: at least the FP32 probabilities (4 bytes) and the
    # mask (1 byte) per score: 2 x 4 x 2 x 65536 x 5 = 5.24 MB
    assert saving >= 2 * 4 * 2 * 256 * 256 * 5
    # The hidden dropouts (the embeddings' and two a layer, on 2 x 256 x 128 fp32 elements):
    # the traced composite saved each mask in fp32, CUDA's native_dropout in one byte.
    masks = 3 * (1 + 2 * 2) * 2 * 256 * 128
    assert sum(g.elements for g in prof.dropout) == 5 * 2 * 256 * 128
    cublas = 2 * 4096 * 1024 + 8 * 16 * 1024  # the cuBLAS workspace (2 x 4 MiB + 8 x 16 KiB)
    assert prof.memory.cuda_peak_bytes == pytest.approx(
        prof.memory.peak_bytes - saving - masks + cublas, abs=1)
    # Inference saves nothing for backward: the two peaks differ by the workspace alone.
    infer = aa.profile(_bert(), torch.randint(0, 1000, (2, 256), device="meta"), mode="infer")
    assert infer.memory.cuda_peak_bytes == infer.memory.peak_bytes + cublas


def test_plans_on_a_gpu_count_the_fused_attention():
    prof = aa.profile(_bert(), torch.randint(0, 1000, (2, 256), device="meta"), mode="train")
    on_gpu = aa.plan_parallel(prof, hardware="H100 SXM", num_devices=1, precision="fp32")
    on_cpu = aa.plan_parallel(prof, hardware="Intel Xeon Platinum 8480+", num_devices=1,
                              precision="fp32")
    saving = sum(g.saved_bytes - g.io_bytes - g.lse_bytes for g in prof.sdpa)
    masks = 3 * (1 + 2 * 2) * 2 * 256 * 128  # one byte, not fp32, a hidden-dropout element
    gpu, cpu = (t.iloc[0]["activations_bytes"] for t in (on_gpu, on_cpu))
    assert cpu - gpu == pytest.approx(saving + masks, rel=0.05)
    assert cpu - gpu > saving + 0.5 * masks


def test_one_block_trace_peaks_with_every_blocks_gradients():
    # Short sequences: the gradients outweigh the activations and the step peaks at the end of
    # the backward, when every block's gradients are alive. The one-block trace must not miss
    # the other blocks' (it read 14 % low on pythia-410m at 1 x 128 tokens before).
    config = transformers.GPTNeoXConfig(hidden_size=128, num_hidden_layers=6,
                                        num_attention_heads=4, intermediate_size=512,
                                        vocab_size=1000, attn_implementation="sdpa")
    with torch.device("meta"):
        model = transformers.GPTNeoXForCausalLM(config)
    x = torch.randint(0, 1000, (1, 16), device="meta")
    one = aa.profile(model, x, mode="train", optimizer="none")
    whole = aa.profile(model, x, mode="train", optimizer="none", repeated_blocks=False)
    assert one.num_blocks == 6 and whole.num_blocks == 0
    m = one.memory
    assert m.peak_bytes >= m.weights_bytes + m.grads_bytes
    assert one.memory.peak_bytes == pytest.approx(whole.memory.peak_bytes, rel=0.03)


def test_the_cuda_view_takes_the_foreach_optimizers_temporaries_whatever_traced_it():
    # torch.optim's AdamW runs its foreach implementation on CUDA (its default there): the
    # square root of exp_avg_sq for every parameter at once, one parameter-sized list, where
    # the CPU's for-loop holds two of one parameter's size. Four Linear(1024, 1024) layers at
    # batch 1: W = 4 x (1024 x 1024 + 1024) x 4 bytes = 16,793,600; the step's peak is
    # weights + gradients + 2 W of state + the temporaries.
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)])
    prof = aa.profile(model, torch.randn(1, 1024), mode="train", optimizer="adamw")
    weights = 4 * (1024 * 1024 + 1024) * 4
    assert prof.memory.weights_bytes == weights
    loop_temps, foreach_temps = 2 * 1024 * 1024 * 4, weights
    # ... and, on the GPU, the cuBLAS workspace PyTorch takes from its caching allocator
    # (":4096:2:16:8": 2 x 4 MiB + 8 x 16 KiB).
    cublas = 2 * 4096 * 1024 + 8 * 16 * 1024
    assert prof.memory.cuda_peak_bytes - prof.memory.peak_bytes == (
        foreach_temps - loop_temps + cublas)
    assert prof.memory.cuda_peak_bytes >= 4 * weights + foreach_temps
