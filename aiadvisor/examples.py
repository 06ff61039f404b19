"""Built-in example models in plain PyTorch (no downloads, no transformers), used by the
``aiadvisor`` command, the demo and the notebooks.

Decoders follow GPT-2 (learned positions, GELU MLP, tied embeddings) or Llama (RMSNorm, rotary
positions omitted as they have no parameters and negligible FLOPs, gated SiLU MLP, grouped
key/value heads). Large ones are built on the meta device: they can be profiled, not run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import InvalidArgumentError, close_matches


@dataclass(frozen=True, kw_only=True)
class DecoderConfig:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int | None = None
    intermediate_size: int | None = None
    max_positions: int = 2048
    style: str = "gpt2"
    """gpt2 (LayerNorm, GELU, learned positions, tied head) or llama (RMSNorm, SwiGLU)."""
    causal: bool = True
    attention: str = "sdpa"
    """sdpa (``F.scaled_dot_product_attention``: a fused, flash-style kernel where one runs) or
    explicit (Megatron-LM's path before FlashAttention, 2022: a batched scores GEMM with the
    ``1/sqrt(d)`` scale and the mask folded in, one softmax pass over the full ``t x s``
    scores held in memory, then the values GEMM), for models trained on such stacks."""

    def __post_init__(self) -> None:
        if self.attention not in ATTENTION_KINDS:
            raise InvalidArgumentError(
                f"DecoderConfig.attention={self.attention!r} is not valid: expected one of "
                f"{', '.join(ATTENTION_KINDS)}."
            )


ATTENTION_KINDS = ("sdpa", "explicit")


def _explicit_attention(q, k, v, mask, causal: bool):
    """Attention as Megatron-LM ran it before FlashAttention: one ``baddbmm`` adding the mask
    as a bias (``-inf`` where a token may not look) with the ``1/sqrt(d)`` scale folded in, one
    softmax pass in the scores' own 16-bit type (its fused scale-mask-softmax kernel), then
    ``bmm`` with the values. The ``t x s`` scores and probabilities live in memory."""
    import torch

    b, h, t, d = q.shape
    s_len = k.shape[2]
    # One copy each into (batch x heads, tokens, dim) at every batch size: ``reshape`` would
    # copy only when batch > 1, and the profiler's batch scaling would count that wrongly.
    qf, kf, vf = (z.contiguous().view(b * h, -1, d) for z in (q, k, v))
    if mask is None and causal:
        mask = torch.ones(t, s_len, dtype=torch.bool, device=q.device).tril(s_len - t)
    if mask is None:
        bias, beta = torch.zeros(1, 1, 1, dtype=q.dtype, device=q.device), 0.0
    else:
        bias = torch.zeros(1, t, s_len, dtype=q.dtype, device=q.device).masked_fill(
            ~mask, float("-inf"))
        beta = 1.0
    scores = torch.baddbmm(bias, qf, kf.transpose(1, 2), beta=beta, alpha=d ** -0.5)
    # dtype= keeps the softmax in the scores' type under autocast (which would run it in fp32).
    probs = torch.softmax(scores, dim=-1, dtype=scores.dtype)
    return torch.bmm(probs, vf).view(b, h, t, d)


def _build_decoder(cfg: DecoderConfig):
    import torch
    from torch import nn
    from torch.nn import functional as F

    kv_heads = cfg.num_kv_heads or cfg.num_heads
    head_dim = cfg.hidden_size // cfg.num_heads
    inter = cfg.intermediate_size or 4 * cfg.hidden_size
    norm = (lambda: nn.RMSNorm(cfg.hidden_size)) if cfg.style == "llama" else \
        (lambda: nn.LayerNorm(cfg.hidden_size))

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_heads * head_dim,
                                    bias=cfg.style == "gpt2")
            self.k_proj = nn.Linear(cfg.hidden_size, kv_heads * head_dim, bias=cfg.style == "gpt2")
            self.v_proj = nn.Linear(cfg.hidden_size, kv_heads * head_dim, bias=cfg.style == "gpt2")
            self.o_proj = nn.Linear(cfg.num_heads * head_dim, cfg.hidden_size,
                                    bias=cfg.style == "gpt2")

        def forward(self, x, past=None):
            b, t, _ = x.shape
            q = self.q_proj(x).view(b, t, cfg.num_heads, head_dim).transpose(1, 2)
            k = self.k_proj(x).view(b, t, kv_heads, head_dim).transpose(1, 2)
            v = self.v_proj(x).view(b, t, kv_heads, head_dim).transpose(1, 2)
            if past is not None:
                k, v = torch.cat((past[0], k), dim=2), torch.cat((past[1], v), dim=2)
            cache = (k, v)
            if kv_heads != cfg.num_heads:
                k = k.repeat_interleave(cfg.num_heads // kv_heads, dim=1)
                v = v.repeat_interleave(cfg.num_heads // kv_heads, dim=1)
            mask, causal = None, cfg.causal
            if past is not None and cfg.causal:
                # New tokens see the whole cache and the new tokens up to themselves.
                s_len = k.shape[2]
                causal = False
                mask = torch.ones(t, s_len, dtype=torch.bool, device=x.device).tril(s_len - t)
            if cfg.attention == "explicit":
                y = _explicit_attention(q, k, v, mask, causal)
            else:
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
            return self.o_proj(y.transpose(1, 2).reshape(b, t, -1)), cache

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gated = cfg.style == "llama"
            self.up_proj = nn.Linear(cfg.hidden_size, inter, bias=not self.gated)
            if self.gated:
                self.gate_proj = nn.Linear(cfg.hidden_size, inter, bias=False)
            self.down_proj = nn.Linear(inter, cfg.hidden_size, bias=not self.gated)

        def forward(self, x):
            if self.gated:
                return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
            return self.down_proj(F.gelu(self.up_proj(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.attn, self.norm2, self.mlp = norm(), Attention(), norm(), MLP()

        def forward(self, x, past=None):
            y, cache = self.attn(self.norm1(x), past)
            x = x + y
            return x + self.mlp(self.norm2(x)), cache

    class Decoder(nn.Module):
        aiadvisor_config = cfg

        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
            if cfg.style == "gpt2":
                self.pos = nn.Embedding(cfg.max_positions, cfg.hidden_size)
            self.layers = nn.ModuleList(Block() for _ in range(cfg.num_layers))
            self.norm = norm()
            self.head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
            if cfg.style == "gpt2":
                self.head.weight = self.embed.weight

        def forward(self, input_ids, past_key_values=None, use_cache=False):
            """Logits; with ``use_cache=True``, ``(logits, cache)`` where the cache holds one
            ``(keys, values)`` pair per layer, each ``(batch, kv_heads, tokens, head_dim)``."""
            past_len = 0 if past_key_values is None else past_key_values[0][0].shape[2]
            x = self.embed(input_ids)
            if cfg.style == "gpt2":
                x = x + self.pos(torch.arange(past_len, past_len + input_ids.shape[1],
                                              device=input_ids.device))
            cache = []
            for i, layer in enumerate(self.layers):
                x, kv = layer(x, None if past_key_values is None else past_key_values[i])
                cache.append(kv)
            logits = self.head(self.norm(x))
            return (logits, tuple(cache)) if use_cache else logits

    return Decoder()


def _mlp():
    from torch import nn

    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def _cnn():
    from torch import nn

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(), nn.MaxPool2d(2))

    return nn.Sequential(block(3, 32), block(32, 64), block(64, 128), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(128, 10))


# name: (config, description)
_DECODERS = {
    "tiny-gpt": (DecoderConfig(vocab_size=8192, hidden_size=256, num_layers=4, num_heads=4,
                               max_positions=512),
                 "GPT-style decoder, 4 layers x 256 wide, 5.4M params"),
    "gpt2": (DecoderConfig(vocab_size=50257, hidden_size=768, num_layers=12, num_heads=12,
                           max_positions=1024), "GPT-2 small shape, 124M params"),
    "gpt2-xl": (DecoderConfig(vocab_size=50257, hidden_size=1600, num_layers=48, num_heads=25,
                              max_positions=1024), "GPT-2 XL shape, 1.56B params"),
    "bert-base": (DecoderConfig(vocab_size=30522, hidden_size=768, num_layers=12, num_heads=12,
                                max_positions=512, causal=False),
                  "BERT-base-shaped encoder (bidirectional), ~110M params"),
    "llama-3-8b": (DecoderConfig(vocab_size=128256, hidden_size=4096, num_layers=32,
                                 num_heads=32, num_kv_heads=8, intermediate_size=14336,
                                 style="llama", max_positions=8192),
                   "Llama-3-8B shape, 8.0B params (meta device)"),
    "llama-3-70b": (DecoderConfig(vocab_size=128256, hidden_size=8192, num_layers=80,
                                  num_heads=64, num_kv_heads=8, intermediate_size=28672,
                                  style="llama", max_positions=8192),
                    "Llama-3-70B shape, 70.6B params (meta device)"),
}
_META_ABOVE_PARAMS = 500_000_000
_OTHERS = {"mlp": "3-layer MLP on 784 features, 1.9M params",
           "cnn": "small CNN (3 conv blocks with BatchNorm) on 32x32 images, 0.1M params"}

DEFAULT_MODEL = "tiny-gpt"


def available() -> dict[str, str]:
    """Example names and one-line descriptions."""
    return {**{k: v[1] for k, v in _DECODERS.items()}, **_OTHERS}


def build(name: str, *, batch_size: int = 8, seq_len: int | None = None,
          device: str | None = None) -> tuple[Any, Any]:
    """``(model, example_inputs)`` for a built-in example; random weights, no download.

    Large decoders (over 0.5B parameters) are built on the meta device unless ``device`` is
    given; they can be profiled but not run.
    """
    import torch

    if name in _DECODERS:
        cfg = _DECODERS[name][0]
        seq = seq_len or min(cfg.max_positions, 512)
        if seq > cfg.max_positions:
            raise InvalidArgumentError(
                f"seq_len={seq} is not valid for {name!r}: expected at most {cfg.max_positions}."
            )
        big = _param_estimate(cfg) > _META_ABOVE_PARAMS
        torch.manual_seed(0)
        with torch.device(device or ("meta" if big else "cpu")):
            model = _build_decoder(cfg)
        return model, torch.randint(0, cfg.vocab_size, (batch_size, seq))
    if name == "mlp":
        torch.manual_seed(0)
        return _mlp(), torch.randn(batch_size, 784)
    if name == "cnn":
        torch.manual_seed(0)
        size = seq_len or 32
        return _cnn(), torch.randn(batch_size, 3, size, size)
    hint = close_matches(name, available(), n=1)
    raise InvalidArgumentError(
        f"model={name!r} is not a built-in example: expected one of "
        f"{', '.join(map(repr, available()))}." + (f" Did you mean {hint[0]!r}?" if hint else "")
    )


def _param_estimate(cfg: DecoderConfig) -> int:
    kv = cfg.num_kv_heads or cfg.num_heads
    head_dim = cfg.hidden_size // cfg.num_heads
    inter = cfg.intermediate_size or 4 * cfg.hidden_size
    attn = cfg.hidden_size * head_dim * (2 * cfg.num_heads + 2 * kv)
    mlp = (3 if cfg.style == "llama" else 2) * cfg.hidden_size * inter
    embed = cfg.vocab_size * cfg.hidden_size * (1 if cfg.style == "gpt2" else 2)
    return cfg.num_layers * (attn + mlp) + embed
