"""Real model definitions (transformers configs, random weights): FLOPs against PyTorch's own
FlopCounterMode on a real step, memory against the CPU allocator's measured peak, scaling
against a re-profile."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import aiadvisor as aa
from aiadvisor.profiler.measure import cpu_peak_bytes

from . import models


def call(model, x):
    return model(**x) if isinstance(x, dict) else model(x)


def first_float(out):
    if isinstance(out, torch.Tensor):
        return out
    return out.logits if getattr(out, "logits", None) is not None else out[0]


class _CPUFlashCalls(TorchDispatchMode):
    """Records q/k shapes of the CPU flash-attention kernels (forward and backward)."""

    def __init__(self):
        super().__init__()
        self.forward, self.backward = [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        aten = torch.ops.aten
        if func is aten._scaled_dot_product_flash_attention_for_cpu.default:
            self.forward.append((args[0].shape, args[1].shape))
        elif func is aten._scaled_dot_product_flash_attention_for_cpu_backward.default:
            self.backward.append((args[1].shape, args[2].shape))
        return func(*args, **(kwargs or {}))


def reference_flops(model, x, train=True) -> int:
    """FLOPs PyTorch's FlopCounterMode counts over one real forward (+ backward) step, plus
    the attention it cannot see: on CPU, SDPA without a mask runs
    ``_scaled_dot_product_flash_attention_for_cpu``, which FlopCounterMode's registry lacks.
    For those calls: forward QK^T and AV = 4 * b * h * s_q * s_k * d; backward recomputes QK^T
    (flash attention keeps no scores) then dP, dV, dQ, dK: 5 GEMMs = 10 * b * h * s_q * s_k * d."""
    m = copy.deepcopy(model)
    m.train(train)
    flash = _CPUFlashCalls()
    with FlopCounterMode(display=False) as counter, flash:
        if train:
            first_float(call(m, x)).sum().backward()
        else:
            with torch.no_grad():
                call(m, x)
    total = counter.get_total_flops()
    for calls, factor in ((flash.forward, 4), (flash.backward, 10)):
        for (b, h, s_q, d), (_, _, s_k, _) in calls:
            total += factor * b * h * s_q * s_k * d
    return total


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama", "t5", "vit", "resnet"])
def test_flops_match_flopcountermode_on_real_models(family):
    model, x = models.FAMILIES[family]()
    prof = aa.profile(model, x, mode="train")
    assert prof.path == "fake"
    ours = prof.flops_forward + prof.flops_backward
    assert ours == pytest.approx(reference_flops(model, x), rel=1e-6)


# ResNet at batch 16 x 96 px: at 4 x 64 px oneDNN's hidden per-call scratch (weight reorders,
# about 4 MB here) is 15 % of the whole step, which fake tensors cannot see (known limitation).
SIZES = {"resnet": {"batch": 16, "image": 96}}


@pytest.mark.parametrize("family", ["bert", "gpt2", "resnet", "mlp", "vit", "t5", "llama"])
def test_training_peak_within_10_percent_of_measured(family):
    model, x = models.FAMILIES[family](**SIZES.get(family, {}))

    def step():  # what a user writes: copy, AdamW, then a loop; the peak is step 2's
        m = copy.deepcopy(model)
        m.train()
        opt = torch.optim.AdamW(m.parameters())
        for _ in range(2):
            first_float(call(m, x)).sum().backward()
            opt.step()
            opt.zero_grad()

    measured, _ = cpu_peak_bytes(step)
    predicted = aa.profile(model, x, mode="train", optimizer="adamw").memory.peak_bytes
    assert predicted == pytest.approx(measured, rel=0.10)


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_bf16_mixed_precision_training_peak_within_10_percent_of_measured(family):
    model, x = models.FAMILIES[family]()

    def step():  # autocast with FP32 master weights, as torch.amp recommends; two steps
        m = copy.deepcopy(model)
        opt = torch.optim.AdamW(m.parameters())
        for _ in range(2):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = first_float(call(m, x)).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()

    measured, _ = cpu_peak_bytes(step)
    prof = aa.profile(model, x, mode="train", precision="bf16")
    assert prof.memory.peak_bytes == pytest.approx(measured, rel=0.10)


@pytest.mark.parametrize("family", ["llama", "mlp"])
def test_bf16_inference_peak_within_10_percent_of_measured(family):
    model, x = models.FAMILIES[family]()
    m = copy.deepcopy(model).to(torch.bfloat16).eval()  # weights stored in 16 bits
    x16 = x.to(torch.bfloat16) if x.is_floating_point() else x
    resident = sum(t.numel() * t.element_size() for t in [*m.parameters(), *m.buffers(), x16])

    def step():
        with torch.no_grad():
            m(x16)

    during, _ = cpu_peak_bytes(step)
    prof = aa.profile(model, x, mode="infer", precision="bf16")
    assert prof.memory.peak_bytes == pytest.approx(resident + during, rel=0.10)


def test_inference_peak_within_10_percent_of_measured():
    model, x = models.gpt2()

    def step():
        m = copy.deepcopy(model).eval()
        with torch.no_grad():
            m(x)

    measured, _ = cpu_peak_bytes(step)
    predicted = aa.profile(model, x, mode="infer").memory.peak_bytes
    assert predicted == pytest.approx(measured, rel=0.10)


def test_repeated_blocks_traced_once_give_the_same_profile():
    model, x = models.gpt2(layers=4)
    once = aa.profile(model, x, scaling=False)
    full = aa.profile(model, x, scaling=False, repeated_blocks=False)
    assert once.num_blocks == 4 and full.num_blocks == 0
    assert any("traced 1 of 4" in n for n in once.notes)
    assert once.flops_forward == full.flops_forward
    assert once.flops_backward == full.flops_backward
    assert once.memory.activations_bytes == full.memory.activations_bytes
    assert once.memory.peak_bytes == pytest.approx(full.memory.peak_bytes, rel=0.02)


@pytest.mark.parametrize("batch, seq", [(3, 48), (8, 16), (1, 64)])
def test_at_matches_a_fresh_profile(batch, seq):
    model, x = models.llama(batch=2, seq=64)
    prof = aa.profile(model, x)
    scaled = prof.at(batch_size=batch, seq_len=seq)
    fresh = aa.profile(model, torch.randint(0, 1000, (batch, seq)))
    assert scaled.batch_size == batch and scaled.seq_len == seq
    assert scaled.flops_forward == pytest.approx(fresh.flops_forward, rel=1e-9)
    assert scaled.flops_backward == pytest.approx(fresh.flops_backward, rel=1e-9)
    assert scaled.bytes_per_step == pytest.approx(fresh.bytes_per_step, rel=1e-6)
    assert scaled.memory.activations_bytes == pytest.approx(fresh.memory.activations_bytes,
                                                            rel=1e-6)
    # The peak is a maximum over the step's timeline, so only piecewise polynomial in (B, S):
    # the fit is exact for FLOPs, bytes and saved activations, close for the peak (<= 1.5 %
    # here, at sizes outside the traced grid).
    assert scaled.memory.peak_bytes == pytest.approx(fresh.memory.peak_bytes, rel=0.03)


def test_at_without_sequence_scales_batch_only():
    model, x = models.resnet(batch=4)
    prof = aa.profile(model, x)
    assert prof.seq_len is None
    double = prof.at(batch_size=8)
    assert double.flops_forward == pytest.approx(2 * prof.flops_forward, rel=1e-9)
    with pytest.raises(aa.AIAdvisorError, match="seq_len"):
        prof.at(seq_len=128)


def test_llama_70b_profiles_on_the_meta_device():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                      num_attention_heads=64, num_key_value_heads=8, vocab_size=128256)
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    prof = aa.profile(model, torch.randint(0, 128256, (1, 2048)), scaling=False)
    # Parameters: embed + lm_head 2*V*H; per layer q,o (H*H each), k,v (H*H/8 each),
    # MLP 3*H*F, two RMSNorm H; final norm H.
    h, f, v, L = 8192, 28672, 128256, 80
    per_layer = 2 * h * h + 2 * h * h // 8 + 3 * h * f + 2 * h
    assert prof.num_params == 2 * v * h + L * per_layer + h  # 70,553,706,496
    # Forward FLOPs: 2 FLOPs per weight per token for every matrix (embedding lookup excluded)
    # plus attention 4 * T^2 * H per layer (QK^T and AV, no causal halving, as flop_counter).
    t = 2048
    matrices = L * (2 * h * h + 2 * h * h // 8 + 3 * h * f) + v * h
    expected_fwd = 2 * t * matrices + L * 4 * t * t * h
    assert prof.flops_forward == pytest.approx(expected_fwd, rel=1e-9)
    # Weights in fp32: 4 bytes per parameter, plus the rotary-embedding buffers.
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    assert prof.memory.weights_bytes == 4 * prof.num_params + buffers
    assert prof.memory.grads_bytes == 4 * prof.num_params
