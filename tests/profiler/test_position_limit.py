"""The model's position limit is recorded at trace time and bounds ``prof.at(seq_len=...)``,
``Report.with_options(seq_len=...)`` and the dashboard's sequence-length slider."""

from __future__ import annotations

import pytest
import torch

import aiadvisor as aa
from aiadvisor import examples
from aiadvisor.errors import InvalidArgumentError


@pytest.fixture(scope="module")
def gpt2():
    pytest.importorskip("transformers")
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = GPT2Config(n_positions=128, n_layer=1, n_embd=64, n_head=2, vocab_size=1000,
                     bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg), torch.randint(0, 1000, (2, 64))


@pytest.fixture(scope="module")
def gpt2_profile(gpt2):
    model, x = gpt2
    return aa.profile(model, x, model_name="gpt2")


def test_hf_config_limit_is_recorded_and_carried_by_rescaling(gpt2_profile):
    # GPT2Config(n_positions=128): wpe is Embedding(128, 64), so 128 positions at most.
    assert gpt2_profile.max_seq_len == 128
    assert gpt2_profile.max_seq_len_source == "GPT2Config.n_positions"
    shorter = gpt2_profile.at(seq_len=32)
    assert (shorter.max_seq_len, shorter.max_seq_len_source) == (128, "GPT2Config.n_positions")
    # Up to the limit still answers from the fit.
    assert gpt2_profile.at(seq_len=128).seq_len == 128


@pytest.mark.parametrize("seq_len", [129, 1024])
def test_at_beyond_the_limit_raises_naming_it(gpt2_profile, seq_len):
    # Before: at(seq_len=1024) extrapolated the fit to positions wpe does not have.
    with pytest.raises(InvalidArgumentError) as info:
        gpt2_profile.at(seq_len=seq_len)
    message = str(info.value)
    assert f"seq_len={seq_len}" in message and "at most 128 positions" in message
    assert "GPT2Config.n_positions" in message and "from 1 to 128" in message
    with pytest.raises(InvalidArgumentError, match=f"seq_len={seq_len}.*at most 128"):
        gpt2_profile.at(seq_len=32).at(seq_len=seq_len)


def test_report_with_options_refuses_a_seq_len_beyond_the_limit(gpt2_profile):
    report = aa.advise(gpt2_profile, hardware="NVIDIA A100 80GB SXM")
    assert report.with_options(seq_len=128).profile.seq_len == 128
    with pytest.raises(InvalidArgumentError, match="seq_len=256.*at most 128.*n_positions"):
        report.with_options(seq_len=256)
    with pytest.raises(InvalidArgumentError, match="seq_len=256.*at most 128"):
        aa.advise(gpt2_profile, hardware="NVIDIA A100 80GB SXM", seq_len=256)


def test_dashboard_seq_slider_stops_at_the_limit(gpt2_profile):
    pytest.importorskip("anywidget")
    pytest.importorskip("altair")
    from aiadvisor.widgets.dashboard import Dashboard

    dash = Dashboard(aa.advise(gpt2_profile, hardware="NVIDIA A100 80GB SXM"))
    # Powers of two from 16 up to the limit 128, and the example's 64 (before: up to 8192).
    assert list(dash.seq.options) == [16, 32, 64, 128]
    assert dash.seq.value == 64


def test_builtin_decoder_limit_comes_from_its_position_table():
    model, x = examples.build("tiny-gpt", batch_size=2, seq_len=64)
    prof = aa.profile(model, x, model_name="tiny")
    # tiny-gpt: DecoderConfig(max_positions=512), hidden 256 -> self.pos = Embedding(512, 256)
    assert prof.max_seq_len == 512
    assert prof.max_seq_len_source == "learned position table 'pos' (Embedding(512, 256))"
    assert prof.at(seq_len=512).seq_len == 512
    with pytest.raises(InvalidArgumentError, match=r"seq_len=513 .*at most 512 .*'pos'"):
        prof.at(seq_len=513)


class _NoPositions(torch.nn.Module):
    """Token embedding + MLP, like a rotary-position model without a maximum: no limit."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(100, 32)
        self.pos = torch.nn.Embedding(8, 32)  # shorter than the example: not a position table
        self.proj = torch.nn.Linear(32, 32)

    def forward(self, ids):
        return self.proj(self.embed(ids))


def test_models_without_a_limit_keep_rescaling():
    prof = aa.profile(_NoPositions(), torch.randint(0, 100, (2, 16)))
    assert prof.max_seq_len is None and prof.max_seq_len_source == ""
    longer = prof.at(seq_len=4096)
    # forward FLOPs are linear in tokens: 2 x 2 x 16 x 32 x 32 at seq 16, x 256 at 4096
    assert longer.flops_forward == pytest.approx(prof.flops_forward * 256)
    cnn, images = examples.build("cnn", batch_size=2)
    assert aa.profile(cnn, images).max_seq_len is None


def test_an_example_longer_than_the_limit_is_noted(gpt2):
    model, _ = gpt2
    too_long = torch.randint(0, 1000, (2, 200))
    with pytest.raises(IndexError):  # the real model: wpe has 128 rows
        model(too_long)
    # Fake tensors do not check index values, so the trace runs; the profile says so.
    prof = aa.profile(model, too_long)
    assert ("the example's sequence length 200 is longer than the model accepts (128, "
            "GPT2Config.n_positions): a real step would fail") in prof.notes
