"""Tiny real models for tests and benches, built from configs with random weights (no downloads)."""

from __future__ import annotations

import itertools

import torch
from torch import nn


def _quiet():
    import transformers

    transformers.logging.set_verbosity_error()


def bert(layers: int = 2, hidden: int = 128, batch: int = 4, seq: int = 64):
    _quiet()
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(vocab_size=1000, hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=4, intermediate_size=4 * hidden,
                     max_position_embeddings=max(seq, 128), attn_implementation="eager")
    torch.manual_seed(0)
    return BertForMaskedLM(cfg), torch.randint(0, 1000, (batch, seq))


def gpt2(layers: int = 2, hidden: int = 128, batch: int = 4, seq: int = 64):
    _quiet()
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=1000, n_embd=hidden, n_layer=layers, n_head=4,
                     n_positions=max(seq, 128), bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    return GPT2LMHeadModel(cfg), torch.randint(0, 1000, (batch, seq))


def llama(layers: int = 2, hidden: int = 128, batch: int = 2, seq: int = 64, device=None):
    _quiet()
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=1000, hidden_size=hidden, intermediate_size=3 * hidden,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=max(seq, 128))
    torch.manual_seed(0)
    if device is not None:
        with torch.device(device):
            return LlamaForCausalLM(cfg), torch.randint(0, 1000, (batch, seq))
    return LlamaForCausalLM(cfg), torch.randint(0, 1000, (batch, seq))


def t5(layers: int = 2, hidden: int = 128, batch: int = 2, seq: int = 32):
    _quiet()
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(vocab_size=1000, d_model=hidden, d_kv=32, d_ff=4 * hidden, num_layers=layers,
                   num_decoder_layers=layers, num_heads=4, decoder_start_token_id=0)
    torch.manual_seed(0)
    ids = torch.randint(0, 1000, (batch, seq))
    return T5ForConditionalGeneration(cfg), {"input_ids": ids, "decoder_input_ids": ids}


def vit(layers: int = 2, hidden: int = 128, batch: int = 4, image: int = 32):
    _quiet()
    from transformers import ViTConfig, ViTForImageClassification

    cfg = ViTConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                    intermediate_size=4 * hidden, image_size=image, patch_size=8, num_labels=10)
    torch.manual_seed(0)
    return ViTForImageClassification(cfg), torch.randn(batch, 3, image, image)


def resnet(batch: int = 4, image: int = 64):
    _quiet()
    from transformers import ResNetConfig, ResNetForImageClassification

    cfg = ResNetConfig(embedding_size=32, hidden_sizes=[32, 64, 128, 256], depths=[1, 1, 1, 1],
                       layer_type="basic", num_labels=10)
    torch.manual_seed(0)
    return ResNetForImageClassification(cfg), torch.randn(batch, 3, image, image)


class MLP(nn.Module):
    def __init__(self, sizes=(256, 1024, 1024, 10)):
        super().__init__()
        layers = []
        for a, b in itertools.pairwise(sizes):
            layers += [nn.Linear(a, b), nn.GELU()]
        self.net = nn.Sequential(*layers[:-1])

    def forward(self, x):
        return self.net(x)


def mlp(batch: int = 32):
    torch.manual_seed(0)
    return MLP(), torch.randn(batch, 256)


class LSTMTagger(nn.Module):
    def __init__(self, vocab: int = 500, emb: int = 64, hidden: int = 128, layers: int = 2):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, 10)

    def forward(self, ids):
        out, _ = self.lstm(self.emb(ids))
        return self.head(out)


def lstm(batch: int = 4, seq: int = 32):
    torch.manual_seed(0)
    return LSTMTagger(), torch.randint(0, 500, (batch, seq))


FAMILIES = {"bert": bert, "gpt2": gpt2, "llama": llama, "t5": t5, "vit": vit, "resnet": resnet,
            "mlp": mlp, "lstm": lstm}
