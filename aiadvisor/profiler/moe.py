"""Mixture-of-experts layers of a model: how many experts, how many a token is routed to, and
which parameters are experts (for active parameters and the routing the profile assumes)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgumentError

_TOP_K_CONFIG_KEYS = ("num_experts_per_tok", "moe_top_k", "top_k")


@dataclass(frozen=True, kw_only=True)
class ExpertLayers:
    """The routed experts found in a model."""

    num_experts: int
    top_k: int
    num_moe_layers: int
    expert_params: int
    """Parameters of all routed experts of all layers (shared experts not included)."""
    hidden_size: int | None = None
    """Width of the tokens an expert takes in and gives back (what an all-to-all moves)."""


def find_experts(model) -> ExpertLayers | None:
    """The routed experts of ``model``, or None for a dense model.

    An experts module is one with an integer ``num_experts`` whose own parameters all stack
    that many experts on dimension 0 (transformers 5's fused ``*Experts`` modules: Mixtral,
    Qwen-MoE, DeepSeek-V3, ...) and no ``top_k`` (that is the router). The top-k is that of
    the first router (a module with both ``num_experts`` and ``top_k``), else the model
    config's ``num_experts_per_tok``.
    """
    layers = []
    for _name, module in model.named_modules():
        num = getattr(module, "num_experts", None)
        own = list(module.parameters(recurse=False))
        # Routers also know ``num_experts`` (their weight is (num_experts, hidden)): not experts.
        if not isinstance(num, int) or num < 2 or not own or hasattr(module, "top_k"):
            continue
        if all(p.dim() >= 2 and p.shape[0] == num for p in own):
            layers.append((num, sum(p.numel() for p in own), _hidden_size(own, model)))
    if not layers:
        return None
    top_k = _top_k(model)
    if top_k is None:
        return None
    return ExpertLayers(num_experts=layers[0][0], top_k=top_k, num_moe_layers=len(layers),
                        expert_params=sum(n for _, n, _ in layers), hidden_size=layers[0][2])


def _hidden_size(params, model) -> int | None:
    """The token width of an experts module: the one trailing dimension all its stacked
    weights share (gate_up (E, 2I, H) and down (E, H, I) share H); the config's
    ``hidden_size`` where two are shared (I = H) and it is one of them."""
    common = set(params[0].shape[1:])
    for p in params[1:]:
        common &= set(p.shape[1:])
    if len(common) == 1:
        return int(next(iter(common)))
    hidden = getattr(getattr(model, "config", None), "hidden_size", None)
    return int(hidden) if isinstance(hidden, int) and hidden in common else None


def _top_k(model) -> int | None:
    for module in model.modules():
        k = getattr(module, "top_k", None)
        if isinstance(k, int) and k >= 1 and hasattr(module, "num_experts"):
            return k
    config = getattr(model, "config", None)
    for key in _TOP_K_CONFIG_KEYS:
        k = getattr(config, key, None)
        if isinstance(k, int) and k >= 1:
            return k
    return None


def num_active_params(num_params: int, experts: ExpertLayers | None) -> int:
    """Parameters one token goes through: all but the routed experts it is not sent to
    (``top_k`` of ``num_experts`` per layer); ``num_params`` for a dense model."""
    if experts is None:
        return num_params
    unused = experts.expert_params * (experts.num_experts - experts.top_k) // experts.num_experts
    return num_params - unused


def check_imbalance(moe_imbalance: float | None, experts: ExpertLayers | None) -> float:
    """The expert load imbalance to profile with (max expert load over the mean), 1 when not
    given (balanced routing)."""
    if moe_imbalance is None:
        return 1.0
    if experts is None:
        raise InvalidArgumentError(
            f"moe_imbalance={moe_imbalance!r} is not valid for this model: it has no "
            "mixture-of-experts layers. Expected moe_imbalance=None for a dense model.")
    ok = isinstance(moe_imbalance, (int, float)) and not isinstance(moe_imbalance, bool)
    if not ok or not 1.0 <= float(moe_imbalance) <= experts.num_experts:
        raise InvalidArgumentError(
            f"moe_imbalance={moe_imbalance!r} is not valid: expected the most loaded expert's "
            f"tokens over the mean, a number in [1, {experts.num_experts}] (1: balanced; "
            f"{experts.num_experts}: every token on one expert, the number of experts).")
    return float(moe_imbalance)


def routing_note(experts: ExpertLayers, imbalance: float) -> str:
    """What the profile assumes about routing, for ``prof.notes``."""
    base = (f"mixture of experts: {experts.num_moe_layers} layers of {experts.num_experts} "
            f"experts, top-{experts.top_k}; routing on fake/meta inputs is degenerate, so "
            "expert loads are those of balanced routing (tokens x top_k / experts each)")
    if imbalance == 1.0:
        return base
    return base + f", the most loaded expert at {imbalance:g}x the mean (moe_imbalance)"
