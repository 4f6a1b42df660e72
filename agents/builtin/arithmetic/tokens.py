"""The tokenizer: text to a stream of tokens, read on demand."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from agents.builtin.arithmetic.errors import ArithmeticInputError
from agents.builtin.arithmetic.limits import Limits

__all__ = ["Token", "fail", "read_tokens"]


class Token(NamedTuple):
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


def read_tokens(text: str, limits: Limits) -> Iterator[Token]:
    """Tokens on demand, so that the first error in reading order is the one reported."""
    pos = count = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            yield Token("end", "", pos)
            return
        count += 1
        if count > limits.max_tokens:
            raise ArithmeticInputError("too many tokens", pos, f" (limit {limits.max_tokens})")
        token = _token_at(text, pos)
        yield token
        pos += len(token.text)


def _token_at(text: str, pos: int) -> Token:
    if number := _NUMBER.match(text, pos):
        if _MALFORMED_TAIL.match(text, number.end()):
            shown = _NUMBER_LIKE.match(text, pos) or number  # always the former: a number was read here
            raise ArithmeticInputError(f"malformed number {shown[0]!r}", pos)
        return Token("number", number[0], pos)
    if name := _NAME.match(text, pos):
        return Token("name", name[0], pos)
    for symbol in (text[pos : pos + 2], text[pos]):
        if symbol in _SYMBOLS:
            return Token(_SYMBOLS[symbol], symbol, pos)
    raise ArithmeticInputError(f"unexpected character {text[pos]!r}", pos)


def fail(problem: str, token: Token, detail: str = "") -> ArithmeticInputError:
    return ArithmeticInputError(problem, token.pos, f" ({token.text!r}{': ' + detail if detail else ''})")
