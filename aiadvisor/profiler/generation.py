"""Capture a causal LM for generation: the prompt forward as an inference profile, and the key/value
cache its forward returns, read from the cache tensors themselves (never guessed from names).

The cache is traced on fake tensors (no memory is used, so a 70B model on the meta device works)
at two prompt lengths: what grows between them is what each token adds to the cache.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from ..errors import AIAdvisorError, InvalidArgumentError, InvalidModelError
from ..schema import DecodeOp, DecodeStep, GenerationProfile, KVCacheLayout
from .blocks import find_repeated_blocks, is_block_module, starred, truncated_copy
from .scaling import position_limit
from .trace import _stand_ins, model_device

#: Prompt lengths the cache is traced at (any two distinct lengths work; short ones are cheap).
_TRACE_LENGTHS = (8, 16)
#: Batch sizes and cached lengths the decode step is traced at (its records are linear in
#: each and in their product).
_DECODE_BATCHES = (1, 2)
_DECODE_CONTEXTS = (8, 16)


class NotACausalLMError(AIAdvisorError, TypeError):
    """The model has no causal-LM interface aiadvisor can trace a KV cache from."""


def _vocab_size(model: nn.Module) -> int:
    config = getattr(model, "config", None) or getattr(model, "aiadvisor_config", None)
    size = getattr(config, "vocab_size", None)
    if isinstance(size, int) and size > 0:
        return size
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            return module.num_embeddings
    raise NotACausalLMError(
        f"{type(model).__name__} has no token embedding (nn.Embedding) and no config.vocab_size: "
        "generation needs a causal LM that takes input_ids.")


def _find_cache(out: Any) -> Any:
    # transformers >= 5 returns the cache as ``cache`` (``past_key_values`` is a deprecated alias
    # that warns); older releases and most code use ``past_key_values``.
    fields = out if isinstance(out, dict) else (
        vars(out) if hasattr(out, "__dict__") and not isinstance(out, torch.Tensor) else {})
    cache = None
    for key in ("cache", "past_key_values"):
        if key in dict.keys(fields):
            cache = dict.__getitem__(fields, key)
            break
    if cache is None and isinstance(out, (tuple, list)) and len(out) >= 2:
        cache = out[1]
    return cache


def _cache_tensors(obj: Any, depth: int = 0, seen: set | None = None) -> list[torch.Tensor]:
    """Every tensor inside a cache object: tuples of (k, v) pairs, HF ``DynamicCache`` (its
    layers' ``keys``/``values``) or any object holding them, without calling its methods."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 6:
        return []
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        items = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        items = list(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, (nn.Module, type)):
        items = list(vars(obj).values())
    else:
        return []
    found: list[torch.Tensor] = []
    for item in items:
        found.extend(_cache_tensors(item, depth + 1, seen))
    return found


def _grouped_mm_in_bf16():
    """A dispatch mode running grouped GEMMs (mixture-of-experts) in BF16 for their shapes:
    PyTorch's kernel accepts no other dtype, even on fake tensors; only shapes matter here."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from .opinfo import GROUPED_GEMM_PACKETS

    class GroupedMMInBF16(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            a, b = (args + (None, None))[:2]
            if (func._overloadpacket in GROUPED_GEMM_PACKETS and isinstance(a, torch.Tensor)
                    and (a.dtype, b.dtype) != (torch.bfloat16, torch.bfloat16)):
                dtype = kwargs.pop("out_dtype", None) or a.dtype
                cast = (a.to(torch.bfloat16), b.to(torch.bfloat16), *args[2:])
                return func(*cast, **kwargs).to(dtype)
            return func(*args, **kwargs)

    return GroupedMMInBF16()


def _trace_cache(model: nn.Module, vocab: int, length: int) -> tuple[list[torch.Tensor], str]:
    from torch._subclasses.fake_tensor import FakeTensorMode

    home = model_device(model)
    device = torch.device("cpu") if home.type == "meta" else home
    with FakeTensorMode(), _grouped_mm_in_bf16(), torch.no_grad():
        mapping, _, _ = _stand_ins(model, path="fake", device=device, train=False)
        ids = torch.zeros((1, length), dtype=torch.long, device=device) % vocab
        out = functional_call(model, mapping, (), {"input_ids": ids, "use_cache": True},
                              tie_weights=True, strict=False)
        cache = _find_cache(out)
        tensors = [t for t in _cache_tensors(cache) if t.dim() >= 2]
        return ([torch.empty(tuple(t.shape), dtype=t.dtype, device="meta") for t in tensors],
                type(cache).__name__)


def _first_tensor(out: Any) -> torch.Tensor | None:
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return None


def _cache_kwarg(model: nn.Module) -> str:
    """The forward's name for the cache it is given: ``cache`` in transformers >= 5
    (``past_key_values`` there is a deprecated alias that warns), else ``past_key_values``."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params and "past_key_values" not in params else \
        "past_key_values"


def _trace_decode(model: nn.Module, vocab: int, batch: int, context: int, *,
                  count_lines: bool = True):
    """(op aggregates, view ops per module, calls per module, Python lines per module or None
    where not counted) of one greedy decode step:
    ``model(ids (batch, 1), past_key_values=<the cache of a (batch, context) prompt>,
    use_cache=True)`` and the argmax over the new logits, on fake tensors. Only the step is
    recorded."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from .pylines import LineCounter
    from .recorder import ModuleStack, Recorder

    home = model_device(model)
    device = torch.device("cpu") if home.type == "meta" else home
    with FakeTensorMode(), _grouped_mm_in_bf16(), torch.no_grad():
        mapping, _, _ = _stand_ins(model, path="fake", device=device, train=False)
        ids = torch.zeros((batch, context), dtype=torch.long, device=device) % vocab
        out = functional_call(model, mapping, (), {"input_ids": ids, "use_cache": True},
                              tie_weights=True, strict=False)
        cache = _find_cache(out)
        del out
        new = torch.zeros((batch, 1), dtype=torch.long, device=device)
        tracker = ModuleStack(model)
        recorder = Recorder(tracker)
        recorder.fake_kernels = True
        lines = LineCounter(tracker)
        with tracker, recorder:
            with lines if count_lines else contextlib.nullcontext():
                out = functional_call(model, mapping, (),
                                      {"input_ids": new, _cache_kwarg(model): cache,
                                       "use_cache": True}, tie_weights=True, strict=False)
            logits = _first_tensor(out)
            if logits is None:
                raise RuntimeError("the decode forward returned no logits")
            logits[:, -1].argmax(-1)
        recorder.detach_all()
    views: dict[str, int] = {}
    for (module, phase), n in recorder.views.items():
        if phase == "forward":
            views[module] = views.get(module, 0) + n
    return (recorder.aggs, views, dict(tracker.calls),
            dict(lines.lines) if lines.available else None)


def _bilinear(v11: float, v21: float, v12: float, v22: float, b: tuple[int, int],
              c: tuple[int, int]) -> tuple[float, float, float, float]:
    """``(k0, kB, kC, kBC)`` of ``v = k0 + kB B + kC C + kBC B C`` through the four corners
    ``v_ij = v(b_i, c_j)``."""
    db, dc = b[1] - b[0], c[1] - c[0]
    k_bc = (v22 - v21 - v12 + v11) / (db * dc)
    k_b = (v21 - v11) / db - k_bc * c[0]
    k_c = (v12 - v11) / dc - k_bc * b[0]
    k0 = v11 - k_b * b[0] - k_c * c[0] - k_bc * b[0] * c[0]
    return (k0, k_b, k_c, k_bc)


def decode_step(model: nn.Module, vocab: int | None = None) -> DecodeStep:
    """Trace ``model``'s decode step with its own cache at two batch sizes and two cached
    lengths (see :class:`~aiadvisor.schema.DecodeStep`). Repeated identical blocks are traced
    once and multiplied (as the prompt forward is), falling back to the whole model where the
    truncated one does not run. Raises what the model raises."""
    vocab = vocab or _vocab_size(model)
    plan = find_repeated_blocks(model)
    was_training = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        if plan is not None:
            try:
                return _fit_decode(_decode_traces(truncated_copy(model, plan), vocab), plan)
            except Exception:  # noqa: BLE001 - the whole model below; its error if any
                pass
        return _fit_decode(_decode_traces(model, vocab), None)
    finally:
        for m, flag in was_training:
            m.training = flag


def _decode_traces(model: nn.Module, vocab: int) -> dict:
    # Lines are counted in the last trace only: by then code a model runs once (a warning
    # logged on its first call, a lazy initialisation) has run, as in a real decode loop.
    last = (_DECODE_BATCHES[-1], _DECODE_CONTEXTS[-1])
    return {(bi, cj): _trace_decode(model, vocab, bi, cj, count_lines=(bi, cj) == last)
            for bi in _DECODE_BATCHES for cj in _DECODE_CONTEXTS}


def _fit_decode(traces: dict, plan) -> DecodeStep:
    """The bilinear fit of every op record over the four traces; records of the traced block
    stand for all ``plan.num_blocks`` blocks."""
    b, c = _DECODE_BATCHES, _DECODE_CONTEXTS

    def times(module: str) -> int:
        return plan.num_blocks if is_block_module(module, plan) else 1

    keys = list(traces[(b[0], c[0])][0])
    for agg, *_ in traces.values():
        keys += [k for k in agg if k not in keys]
    ops = []
    for key in keys:
        module, _, op = key
        aggs = [traces[(bi, cj)][0].get(key) for bi in b for cj in c]
        first = next(a for a in aggs if a is not None)
        n = times(module)

        def fit(field: str, aggs=aggs, n=n):
            v11, v12, v21, v22 = (n * float(getattr(a, field)) if a is not None else 0.0
                                  for a in aggs)
            return _bilinear(v11, v21, v12, v22, b, c)

        ops.append(DecodeOp(op=op, op_class=first.op_class, module=starred(module, plan),
                            dtype=first.dtype, count=fit("count"), flops=fit("flops"),
                            bytes_read=fit("bytes_read"), bytes_written=fit("bytes_written"),
                            repeat=n))
    v11, v12, v21, v22 = (float(sum(times(m) * k for m, k in traces[(bi, cj)][1].items()))
                          for bi in b for cj in c)
    calls = sum(times(m) * k for m, k in traces[(b[0], c[0])][2].items())
    lines = traces[(b[-1], c[-1])][3]
    return DecodeStep(ops=tuple(ops), num_module_calls=int(calls),
                      num_view_ops=_bilinear(v11, v21, v12, v22, b, c), contexts=c,
                      num_python_lines=None if lines is None else
                      int(sum(times(m) * k for m, k in lines.items())))


def kv_cache_layout(model: nn.Module) -> KVCacheLayout:
    """Trace ``model``'s forward with ``use_cache=True`` at two prompt lengths and read what one
    token adds to the cache it returns.

    Raises
    ------
    NotACausalLMError
        The forward does not accept ``input_ids``/``use_cache`` or returns no cache.
    """
    vocab = _vocab_size(model)
    was_training = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        short, long = _TRACE_LENGTHS
        try:
            (small, kind), (big, _) = (_trace_cache(model, vocab, short),
                                       _trace_cache(model, vocab, long))
        except Exception as exc:  # the model's own error is quoted: any type can come back
            raise NotACausalLMError(
                f"{type(model).__name__}(input_ids=..., use_cache=True) failed on fake tensors "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}). "
                "Generation needs a causal LM whose forward takes input_ids and use_cache=True "
                "and returns its key/value cache (transformers *ForCausalLM, the built-in "
                "example decoders); for another module pass "
                "kv_cache=KVCacheLayout.from_shape(num_layers=..., kv_heads=..., head_dim=...)."
            ) from exc
    finally:
        for m, flag in was_training:
            m.training = flag
    grown = [(a, b) for a, b in zip(small, big) if a.shape != b.shape]
    if not small or len(small) != len(big) or not grown:
        raise NotACausalLMError(
            f"{type(model).__name__}(input_ids=..., use_cache=True) returned no key/value cache "
            "that grows with the prompt. Generation needs a causal LM that returns "
            "past_key_values (transformers *ForCausalLM) or (logits, cache); for another module "
            "pass kv_cache=KVCacheLayout.from_shape(num_layers=..., kv_heads=..., head_dim=...).")
    per_token = sum(b.numel() - a.numel() for a, b in grown) // (long - short)
    # A standard layer cache is (batch, kv_heads, tokens, head_dim): heads and dim are read off
    # the shape where every grown tensor has it.
    shapes = {tuple(b.shape) for _, b in grown}
    kv_heads = head_dim = None
    standard = all(len(s) == 4 and s[2] == long for s in shapes)
    if standard and len({(s[1], s[3]) for s in shapes}) == 1:
        _, kv_heads, _, head_dim = next(iter(shapes))
    dtype = str(grown[0][1].dtype).removeprefix("torch.")
    return KVCacheLayout(num_layers=max(len(grown) // 2, 1), kv_heads=kv_heads, head_dim=head_dim,
                         elements_per_token=int(per_token), dtype=dtype,
                         source=f"traced cache ({kind}, {len(grown)} tensors)")


def _linear_weight(module: nn.Module) -> tuple[torch.Tensor, int] | None:
    """(weight, output features) of a linear layer: ``nn.Linear`` or transformers' ``Conv1D``
    (GPT-2's linear layers, weight stored transposed)."""
    if isinstance(module, nn.Linear):
        return module.weight, module.out_features
    if type(module).__name__ == "Conv1D" and isinstance(getattr(module, "nf", None), int):
        return module.weight, module.nf
    return None


def _linear_params(model: nn.Module, vocab: int) -> tuple[int, int, int]:
    """(parameters of linear layers other than the vocabulary head, parameters of the head when
    it is not tied to the input embedding, elements of the largest of those layers' weights)."""
    from . import _embedding_tables

    embedding_ids = _embedding_tables(model)
    quantizable = head = largest = 0
    seen: set[int] = set()
    for module in model.modules():
        found = _linear_weight(module)
        if found is None or id(found[0]) in seen:
            continue
        weight, out_features = found
        seen.add(id(weight))
        bias = getattr(module, "bias", None)
        n = weight.numel() + (bias.numel() if isinstance(bias, torch.Tensor) else 0)
        if out_features == vocab:
            head += 0 if id(weight) in embedding_ids else n
        else:
            quantizable += n
            largest = max(largest, weight.numel())
    return quantizable, head, largest


def profile_generation(model: nn.Module, example_inputs: Any = None, *, prompt_len: int = 512,
                       model_name: str | None = None,
                       kv_cache: KVCacheLayout | None = None) -> GenerationProfile:
    """Capture ``model`` (a causal LM) for :func:`aiadvisor.predict_generation`.

    Parameters
    ----------
    model : torch.nn.Module
        A transformers ``*ForCausalLM``, a built-in example decoder, or any module whose
        ``forward(input_ids=..., use_cache=True)`` returns its key/value cache. May live on the
        meta device.
    example_inputs : tensor, optional
        Token ids ``(batch, tokens)``; only their shape matters. Default: one prompt of
        ``prompt_len`` tokens (capped at the model's position limit).
    kv_cache : KVCacheLayout, optional
        The cache layout by hand (no cache trace), for a module that returns none.
    prompt_len : int
        Prompt length the forward is traced at when ``example_inputs`` is not given; the
        profile answers other lengths without re-tracing.
    """
    from . import profile as profile_fn

    if not isinstance(model, nn.Module):
        raise InvalidModelError(
            f"model={type(model).__name__} is not valid: expected a torch.nn.Module (a causal "
            "LM such as a transformers *ForCausalLM).")
    from .wrappers import eager_module

    model, wrapper_note = eager_module(model)
    if not isinstance(prompt_len, int) or prompt_len < 1:
        raise InvalidArgumentError(
            f"prompt_len={prompt_len!r} is not valid: expected an integer >= 1.")
    limit, _ = position_limit(model, seq_len=1)
    vocab = _vocab_size(model)
    kv = kv_cache if kv_cache is not None else kv_cache_layout(model)
    if example_inputs is None:
        length = min(prompt_len, limit) if limit else prompt_len
        example_inputs = torch.zeros((1, length), dtype=torch.long)
    with _no_cache_outputs(model):
        prefill = profile_fn(model, example_inputs, mode="infer", precision="fp32",
                             model_name=model_name or type(model).__name__)
    if wrapper_note:
        prefill = dataclasses.replace(prefill, notes=(*prefill.notes, wrapper_note))
    quantizable, head, largest = _linear_params(model, vocab)
    decode = None
    if kv_cache is None:
        try:
            decode = decode_step(model, vocab)
        except Exception:  # noqa: BLE001 - any model error: priced without the traced step
            decode = None
    return GenerationProfile(
        model_name=prefill.model_name, model_type=prefill.model_type, prefill=prefill, kv=kv,
        max_positions=prefill.max_seq_len,
        positions_source=prefill.max_seq_len_source or "the model sets no position limit",
        quantizable_params=quantizable,
        head_params=head, largest_quantizable_params=largest,
        attention_flops_per_context_token=_attention_coefficient(prefill),
        decode=decode, vocab_size=vocab, logits_to_keep=_takes_logits_to_keep(model))


def _takes_logits_to_keep(model: nn.Module) -> bool:
    """Whether ``model.forward`` takes ``logits_to_keep``, which transformers ``generate``
    then sets to 1 (``GenerationMixin._supports_logits_to_keep``)."""
    try:
        return "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


@contextlib.contextmanager
def _no_cache_outputs(model: nn.Module):
    """Profile the prompt forward as an engine runs it: transformers models would otherwise
    build a cache object of their own during the trace (the KV bytes are accounted for apart)."""
    config = getattr(model, "config", None)
    old = getattr(config, "use_cache", None) if config is not None else None
    if config is not None and old is not None:
        config.use_cache = False
    try:
        yield
    finally:
        if config is not None and old is not None:
            config.use_cache = old


def _attention_coefficient(prefill) -> float:
    """Attention FLOPs per new token per cached token, from the prompt forward's growth in the
    sequence length: ``flops(T) = a T + b T^2`` per sequence, where the T^2 term is the score
    and weighted-sum matmuls (4 x heads x head_dim per layer, counted over the full T x T as the
    FLOP counter does); a decode step at context c costs ``b c`` of them."""
    seq = prefill.seq_len
    if not seq or seq < 4:
        return 0.0
    t1, t2 = max(seq // 2, 2), seq
    f1 = prefill.at(batch_size=1, seq_len=t1).flops_forward
    f2 = prefill.at(batch_size=1, seq_len=t2).flops_forward
    # f/T = a + b T: the slope in T.
    return max((f2 / t2 - f1 / t1) / (t2 - t1), 0.0)
