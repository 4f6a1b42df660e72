"""A safe evaluator for arithmetic typed by people: ``evaluate("2^10 / 3")``.

Nothing of the input reaches ``eval``, ``exec``, ``compile`` or :mod:`ast`: a hand-written
tokenizer feeds a recursive-descent parser, which compiles to a postfix program that a loop
runs on a stack. Grammar, loosest binding first::

    sum      := product (("+" | "-") product)*
    product  := signed (("*" | "/" | "//" | "%") signed)*
    signed   := ("+" | "-")* primary (("^" | "**") signed)?      right-associative
    primary  := number | constant | function "(" sum ("," sum)* ")" | "(" sum ")"

So ``-2^2 == -4``, ``2^-1 == 0.5`` and ``2^3^2 == 512``. ``×``, ``÷`` and ``−`` stand for
``*``, ``/`` and ``-``; names ignore case. ``2(3)`` and ``2pi`` are refused: implicit
multiplication is too often a typo to guess at.

Numbers are exact where they can be. Literals become :class:`~fractions.Fraction`
(``0.1 + 0.2 == 0.3``), and so do ``+ - * / // %``, integer powers, powers with a rational
result (``8^(1/3) == 2``, ``sqrt(9/4) == 3/2``), ``floor ceil round``, logarithms that come
out whole (``log(1000) == 3``), and ``abs min max`` of exact values. ``pi``, ``e``, the
trigonometric functions, ``exp``, the other logarithms and powers are floats computed in
double precision (their arguments must fit in one); so is an operator given a float.
``//`` and ``%`` follow Python (``-7 % 3 == 2``); ``round`` rounds half away from zero, as
on paper; ``0^0 == 1``; an odd root of a negative number is real (``(-8)^(1/3) == -2``).
Nothing is complex: a domain error is an :class:`ArithmeticInputError`, like every other
problem, and so is a floating-point overflow.

Work is bounded by :class:`Limits`: the text's length and token count, the nesting depth
(which bounds the recursion), and the digits of every exact intermediate result. A power is
checked before it is computed, so ``9^9^9`` fails at once.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction
from typing import NamedTuple

__all__ = [
    "DEFAULT_LIMITS",
    "ArithmeticInputError",
    "Limits",
    "Number",
    "evaluate",
    "extract_expression",
    "format_number",
]

Number = int | Fraction | float
_Value = Fraction | float  # while evaluating, integers are Fractions too


class ArithmeticInputError(ValueError):
    """The expression cannot be evaluated; the message names the problem and its position.

    ``position`` is a 0-based index into the evaluated text, for pointing at the culprit.
    """

    def __init__(self, problem: str, position: int, detail: str = "") -> None:
        super().__init__(f"{problem} at position {position}{detail}")
        self.problem = problem
        self.position = position


@dataclass(frozen=True)
class Limits:
    """Bounds on the work one evaluation may do; the defaults suit a chat calculator.

    Each level of nesting costs the parser four or five Python frames, so keep ``max_depth``
    well below a fifth of :func:`sys.getrecursionlimit`.
    """

    max_length: int = 1000
    max_tokens: int = 500
    max_depth: int = 100
    max_digits: int = 1000  # of an exact result's numerator, and of its denominator


DEFAULT_LIMITS = Limits()


def evaluate(expression: str, limits: Limits = DEFAULT_LIMITS) -> Number:
    """The value of ``expression``: an ``int`` or ``Fraction`` when exact, else a ``float``."""
    if len(expression) > limits.max_length:
        raise ArithmeticInputError(f"expression longer than {limits.max_length} characters", limits.max_length)
    if not expression.strip():
        raise ArithmeticInputError("empty expression", 0)
    arithmetic = _Arithmetic(limits)
    program = _Parser(expression, arithmetic).parse()
    stack: list[_Value] = []
    for step in program:
        if step.op == "push":
            stack.append(step.value)
        elif step.op == "neg":
            stack[-1] = -stack[-1]
        elif step.op == "call":
            args = stack[len(stack) - step.argc :]
            del stack[len(stack) - step.argc :]
            stack.append(arithmetic.call(step.token, args))
        else:
            right = stack.pop()
            stack[-1] = arithmetic.binary(step.token, stack[-1], right)
    (result,) = stack
    if isinstance(result, Fraction) and result.denominator == 1:
        return result.numerator
    return result


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


# --- tokens -------------------------------------------------------------------------------


class _Token(NamedTuple):
    kind: str  # "number", "name", "end", or the canonical operator: "^" for both ^ and **
    text: str  # as typed, for messages
    pos: int


_DIGITS = r"[0-9](?:_?[0-9])*"
_NUMBER = re.compile(rf"(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][+-]?{_DIGITS})?")
_NUMBER_LIKE = re.compile(r"[0-9A-Za-z_.]+")
# What may not follow a number: "1.2.3", "1__0", "1e+". A letter may ("2pi"): the parser
# then reports the missing operator, which is the clearer message.
_MALFORMED_TAIL = re.compile(r"[0-9_.]|[eE][0-9_+-]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SYMBOLS = {
    "**": "^", "//": "//", "^": "^", "*": "*", "×": "*", "/": "/", "÷": "/", "%": "%",
    "+": "+", "-": "-", "−": "-", "(": "(", ")": ")", ",": ",",
}  # fmt: skip


def _tokens(text: str, limits: Limits) -> Iterator[_Token]:
    """Tokens on demand, so that the first error in reading order is the one reported."""
    pos = count = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            yield _Token("end", "", pos)
            return
        count += 1
        if count > limits.max_tokens:
            raise ArithmeticInputError("too many tokens", pos, f" (limit {limits.max_tokens})")
        token = _token_at(text, pos)
        yield token
        pos += len(token.text)


def _token_at(text: str, pos: int) -> _Token:
    if number := _NUMBER.match(text, pos):
        if _MALFORMED_TAIL.match(text, number.end()):
            raise ArithmeticInputError(f"malformed number {_NUMBER_LIKE.match(text, pos)[0]!r}", pos)
        return _Token("number", number[0], pos)
    if name := _NAME.match(text, pos):
        return _Token("name", name[0], pos)
    for symbol in (text[pos : pos + 2], text[pos]):
        if symbol in _SYMBOLS:
            return _Token(_SYMBOLS[symbol], symbol, pos)
    raise ArithmeticInputError(f"unexpected character {text[pos]!r}", pos)


# --- parsing ------------------------------------------------------------------------------


class _Step(NamedTuple):
    op: str  # "push", "neg", "call", or a binary operator
    token: _Token
    value: _Value = 0.0
    argc: int = 0


_CONSTANTS: dict[str, _Value] = {"pi": math.pi, "e": math.e}
_ARITY = {
    "sqrt": (1, 1), "abs": (1, 1), "round": (1, 2), "floor": (1, 1), "ceil": (1, 1),
    "min": (1, None), "max": (1, None), "sin": (1, 1), "cos": (1, 1), "tan": (1, 1),
    "log": (1, 2), "ln": (1, 1), "exp": (1, 1),
}  # fmt: skip
_KNOWN_NAMES = f"; known functions: {', '.join(sorted(_ARITY))}; constants: {', '.join(sorted(_CONSTANTS))}"


class _Parser:
    """Recursive descent over a token stream, emitting a postfix program."""

    def __init__(self, text: str, arithmetic: _Arithmetic) -> None:
        self._arithmetic = arithmetic
        self._limits = arithmetic.limits
        self._tokens = _tokens(text, self._limits)
        self._token = next(self._tokens)
        self._depth = 0
        self._program: list[_Step] = []

    def parse(self) -> list[_Step]:
        self._sum()
        if self._token.kind == ")":
            raise ArithmeticInputError("unexpected ')'", self._token.pos, "; it closes no '('")
        if self._token.kind != "end":
            raise self._unexpected("an operator or the end of the expression")
        return self._program

    def _advance(self) -> _Token:
        token, self._token = self._token, next(self._tokens)
        return token

    def _sum(self) -> None:
        self._product()
        while self._token.kind in ("+", "-"):
            operator_token = self._advance()
            self._product()
            self._program.append(_Step(operator_token.kind, operator_token))

    def _product(self) -> None:
        self._signed()
        while self._token.kind in ("*", "/", "//", "%"):
            operator_token = self._advance()
            self._signed()
            self._program.append(_Step(operator_token.kind, operator_token))

    def _signed(self) -> None:
        # A loop rather than recursion, so "----1" and "2^2^2^2" cost no stack.
        pending: list[tuple[list[_Token], _Token]] = []  # signs and "^" awaiting an exponent
        while True:
            signs = []
            while self._token.kind in ("+", "-"):
                signs.append(self._advance())
            self._primary()
            if self._token.kind != "^":
                break
            pending.append((signs, self._advance()))
        self._negate(signs)
        for signs, caret in reversed(pending):
            self._program.append(_Step("^", caret))
            self._negate(signs)

    def _negate(self, signs: list[_Token]) -> None:
        minuses = [sign for sign in signs if sign.kind == "-"]
        if len(minuses) % 2:
            self._program.append(_Step("neg", minuses[0]))

    def _primary(self) -> None:
        token = self._token
        if token.kind == "number":
            value = self._arithmetic.literal(token)
            self._advance()
            self._program.append(_Step("push", token, value))
        elif token.kind == "name" and token.text.lower() in _CONSTANTS:
            self._advance()
            self._program.append(_Step("push", token, _CONSTANTS[token.text.lower()]))
        elif token.kind == "name" and token.text.lower() in _ARITY:
            self._call()
        elif token.kind == "name":
            raise ArithmeticInputError(f"unknown name {token.text!r}", token.pos, _KNOWN_NAMES)
        elif token.kind == "(":
            self._enter()
            self._sum()
            self._leave(token)
        else:
            raise self._unexpected("a number, a name or '('")
        if self._token.kind in ("number", "name", "("):
            raise ArithmeticInputError(
                f"missing operator before {self._token.text!r}",
                self._token.pos,
                "; implicit multiplication is not supported, write '*'",
            )

    def _call(self) -> None:
        function = self._advance()
        name = function.text.lower()
        if self._token.kind != "(":
            raise ArithmeticInputError(f"missing '(' after {function.text!r}", self._token.pos, f"; write {name}(x)")
        opening = self._token
        self._enter()
        argc = 0
        if self._token.kind != ")":
            self._sum()
            argc = 1
            while self._token.kind == ",":
                self._advance()
                self._sum()
                argc += 1
        self._leave(opening)
        low, high = _ARITY[name]
        if argc < low or (high is not None and argc > high):
            expected = {1: "1 argument", 2: "1 or 2 arguments", None: "at least 1 argument"}[high]
            raise ArithmeticInputError(f"{name}() takes {expected}, got {argc}", function.pos)
        self._program.append(_Step("call", function, argc=argc))

    def _enter(self) -> None:
        if self._depth == self._limits.max_depth:
            raise ArithmeticInputError("nesting too deep", self._token.pos, f" (limit {self._limits.max_depth} levels)")
        self._depth += 1
        self._advance()

    def _leave(self, opening: _Token) -> None:
        if self._token.kind != ")":
            raise self._unexpected(f"')' to close '(' at position {opening.pos}")
        self._advance()
        self._depth -= 1

    def _unexpected(self, expected: str) -> ArithmeticInputError:
        found = "end of input" if self._token.kind == "end" else repr(self._token.text)
        return ArithmeticInputError(f"unexpected {found}", self._token.pos, f"; expected {expected}")


# --- arithmetic ---------------------------------------------------------------------------

_BINARY: dict[str, Callable[[_Value, _Value], _Value | int]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul,
    "/": operator.truediv, "//": operator.floordiv, "%": operator.mod,
}  # fmt: skip
_HALF = Fraction(1, 2)
_FLOAT_RANGE = (Fraction(1, 2**1000), Fraction(2**1000))
_MAX_EXACT_ROOT = 100  # exact roots are tried for exponents p/q with q up to this


class _Arithmetic:
    """The operations, each checked: errors name the operator or function at fault."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._bound = 10**limits.max_digits

    def literal(self, token: _Token) -> Fraction:
        mantissa, _, exponent = token.text.replace("_", "").lower().partition("e")
        whole, _, decimals = mantissa.partition(".")
        digits = int(whole + decimals)
        scale = int(exponent or "0") - len(decimals)
        if digits == 0:
            return Fraction(0)
        if abs(scale) > 2 * self.limits.max_digits:  # don't even build 10**scale
            raise self._size_error(token, scale > 0)
        return self.checked(token, Fraction(digits) * Fraction(10) ** scale)

    def binary(self, token: _Token, left: _Value, right: _Value) -> _Value:
        if token.kind == "^":
            return self.power(token, left, right)
        try:
            return self.checked(token, _BINARY[token.kind](left, right))
        except ZeroDivisionError:
            raise _fail("division by zero", token) from None
        except OverflowError:
            raise _fail("floating-point overflow", token) from None

    def call(self, token: _Token, args: list[_Value]) -> _Value:
        x = args[0]
        match token.text.lower():
            case "abs":
                return abs(x)
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
                    raise _fail("square root of a negative number", token)
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
                    raise _fail("floating-point overflow", token) from None

    def power(self, token: _Token, base: _Value, exponent: _Value) -> _Value:
        if base == 0 and exponent < 0:
            raise _fail("division by zero", token, "zero to a negative power")
        if isinstance(base, Fraction) and isinstance(exponent, Fraction):
            p, q = exponent.numerator, exponent.denominator
            if q == 1:
                return self._integer_power(token, base, p)
            if base < 0 and q % 2 == 0:
                raise _fail("even root of a negative number", token)
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
            raise _fail("fractional power of a negative number", token) from None
        except OverflowError:
            raise _fail("floating-point overflow", token) from None

    def checked(self, token: _Token, value: _Value | int) -> _Value:
        """``value`` as a Fraction or a finite float, if within the limits."""
        if isinstance(value, float):
            if not math.isfinite(value):
                raise _fail("floating-point overflow", token)
            return value
        value = Fraction(value)
        if abs(value.numerator) >= self._bound or value.denominator >= self._bound:
            raise self._size_error(token, abs(value.numerator) >= self._bound)
        return value

    def _integer_power(self, token: _Token, base: Fraction, k: int) -> Fraction:
        if k == 0 or base == 0:
            return Fraction(0 if k else 1)
        top, bottom = (abs(base.numerator), base.denominator) if k > 0 else (base.denominator, abs(base.numerator))
        # Digits of top**|k| and bottom**|k|, estimated before anything is computed; written
        # as a division because |k| may be too large for a float.
        for part, too_large in ((top, True), (bottom, False)):
            if math.log10(part) > (self.limits.max_digits + 1) / abs(k):
                raise self._size_error(token, too_large)
        return self.checked(token, base**k)

    def _round(self, token: _Token, x: _Value, digits: _Value) -> Fraction:
        if not (isinstance(digits, Fraction) and digits.denominator == 1):
            raise _fail("round() needs a whole number of digits", token)
        scale = self._integer_power(token, Fraction(10), digits.numerator)
        scaled = abs(Fraction(x)) * scale
        rounded = math.floor(scaled + _HALF) * (1 if x >= 0 else -1)
        return self.checked(token, rounded / scale)

    def _log(self, token: _Token, x: _Value, base: _Value | None) -> _Value:
        if x <= 0:
            raise _fail("logarithm of a non-positive number", token)
        if base is None:
            return self.checked(token, _ln(x))
        if base <= 0 or base == 1:
            raise _fail("invalid logarithm base", token, "it must be positive and not 1")
        try:
            result = self.checked(token, _ln(x) / _ln(base))
        except ZeroDivisionError:
            raise _fail("invalid logarithm base", token, "too close to 1") from None
        # log(1000) is 3, exactly: try the nearest integer when the inputs are exact.
        nearest = round(result)
        if isinstance(x, Fraction) and isinstance(base, Fraction) and abs(result - nearest) < 1e-9:
            try:
                if self._integer_power(token, base, nearest) == x:
                    return Fraction(nearest)
            except ArithmeticInputError:
                pass
        return result

    def _float(self, token: _Token, value: _Value) -> float:
        try:
            return float(value)
        except OverflowError:
            raise _fail("floating-point overflow", token, "number too large for this function") from None

    def _size_error(self, token: _Token, too_large: bool) -> ArithmeticInputError:
        digits = self.limits.max_digits
        if too_large:
            return _fail("number too large", token, f"more than {digits} digits")
        return _fail("number too precise", token, f"denominator of more than {digits} digits")


def _fail(problem: str, token: _Token, detail: str = "") -> ArithmeticInputError:
    return ArithmeticInputError(problem, token.pos, f" ({token.text!r}{': ' + detail if detail else ''})")


def _ln(x: _Value) -> float:
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
