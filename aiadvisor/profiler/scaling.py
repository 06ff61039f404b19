"""Batch size and sequence length as parameters of a captured profile.

Every per-step quantity the profiler records (FLOPs, bytes and calls of each op, saved
activations, the peak) is a polynomial in batch size B and sequence length S of the form
``c0 + c1 S + c2 S^2 + B (c3 + c4 S + c5 S^2)``: per-sample work is at most quadratic in S
(attention scores) and linear in B; weights and the optimizer do not depend on either. The
profiler traces the model at six (B, S) points (two without a sequence dimension) and solves for
the coefficients exactly, so :func:`rescale` (``prof.at`` on a :class:`TracedProfile`) answers
any (B, S) without re-tracing.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..schema import ModelProfile

#: Config attributes that bound the sequence length (Hugging Face: ``max_position_embeddings``
#: in BERT/Llama-style configs, ``n_positions`` in GPT-2's, ``max_seq_len`` in MPT's).
CONFIG_POSITION_LIMITS = ("max_position_embeddings", "n_positions", "max_seq_len")

_POSITION_TABLE = re.compile(r"(^|_)(pos|wpe|position|positions|positional)(_|$)")


def is_position_table(name: str) -> bool:
    """Whether a module's qualified name is a learned position table's (``wpe``,
    ``position_embeddings``, ``embed_positions``, ``pos``, ...)."""
    return bool(_POSITION_TABLE.search(name.rsplit(".", 1)[-1]))


def position_limit(model: Any, *, seq_len: int | None) -> tuple[int | None, str]:
    """The longest sequence ``model`` accepts and where that was read, or ``(None, "")``.

    A model's ``config`` attribute (Hugging Face) names it; otherwise a learned position table,
    an ``nn.Embedding`` named like one (``pos``, ``wpe``, ``position_embeddings``,
    ``embed_positions``, ...), has one row per position. A table shorter than the example's
    ``seq_len`` cannot be the position table of a model that just ran on it, so it is skipped.
    Last, the built-in example decoders name theirs in ``aiadvisor_config.max_positions``.
    Inputs without a sequence dimension have no limit.
    """
    if seq_len is None:
        return None, ""
    config = getattr(model, "config", None)
    for attr in CONFIG_POSITION_LIMITS:
        value = getattr(config, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            # Name the attribute as the config spells it (GPT2Config aliases n_positions).
            own = getattr(config, "attribute_map", {}).get(attr, attr)
            return value, f"{type(config).__name__}.{own}"
    tables = []
    for name, module in model.named_modules():
        rows = getattr(module, "num_embeddings", None)
        if (type(module).__name__ == "Embedding" and isinstance(rows, int) and rows >= seq_len
                and is_position_table(name)):
            tables.append((rows, f"learned position table {name!r} "
                                 f"(Embedding({rows}, {module.embedding_dim}))"))
    if tables:
        return min(tables)
    # The built-in example decoders (aiadvisor.examples) carry the config they were built from
    # (the Llama-style ones have no position table: rotary positions are left out).
    builtin = getattr(getattr(model, "aiadvisor_config", None), "max_positions", None)
    if isinstance(builtin, int) and not isinstance(builtin, bool) and builtin > 0:
        return builtin, "DecoderConfig.max_positions of the built-in example"
    return None, ""


def grid(batch_size: int, seq_len: int | None) -> list[tuple[int, int | None]]:
    """Trace points: B in {B0, 2 B0}; S in {S0, S0/2, S0/4} (shorter, so position tables that
    end at S0 still fit). Falls back to two S points, then none, for very short sequences."""
    batches = [batch_size, 2 * batch_size]
    if seq_len is None:
        return [(b, None) for b in batches]
    seqs = sorted({seq_len, seq_len // 2, seq_len // 4} - {0}, reverse=True)
    return [(b, s) for b in batches for s in seqs]


def _basis(points: list[tuple[int, int | None]], b0: int, s0: int | None) -> np.ndarray:
    seqs = sorted({s for _, s in points if s is not None})
    rows = []
    for b, s in points:
        x_b = b / b0
        if s0 is None:
            rows.append([1.0, x_b])
            continue
        x_s = s / s0
        powers = [x_s**k for k in range(len(seqs))]
        rows.append(powers + [x_b * p for p in powers])
    return np.asarray(rows, dtype=float)


def fit(points: list[tuple[int, int | None]], samples: list[dict[str, float]], *,
        batch_size: int, seq_len: int | None) -> dict[str, Any]:
    """Solve the coefficients of every quantity from one dict of samples per point."""
    keys = sorted(set().union(*samples))
    values = np.array([[s.get(k, 0.0) for k in keys] for s in samples], dtype=float)
    basis = _basis(points, batch_size, seq_len)
    coef, *_ = np.linalg.lstsq(basis, values, rcond=None)
    num_seq = len({s for _, s in points if s is not None})
    return {"keys": keys, "coef": coef.tolist(), "batch_size": batch_size, "seq_len": seq_len,
            "num_seq_terms": num_seq, "min_seq": min((s for _, s in points if s), default=None)}


def evaluate(scaling: dict[str, Any], batch_size: int, seq_len: int | None) -> dict[str, float]:
    b0, s0 = scaling["batch_size"], scaling["seq_len"]
    x_b = batch_size / b0
    if s0 is None:
        row = np.array([1.0, x_b])
    else:
        x_s = seq_len / s0
        powers = [x_s**k for k in range(scaling["num_seq_terms"])]
        row = np.array(powers + [x_b * p for p in powers])
    values = row @ np.asarray(scaling["coef"], dtype=float)
    # Exact polynomials can come back as -1e-9 from float round-off: clamp at zero.
    return {k: max(0.0, float(v)) for k, v in zip(scaling["keys"], values)}


def rescale(prof: ModelProfile, *, batch_size: int | None = None,
            seq_len: int | None = None) -> ModelProfile:
    """The profile at another batch size and/or sequence length, from its fitted coefficients.

    Parameters
    ----------
    prof : ModelProfile
        A profile from :func:`aiadvisor.profile` (any other profile can only be asked for its
        own size: it has no scaling traces).
    batch_size, seq_len : int, optional
        The new size; each defaults to the profile's own.

    Returns
    -------
    ModelProfile
        Of the same class as ``prof`` (a :class:`TracedProfile` stays one).

    Raises
    ------
    InvalidArgumentError
        For a ``seq_len`` beyond the model's position limit (``prof.max_seq_len``, named with
        where it was read), a size below 1, a sequence length on inputs without one, or a
        profile that has no scaling traces (``profile(..., scaling=False)``, or tracing at
        another size failed).

    Examples
    --------
    >>> import torch, aiadvisor as aa
    >>> prof = aa.profile(torch.nn.Linear(64, 64), torch.randn(4, 64), mode="infer")
    >>> round(rescale(prof, batch_size=8).flops_forward)  # 2 * 8 * 64 * 64
    65536
    """
    from . import assemble  # local: assemble imports torch-free helpers only

    batch_size = prof.batch_size if batch_size is None else batch_size
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(
            f"batch_size={batch_size!r} is not valid: expected an integer >= 1.")
    if seq_len is not None and prof.seq_len is None:
        raise InvalidArgumentError(
            f"seq_len={seq_len!r} is not valid for this profile: its inputs have no sequence "
            "dimension (expected seq_len=None)."
        )
    seq_len = prof.seq_len if seq_len is None else seq_len
    if seq_len is not None and (not isinstance(seq_len, int) or seq_len < 1):
        raise InvalidArgumentError(f"seq_len={seq_len!r} is not valid: expected an integer >= 1.")
    if (batch_size, seq_len) == (prof.batch_size, prof.seq_len):
        return prof
    limit = prof.max_seq_len
    if limit is not None and seq_len > limit and seq_len != prof.seq_len:
        raise InvalidArgumentError(
            f"seq_len={seq_len} is not valid for {prof.model_name!r}: the model accepts at most "
            f"{limit} positions ({prof.max_seq_len_source or 'its position limit'}). Expected "
            f"a seq_len from 1 to {limit}."
        )
    if prof.scaling is None:
        raise InvalidArgumentError(
            "this profile cannot be rescaled: its scaling traces did not run "
            f"({'; '.join(prof.notes) or 'profile(..., scaling=False)'}). Profile again at "
            f"batch_size={batch_size}, seq_len={seq_len}."
        )
    fixed = prof.scaling["fit"].get("fixed_seq_len")
    if fixed is not None and seq_len != fixed:
        raise InvalidArgumentError(
            f"seq_len={seq_len} is not valid for this profile: it was fitted in the batch size "
            f"only, at seq_len={fixed} (tracing at other sequence lengths failed; see "
            f"prof.notes). Expected seq_len={fixed}, or profile inputs of the length you want.")
    # Sliders revisit the same sizes: keep the last few answers (profiles are immutable).
    cache = prof.scaling.setdefault("cache", {})
    hit = cache.get((batch_size, seq_len))
    if hit is not None:
        return hit
    dynamic = evaluate(prof.scaling["fit"], batch_size, seq_len)
    new = assemble.build_profile(prof.scaling["static"], dynamic, batch_size=batch_size,
                                 seq_len=seq_len)
    # Notes added after the trace (a torch.compile wrapper, PyTorch's own log lines) hold at
    # every size: carry them with the ones the static facts rebuild.
    new = dataclasses.replace(new, scaling=prof.scaling, notes=prof.notes)
    if len(cache) >= _CACHE_SIZE:
        cache.pop(next(iter(cache)))
    cache[(batch_size, seq_len)] = new
    return new


_CACHE_SIZE = 64


class TracedProfile(ModelProfile):
    """The :class:`~aiadvisor.schema.ModelProfile` that :func:`aiadvisor.profile` returns: the
    same fields, plus :meth:`at` (:func:`rescale` as a method).

    Defined here rather than on ``ModelProfile`` because rescaling needs the profiler and the
    schema may import no layer above it. ``dataclasses.replace`` keeps the class, so every
    profile derived from one (``at``, ``measure=True``) has ``at`` too.
    """

    def at(self, *, batch_size: int | None = None, seq_len: int | None = None) -> ModelProfile:
        """The same model at another batch size and/or sequence length (no re-trace).

        See :func:`rescale` for the parameters and errors.

        Examples
        --------
        >>> import torch, aiadvisor as aa
        >>> prof = aa.profile(torch.nn.Linear(64, 64), torch.randn(4, 64), mode="infer")
        >>> round(prof.at(batch_size=2).flops_forward)  # 2 * 2 * 64 * 64 (fit round-off aside)
        16384
        """
        return rescale(self, batch_size=batch_size, seq_len=seq_len)
