"""A matrix of transformers families built from tiny configs on the meta device: each profiles,
and its forward FLOPs equal torch's FlopCounterMode, which counts every op these dense models
run (mixture-of-experts models, whose grouped GEMMs it does not count, are checked against hand
counts in test_moe.py)."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import aiadvisor as aa

transformers = pytest.importorskip("transformers")

# Sizes set on whichever of these a config has: 2 layers, width 64, 4 heads, 256 tokens.
SMALL = dict(
    hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
    vocab_size=256, num_key_value_heads=2, n_embd=64, n_layer=2, n_head=4, d_model=64,
    num_layers=2, num_heads=4, d_ff=128, d_kv=16, max_position_embeddings=128, image_size=32,
    patch_size=8, state_size=8, expand=2,
)

IDS = {"input_ids": torch.zeros(1, 16, dtype=torch.long)}
SEQ2SEQ = {**IDS, "decoder_input_ids": torch.zeros(1, 16, dtype=torch.long)}
IMAGE = {"pixel_values": torch.zeros(1, 3, 32, 32)}
AUDIO = {"input_values": torch.zeros(1, 4000)}

FAMILIES = [
    # text encoders
    ("Bert", "BertModel", IDS), ("Roberta", "RobertaModel", IDS),
    ("XLMRoberta", "XLMRobertaModel", IDS), ("DistilBert", "DistilBertModel", IDS),
    ("Electra", "ElectraModel", IDS), ("Albert", "AlbertModel", IDS),
    # text decoders
    ("GPT2", "GPT2LMHeadModel", IDS), ("Llama", "LlamaForCausalLM", IDS),
    ("Mistral", "MistralForCausalLM", IDS), ("Qwen2", "Qwen2ForCausalLM", IDS),
    ("Qwen3", "Qwen3ForCausalLM", IDS), ("Gemma", "GemmaForCausalLM", IDS),
    ("Phi", "PhiForCausalLM", IDS), ("OPT", "OPTForCausalLM", IDS),
    ("GPTNeoX", "GPTNeoXForCausalLM", IDS), ("Falcon", "FalconForCausalLM", IDS),
    ("Bloom", "BloomForCausalLM", IDS), ("StableLm", "StableLmForCausalLM", IDS),
    ("Starcoder2", "Starcoder2ForCausalLM", IDS),
    # encoder-decoder
    ("T5", "T5ForConditionalGeneration", SEQ2SEQ),
    # vision
    ("ViT", "ViTModel", IMAGE), ("DeiT", "DeiTModel", IMAGE),
    ("CLIPVision", "CLIPVisionModel", IMAGE),
    # audio
    ("Wav2Vec2", "Wav2Vec2Model", AUDIO),
    # state space
    ("Mamba", "MambaForCausalLM", IDS),
]


def _tiny(family: str, model_class: str) -> torch.nn.Module:
    config = getattr(transformers, family + "Config")()
    for key, value in SMALL.items():
        if hasattr(config, key):
            setattr(config, key, value)
    with torch.device("meta"):
        return getattr(transformers, model_class)(config)


@pytest.mark.parametrize(("family", "model_class", "inputs"), FAMILIES,
                         ids=[f[0] for f in FAMILIES])
def test_family_profiles_on_meta_with_flop_counter_flops(family, model_class, inputs):
    model = _tiny(family, model_class)
    prof = aa.profile(model, inputs, mode="infer", scaling=False)
    counter = FlopCounterMode(display=False)
    # Grad mode on (nothing runs backward): the counter's module hooks fail under no_grad on
    # Mamba's reference scan ("Expected gradient function to be set").
    with counter:
        model(**{k: v.to("meta") for k, v in inputs.items()})
    assert counter.get_total_flops() > 0
    assert prof.flops_forward == pytest.approx(counter.get_total_flops(), rel=1e-3)
    assert prof.num_active_params == prof.num_params
