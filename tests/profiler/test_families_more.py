"""More transformers families on the meta device (with test_families.py, test_moe.py and
test_meta_fallbacks.py: 47 families): each profiles in inference and training and gets a
prediction; forward FLOPs equal torch's FlopCounterMode run on the same model (on the meta
device, or on a CPU copy with random weights where the forward needs real values). For
mixture-of-experts families, whose grouped expert GEMMs FlopCounterMode does not count, the
expected count is FlopCounterMode's plus the experts by hand: ``2 x tokens x top_k x 3 x
hidden x expert_intermediate`` per MoE layer (gate, up and down projections)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import aiadvisor as aa

from .test_families import AUDIO, IDS, IMAGE, SEQ2SEQ, SMALL

transformers = pytest.importorskip("transformers")

# 33 families x (two profiles, a FlopCounterMode run, a prediction): about 80 s on 2 busy cores.
pytestmark = pytest.mark.slow

TOKENS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
MOE = dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, **TOKENS)

# (family, model class, inputs, config overrides: sizes the defaults of SMALL do not fit)
FAMILIES_MORE = [
    # text encoders
    ("MPNet", "MPNetModel", IDS, {}), ("Camembert", "CamembertModel", IDS, {}),
    ("DebertaV2", "DebertaV2Model", IDS, {}), ("ConvBert", "ConvBertModel", IDS, {}),
    ("BigBird", "BigBirdModel", IDS, {"attention_type": "original_full"}),
    ("ModernBert", "ModernBertModel", IDS, {**TOKENS, "cls_token_id": 1, "sep_token_id": 2}),
    # text decoders
    ("Gemma2", "Gemma2ForCausalLM", IDS, {}), ("Gemma3Text", "Gemma3ForCausalLM", IDS, {}),
    ("Phi3", "Phi3ForCausalLM", IDS, TOKENS), ("GPTNeo", "GPTNeoForCausalLM", IDS, {}),
    ("GPTJ", "GPTJForCausalLM", IDS, {"rotary_dim": 8}),
    ("CodeGen", "CodeGenForCausalLM", IDS, {"rotary_dim": 8}),
    ("Cohere", "CohereForCausalLM", IDS, {}), ("Olmo", "OlmoForCausalLM", IDS, {}),
    ("Olmo2", "Olmo2ForCausalLM", IDS, {}), ("Granite", "GraniteForCausalLM", IDS, {}),
    # encoder-decoders
    ("Bart", "BartForConditionalGeneration", SEQ2SEQ, {}),
    ("MBart", "MBartForConditionalGeneration", SEQ2SEQ, {}),
    ("Pegasus", "PegasusForConditionalGeneration", SEQ2SEQ, {}),
    ("Marian", "MarianMTModel", SEQ2SEQ, {**TOKENS, "decoder_start_token_id": 0}),
    ("MT5", "MT5ForConditionalGeneration", SEQ2SEQ, {}),
    # vision
    ("Beit", "BeitModel", IMAGE, {}), ("Dinov2", "Dinov2Model", IMAGE, {}),
    ("SiglipVision", "SiglipVisionModel", IMAGE, {}),
    ("Swin", "SwinModel", IMAGE, {"embed_dim": 16, "depths": [1, 1], "num_heads": [2, 4],
                                  "window_size": 4, "patch_size": 4}),
    ("ConvNext", "ConvNextModel", IMAGE, {"hidden_sizes": [16, 32], "depths": [1, 1],
                                          "num_stages": 2}),
    ("ResNet", "ResNetModel", IMAGE, {"hidden_sizes": [16, 32], "depths": [1, 1],
                                      "embedding_size": 16}),
    # audio
    ("WavLM", "WavLMModel", AUDIO, {}), ("Data2VecAudio", "Data2VecAudioModel", AUDIO, {}),
    # state space
    ("Mamba2", "Mamba2ForCausalLM", IDS, {"head_dim": 32, "n_groups": 1, "chunk_size": 16}),
    ("Rwkv", "RwkvForCausalLM", IDS, {"attention_hidden_size": 64}),
    # mixture of experts (transformers' grouped-GEMM experts)
    ("Qwen3Moe", "Qwen3MoeForCausalLM", IDS, MOE),
    ("Olmoe", "OlmoeForCausalLM", IDS, {"num_experts": 8, "num_experts_per_tok": 2,
                                        "intermediate_size": 32, **TOKENS}),
]


def _config(family: str, overrides: dict):
    config = getattr(transformers, family + "Config")()
    for key, value in {**SMALL, **overrides}.items():
        if hasattr(config, key) or key in overrides:
            setattr(config, key, value)
    return config


def _build(model_class: str, config, device: str):
    with torch.device(device):
        return getattr(transformers, model_class)(config)


def _moe_expert_flops(config, tokens: int) -> int:
    """The grouped expert GEMMs by hand: per MoE layer, each token's top-k experts run gate,
    up (hidden -> expert_intermediate) and down (back) projections, 2 FLOPs per multiply-add."""
    hidden = config.hidden_size
    # Qwen3-MoE sizes its experts by moe_intermediate_size; OLMoE by intermediate_size.
    inter = getattr(config, "moe_intermediate_size", None) or config.intermediate_size
    return config.num_hidden_layers * 2 * tokens * config.num_experts_per_tok * 3 * hidden * inter


def _expected_forward_flops(model_class, config, meta_model, inputs) -> int:
    """FlopCounterMode's forward on the meta model in eval mode; on a CPU copy (random weights,
    eager attention, which the counter counts in full) where the forward needs real values.
    Grad mode stays on (no backward runs): the counter's module hooks fail under no_grad on
    Mamba2's reference scan."""
    counter = FlopCounterMode(display=False)
    meta_model.eval()
    try:
        with counter:
            meta_model(**{k: v.to("meta") for k, v in inputs.items()})
    except Exception:  # noqa: BLE001 - data-dependent forward: count a real copy instead
        cfg = copy.deepcopy(config)
        cfg._attn_implementation = "eager"
        torch.manual_seed(0)
        real = _build(model_class, cfg, "cpu").eval()
        counter = FlopCounterMode(display=False)
        with counter:
            real(**inputs)
    total = counter.get_total_flops()
    if getattr(config, "num_experts", None):
        total += _moe_expert_flops(config, tokens=next(iter(inputs.values())).numel())
    return total


@pytest.mark.parametrize(("family", "model_class", "inputs", "overrides"), FAMILIES_MORE,
                         ids=[f[0] for f in FAMILIES_MORE])
def test_more_families_profile_and_predict_on_meta(family, model_class, inputs, overrides):
    config = _config(family, overrides)
    model = _build(model_class, config, "meta")
    prof = aa.profile(model, inputs, mode="infer", scaling=False)
    expected = _expected_forward_flops(model_class, config, model, inputs)
    assert expected > 0
    assert prof.flops_forward == pytest.approx(expected, rel=2e-3)
    assert (prof.moe is not None) == bool(getattr(config, "num_experts", None))
    train = aa.profile(model, inputs, mode="train", scaling=False)
    assert train.flops_backward > train.flops_forward > 0
    pred = aa.predict(prof, hardware="H100 SXM", precision="bf16")
    assert pred.step_time_s > 0
