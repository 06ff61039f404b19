"""A per-device correction of the cost model from the measurement store.

For a benchmarked device (``hardware="local"``), the records of that device (same
``kind/name``, same aiadvisor version: another version's cost model made other predictions)
give log-ratios ``r_i = ln(measured_i / predicted_i)``, ``n`` of them. The prior is ``n0``
pseudo-records at ratio 1 with the spread ``sigma0`` of calibrated predictions (see below),
so that one lucky or unlucky measurement moves the prediction only part of the way:

    mu      = sum(r_i) / (n + n0)                      posterior mean of the log-factor
    factor  = exp(mu)                                  multiplies every time of the prediction
    s^2     = (n0 * sigma0^2 + sum((r_i - mu)^2)) / (n + n0)

``s`` is the spread of the log-ratio the evidence supports: ``sigma0`` with no records, then
the records' own spread around ``mu`` as they accumulate. The prediction's P10-P90 band is
rescaled in log space by ``k = s / sigma0`` around the corrected point (its asymmetry kept):
``low' = step' * (low / step)^k``, likewise ``high'``. Consistent records narrow it (for ratios
all equal to ``r``, ``s^2 = (n0 sigma0^2 + n (n0 r / (n + n0))^2) / (n + n0)`` falls like
``1 / n``); scattered ones widen it.

Example: 4 records at ratio 1.2 with n0 = 2: mu = 4 ln 1.2 / 6, factor = 1.2^(2/3) = 1.129.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from .measurements import Measurement, device_key, store_path

__all__ = ["PRIOR_RECORDS", "PRIOR_SIGMA", "Correction", "correction_for", "enabled",
           "from_records"]

#: Pseudo-records at ratio 1 the evidence is weighed against.
PRIOR_RECORDS = 2.0
#: Prior spread of ln(measured / predicted) on a calibrated device: the development CPU's
#: calibrated FP32 predictions were 7-13 % off on average (bench/costmodel_local_cpu.py), a
#: mean |log error| near 0.1, i.e. a normal spread near 0.12; 0.15 leaves room for other
#: devices (an assumption, not a measurement of yours).
PRIOR_SIGMA = 0.15


@dataclass(frozen=True)
class Correction:
    """The multiplicative correction of one device's predictions."""

    factor: float
    """exp(mu): measured / predicted step time the records support."""
    num_records: int
    band_scale: float
    """k = s / sigma0: the P10-P90 band's log-width is multiplied by this."""

    def note(self) -> str:
        plural = "measurement" if self.num_records == 1 else "measurements"
        return (f"corrected by {self.num_records} {plural} on this device (x{self.factor:.2f}; "
                f"the likely range scaled x{self.band_scale:.2f} by their spread and count): "
                "aa.verify records them; AIADVISOR_MEASURED_CORRECTION=0 or "
                "predict(..., correction=False) turns this off.")

    def apply(self, step_s: float, low_s: float, high_s: float) -> tuple[float, float, float]:
        """(step, low, high) corrected: the point times the factor, the band rescaled."""
        new = step_s * self.factor
        if step_s <= 0 or low_s <= 0:  # no band to rescale in log space
            return new, low_s * self.factor, high_s * self.factor
        k = self.band_scale
        low, high = new * (low_s / step_s) ** k, new * (high_s / step_s) ** k
        return new, min(low, new), max(high, new)


def from_records(ratios: Sequence[float], *, n0: float = PRIOR_RECORDS,
                 sigma0: float = PRIOR_SIGMA) -> Correction | None:
    """The correction for measured / predicted ``ratios`` (None when there are none)."""
    logs = [math.log(r) for r in ratios if r > 0 and math.isfinite(r)]
    if not logs:
        return None
    n = len(logs)
    mu = sum(logs) / (n + n0)
    s2 = (n0 * sigma0**2 + sum((r - mu) ** 2 for r in logs)) / (n + n0)
    return Correction(factor=math.exp(mu), num_records=n, band_scale=math.sqrt(s2) / sigma0)


def enabled() -> bool:
    """False when ``$AIADVISOR_MEASURED_CORRECTION`` is ``0``, ``off``, ``false`` or ``no``."""
    value = os.environ.get("AIADVISOR_MEASURED_CORRECTION", "").strip().lower()
    return value not in ("0", "off", "false", "no")


_LOCK = threading.Lock()
#: str(path) -> ((inode, mtime_ns, size), {device key: Correction or None}): planners predict
#: hundreds of times per report, and a stat is all a prediction costs while the file is the same
#: (an append renames a new file over it: another inode, a larger size).
_CACHE: dict[str, tuple[tuple[int, int, int], dict[str, Correction | None]]] = {}


def _ratios(records: list[Measurement], key: str) -> list[float]:
    from .. import __version__

    return [r.ratio for r in records
            if r.device_key == key and r.aiadvisor_version == __version__]


def correction_for(kind: str, name: str, *, path: str | os.PathLike | None = None
                   ) -> Correction | None:
    """The correction of device ``kind/name`` from the store (None: no records, or off)."""
    if not enabled():
        return None
    from .measurements import load

    file = store_path(path)
    try:
        stat = file.stat()
    except OSError:
        return None
    stamp, key = (stat.st_ino, stat.st_mtime_ns, stat.st_size), device_key(kind, name)
    with _LOCK:
        hit = _CACHE.get(str(file))
        if hit is not None and hit[0] == stamp and key in hit[1]:
            return hit[1][key]
    fix = from_records(_ratios(load(file), key))
    with _LOCK:
        hit = _CACHE.get(str(file))
        by_key = hit[1] if hit is not None and hit[0] == stamp else {}
        by_key[key] = fix
        _CACHE[str(file)] = (stamp, by_key)
    return fix
