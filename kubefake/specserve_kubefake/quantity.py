"""resource.Quantity parsing and the canonical form the API server stores ("0.5" -> "500m", "1024Mi" -> "1Gi")."""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIX_OF_EXP = {v: k for k, v in _DECIMAL.items()}
_RE = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")


class QuantityError(ValueError):
    pass


def parse(text: str) -> tuple[Fraction, str]:
    """The exact value and the format ("BinarySI", "DecimalSI" or "DecimalExponent") of a quantity string."""
    match = _RE.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise QuantityError(f"quantities must match the regular expression '{_RE.pattern}'")
    number, suffix = Fraction(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        return number * 1024 ** _BINARY[suffix], "BinarySI"
    if suffix[:1] in ("e", "E"):
        return number * Fraction(10) ** int(suffix[1:]), "DecimalExponent"
    return number * Fraction(10) ** _DECIMAL[suffix], "DecimalSI"


def _round_up_nano(value: Fraction) -> Fraction:
    scaled = value * 10**9
    if scaled.denominator != 1:
        whole = -((-scaled.numerator) // scaled.denominator) if value > 0 else scaled.numerator // scaled.denominator
        return Fraction(whole, 10**9)
    return value


def canonical(text: str | int | float) -> str:
    """The string the API server stores for a quantity."""
    value, fmt = parse(str(text))
    value = _round_up_nano(value)
    if value == 0:
        return "0"
    if fmt == "BinarySI" and (abs(value) < 1024 or value.denominator != 1):
        fmt = "DecimalSI"  # small or fractional byte counts read better in decimal, as Go does
    if fmt == "BinarySI":
        number, power = int(value), 0
        while power < 6 and number % 1024 == 0:
            number //= 1024
            power += 1
        suffix = next((k for k, v in _BINARY.items() if v == power), "")
        return f"{number}{suffix}"
    # Decimal: the largest exponent (a multiple of 3) that keeps the mantissa an integer.
    exponent = -9
    mantissa = value * 10**9
    while exponent < 18 and mantissa.denominator == 1 and int(mantissa) % 1000 == 0:
        mantissa /= 1000
        exponent += 3
    number = int(mantissa)
    if fmt == "DecimalExponent":
        return f"{number}e{exponent}" if exponent else str(number)
    return f"{number}{_SUFFIX_OF_EXP[exponent]}"


def value(text: str | int | float) -> Fraction:
    """The exact numeric value (for comparing requests with limits)."""
    return parse(str(text))[0]
