"""Where FLOPs and memory go, per module: the table behind the Profile tab's bar charts."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..schema import ModelProfile, ModuleRecord

__all__ = ["module_breakdown"]

_VALUES = ("flops_forward", "flops_backward", "param_bytes", "activation_bytes", "bytes_total")
COLUMNS = ("module", "type", "repeat", *_VALUES)
MIN_SHARE = 0.001


@dataclass
class _Node:
    name: str
    record: ModuleRecord | None
    children: list[_Node] = field(default_factory=list)

    def own(self) -> dict[str, float]:
        """This module's own ops and parameters, over every block it stands for."""
        r = self.record
        if r is None:
            return dict.fromkeys(_VALUES, 0.0)
        total_bytes = r.bytes_forward + r.bytes_backward
        return {"flops_forward": r.flops_forward * r.repeat,
                "flops_backward": r.flops_backward * r.repeat,
                "param_bytes": r.param_bytes * r.repeat,
                "activation_bytes": r.activation_bytes * r.repeat,
                "bytes_total": total_bytes * r.repeat}

    def total(self) -> dict[str, float]:
        out = self.own()
        for child in self.children:
            for key, value in child.total().items():
                out[key] += value
        return out


def _tree(modules: tuple[ModuleRecord, ...]) -> _Node:
    nodes = {m.name: _Node(m.name, m) for m in modules}
    root = nodes.setdefault("", _Node("", None))
    for name in sorted(nodes, key=lambda n: n.count(".")):
        if name == "":
            continue
        parent = name.rpartition(".")[0] if "." in name else ""
        while parent not in nodes:  # a missing level: hang under the nearest known ancestor
            parent = parent.rpartition(".")[0] if "." in parent else ""
        nodes[parent].children.append(nodes[name])
    return root


def _row(node: _Node, values: dict[str, float], *, own_only: bool = False) -> dict:
    r = node.record
    label = node.name or "(model)"
    if own_only:
        label = f"{node.name} (own ops)" if node.name else "(model's own ops)"
    return {"module": label, "type": r.type if r else "", "repeat": r.repeat if r else 1,
            **values}


def _flops(values: dict[str, float]) -> float:
    return values["flops_forward"] + values["flops_backward"]


def module_breakdown(profile: ModelProfile, *, max_rows: int = 12,
                     expand_share: float = 0.5) -> pd.DataFrame:
    """FLOPs, parameter bytes and saved activations per module, summed over sub-modules.

    Starts from the model's direct children and keeps opening the module that holds more than
    ``expand_share`` of the step's FLOPs (e.g. the stack of transformer blocks) while the table
    stays within ``max_rows``. Rows of repeated blocks (``layers.*``) cover all blocks
    (``repeat`` says how many). A module's own ops (outside its children) get a row
    "<name> (own ops)".

    Parameters
    ----------
    profile : ModelProfile
    max_rows : int
        Largest number of rows to open up to.
    expand_share : float
        A module is opened when its FLOPs exceed this share of the total.

    Returns
    -------
    pandas.DataFrame
        Columns ``module, type, repeat, flops_forward, flops_backward, param_bytes,
        activation_bytes, bytes_total``, largest FLOPs first.
    """
    root = _tree(profile.modules)
    total_flops = _flops(root.total()) or 1.0
    rows: list[tuple[_Node, bool]] = [(root, False)]
    while True:
        candidates = [(n, own) for n, own in rows if not own and n.children]
        if not candidates:
            break
        node = max(candidates, key=lambda item: _flops(item[0].total()))[0]
        opened = [(c, False) for c in node.children]
        own = node.own()
        if _flops(own) > 0 or own["param_bytes"] > 0 or own["activation_bytes"] > 0:
            opened.append((node, True))
        share = _flops(node.total()) / total_flops
        too_many = len(rows) - 1 + len(opened) > max_rows
        if node is not root and (share <= expand_share or too_many):
            break
        rows = [item for item in rows if item[0] is not node] + opened
    table = [_row(n, n.own() if own else n.total(), own_only=own) for n, own in rows]
    frame = pd.DataFrame(table, columns=list(COLUMNS))
    frame["flops_total"] = frame["flops_forward"] + frame["flops_backward"]
    # Rows below 0.1 % of every total (e.g. a loss's 4-byte scalar) would be empty bars.
    keep = False
    for column in ("flops_total", "param_bytes", "activation_bytes"):
        total = frame[column].sum()
        keep = keep | (frame[column] >= MIN_SHARE * total) & (frame[column] > 0)
    frame = frame[keep]
    return frame.sort_values("flops_total", ascending=False, kind="stable").reset_index(drop=True)
