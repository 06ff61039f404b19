"""Cluster networks: the fabric table, each device's default node, and the network a prediction
assumes.

Two shipped tables (``data/fabrics.csv``, ``data/node_configs.csv``; in the wheel under
``aiadvisor/_data``), each row with its source:

- a *fabric* is a link technology: line rate per link (Gb/s), latency per message and the share
  of line rate NCCL-style collectives reach on large messages (``efficiency``);
- a *node config* is how a device is usually built into servers: devices per node, NICs per
  node x Gb/s, the default fabric, and the NVLink-class domain (devices that reach each other at
  the device's own interconnect figure: 8 in a DGX, 72 in a GB200 NVL72 rack, a whole TPU pod).
  ``basis`` says whether it comes from a datasheet, a cloud instance type, or is assumed.

:func:`network_for` turns a device (plus the user's ``fabric=`` / ``node_size=``) into a
:class:`Network`, which the cost model uses for hierarchical collectives: inside the domain over
the device interconnect, across nodes over ``nics x gbps x efficiency`` per node.

>>> net = network_for(get_spec("NVIDIA H100 SXM"))
>>> net.fabric, net.node_size, net.node_gbps, round(net.nic_gbs_per_device, 1)
('InfiniBand NDR 400G', 8, 3200.0, 46.0)
"""

from __future__ import annotations

import csv
import functools
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import (
    HardwareCatalogError,
    InvalidFabricError,
    NodeLayoutError,
    UnknownFabricError,
    close_matches,
)
from ..schema import HardwareSpec

__all__ = [
    "FABRIC_KINDS",
    "Fabric",
    "Network",
    "NodeConfig",
    "default_node",
    "fabric_from_text",
    "fabrics",
    "get_fabric",
    "is_datacenter",
    "network_for",
    "node_configs",
]

FABRIC_KINDS = ("infiniband", "roce", "efa", "tcpx", "ethernet", "slingshot", "nvlink", "ici",
                "dcn")
_BASES = ("datasheet", "cloud", "assumed")
#: Network.basis: a node row's basis, or the fabric was named / its figures given by the user.
NETWORK_BASES = (*_BASES, "named", "user")
#: Keys a user-given fabric dict may carry.
USER_FABRIC_KEYS = ("gbps", "latency_us", "efficiency", "name")
#: Efficiency assumed for a user-given fabric without one: the RoCE figure of the table
#: (between InfiniBand's 0.92 and EFA's 0.75), said so in the network's description.
USER_DEFAULT_EFFICIENCY = 0.8
USER_DEFAULT_LATENCY_US = 5.0
#: Devices with no node row (consumer and workstation GPUs, CPUs, the attached device):
#: one 100 GbE port per node of 8 (accelerators) or 1 (CPUs, edge), assumed.
_FALLBACK_FABRIC = "Ethernet 100GbE"
#: Catalog rows that are not datacenter accelerators although their kind is gpu/tpu/npu.
_NOT_DATACENTER = re.compile(r"geforce|\brtx\b|dgx spark|apple|jetson", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class Fabric:
    """One link technology of ``data/fabrics.csv``."""

    name: str
    kind: str
    gbps: float
    """Line rate of one link (one NIC port), Gb/s, one direction."""
    links_per_device: float = 1.0
    """Links per device where the fabric comes with a fixed build (a p5's 32 EFA cards for 8
    GPUs: 4; a Gaudi's 3 scale-out ports: 3); 1 for fabrics bought per NIC."""
    latency_us: float
    """Latency of one message over the fabric (approximate; see the row's notes)."""
    efficiency: float
    """Share of line rate that collectives reach on large messages, (0, 1]."""
    aliases: tuple[str, ...] = ()
    source: str = ""
    notes: str = ""


@dataclass(frozen=True, kw_only=True)
class NodeConfig:
    """How one catalog device is usually built into nodes (``data/node_configs.csv``)."""

    device: str
    node_size: int
    """Devices per node (server, compute tray or TPU host)."""
    nics_per_node: int
    nic_gbps: float
    fabric: str
    nvlink_domain: int
    """Devices joined by NVLink-class links (NVLink, xGMI, ICI, NeuronLink)."""
    basis: str
    """datasheet, cloud (an instance type) or assumed."""
    source: str = ""


@dataclass(frozen=True, kw_only=True)
class Network:
    """The cluster a multi-device prediction assumes."""

    fabric: str
    """Name of the scale-out fabric (or ``"user"`` for given figures)."""
    node_size: int
    """Devices per node; they share the node's NICs."""
    scaleup_size: int
    """Devices that reach each other at the device interconnect figure (>= node_size)."""
    node_gbps: float
    """Scale-out line rate per node: NICs x Gb/s."""
    efficiency: float
    latency_us: float
    basis: str
    """datasheet, cloud, assumed, or user."""
    node_size_pinned: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        if not (self.node_gbps > 0 and math.isfinite(self.node_gbps)):
            raise InvalidFabricError(
                f"node_gbps={self.node_gbps!r} is not valid: expected a bandwidth > 0 Gb/s.")
        if not 0 < self.efficiency <= 1:
            raise InvalidFabricError(
                f"efficiency={self.efficiency!r} is not valid: expected a share in (0, 1].")
        if self.node_size < 1 or self.scaleup_size < self.node_size:
            raise InvalidFabricError(
                f"node_size={self.node_size!r}, scaleup_size={self.scaleup_size!r} are not "
                "valid: expected node_size >= 1 and scaleup_size >= node_size.")

    @property
    def nic_gbs_per_device(self) -> float:
        """Achieved scale-out bandwidth of one device, GB/s per direction:
        ``node_gbps x efficiency / 8 bits / node_size`` (each device drives its share of NICs,
        as NCCL does on rail-optimised clusters)."""
        return self.node_gbps * self.efficiency / 8.0 / self.node_size

    def num_nodes(self, num_devices: int) -> int:
        return max(1, math.ceil(num_devices / self.node_size))

    def describe(self, num_devices: int | None = None) -> str:
        """One line for reports: which network was assumed and how sure that is."""
        where = ""
        if num_devices is not None:
            nodes = self.num_nodes(num_devices)
            where = f"{num_devices} devices = {nodes} node{'s' if nodes > 1 else ''} of " \
                    f"{self.node_size}; "
        domain = (f", NVLink-class domain of {self.scaleup_size}"
                  if self.scaleup_size > self.node_size else "")
        basis = {"datasheet": "from the reference system's datasheet",
                 "cloud": "as the cloud instance type is built",
                 "assumed": "an assumed typical build (estimated)",
                 "named": "the fabric you named, its links per device as listed",
                 "user": "figures you gave"}[self.basis]
        return (f"Network assumed: {where}{self.fabric}, {self.node_gbps:.0f} Gb/s per node "
                f"at {self.efficiency:.0%} efficiency = {self.nic_gbs_per_device:.1f} GB/s per "
                f"device across nodes, {self.latency_us:g} us latency{domain} ({basis}; "
                "pick another with fabric=... / node_size=...).")


# -- the tables ------------------------------------------------------------------------------

def _data_path(filename: str) -> Path:
    """The shipped table: inside the wheel, else ``<repo>/data/<filename>``."""
    from importlib.resources import files

    packaged = files("aiadvisor").joinpath("_data", filename)
    if packaged.is_file():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "data" / filename


def _read(filename: str) -> list[dict[str, str]]:
    path = _data_path(filename)
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return [{k.strip(): (v or "").strip() for k, v in row.items()}
                    for row in csv.DictReader(handle)]
    except OSError as exc:
        raise HardwareCatalogError(f"{filename} ({path}) cannot be read: {exc}.") from exc


def _number(row: dict[str, str], column: str, filename: str, *, integer: bool = False,
            positive: bool = True) -> float:
    text = row.get(column, "")
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or (value <= 0 if positive else value < 0):
        kind = "an integer" if integer else "a number"
        raise HardwareCatalogError(
            f"{filename}, row {row.get('name') or row.get('device')!r}, column {column!r}: value "
            f"{text!r} is not valid: expected {kind} {'> 0' if positive else '>= 0'}.")
    return value


@functools.lru_cache(maxsize=1)
def fabrics() -> tuple[Fabric, ...]:
    """Every row of ``data/fabrics.csv``, validated."""
    out = []
    for row in _read("fabrics.csv"):
        if row["kind"] not in FABRIC_KINDS:
            raise HardwareCatalogError(
                f"fabrics.csv, row {row['name']!r}, column 'kind': value {row['kind']!r} is not "
                f"valid: expected one of {', '.join(FABRIC_KINDS)}.")
        efficiency = _number(row, "efficiency", "fabrics.csv")
        if efficiency > 1 or not row["source"]:
            raise HardwareCatalogError(
                f"fabrics.csv, row {row['name']!r}: expected an efficiency in (0, 1] and a "
                f"source (got {efficiency!r}, {row['source']!r}).")
        out.append(Fabric(
            name=row["name"], kind=row["kind"], gbps=_number(row, "gbps", "fabrics.csv"),
            links_per_device=_number(row, "links_per_device", "fabrics.csv"),
            latency_us=_number(row, "latency_us", "fabrics.csv", positive=False),
            efficiency=efficiency,
            aliases=tuple(a.strip() for a in row.get("aliases", "").split(";") if a.strip()),
            source=row["source"], notes=row.get("notes", "")))
    return tuple(out)


@functools.lru_cache(maxsize=1)
def node_configs() -> dict[str, NodeConfig]:
    """Every row of ``data/node_configs.csv`` by lower-case device name, validated."""
    names = {f.name for f in fabrics()}
    out = {}
    for row in _read("node_configs.csv"):
        if row["fabric"] not in names or row["basis"] not in _BASES or not row["source"]:
            raise HardwareCatalogError(
                f"node_configs.csv, row {row['device']!r}: expected a fabric named in "
                f"fabrics.csv, a basis in {_BASES} and a source (got {row['fabric']!r}, "
                f"{row['basis']!r}, {row['source']!r}).")
        out[row["device"].lower()] = NodeConfig(
            device=row["device"],
            node_size=int(_number(row, "node_size", "node_configs.csv", integer=True)),
            nics_per_node=int(_number(row, "nics_per_node", "node_configs.csv", integer=True)),
            nic_gbps=_number(row, "nic_gbps", "node_configs.csv"), fabric=row["fabric"],
            nvlink_domain=int(_number(row, "nvlink_domain", "node_configs.csv", integer=True)),
            basis=row["basis"], source=row["source"])
    return out


def get_fabric(name: str) -> Fabric:
    """The fabric called ``name`` (its name or an alias, case-insensitive).

    >>> get_fabric("ndr").gbps
    400.0

    Raises
    ------
    UnknownFabricError
        Naming the closest fabrics and every choice.
    """
    key = str(name).strip().lower()
    for fabric in fabrics():
        if key == fabric.name.lower() or key in (a.lower() for a in fabric.aliases):
            return fabric
    choices = [f.name for f in fabrics()]
    hint = close_matches(str(name), choices + [a for f in fabrics() for a in f.aliases], n=3)
    fix = f" Did you mean {' or '.join(map(repr, hint))}?" if hint else ""
    raise UnknownFabricError(
        f"fabric={name!r} is not a known fabric: expected one of {', '.join(map(repr, choices))}"
        f", or a dict such as {{'gbps': 400, 'latency_us': 2}} (Gb/s per device).{fix}")


def is_datacenter(spec: HardwareSpec) -> bool:
    """Accelerators built into clusters: GPUs, TPUs and NPUs other than consumer, workstation,
    desktop and edge parts. Each has a row in ``data/node_configs.csv``."""
    if spec.kind not in ("gpu", "tpu", "npu"):
        return False
    segment = getattr(spec, "segment", None)
    if segment:
        return segment == "datacenter"
    return not _NOT_DATACENTER.search(spec.name)


def default_node(spec: HardwareSpec) -> NodeConfig:
    """The node row of ``spec``, or an assumed one (8 devices and one 100 GbE port; 1 device for
    CPUs and edge devices) when the device has none."""
    row = node_configs().get(spec.name.lower())
    if row is not None:
        return row
    size = 1 if spec.kind in ("cpu", "edge") else 8
    return NodeConfig(device=spec.name, node_size=size, nics_per_node=1, nic_gbps=100.0,
                      fabric=_FALLBACK_FABRIC, nvlink_domain=1, basis="assumed",
                      source="no node row for this device: one 100 GbE port per node assumed")


# -- the network of one prediction -----------------------------------------------------------

def _check_node_size(node_size: Any) -> int:
    if isinstance(node_size, bool) or not isinstance(node_size, int) or node_size < 1:
        raise NodeLayoutError(
            f"node_size={node_size!r} is not valid: expected an integer >= 1 (devices per "
            "node, e.g. 8 for a DGX/HGX server, 4 for a GB200 compute tray).")
    return node_size


def _user_fabric(fabric: dict, node: NodeConfig, node_size: int) -> Network:
    unknown = sorted(set(fabric) - set(USER_FABRIC_KEYS))
    if unknown:
        raise InvalidFabricError(
            f"fabric has unknown key(s) {', '.join(map(repr, unknown))}: expected "
            f"{', '.join(map(repr, USER_FABRIC_KEYS))} ('gbps' = NIC Gb/s per device).")
    values = {}
    for key, default, low_ok in (("gbps", None, False), ("latency_us", USER_DEFAULT_LATENCY_US,
                                                          True),
                                 ("efficiency", USER_DEFAULT_EFFICIENCY, False)):
        value = fabric.get(key, default)
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and math.isfinite(value) and (value >= 0 if low_ok else value > 0)
              and (key != "efficiency" or value <= 1))
        if not ok:
            expected = {"gbps": "a NIC bandwidth per device > 0 Gb/s (e.g. 400 for one "
                                "NDR port per GPU; a p5's 3200 Gb/s per 8 GPUs is 400)",
                        "latency_us": "a latency >= 0 microseconds",
                        "efficiency": "a share of line rate in (0, 1]"}[key]
            raise InvalidFabricError(f"fabric[{key!r}]={value!r} is not valid: expected "
                                     f"{expected}.")
        values[key] = float(value)
    assumed = [k for k in ("latency_us", "efficiency") if k not in fabric]
    name = str(fabric.get("name") or f"user fabric {values['gbps']:g} Gb/s per device")
    if assumed:
        name += f" ({' and '.join(assumed)} assumed)"
    return Network(fabric=name, node_size=node_size,
                   scaleup_size=max(node_size, node.nvlink_domain),
                   node_gbps=values["gbps"] * node_size, efficiency=values["efficiency"],
                   latency_us=values["latency_us"], basis="user", source="given by the user")


def network_for(spec: HardwareSpec, *, fabric: str | dict | Network | None = None,
                node_size: int | None = None, num_devices: int | None = None) -> Network:
    """The network that ``num_devices`` of ``spec`` are assumed to sit on.

    Parameters
    ----------
    spec : HardwareSpec
    fabric : str, dict or Network, optional
        A fabric name or alias from ``data/fabrics.csv`` (its per-link rate times its links
        per device; the device's default fabric keeps the node row's NIC count);
        a dict ``{"gbps": NIC Gb/s per device, "latency_us": ..., "efficiency": ...}``; or a
        ready Network. Default: the device's node row.
    node_size : int, optional
        Devices per node. When given, ``num_devices`` must fill whole nodes; it also bounds the
        NVLink-class domain unless the device's domain spans nodes (NVL72, TPU pods).
    num_devices : int, optional
        Checked against a pinned ``node_size``.

    Raises
    ------
    UnknownFabricError, InvalidFabricError, NodeLayoutError
    """
    node = default_node(spec)
    pinned = node_size is not None
    size = _check_node_size(node_size) if pinned else node.node_size
    if isinstance(fabric, Network):
        net = replace(fabric, node_size=size, scaleup_size=max(size, fabric.scaleup_size),
                      node_size_pinned=pinned) if pinned else fabric
    elif isinstance(fabric, dict):
        net = replace(_user_fabric(fabric, node, size), node_size_pinned=pinned)
    elif fabric is None or get_fabric(fabric).name == node.fabric:
        link = get_fabric(node.fabric)
        # A pinned node size keeps the row's NICs per device.
        nics = node.nics_per_node * size / node.node_size
        net = Network(fabric=link.name, node_size=size,
                      scaleup_size=max(size, node.nvlink_domain if node.nvlink_domain >
                                       node.node_size else size),
                      node_gbps=nics * node.nic_gbps, efficiency=link.efficiency,
                      latency_us=link.latency_us, basis=node.basis,
                      node_size_pinned=pinned, source=node.source)
    else:
        link = get_fabric(fabric)
        if link.kind in ("nvlink", "ici"):
            raise InvalidFabricError(
                f"fabric={fabric!r} is a scale-up fabric (NVLink-class), not a network between "
                "nodes: pick a scale-out fabric (InfiniBand, RoCE, EFA, Ethernet, ...) and the "
                "domain size with node_size=..., e.g. node_size=72 for an NVL72 rack.")
        net = Network(fabric=link.name, node_size=size,
                      scaleup_size=max(size, node.nvlink_domain if node.nvlink_domain >
                                       node.node_size else size),
                      node_gbps=size * link.links_per_device * link.gbps,
                      efficiency=link.efficiency, latency_us=link.latency_us, basis="named",
                      node_size_pinned=pinned,
                      source=f"{link.source}; {link.links_per_device:g} x {link.gbps:g} Gb/s "
                             "per device")
    if pinned and num_devices is not None and num_devices > size and num_devices % size:
        raise NodeLayoutError(
            f"num_devices={num_devices} does not fill whole nodes of node_size={size}: expected "
            f"a multiple of {size} (e.g. {num_devices // size * size} or "
            f"{(num_devices // size + 1) * size}), or leave node_size out.")
    return net


def fabric_from_text(text: str) -> str | dict:
    """A ``--fabric`` value of the magic or the CLI: a number is NIC Gb/s per device
    (``"400"`` -> ``{"gbps": 400.0}``), anything else a fabric name (checked later).

    >>> fabric_from_text("400"), fabric_from_text("RoCE 400G")
    ({'gbps': 400.0}, 'RoCE 400G')
    """
    try:
        return {"gbps": float(text)}
    except ValueError:
        return text


def get_spec(name: str) -> HardwareSpec:
    """Catalog lookup (for the doctest above)."""
    from .lookup import get

    return get(name)
