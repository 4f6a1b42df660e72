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

from agents.builtin.arithmetic.errors import ArithmeticInputError
from agents.builtin.arithmetic.evaluator import Number, evaluate
from agents.builtin.arithmetic.limits import DEFAULT_LIMITS, Limits
from agents.builtin.arithmetic.text import extract_expression, format_number

__all__ = [
    "DEFAULT_LIMITS",
    "ArithmeticInputError",
    "Limits",
    "Number",
    "evaluate",
    "extract_expression",
    "format_number",
]
