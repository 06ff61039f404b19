"""Turning a purchase price into a cost per hour of use, so bought and rented devices compare.

The rule (all inputs user-changeable)::

    $/h = usd_purchase / (years * 8760 h * utilisation) + tdp_w / 1000 * usd_per_kwh

The first term spreads the purchase over the hours the device is actually busy; the second is
the electricity of one busy hour at the device's TDP (an upper bound: TDP is the sustained
board limit). Resale value, cooling, the host machine and staff are left out.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import InvalidArgumentError

__all__ = ["DEFAULT_USD_PER_KWH", "DEFAULT_UTILISATION", "DEFAULT_YEARS", "hourly_cost"]

#: Depreciation period: 3 years is the usual straight-line life of IT hardware.
DEFAULT_YEARS = 3.0
#: Share of wall-clock hours the device is busy (an assumption: a workstation used half the time).
DEFAULT_UTILISATION = 0.5
#: Electricity price, USD per kWh (an assumption near the US residential average; change it).
DEFAULT_USD_PER_KWH = 0.15

_HOURS_PER_YEAR = 8760.0  # 365 * 24


def _positive(name: str, value: Any, *, upper: float | None = None, zero_ok: bool = False
              ) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    low_ok = number >= 0 if zero_ok else number > 0
    if not (math.isfinite(number) and low_ok and (upper is None or number <= upper)):
        bound = f" and at most {upper:g}" if upper is not None else ""
        sign = "non-negative" if zero_ok else "positive"
        raise InvalidArgumentError(
            f"{name}={value!r} is not valid: expected a {sign} finite number{bound}."
        )
    return number


def hourly_cost(spec: Any, *, years: float = DEFAULT_YEARS,
                utilisation: float = DEFAULT_UTILISATION,
                usd_per_kwh: float = DEFAULT_USD_PER_KWH) -> float | None:
    """Cost of one busy hour of a device, USD: its rental price, else its amortised purchase.

    Parameters
    ----------
    spec : HardwareSpec or mapping
        Anything with ``usd_per_hour``, ``usd_purchase`` and ``tdp_w`` (a catalog row works).
    years : float, default 3
        Period over which the purchase is written off.
    utilisation : float, default 0.5
        Fraction of all hours in ``years`` that the device is busy, in (0, 1].
    usd_per_kwh : float, default 0.15
        Electricity price; 0 leaves power out. An unknown ``tdp_w`` also leaves it out.

    Returns
    -------
    float or None
        ``usd_per_hour`` when the device can be rented, else the amortised purchase price plus
        power; None when it has neither price.

    Raises
    ------
    InvalidArgumentError
        ``years`` or ``usd_per_kwh`` is negative or not finite, or ``utilisation`` is not in
        (0, 1].

    Examples
    --------
    >>> round(hourly_cost({"usd_purchase": 1599, "tdp_w": 450}), 3)  # RTX 4090
    0.189
    """
    years = _positive("years", years)
    utilisation = _positive("utilisation", utilisation, upper=1.0)
    usd_per_kwh = _positive("usd_per_kwh", usd_per_kwh, zero_ok=True)
    get = spec.get if hasattr(spec, "get") else lambda key, default=None: getattr(
        spec, key, default)

    def value(key: str) -> float | None:
        raw = get(key, None)
        if raw is None or (isinstance(raw, float) and math.isnan(raw)):
            return None
        return float(raw)

    rent = value("usd_per_hour")
    if rent is not None:
        return rent
    purchase = value("usd_purchase")
    if purchase is None:
        return None
    power_w = value("tdp_w") or 0.0
    return purchase / (years * _HOURS_PER_YEAR * utilisation) + power_w / 1000.0 * usd_per_kwh
