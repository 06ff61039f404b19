"""The snippets that can run on a CPU run here, on small models, with non-default user names."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

from aiadvisor.codegen import CodeNames, snippet

NAMES = CodeNames(model="net", inputs="batch", optimizer="opt", loss_fn="my_loss", dataset="data")


class Block(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.attention = SelfAttention(width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(),
                                       torch.nn.Linear(2 * width, width))

    def forward(self, x):
        x = x + self.attention(x)
        return x + self.mlp(x)


class SelfAttention(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(width, 3 * width)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
        return scores.softmax(-1) @ v


class TinyLM(torch.nn.Module):
    def __init__(self, vocab: int = 32, width: int = 16, depth: int = 3) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.layers = torch.nn.ModuleList(Block(width) for _ in range(depth))
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def my_loss(output):
    return output.float().pow(2).mean()


def _run(code: str, namespace: dict) -> None:
    exec(code, namespace)  # noqa: S102 (running the generated snippet is what is tested)


def _namespace(model: torch.nn.Module, batch) -> dict:
    torch.manual_seed(0)
    return {"net": model, "batch": batch, "opt": torch.optim.AdamW(model.parameters(), lr=1e-3),
            "my_loss": my_loss}


def _lm_namespace() -> dict:
    torch.manual_seed(0)
    return _namespace(TinyLM(), torch.randint(0, 32, (4, 8)))


def _grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() for p in model.parameters()]


def test_tf32_sets_the_flags():
    before = torch.get_float32_matmul_precision()
    try:
        _run(snippet("tf32", names=NAMES), {})
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.matmul.allow_tf32 is True
    finally:
        torch.set_float32_matmul_precision(before)
        torch.backends.cuda.matmul.allow_tf32 = False


def test_autocast_train_step_runs_in_bf16_on_cpu():
    ns = _lm_namespace()
    before = copy.deepcopy(ns["net"].state_dict())
    _run(snippet("autocast_train", names=NAMES, dtype="bfloat16", device_type="cpu"), ns)
    loss = ns["train_step"]()
    assert torch.isfinite(loss)
    changed = [not torch.equal(before[k], v) for k, v in ns["net"].state_dict().items()]
    assert any(changed)  # the optimizer stepped
    assert ns["net"].head.weight.dtype == torch.float32  # fp32 master weights kept


def test_autocast_infer_produces_bf16_output():
    ns = _lm_namespace()
    _run(snippet("autocast_infer", names=NAMES, dtype="bfloat16", device_type="cpu"), ns)
    assert ns["output"].dtype == torch.bfloat16
    assert ns["output"].shape == (4, 8, 32)
    # the weights are stored in bf16 once, as the plan prices it (half the weight memory)
    assert ns["net"].head.weight.dtype == torch.bfloat16


def test_channels_last_converts_model_and_inputs():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3))
    ns = _namespace(net, torch.randn(2, 3, 16, 16))
    _run(snippet("channels_last", names=NAMES), ns)
    assert ns["batch"].is_contiguous(memory_format=torch.channels_last)
    assert ns["net"][0].weight.is_contiguous(memory_format=torch.channels_last)
    assert ns["net"](ns["batch"]).shape == (2, 4, 12, 12)


def test_sdpa_attention_matches_the_eager_formula():
    ns = _lm_namespace()
    _run(snippet("sdpa", names=NAMES, causal=False), ns)
    q, k, v = torch.randn(3, 2, 5, 8).unbind(0)
    eager = ((q @ k.transpose(-2, -1)) / 8**0.5).softmax(-1) @ v
    torch.testing.assert_close(ns["attention"](q, k, v), eager, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("selective", [False, True])
def test_checkpointing_keeps_gradients_identical(selective):
    ns = _lm_namespace()
    reference = copy.deepcopy(ns["net"])
    my_loss(reference(ns["batch"])).backward()
    _run(snippet("checkpointing", names=NAMES, selective=selective), ns)
    wrapped = [m for m in ns["net"].modules() if "forward" in vars(m)]
    # full: the 3 blocks; selective: the 3 attention modules only
    assert len(wrapped) == 3
    assert all(isinstance(m, SelfAttention if selective else Block) for m in wrapped)
    my_loss(ns["net"](ns["batch"])).backward()
    for got, want in zip(_grads(ns["net"]), _grads(reference)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("snippet_id,flag", [("fused_optimizer", "fused"),
                                             ("foreach_optimizer", "foreach")])
def test_fused_and_foreach_optimizers_keep_the_settings(snippet_id, flag):
    ns = _lm_namespace()
    ns["opt"] = torch.optim.AdamW(ns["net"].parameters(), lr=3e-4, weight_decay=0.05)
    _run(snippet(snippet_id, names=NAMES), ns)
    opt = ns["opt"]
    assert isinstance(opt, torch.optim.AdamW)
    assert opt.defaults[flag] is True
    assert opt.defaults["lr"] == 3e-4 and opt.defaults["weight_decay"] == 0.05
    my_loss(ns["net"](ns["batch"])).backward()
    opt.step()


def test_dataloader_yields_batches_of_the_requested_size():
    ns = {"data": torch.utils.data.TensorDataset(torch.randn(20, 3), torch.arange(20))}
    code = snippet("dataloader", names=NAMES, num_workers=0, batch_size=8, prefetch=2)
    _run(code, ns)
    batches = list(ns["batches"]())
    assert len(batches) == 2  # 20 samples, batch 8, drop_last
    assert batches[0][0].shape == (8, 3)


def test_gradient_accumulation_equals_one_full_batch_step():
    # mean loss over 4 samples == average of the means over 2 micro-batches of 2 samples
    ns = _lm_namespace()
    reference = copy.deepcopy(ns["net"])
    my_loss(reference(ns["batch"])).backward()
    _run(snippet("grad_accumulation", names=NAMES, accum_steps=2, effective_batch=4), ns)
    grads = {}
    ns["opt"].step = lambda: grads.update({n: p.grad.clone()
                                           for n, p in ns["net"].named_parameters()})
    ns["train_step"](ns["batch"])
    for name, param in reference.named_parameters():
        torch.testing.assert_close(grads[name], param.grad, atol=1e-6, rtol=1e-5)


def test_larger_batch_loader():
    ns = {"data": torch.utils.data.TensorDataset(torch.randn(130, 3))}
    _run(snippet("larger_batch", names=NAMES, batch_size=64, old_batch_size=16), ns)
    assert len(ns["loader"]) == 2


def test_dynamic_int8_quantizes_a_copy():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    ns = _namespace(net, torch.randn(5, 16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run(snippet("dynamic_int8", names=NAMES), ns)
    assert type(ns["quantized_net"][0]).__name__ == "Linear"  # dynamic quantized Linear
    assert "quantized" in type(ns["quantized_net"][0]).__module__
    assert isinstance(ns["net"][0], torch.nn.Linear)  # the user's model is untouched
    torch.testing.assert_close(ns["output"], net(ns["batch"]), atol=0.05, rtol=0.05)


def test_embedding_int8_quantizes_the_tables():
    ns = _lm_namespace()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run(snippet("embedding_int8", names=NAMES), ns)
    assert "quantized" in type(ns["quantized_net"].embed).__module__
    assert ns["quantized_net"].embed.weight().dtype == torch.quint8
    assert ns["output"].shape == (4, 8, 32)


class _ExpandedIds(torch.nn.Module):
    """Looks up a stride-0 expand of a buffer, as HF BERT does for its token_type_ids."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.register_buffer("type_ids", torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]]))

    def forward(self, x):
        return self.embed(self.type_ids[:, : x.shape[1]].expand(x.shape[0], x.shape[1]))


def test_embedding_int8_takes_expanded_indices():
    model = _ExpandedIds()
    ns = _namespace(model, torch.zeros(3, 8, dtype=torch.long))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run(snippet("embedding_int8", names=NAMES), ns)  # raised "...contiguous" before
    # 8-bit rows with a per-row scale: each looked-up row within a 255th of its range.
    expected = model.embed.weight[torch.arange(1, 9)].expand(3, 8, 4)
    span = float(model.embed.weight.max() - model.embed.weight.min())
    torch.testing.assert_close(ns["output"], expected, atol=span / 255, rtol=0)


class _EmbedNorm(torch.nn.Module):
    """An embedding followed by a LayerNorm, as in BERT's embeddings."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.norm(self.embed(x)))


def test_embedding_int8_runs_after_the_bf16_step():
    # The plan stacks the 8-bit tables on bf16 inference: the model is in bf16 by then and the
    # 8-bit lookup returns fp32, which a bf16 LayerNorm rejects on the CPU ("mixed dtype").
    torch.manual_seed(0)
    model = _EmbedNorm().eval()
    reference = copy.deepcopy(model)
    ns = _namespace(model, torch.randint(0, 50, (3, 8)))
    _run(snippet("autocast_infer", names=NAMES, dtype="bfloat16", device_type="cpu"), ns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run(snippet("embedding_int8", names=NAMES), ns)
    assert ns["quantized_net"].embed.weight().dtype == torch.quint8
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = ns["quantized_net"](ns["batch"])  # as the plan runs it
    assert out.dtype == torch.bfloat16 and ns["output"].dtype == torch.bfloat16
    # 8-bit rows then bf16 (8 significant bits): within a few percent of the fp32 model.
    with torch.no_grad():
        expected = reference(ns["batch"])
    torch.testing.assert_close(out.float(), expected, atol=0.1, rtol=0.05)


def test_distill_prune_zeroes_a_fifth_of_the_channels():
    ns = _lm_namespace()
    _run(snippet("distill_prune", names=NAMES, prune_percent=20, amount=0.2, temperature=2.0), ns)
    first = ns["net"].layers[0].mlp[0].weight  # 32 output channels -> round(0.2 * 32) = 6 zeroed
    assert int((first.abs().sum(dim=1) == 0).sum()) == 6
    assert ns["net"].head.weight.abs().sum(dim=1).min() > 0  # output layer kept whole
    logits = ns["net"](ns["batch"])
    with torch.no_grad():
        teacher_logits = ns["teacher"](ns["batch"])
    loss = ns["distillation_loss"](logits, teacher_logits)
    assert torch.isfinite(loss) and loss >= 0


@pytest.mark.slow
def test_torch_compile_runs_the_model():
    pytest.importorskip("torch._inductor")
    torch.manual_seed(0)
    ns = _namespace(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()), torch.randn(2, 8))
    expected = ns["net"](ns["batch"])
    _run(snippet("torch_compile", names=NAMES, mode="default"), ns)
    torch._dynamo.reset()
    try:
        torch.testing.assert_close(ns["net"](ns["batch"]), expected, atol=1e-4, rtol=1e-4)
    finally:
        torch._dynamo.reset()
