"""Alpha-beta times of collectives, overlap, and the pipeline bubble.

A ring collective over ``n`` devices moves ``BUS_FACTOR[kind](n) * size`` bytes through each
device's link (NCCL's "bus bandwidth" convention, ``nccl-tests/doc/PERFORMANCE.md``): an
all-reduce is a reduce-scatter plus an all-gather, ``2 (n - 1) / n``; an all-gather or a
reduce-scatter alone ``(n - 1) / n``; a point-to-point send moves the message once.

Across nodes (:func:`hierarchical_time_s`) a collective runs in two levels, as NCCL and Intel's
HCCL do: inside each NVLink-class domain over the device interconnect, and between domains over
the NICs, each device driving its own share of its node's NICs. The levels are pipelined (chunks
flow through both at once), so the slower level sets the time.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "send_recv")
#: PyTorch DDP's default gradient bucket (``bucket_cap_mb=25``): the last bucket's all-reduce
#: starts when backward ends, so it is always exposed.
DDP_BUCKET_BYTES = 25 * 1024**2

BUS_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "send_recv": lambda n: 1.0,
}


def collective_time_s(kind, size_bytes, *, num_devices, bus_bw_gbs, alpha_s):
    """Alpha-beta time of one collective: ``alpha + bus_factor(n) * size / bus_bw``.

    Parameters
    ----------
    kind : str
        One of :data:`COLLECTIVES`.
    size_bytes : float or array
        Message size per device (the buffer each rank passes in), bytes.
    num_devices : int
        Devices taking part; a collective over one device takes no time.
    bus_bw_gbs : float
        Achieved bus bandwidth per device, GB/s.
    alpha_s : float
        Fixed latency per call, seconds.

    Examples
    --------
    All-reduce of 1 GB over 8 devices at 100 GB/s bus bandwidth with 20 us latency:
    ``2 * 7 / 8 * 1e9 / 100e9 = 17.5 ms`` plus 0.02 ms:

    >>> round(collective_time_s("all_reduce", 1e9, num_devices=8, bus_bw_gbs=100,
    ...                         alpha_s=20e-6) * 1e3, 2)
    17.52
    """
    if kind not in BUS_FACTOR:
        raise InvalidArgumentError(
            f"kind={kind!r} is not valid: expected one of {', '.join(COLLECTIVES)}."
        )
    if num_devices <= 1:
        return 0.0 if np.ndim(size_bytes) == 0 else np.zeros(np.shape(size_bytes))
    out = alpha_s + (BUS_FACTOR[kind](num_devices) * np.asarray(size_bytes, float)
                     / (bus_bw_gbs * 1e9))
    return float(out) if np.ndim(out) == 0 else out


def _level_times(kind, size_bytes, num_devices, per_domain, intra_bus_bw_gbs, inter_bw_gbs):
    """(intra-domain seconds, inter-domain seconds) of one hierarchical collective."""
    n = np.asarray(num_devices, float)
    g = np.clip(np.asarray(per_domain, float), 1.0, n)
    k = np.ceil(n / g)
    size = np.asarray(size_bytes, float)
    if kind == "send_recv":
        crosses = k > 1
        return (np.where(crosses, 0.0, size / (intra_bus_bw_gbs * 1e9)),
                np.where(crosses, size / (inter_bw_gbs * 1e9), 0.0))
    factor = BUS_FACTOR[kind]
    # Intra: the whole buffer among the g devices of a domain. Inter: after the intra
    # reduce-scatter (or before the intra all-gather) each device holds 1/g of it and runs the
    # same collective with its peers in the other k - 1 domains.
    intra = np.where(g > 1, factor(np.maximum(g, 2)) * size / (intra_bus_bw_gbs * 1e9), 0.0)
    inter = np.where(k > 1, factor(np.maximum(k, 2)) * size / g / (inter_bw_gbs * 1e9), 0.0)
    return intra, inter


def hierarchical_time_s(kind, size_bytes, *, num_devices, per_domain, intra_bus_bw_gbs,
                        inter_bw_gbs, alpha_s, inter_latency_s=0.0):
    """Time of one collective over ``num_devices`` laid out ``per_domain`` to an NVLink-class
    domain: ``alpha + max(intra, inter)`` plus ``2 log2(k)`` fabric latencies across ``k``
    domains (NCCL's trees between nodes take ``log2 k`` hops up and down; a send, one).

    Parameters
    ----------
    kind : str
        One of :data:`COLLECTIVES`.
    size_bytes : float or array
        Message size per device, bytes.
    num_devices : int
        Devices in the group.
    per_domain : int or array
        Group members inside one domain (``num_devices`` when the group fits in one).
    intra_bus_bw_gbs, inter_bw_gbs : float or array
        Achieved bus bandwidth inside a domain, and achieved NIC bandwidth of one device across
        domains (node NIC line rate x efficiency / devices per node), GB/s.
    alpha_s, inter_latency_s : float
        Fixed latency per call, and per fabric hop between domains, seconds.

    Examples
    --------
    All-reduce of 1 GB over 2 nodes of 8 (16 devices), 100 GB/s inside a node, 20 GB/s per
    device across: intra ``2 * 7/8 * 1e9 / 100e9 = 17.5 ms``; inter ``2 * 1/2 * (1e9 / 8) /
    20e9 = 6.25 ms``; the slower level sets the time:

    >>> round(hierarchical_time_s("all_reduce", 1e9, num_devices=16, per_domain=8,
    ...                           intra_bus_bw_gbs=100, inter_bw_gbs=20, alpha_s=0) * 1e3, 2)
    17.5

    One device per node (tensor parallel fills the node): the whole ring crosses the NICs,
    ``2 * 15/16 * 1e9 / 20e9 = 93.75 ms``:

    >>> round(hierarchical_time_s("all_reduce", 1e9, num_devices=16, per_domain=1,
    ...                           intra_bus_bw_gbs=100, inter_bw_gbs=20, alpha_s=0) * 1e3, 2)
    93.75
    """
    if kind not in BUS_FACTOR:
        raise InvalidArgumentError(
            f"kind={kind!r} is not valid: expected one of {', '.join(COLLECTIVES)}."
        )
    if np.all(np.asarray(num_devices) <= 1):
        return 0.0 if np.ndim(size_bytes) == 0 else np.zeros(np.shape(size_bytes))
    intra, inter = _level_times(kind, size_bytes, num_devices, per_domain, intra_bus_bw_gbs,
                                inter_bw_gbs)
    k = np.ceil(np.asarray(num_devices, float) / np.clip(per_domain, 1, None))
    hops = np.where(k > 1, 2.0 * np.ceil(np.log2(np.maximum(k, 2))), 0.0)
    if kind == "send_recv":  # one message, one traversal of the fabric
        hops = np.where(k > 1, 1.0, 0.0)
    out = alpha_s + hops * inter_latency_s + np.maximum(intra, inter)
    return float(out) if np.ndim(out) == 0 else out


def exposed_time_s(comm_s, window_s, *, overlap=0.8, min_exposed_s=None):
    """Communication time left on the critical path when it overlaps with compute.

    Up to ``overlap`` of the communication can hide under ``window_s`` of compute (DDP buckets
    all-reduce while backward runs; FSDP prefetches the next all-gather): the exposed part is
    ``max(comm - overlap * window, floor)``. The floor is what cannot hide: ``min_exposed_s``
    when the caller knows it (the last DDP bucket's all-reduce after backward ends; FSDP's
    first all-gather, before any compute to hide behind, and its last reduce-scatter), else
    ``(1 - overlap) * comm``.

    >>> round(exposed_time_s(10.0, 100.0), 6)   # fully hidden but the last 20 %
    2.0
    >>> exposed_time_s(100.0, 50.0)   # 100 - 0.8 * 50
    60.0
    >>> exposed_time_s(10.0, 100.0, min_exposed_s=0.5)   # only the last bucket is paid
    0.5
    """
    comm_s = np.asarray(comm_s, float)
    floor = (1.0 - overlap) * comm_s if min_exposed_s is None else np.minimum(
        np.asarray(min_exposed_s, float), comm_s)
    out = np.maximum(comm_s - overlap * np.asarray(window_s, float), floor)
    return float(out) if np.ndim(out) == 0 else out


def bubble_fraction(pp_degree: int, num_microbatches: int, virtual_stages: int = 1) -> float:
    """Idle fraction of a 1F1B / GPipe pipeline step: ``(pp - 1) / (v m + pp - 1)``.

    The step takes ``ideal / (1 - bubble)`` = ``ideal * (1 + (pp - 1) / (v m))``. With ``v``
    virtual stages per device (Megatron-LM's interleaved 1F1B, Narayanan et al. 2021,
    sec. 2.2.2) each of the ``pp - 1`` fill/drain slots lasts one chunk of ``1 / v`` of a
    stage, so the bubble shrinks ``v``-fold; ``v = 1`` is plain 1F1B.

    >>> bubble_fraction(4, 1)   # 3 / 4: one micro-batch keeps one stage of four busy
    0.75
    >>> bubble_fraction(4, 12)  # 3 / 15
    0.2
    >>> bubble_fraction(4, 12, 2)  # 3 / 27: half the bubble time of plain 1F1B
    0.1111111111111111
    """
    if pp_degree < 1 or num_microbatches < 1 or virtual_stages < 1:
        raise InvalidArgumentError(
            f"pp_degree={pp_degree!r}, num_microbatches={num_microbatches!r}, "
            f"virtual_stages={virtual_stages!r} are not valid: expected integers >= 1."
        )
    return (pp_degree - 1) / (virtual_stages * num_microbatches + pp_degree - 1)


def stage_imbalance(block_s, first_s, last_s, *, pp_degree: int, num_blocks: int):
    """Slowest / average pipeline stage time under Megatron-LM's partition.

    Megatron-LM gives every stage the same number of transformer blocks (``num_blocks /
    pp``; when it does not divide, the first ``num_blocks % pp`` stages here take one more),
    puts the embedding on the first stage and the final norm, LM head and loss on the last.
    DeepSpeed's ``partition_method="type:transformer"`` partitions the same way; its default
    ``"parameters"`` (balance parameter counts, embeddings included) is not modelled. In 1F1B
    the slowest stage paces every slot, so the step is ``imbalance / (1 - bubble)`` times the
    average stage's busy time. ``block_s`` is the time of all blocks, ``first_s`` and
    ``last_s`` of the ops outside them (numbers or numpy arrays of one shape).

    >>> stage_imbalance(8.0, 0.0, 2.0, pp_degree=4, num_blocks=8)  # stages 2, 2, 2, 4 s
    1.6
    >>> stage_imbalance(8.0, 1.0, 1.0, pp_degree=1, num_blocks=8)
    1.0
    """
    if pp_degree < 1 or num_blocks < 0:
        raise InvalidArgumentError(
            f"pp_degree={pp_degree!r}, num_blocks={num_blocks!r} are not valid: expected "
            "pp_degree >= 1 and num_blocks >= 0."
        )
    block_s, first_s, last_s = (np.asarray(x, float) for x in (block_s, first_s, last_s))
    if pp_degree == 1 or num_blocks == 0:
        return _scalar(np.ones(np.broadcast(block_s, first_s, last_s).shape))
    base, extra = divmod(num_blocks, pp_degree)
    share = block_s / num_blocks
    first = (base + (extra > 0)) * share + first_s
    last = (base + (pp_degree - 1 < extra)) * share + last_s
    slowest = np.maximum(first, last)
    if pp_degree > 2:  # stage 1 holds the most blocks of the middle stages
        slowest = np.maximum(slowest, (base + (1 < extra)) * share)
    mean = (block_s + first_s + last_s) / pp_degree
    return _scalar(np.where(mean > 0, slowest / np.where(mean > 0, mean, 1.0), 1.0))


def _scalar(values: np.ndarray):
    """A 0-d array as a float, others unchanged."""
    return float(values) if values.ndim == 0 else values


#: Fixed latency of one all-to-all call (NCCL's grouped send/recv), seconds: an assumed figure
#: of the same order as the fitted all-reduce latency, not fitted to measurements.
ALL_TO_ALL_ALPHA_S = 25e-6


def all_to_all_time_s(size_bytes, ranks, intra_bw, inter_bw, ranks_per_node, *,
                      alpha_s=ALL_TO_ALL_ALPHA_S):
    """Time of one all-to-all (MoE token dispatch or combine) over ``ranks`` devices.

    Each rank holds a send buffer of ``size_bytes`` split evenly over the ``ranks``
    destinations (balanced routing); the share addressed to itself never leaves the device.
    Of the rest, ``(ranks_per_node - 1) / ranks`` of the buffer goes to ranks in the same node
    over the intra-node links and ``(ranks - ranks_per_node) / ranks`` to other nodes over
    the NICs. Both kinds of transfer run at the same time, so the slower one sets the time:
    ``alpha + max(intra_bytes / intra_bw, inter_bytes / inter_bw)``.

    Parameters
    ----------
    size_bytes : float
        Send buffer per rank (tokens x hidden x bytes per element x top_k for a dispatch).
    ranks : int
        Devices in the expert-parallel group; one rank sends nothing.
    intra_bw : float
        Per-direction intra-node bandwidth of one device (NVLink, xGMI), GB/s.
    inter_bw : float
        Per-direction NIC bandwidth of one device across nodes, GB/s (the node's NIC
        bandwidth over its devices).
    ranks_per_node : int
        Ranks of the group inside one node (the group's size when it fits in a node).
    alpha_s : float
        Fixed latency per call, seconds.

    Examples
    --------
    64 MB per rank over 64 ranks, 8 per node, 450 GB/s NVLink and 50 GB/s of NIC per device:
    inside the node 64e6 x 7/64 = 7 MB take 15.6 us, across nodes 64e6 x 56/64 = 56 MB take
    1.12 ms, plus 25 us:

    >>> round(all_to_all_time_s(64e6, 64, 450, 50, 8) * 1e3, 3)
    1.145
    >>> all_to_all_time_s(64e6, 1, 450, 50, 8)
    0.0
    """
    if ranks <= 1:
        return 0.0
    if ranks_per_node < 1 or intra_bw <= 0 or inter_bw <= 0:
        raise InvalidArgumentError(
            f"ranks_per_node={ranks_per_node!r}, intra_bw={intra_bw!r}, inter_bw={inter_bw!r} "
            "are not valid: expected ranks_per_node >= 1 and bandwidths > 0 GB/s.")
    local = min(ranks_per_node, ranks)
    intra_bytes = size_bytes * (local - 1) / ranks
    inter_bytes = size_bytes * (ranks - local) / ranks
    return alpha_s + max(intra_bytes / (intra_bw * 1e9), inter_bytes / (inter_bw * 1e9))
