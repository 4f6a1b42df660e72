"""The operations of the evaluator, exact where they can be and each checked against the limits."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from fractions import Fraction

from agents.builtin.arithmetic.errors import ArithmeticInputError
from agents.builtin.arithmetic.limits import Limits
from agents.builtin.arithmetic.tokens import Token, fail

__all__ = ["Arithmetic", "Value"]

Value = Fraction | float  # while evaluating, integers are Fractions too

_BINARY: dict[str, Callable[[Value, Value], Value | int]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul,
    "/": operator.truediv, "//": operator.floordiv, "%": operator.mod,
}  # fmt: skip
_HALF = Fraction(1, 2)
_FLOAT_RANGE = (Fraction(1, 2**1000), Fraction(2**1000))
_MAX_EXACT_ROOT = 100  # exact roots are tried for exponents p/q with q up to this


class Arithmetic:
    """The operations, each checked: errors name the operator or function at fault."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._bound = 10**limits.max_digits

    def literal(self, token: Token) -> Fraction:
        mantissa, _, exponent = token.text.replace("_", "").lower().partition("e")
        whole, _, decimals = mantissa.partition(".")
        digits = int(whole + decimals)
        scale = int(exponent or "0") - len(decimals)
        if digits == 0:
            return Fraction(0)
        if abs(scale) > 2 * self.limits.max_digits:  # don't even build 10**scale
            raise self._size_error(token, scale > 0)
        return self._exact(token, Fraction(digits) * Fraction(10) ** scale)

    def binary(self, token: Token, left: Value, right: Value) -> Value:
        if token.kind == "^":
            return self.power(token, left, right)
        try:
            return self.checked(token, _BINARY[token.kind](left, right))
        except ZeroDivisionError:
            raise fail("division by zero", token) from None
        except OverflowError:
            raise fail("floating-point overflow", token) from None

    def call(self, token: Token, args: list[Value]) -> Value:
        x = args[0]
        match token.text.lower():
            case "abs":
                # abs() of the union types as object: narrow it for mypy
                return abs(x) if isinstance(x, float) else abs(x)  # noqa: RUF034
            case "min":
                return min(args)
            case "max":
                return max(args)
            case "floor":
                return Fraction(math.floor(x))
            case "ceil":
                return Fraction(math.ceil(x))
            case "round":
                return self._round(token, x, args[1] if len(args) == 2 else Fraction(0))
            case "sqrt":
                if x < 0:
                    raise fail("square root of a negative number", token)
                return self.power(token, x, _HALF) if isinstance(x, Fraction) else math.sqrt(x)
            case "log" | "ln":
                base = args[1] if len(args) == 2 else Fraction(10) if token.text.lower() == "log" else None
                return self._log(token, x, base)
            case name:
                function = {"sin": math.sin, "cos": math.cos, "tan": math.tan, "exp": math.exp}[name]
                argument = self._float(token, x)
                try:
                    return self.checked(token, function(argument))
                except OverflowError:
                    raise fail("floating-point overflow", token) from None

    def power(self, token: Token, base: Value, exponent: Value) -> Value:
        if base == 0 and exponent < 0:
            raise fail("division by zero", token, "zero to a negative power")
        if isinstance(base, Fraction) and isinstance(exponent, Fraction):
            p, q = exponent.numerator, exponent.denominator
            if q == 1:
                return self._integer_power(token, base, p)
            if base < 0 and q % 2 == 0:
                raise fail("even root of a negative number", token)
            root = _exact_root(abs(base), q) if q <= _MAX_EXACT_ROOT else None
            if root is not None:
                return self._integer_power(token, root if base > 0 else -root, p)
            if base < 0:  # an odd root of a negative number is real: (-b)^(p/q) = (-1)^p * b^(p/q)
                magnitude = self.power(token, -base, exponent)
                return -magnitude if p % 2 else magnitude
        x, y = self._float(token, base), self._float(token, exponent)
        try:
            return self.checked(token, math.pow(x, y))
        except ValueError:
            raise fail("fractional power of a negative number", token) from None
        except OverflowError:
            raise fail("floating-point overflow", token) from None

    def checked(self, token: Token, value: Value | int) -> Value:
        """``value`` as a Fraction or a finite float, if within the limits."""
        if isinstance(value, float):
            if not math.isfinite(value):
                raise fail("floating-point overflow", token)
            return value
        return self._exact(token, value)

    def _exact(self, token: Token, value: Fraction | int) -> Fraction:
        """``value`` as a Fraction, if its numerator and denominator are within the digit limit."""
        value = Fraction(value)
        if abs(value.numerator) >= self._bound or value.denominator >= self._bound:
            raise self._size_error(token, abs(value.numerator) >= self._bound)
        return value

    def _integer_power(self, token: Token, base: Fraction, k: int) -> Fraction:
        if k == 0 or base == 0:
            return Fraction(0 if k else 1)
        top, bottom = (abs(base.numerator), base.denominator) if k > 0 else (base.denominator, abs(base.numerator))
        # Digits of top**|k| and bottom**|k|, estimated before anything is computed; written
        # as a division because |k| may be too large for a float.
        for part, too_large in ((top, True), (bottom, False)):
            if math.log10(part) > (self.limits.max_digits + 1) / abs(k):
                raise self._size_error(token, too_large)
        return self._exact(token, base**k)

    def _round(self, token: Token, x: Value, digits: Value) -> Fraction:
        if not (isinstance(digits, Fraction) and digits.denominator == 1):
            raise fail("round() needs a whole number of digits", token)
        scale = self._integer_power(token, Fraction(10), digits.numerator)
        scaled = abs(Fraction(x)) * scale
        rounded = math.floor(scaled + _HALF) * (1 if x >= 0 else -1)
        return self._exact(token, rounded / scale)

    def _log(self, token: Token, x: Value, base: Value | None) -> Value:
        if x <= 0:
            raise fail("logarithm of a non-positive number", token)
        if base is None:
            return self.checked(token, _ln(x))
        if base <= 0 or base == 1:
            raise fail("invalid logarithm base", token, "it must be positive and not 1")
        try:
            ratio = _ln(x) / _ln(base)
        except ZeroDivisionError:
            raise fail("invalid logarithm base", token, "too close to 1") from None
        result = self.checked(token, ratio)
        # log(1000) is 3, exactly: try the nearest integer when the inputs are exact.
        nearest = round(ratio)
        if isinstance(x, Fraction) and isinstance(base, Fraction) and abs(ratio - nearest) < 1e-9:
            try:
                if self._integer_power(token, base, nearest) == x:
                    return Fraction(nearest)
            except ArithmeticInputError:
                pass
        return result

    def _float(self, token: Token, value: Value) -> float:
        try:
            return float(value)
        except OverflowError:
            raise fail("floating-point overflow", token, "number too large for this function") from None

    def _size_error(self, token: Token, too_large: bool) -> ArithmeticInputError:
        digits = self.limits.max_digits
        if too_large:
            return fail("number too large", token, f"more than {digits} digits")
        return fail("number too precise", token, f"denominator of more than {digits} digits")


def _ln(x: Value) -> float:
    if isinstance(x, float):
        return math.log(x)
    if abs(x - 1) < _HALF:  # x - 1 is exact, so log1p keeps the digits a float x would lose
        return math.log1p(float(x - 1))
    if _FLOAT_RANGE[0] < x < _FLOAT_RANGE[1]:
        return math.log(float(x))
    # math.log takes integers of any size, where float(x) would overflow or underflow.
    return math.log(x.numerator) - math.log(x.denominator)


def _exact_root(x: Fraction, k: int) -> Fraction | None:
    """The k-th root of ``x >= 0`` if it is rational, else None."""
    top, bottom = _integer_root(x.numerator, k), _integer_root(x.denominator, k)
    if top**k == x.numerator and bottom**k == x.denominator:
        return Fraction(top, bottom)
    return None


def _integer_root(n: int, k: int) -> int:
    """The largest r with r**k <= n: Newton's method, from above."""
    if n < 2:
        return n
    r = 1 << -(-n.bit_length() // k)
    while True:
        s = ((k - 1) * r + n // r ** (k - 1)) // k
        if s >= r:
            return r
        r = s
