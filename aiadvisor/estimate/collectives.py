"""Alpha-beta times of collectives, overlap, and the pipeline bubble.

A ring collective over ``n`` devices moves ``BUS_FACTOR[kind](n) * size`` bytes through each
device's link (NCCL's "bus bandwidth" convention, ``nccl-tests/doc/PERFORMANCE.md``): an
all-reduce is a reduce-scatter plus an all-gather, ``2 (n - 1) / n``; an all-gather or a
reduce-scatter alone ``(n - 1) / n``; a point-to-point send moves the message once.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "send_recv")

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


def exposed_time_s(comm_s, window_s, *, overlap=0.8):
    """Communication time left on the critical path when it overlaps with compute.

    Up to ``overlap`` of the communication can hide under ``window_s`` of compute (DDP buckets
    all-reduce while backward runs; FSDP prefetches the next all-gather): the exposed part is
    ``max(comm - overlap * window, (1 - overlap) * comm)``, so at least the last bucket's share
    ``(1 - overlap) * comm`` is always paid.

    >>> round(exposed_time_s(10.0, 100.0), 6)   # fully hidden but the last 20 %
    2.0
    >>> exposed_time_s(100.0, 50.0)   # 100 - 0.8 * 50
    60.0
    """
    comm_s = np.asarray(comm_s, float)
    out = np.maximum(comm_s - overlap * np.asarray(window_s, float), (1.0 - overlap) * comm_s)
    return float(out) if np.ndim(out) == 0 else out


def bubble_fraction(pp_degree: int, num_microbatches: int) -> float:
    """Idle fraction of a 1F1B / GPipe pipeline step: ``(pp - 1) / (m + pp - 1)``.

    The step takes ``ideal / (1 - bubble)`` = ``ideal * (m + pp - 1) / m``.

    >>> bubble_fraction(4, 1)   # 3 / 4: one micro-batch keeps one stage of four busy
    0.75
    >>> bubble_fraction(4, 12)  # 3 / 15
    0.2
    """
    if pp_degree < 1 or num_microbatches < 1:
        raise InvalidArgumentError(
            f"pp_degree={pp_degree!r}, num_microbatches={num_microbatches!r} are not valid: "
            "expected integers >= 1."
        )
    return (pp_degree - 1) / (num_microbatches + pp_degree - 1)


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
