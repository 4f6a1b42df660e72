"""Text in and out: the expression in a request, and a result as people write numbers."""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction

from agents.builtin.arithmetic.evaluator import Number

__all__ = ["extract_expression", "format_number"]

# 15 significant digits is DBL_DIG: every such decimal survives a trip through a double, so
# float results print without binary noise (sqrt(2)^2 -> "2", not "2.0000000000000004").
_DISPLAY = Context(prec=15, rounding=ROUND_HALF_EVEN)


def format_number(value: Number) -> str:
    """Integers in full; anything else to 15 significant digits, trailing zeros dropped.

    ``1/8 -> "0.125"``, ``1/3 -> "0.333333333333333"``, ``2^0.5 -> "1.4142135623731"``;
    scientific notation below 1e-6 and from 1e15 (``"1.5e-20"``).
    """
    if isinstance(value, int) or (isinstance(value, Fraction) and value.denominator == 1):
        return str(int(value))
    if isinstance(value, Fraction):
        rounded = _DISPLAY.divide(Decimal(value.numerator), Decimal(value.denominator))
    elif not math.isfinite(value):
        return repr(value)  # evaluate() never returns these
    else:
        rounded = _DISPLAY.plus(Decimal(value))
    if rounded.is_zero():
        return "0"
    rounded = rounded.normalize(_DISPLAY)
    return f"{rounded:f}" if -6 <= rounded.adjusted() < 15 else f"{rounded:e}"


_POLITE_PREFIX = re.compile(r"\s*(?:what\s+is|what['’]s|calculate|compute|evaluate)\b[\s:]*", re.IGNORECASE)


def extract_expression(text: str) -> str:
    """The expression in a request: ``"What is 2+2?" -> "2+2"``, ``"Compute: 6×7 =" -> "6×7"``.

    Drops one polite prefix (what is, what's, calculate, compute, evaluate; any case) and
    any trailing ``?``, ``=`` and whitespace. The rest is left for :func:`evaluate` to judge.
    """
    prefix = _POLITE_PREFIX.match(text)
    body = text[prefix.end() :] if prefix else text
    end = len(body)
    while end and (body[end - 1].isspace() or body[end - 1] in "?="):
        end -= 1
    return body[:end].strip()
