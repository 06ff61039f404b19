"""The built-in decoder's explicit (pre-FlashAttention, Megatron-LM style) attention: same
outputs as SDPA, and the traced scores GEMM and softmax have the sizes worked out by hand."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa
from aiadvisor.errors import InvalidArgumentError
from aiadvisor.examples import DecoderConfig, _build_decoder

CFG = dict(vocab_size=100, hidden_size=64, num_layers=2, num_heads=4, max_positions=32)


def _pair():
    torch.manual_seed(0)
    sdpa = _build_decoder(DecoderConfig(**CFG))
    torch.manual_seed(0)
    explicit = _build_decoder(DecoderConfig(attention="explicit", **CFG))
    return sdpa, explicit


def test_explicit_attention_matches_sdpa_with_and_without_cache():
    sdpa, explicit = _pair()
    ids = torch.randint(0, 100, (2, 16), generator=torch.Generator().manual_seed(1))
    assert torch.allclose(sdpa(ids), explicit(ids), atol=1e-5)
    _, cache_a = sdpa(ids[:, :10], use_cache=True)
    _, cache_b = explicit(ids[:, :10], use_cache=True)
    assert torch.allclose(sdpa(ids[:, 10:], past_key_values=cache_a),
                          explicit(ids[:, 10:], past_key_values=cache_b), atol=1e-5)


def test_explicit_attention_traces_the_scores_in_memory():
    _, explicit = _pair()
    ids = torch.zeros(2, 16, dtype=torch.long)
    prof = aa.profile(explicit, ids, mode="train")

    def total(name, field):
        return sum(getattr(o, field) for o in prof.ops if (o.op, o.phase) == (name, "forward"))

    # batch 2 x 4 heads x 16 x 16 scores x head dim 16: 2 x 2 x 4 x 16 x 16 x 16 = 65,536
    # FLOPs per layer for QK^T; the fp32 softmax reads and writes 2 x 4 x 16 x 16 x 4 bytes.
    assert total("aten.baddbmm", "flops") == 2 * 65_536           # two layers
    assert total("aten._softmax", "bytes_read") == 2 * 8192
    assert total("aten._softmax", "bytes_written") == 2 * 8192
    # The causal mask is a 16 x 16 bias folded into the scores GEMM, not a pass over the
    # scores: only 16 x 16 x 4 = 1,024 bytes written per layer besides them.
    assert total("aten.masked_fill", "bytes_written") == 2 * 1024


def test_explicit_softmax_stays_16_bit_under_autocast():
    # Megatron's fused softmax runs in fp16/bf16: 2 bytes per score, 2 x 4 x 16 x 16 x 2.
    _, explicit = _pair()
    prof = aa.profile(explicit, torch.zeros(2, 16, dtype=torch.long), mode="train",
                      precision="bf16")
    soft = [o for o in prof.ops if (o.op, o.phase) == ("aten._softmax", "forward")]
    assert {o.dtype for o in soft} == {"bfloat16"}
    assert sum(o.bytes_written for o in soft) == 2 * 4096


def test_bad_attention_kind_names_the_choices():
    with pytest.raises(InvalidArgumentError, match="sdpa, explicit"):
        DecoderConfig(attention="flash", **CFG)


def test_explicit_attention_copies_do_not_depend_on_the_batch():
    # q, k and v are copied into (batch x heads, tokens, dim) once per layer whatever the batch
    # (a reshape would be a free view at batch 1 only): 3 x 2 layers forward at batch 1 and 3,
    # each copy batch x 16 x 64 x 4 bytes.
    _, explicit = _pair()
    counts = []
    for batch in (1, 3):
        prof = aa.profile(explicit, torch.zeros(batch, 16, dtype=torch.long), mode="train")
        attn = [o for o in prof.ops if (o.op, o.phase) == ("aten.clone", "forward")
                and o.module.endswith("attn")]
        counts.append(sum(o.count for o in attn))
        assert sum(o.bytes_written for o in attn) >= 6 * batch * 16 * 64 * 4
    assert counts[0] == counts[1]
