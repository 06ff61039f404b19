"""FLOPs, bytes and memory of small modules, worked out by hand."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import aiadvisor as aa


def ops(prof, phase=None, op=None):
    return [o for o in prof.ops
            if (phase is None or o.phase == phase) and (op is None or o.op == op)]


def test_linear_flops_and_bytes():
    prof = aa.profile(nn.Linear(64, 32), torch.randn(8, 64), mode="train", optimizer="sgd")
    # forward: addmm(bias, x, W^T): 2 * m * n * k = 2 * 8 * 32 * 64 (bias add not counted)
    assert prof.flops_forward == 2 * 8 * 32 * 64
    # backward: only dL/dW (the input does not require grad): one GEMM of the same size
    assert prof.flops_backward == 2 * 8 * 32 * 64
    (addmm,) = ops(prof, "forward", "aten.addmm")
    # reads bias 32*4 + x 8*64*4 + W 64*32*4 bytes; writes the 8x32 fp32 output
    assert addmm.bytes_read == 32 * 4 + 8 * 64 * 4 + 64 * 32 * 4
    assert addmm.bytes_written == 8 * 32 * 4
    assert addmm.op_class == "gemm" and addmm.module == "" and addmm.count == 1


def test_gemm_on_the_expanded_gradient_of_sum_pays_its_dense_copy():
    # model(x).sum().backward() gives the Linear ones(8, 32) expanded (strides 0, 0): the
    # backward GEMM dL/dW = g^T @ x (the input needs no gradient) makes it dense first
    # (contiguous() inside the kernel, not a traced op): 8 * 32 fp32 = 1024 bytes written,
    # reading the one stored element (4 bytes).
    prof = aa.profile(nn.Linear(64, 32), torch.randn(8, 64), mode="train", optimizer="sgd")
    (copy,) = ops(prof, "backward", "aten.clone")
    assert copy.count == 1 and copy.bytes_written == 8 * 32 * 4
    assert copy.bytes_read == 4 and copy.op_class == "memory"
    # The forward GEMM, on dense operands, copies nothing.
    assert not ops(prof, "forward", "aten.clone")


def test_linear_training_memory_adamw():
    # W: 1024*1024*4 + 1024*4 = 4,198,400 bytes; grads the same; AdamW keeps two moments (2x).
    prof = aa.profile(nn.Linear(1024, 1024), torch.randn(32, 1024), optimizer="adamw")
    w = 1024 * 1024 * 4 + 1024 * 4
    assert prof.memory.weights_bytes == w
    assert prof.memory.grads_bytes == w
    assert prof.memory.optimizer_bytes == 2 * w
    assert prof.memory.inputs_bytes == 32 * 1024 * 4
    # Peak is inside AdamW's step: weights + grads + 2 moments + input + output (kept by the
    # caller) + the loss scalar + two temporaries the size of the largest parameter
    # (exp_avg_sq.sqrt() / bias_correction2_sqrt, computed out of place per parameter).
    expected = w + w + 2 * w + 32 * 1024 * 4 + 32 * 1024 * 4 + 4 + 2 * 1024 * 1024 * 4
    assert prof.memory.peak_bytes == expected


@pytest.mark.parametrize("optimizer, states", [("adamw", 2), ("adam", 2), ("sgd_momentum", 1),
                                               ("sgd", 0)])
def test_optimizer_state_bytes(optimizer, states):
    prof = aa.profile(nn.Linear(100, 10), torch.randn(4, 100), optimizer=optimizer)
    assert prof.memory.optimizer_bytes == states * (100 * 10 + 10) * 4


def test_frozen_parameters_have_no_grads_or_state():
    model = nn.Sequential(nn.Linear(10, 10), nn.Linear(10, 10))
    model[0].requires_grad_(False)
    prof = aa.profile(model, torch.randn(2, 10), optimizer="adamw")
    assert prof.num_params == 220 and prof.num_trainable_params == 110
    assert prof.memory.grads_bytes == 110 * 4
    assert prof.memory.optimizer_bytes == 2 * 110 * 4


def test_conv2d_flops():
    prof = aa.profile(nn.Conv2d(3, 8, 3, padding=1), torch.randn(2, 3, 16, 16), mode="infer")
    # 2 * (N * H_out * W_out) * C_out * (C_in * kh * kw) = 2 * (2*16*16) * 8 * 27
    assert prof.flops_forward == 2 * 2 * 16 * 16 * 8 * 27
    assert prof.flops_backward == 0
    assert {o.op_class for o in prof.ops if o.flops} == {"conv"}


def test_embedding_reads_only_gathered_rows():
    ids = torch.randint(0, 100, (4, 10))
    prof = aa.profile(nn.Embedding(100, 16), ids, mode="infer")
    (emb,) = ops(prof, "forward", "aten.embedding")
    # 40 rows of 16 fp32 gathered (2560 bytes) + 40 int64 indices (320 bytes), not the table
    assert emb.bytes_read == 40 * 16 * 4 + 40 * 8
    assert emb.bytes_written == 40 * 16 * 4
    assert emb.flops == 0 and emb.op_class == "embedding"


def test_layernorm_bytes():
    prof = aa.profile(nn.LayerNorm(16), torch.randn(4, 10, 16), mode="infer")
    (ln,) = ops(prof, "forward", "aten.native_layer_norm")
    # reads x (640 fp32) + weight + bias (16 each); writes y (640) + mean and rstd (40 each)
    assert ln.bytes_read == (640 + 16 + 16) * 4
    assert ln.bytes_written == (640 + 40 + 40) * 4


class SDPA(nn.Module):
    def forward(self, q, k, v):
        return nn.functional.scaled_dot_product_attention(q, k, v)


def test_attention_flops():
    q = torch.randn(2, 4, 32, 16, requires_grad=True)
    prof = aa.profile(SDPA(), (q, q.detach().clone(), q.detach().clone()), mode="infer")
    # QK^T and AV: 2 * (2 * b * h * s_q * s_k * d) = 4 * 2 * 4 * 32 * 32 * 16
    assert prof.flops_forward == 4 * 2 * 4 * 32 * 32 * 16
    assert [o.op_class for o in prof.ops if o.flops] == ["attention"]


def test_lstm_flops_are_counted():
    # FlopCounterMode counts recurrent layers as zero. Per step the gates are
    # x W_ih^T + h W_hh^T: 2 * B * 4H * (I + H); T steps: 2 * 5 * 2 * 64 * (8 + 16) = 30720
    prof = aa.profile(nn.LSTM(8, 16, batch_first=True), torch.randn(2, 5, 8), mode="infer")
    assert prof.flops_forward == 2 * 5 * 2 * 4 * 16 * (8 + 16)
    trained = aa.profile(nn.LSTM(8, 16, batch_first=True), torch.randn(2, 5, 8))
    # backward: input and weight gradients, two GEMMs of the forward's size
    assert trained.flops_backward == 2 * trained.flops_forward


def test_gru_step_gemms_are_recorded_apart_from_the_input_gemms():
    # On a CPU a GRU multiplies the whole sequence's inputs by W_ih in one GEMM per layer, then
    # the hidden state by W_hh once per time step. 2 layers, 5 steps, batch 3, input 8, hidden
    # 16 (3 gates: 48 outputs). Input GEMMs: 15 rows x (8 | 16) x 48 -> 2 * 15 * 48 * (8 + 16)
    # = 34560 FLOPs in 2 calls; step GEMMs: 3 rows x 16 x 48 -> 2 * 3 * 16 * 48 = 4608 FLOPs,
    # 2 layers x 5 steps = 10 calls. One record of all 12 had priced every call at the mean
    # (6720 FLOPs): 1.5x a step GEMM, 0.3-0.6x an input GEMM (11520 and 23040).
    prof = aa.profile(nn.GRU(8, 16, num_layers=2), torch.randn(5, 3, 8), mode="infer")
    gemms = {o.op: o for o in prof.ops if o.op_class == "gemm"}
    assert set(gemms) == {"aten.addmm", "aten.addmm[step]"}
    assert (gemms["aten.addmm"].count, gemms["aten.addmm"].flops) == (2, 34560)
    assert (gemms["aten.addmm[step]"].count, gemms["aten.addmm[step]"].flops) == (10, 46080)
    # Backward: the gradient of each step's hidden state goes back through W_hh, 3 rows x 48 x
    # 16 -> 4608 FLOPs a call, once per step but the first of each layer (h0 needs none):
    # 2 x 4 = 8 calls. The weight gradients (no W_hh operand) stay with the input GEMMs'.
    trained = aa.profile(nn.GRU(8, 16, num_layers=2), torch.randn(5, 3, 8))
    assert {o.op for o in trained.ops if o.op_class == "gemm" and o.phase == "forward"} == \
        {"aten.addmm", "aten.addmm[step]"}
    back = {o.op: o for o in trained.ops if o.op_class == "gemm" and o.phase == "backward"}
    assert set(back) == {"aten.mm", "aten.mm[step]"}
    assert (back["aten.mm[step]"].count, back["aten.mm[step]"].flops) == (8, 8 * 4608)


def test_inference_weight_formats():
    model = nn.Sequential(nn.Linear(256, 256), nn.LayerNorm(256))
    x = torch.randn(4, 256)
    matrix, vectors = 256 * 256, 256 + 256 + 256  # Linear weight; bias + LN weight + LN bias
    assert aa.profile(model, x, mode="infer", precision="fp32").memory.weights_bytes == \
        (matrix + vectors) * 4
    assert aa.profile(model, x, mode="infer", precision="bf16").memory.weights_bytes == \
        (matrix + vectors) * 2
    # int8: matrices 1 byte, the rest 2 bytes
    assert aa.profile(model, x, mode="infer", precision="int8").memory.weights_bytes == \
        matrix + vectors * 2
    # nf4: 4 bits + an 8-bit absmax per 64 weights + an fp32 constant per 256 absmax
    # (bitsandbytes double quantization) = 4 + 0.125 + 0.00195 = 4.127 bits per matrix weight
    assert aa.profile(model, x, mode="infer", precision="nf4").memory.weights_bytes == \
        int(matrix * (4 + 8 / 64 + 32 / (64 * 256)) / 8 + vectors * 2)


def test_bf16_training_runs_gemms_in_bf16():
    prof = aa.profile(nn.Linear(64, 64), torch.randn(8, 64), precision="bf16")
    (addmm,) = ops(prof, "forward", "aten.addmm")
    assert addmm.dtype == "bfloat16"
    assert prof.compute_dtype == "bfloat16" and prof.param_dtype == "float32"
    # FP32 master weights stay: weights, grads and AdamW state as in fp32
    assert prof.memory.weights_bytes == (64 * 64 + 64) * 4


def test_measuring_prints_no_profiler_trace_lines_but_keeps_the_steps_output(capfd):
    # Kineto writes "profiler_start"/"profiler_stop" to file descriptor 2 when the memory
    # profiler starts and stops; a notebook would show them under the cell.
    import os

    import torch

    from aiadvisor.profiler.measure import cpu_peak_bytes

    def step():
        os.write(2, b"written by the step\n")
        return torch.ones(1024, 1024).sum()  # one 4 MiB allocation

    peak, result = cpu_peak_bytes(step)
    err = capfd.readouterr().err
    assert "written by the step" in err
    assert "profiler_start" not in err and "profiler_stop" not in err
    assert peak >= 4 * 2**20 and float(result) == 1024 * 1024
