"""Turning a purchase price into a cost per hour of use, so bought and rented devices compare.

The rule (all inputs user-changeable)::

    $/h = usd_purchase / (years * 8760 h * utilisation) + tdp_w / 1000 * usd_per_kwh

The first term spreads the purchase over the hours the device is actually busy; the second is
the electricity of one busy hour at the device's TDP (an upper bound: TDP is the sustained
board limit). Resale value, cooling, the host machine and staff are left out.

:class:`PriceRule` holds the assumptions and the choice between renting and owning (a device
priced both ways costs its rental price when renting, its amortised purchase when owning);
``aiadvisor.advise(..., price=...)`` and ``%config Advisor.price_*`` pass one to the hardware
ranking, whose ``price_basis`` column says which price each row used and when it was read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError, check_choice

__all__ = ["DEFAULT_USD_PER_KWH", "DEFAULT_UTILISATION", "DEFAULT_YEARS", "PRICE_BASES",
           "PriceQuote", "PriceRule", "hourly_cost"]

#: Depreciation period: 3 years is the usual straight-line life of IT hardware.
DEFAULT_YEARS = 3.0
#: Share of wall-clock hours the device is busy (an assumption: a workstation used half the time).
DEFAULT_UTILISATION = 0.5
#: Electricity price, USD per kWh (an assumption near the US residential average; change it).
DEFAULT_USD_PER_KWH = 0.15

#: ``rent``: a device's rental price where it has one, else its amortised purchase; ``own``:
#: the amortised purchase where it has one, else the rental price.
PRICE_BASES = ("rent", "own")

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
                usd_per_kwh: float = DEFAULT_USD_PER_KWH, basis: str = "rent") -> float | None:
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
    basis : {"rent", "own"}, default "rent"
        Which price a device priced both ways uses (see :data:`PRICE_BASES`).

    Returns
    -------
    float or None
        With ``basis="rent"``: ``usd_per_hour`` when the device can be rented, else the
        amortised purchase price plus power; ``"own"`` prefers the purchase. None when it has
        neither price.

    Raises
    ------
    InvalidArgumentError
        ``years`` or ``usd_per_kwh`` is negative or not finite, ``utilisation`` is not in
        (0, 1], or ``basis`` is not one of :data:`PRICE_BASES`.

    Examples
    --------
    >>> round(hourly_cost({"usd_purchase": 1599, "tdp_w": 450}), 3)  # RTX 4090
    0.189
    """
    rule = PriceRule(basis=basis, years=years, utilisation=utilisation, usd_per_kwh=usd_per_kwh)
    quote = rule.quote(spec)
    return None if quote is None else quote.usd_per_hour


def _getter(spec: Any):
    get = spec.get if hasattr(spec, "get") else lambda key, default=None: getattr(
        spec, key, default)

    def value(key: str) -> Any:
        raw = get(key, None)
        if raw is None or (isinstance(raw, float) and math.isnan(raw)):
            return None
        return raw
    return value


@dataclass(frozen=True, kw_only=True)
class PriceQuote:
    """The cost of one busy device-hour and how it was reached."""

    usd_per_hour: float
    basis: str
    """``"rent"`` (a rental price) or ``"own"`` (an amortised purchase)."""
    price_date: str | None
    """When the catalog price was read or published (``YYYY-MM``), None if unknown."""
    text: str
    """One line for the report, e.g. ``"rent 3.78 $/h (Lambda 1x H100 SXM ..., 2026-05)"``."""


@dataclass(frozen=True, kw_only=True)
class PriceRule:
    """How a device's cost per busy hour is worked out: rent or own, and the amortisation.

    Examples
    --------
    >>> rule = PriceRule(basis="own", years=5, utilisation=1.0, usd_per_kwh=0)
    >>> round(rule.quote({"usd_purchase": 1599, "tdp_w": 450}).usd_per_hour, 4)  # 1599 / 43800
    0.0365
    """

    basis: str = "rent"
    """``"rent"`` or ``"own"`` (:data:`PRICE_BASES`): which price a device priced both ways
    uses; a device with only one kind of price always uses that one."""
    years: float = DEFAULT_YEARS
    """Years over which a purchase is written off."""
    utilisation: float = DEFAULT_UTILISATION
    """Share of all hours in ``years`` that the device is busy, in (0, 1]."""
    usd_per_kwh: float = DEFAULT_USD_PER_KWH
    """Electricity price for owned devices (0 leaves power out)."""

    def __post_init__(self) -> None:
        if not isinstance(self.basis, str):
            raise InvalidArgumentError(
                f"basis={self.basis!r} is not valid: expected one of {PRICE_BASES}.")
        object.__setattr__(self, "basis", check_choice("basis", self.basis.lower(),
                                                       PRICE_BASES))
        object.__setattr__(self, "years", _positive("years", self.years))
        object.__setattr__(self, "utilisation",
                           _positive("utilisation", self.utilisation, upper=1.0))
        object.__setattr__(self, "usd_per_kwh",
                           _positive("usd_per_kwh", self.usd_per_kwh, zero_ok=True))

    @classmethod
    def from_value(cls, value: Any) -> PriceRule:
        """A rule from None (the defaults), a rule, ``"rent"`` / ``"own"``, or a mapping of the
        fields (``{"basis": "own", "years": 4}``)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls(basis=value)
        if isinstance(value, Mapping):
            fields = ("basis", "years", "utilisation", "usd_per_kwh")
            unknown = sorted(set(value) - set(fields))
            if unknown:
                raise InvalidArgumentError(
                    f"price={dict(value)!r} is not valid: unknown key(s) {', '.join(unknown)}; "
                    f"expected keys among {', '.join(fields)}.")
            return cls(**value)
        raise InvalidArgumentError(
            f"price={value!r} is not valid: expected None, 'rent', 'own', a mapping of "
            "basis/years/utilisation/usd_per_kwh, or an aiadvisor.hardware.PriceRule.")

    def as_dict(self) -> dict[str, Any]:
        """The fields as plain values (what ``report.options['price']`` holds)."""
        return {"basis": self.basis, "years": self.years, "utilisation": self.utilisation,
                "usd_per_kwh": self.usd_per_kwh}

    def describe(self) -> str:
        """One sentence for the report: the rule every price in the ranking follows."""
        first = ("rental price where a device has one, else its purchase price"
                 if self.basis == "rent" else
                 "purchase price where a device has one, else its rental price")
        return (f"Cost per device-hour: {first}; a purchase is written off over "
                f"{self.years:g} years at {self.utilisation:.0%} use plus TDP power at "
                f"{self.usd_per_kwh:g} $/kWh (resale, cooling and the host are left out).")

    def amortised(self, purchase: float, tdp_w: float | None) -> float:
        """$/busy hour of a device bought for ``purchase`` USD drawing ``tdp_w`` watts."""
        busy_hours = self.years * _HOURS_PER_YEAR * self.utilisation
        return purchase / busy_hours + (tdp_w or 0.0) / 1000.0 * self.usd_per_kwh

    def quote(self, spec: Any) -> PriceQuote | None:
        """The cost of one busy hour of ``spec`` (a HardwareSpec or catalog row), or None when
        it has no price."""
        value = _getter(spec)
        rent, purchase = value("usd_per_hour"), value("usd_purchase")
        date = value("price_date")
        date = str(date) if date else None
        source = str(value("price_source") or "no source given")
        when = f", {date}" if date else ""
        own = purchase is not None and (self.basis == "own" or rent is None)
        if own:
            power = value("tdp_w")
            hourly = self.amortised(float(purchase), None if power is None else float(power))
            watts = f" + {float(power):g} W at {self.usd_per_kwh:g} $/kWh" if power else ""
            text = (f"own: {float(purchase):,.0f} USD over {self.years:g} y at "
                    f"{self.utilisation:.0%} use{watts} = {hourly:.3g} $/h ({source}{when})")
            return PriceQuote(usd_per_hour=hourly, basis="own", price_date=date, text=text)
        if rent is None:
            return None
        return PriceQuote(usd_per_hour=float(rent), basis="rent", price_date=date,
                          text=f"rent {float(rent):g} $/h ({source}{when})")
