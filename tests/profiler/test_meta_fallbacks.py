"""Models whose forward needs real values, built on the meta device: Whisper (its input length is
fixed, so only the batch rescales), wav2vec2 and HuBERT in training (SpecAugment masks drawn in
numpy), Longformer (``.item()`` on the attention mask) profile through a random-weight copy on
the CPU, as real-weight models fall back to a real batch; what cannot be copied gets one error
saying what to pass."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import aiadvisor as aa
from aiadvisor.errors import InvalidArgumentError, ProfilingError

transformers = pytest.importorskip("transformers")


def _on_meta(config_cls, model_cls, **config):
    cfg = getattr(transformers, config_cls)(**config)
    with torch.device("meta"):
        return getattr(transformers, model_cls)(cfg), cfg


def _flop_count(model_cls, cfg, inputs, *, train: bool) -> int:
    """FlopCounterMode's forward FLOPs on a CPU copy with the same config (independent of
    aiadvisor's trace), with eager attention: FlopCounterMode does not count the CPU
    flash-attention kernel SDPA picks, and eager attention's two matmuls are the same FLOPs
    (2 x 2 x batch x heads x queries x keys x head_dim)."""
    import copy

    cfg = copy.deepcopy(cfg)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(cfg).train(train)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(**inputs)
    return counter.get_total_flops()


WHISPER = dict(vocab_size=256, d_model=64, encoder_layers=1, decoder_layers=1,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
               decoder_ffn_dim=128, num_mel_bins=80, max_source_positions=16,
               max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
               decoder_start_token_id=1)


def test_whisper_on_meta_rescales_the_batch_only():
    model, cfg = _on_meta("WhisperConfig", "WhisperForConditionalGeneration", **WHISPER)
    # The encoder takes exactly 2 x max_source_positions = 32 frames of 80 mel bins.
    inputs = {"input_features": torch.zeros(1, 80, 32),
              "decoder_input_ids": torch.zeros(1, 8, dtype=torch.long)}
    prof = aa.profile(model, inputs, mode="infer")
    assert prof.path == "fake"
    assert prof.flops_forward == pytest.approx(_flop_count(
        "WhisperForConditionalGeneration", cfg, inputs, train=False), rel=1e-3)
    # Every FLOP here scales with the batch: twice the batch, twice the FLOPs.
    assert prof.at(batch_size=2).flops_forward == pytest.approx(2 * prof.flops_forward)
    assert any("batch size only" in n for n in prof.notes)
    with pytest.raises(InvalidArgumentError, match="seq_len=40 .*batch size only.*seq_len=80"):
        prof.at(seq_len=40)


SPEECH = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
              conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
              num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, layerdrop=0.0,
              mask_time_length=2)


@pytest.mark.parametrize(("config_cls", "model_cls"), [("Wav2Vec2Config", "Wav2Vec2Model"),
                                                       ("HubertConfig", "HubertModel")])
def test_speech_models_train_on_meta_through_a_random_copy(config_cls, model_cls):
    model, cfg = _on_meta(config_cls, model_cls, **SPEECH)
    inputs = {"input_values": torch.zeros(1, 400)}
    prof = aa.profile(model, inputs, mode="train")
    assert prof.path == "real"
    assert any("random weights built from its config" in n for n in prof.notes)
    # 400 samples -> (400 - 10) / 5 + 1 = 79 -> (79 - 3) / 2 + 1 = 39 frames; the SpecAugment
    # mask changes values, not shapes, so the count equals FlopCounterMode's in training.
    assert prof.flops_forward == pytest.approx(_flop_count(model_cls, cfg, inputs, train=True),
                                               rel=1e-3)
    assert prof.num_params == sum(p.numel() for p in model.parameters())
    assert all(p.is_meta for p in list(model.parameters())[1:])  # the user's model untouched


def test_random_copy_counts_every_layer_despite_layerdrop():
    # wav2vec2's default layerdrop 0.1 skips layers at random in training: the copy traces
    # them all (the user's config keeps its 0.1), so the count is FlopCounterMode's with 0.
    model, cfg = _on_meta("Wav2Vec2Config", "Wav2Vec2Model", **{**SPEECH, "layerdrop": 0.1})
    inputs = {"input_values": torch.zeros(1, 400)}
    prof = aa.profile(model, inputs, mode="train", scaling=False)
    assert model.config.layerdrop == 0.1
    assert any("layerdrop=0.1 was set to 0" in n for n in prof.notes)
    cfg.layerdrop = 0.0
    assert prof.flops_forward == pytest.approx(
        _flop_count("Wav2Vec2Model", cfg, inputs, train=True), rel=1e-3)


def test_longformer_on_meta_through_a_random_copy():
    model, cfg = _on_meta("LongformerConfig", "LongformerModel", hidden_size=64,
                          num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                          vocab_size=256, attention_window=8, max_position_embeddings=64)
    inputs = {"input_ids": torch.full((1, 16), 5, dtype=torch.long)}
    prof = aa.profile(model, inputs, mode="infer")
    assert prof.path == "real"
    assert prof.flops_forward == pytest.approx(
        _flop_count("LongformerModel", cfg, inputs, train=False), rel=1e-3)


class _NeedsValues(nn.Module):
    """No config to rebuild it from, and a forward that reads a value."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        steps = int(x.abs().sum().item()) % 3 + 1
        for _ in range(steps):
            x = self.proj(x)
        return x


def test_meta_model_without_config_gets_one_error_saying_what_to_pass():
    with torch.device("meta"):
        model = _NeedsValues()
    with pytest.raises(ProfilingError) as info:
        aa.profile(model, torch.zeros(2, 8), mode="infer")
    message = str(info.value)
    assert "meta device" in message and "float32[2, 8]" in message
    assert "real or random weights on the CPU" in message
