"""The recursive-descent parser: tokens to a postfix program for the evaluator."""

from __future__ import annotations

import math
from typing import NamedTuple

from agents.builtin.arithmetic.errors import ArithmeticInputError
from agents.builtin.arithmetic.operations import Arithmetic, Value
from agents.builtin.arithmetic.tokens import Token, read_tokens

__all__ = ["Parser", "Step"]


class Step(NamedTuple):
    op: str  # "push", "neg", "call", or a binary operator
    token: Token
    value: Value = 0.0
    argc: int = 0


_CONSTANTS: dict[str, Value] = {"pi": math.pi, "e": math.e}
_ARITY = {
    "sqrt": (1, 1), "abs": (1, 1), "round": (1, 2), "floor": (1, 1), "ceil": (1, 1),
    "min": (1, None), "max": (1, None), "sin": (1, 1), "cos": (1, 1), "tan": (1, 1),
    "log": (1, 2), "ln": (1, 1), "exp": (1, 1),
}  # fmt: skip
_KNOWN_NAMES = f"; known functions: {', '.join(sorted(_ARITY))}; constants: {', '.join(sorted(_CONSTANTS))}"


class Parser:
    """Recursive descent over a token stream, emitting a postfix program."""

    def __init__(self, text: str, arithmetic: Arithmetic) -> None:
        self._arithmetic = arithmetic
        self._limits = arithmetic.limits
        self._tokens = read_tokens(text, self._limits)
        self._token = next(self._tokens)
        self._depth = 0
        self._program: list[Step] = []

    def parse(self) -> list[Step]:
        self._sum()
        if self._token.kind == ")":
            raise ArithmeticInputError("unexpected ')'", self._token.pos, "; it closes no '('")
        if self._token.kind != "end":
            raise self._unexpected("an operator or the end of the expression")
        return self._program

    def _advance(self) -> Token:
        token, self._token = self._token, next(self._tokens)
        return token

    def _sum(self) -> None:
        self._product()
        while self._token.kind in ("+", "-"):
            operator_token = self._advance()
            self._product()
            self._program.append(Step(operator_token.kind, operator_token))

    def _product(self) -> None:
        self._signed()
        while self._token.kind in ("*", "/", "//", "%"):
            operator_token = self._advance()
            self._signed()
            self._program.append(Step(operator_token.kind, operator_token))

    def _signed(self) -> None:
        # A loop rather than recursion, so "----1" and "2^2^2^2" cost no stack.
        pending: list[tuple[list[Token], Token]] = []  # signs and "^" awaiting an exponent
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
            self._program.append(Step("^", caret))
            self._negate(signs)

    def _negate(self, signs: list[Token]) -> None:
        minuses = [sign for sign in signs if sign.kind == "-"]
        if len(minuses) % 2:
            self._program.append(Step("neg", minuses[0]))

    def _primary(self) -> None:
        token = self._token
        if token.kind == "number":
            value = self._arithmetic.literal(token)
            self._advance()
            self._program.append(Step("push", token, value))
        elif token.kind == "name" and token.text.lower() in _CONSTANTS:
            self._advance()
            self._program.append(Step("push", token, _CONSTANTS[token.text.lower()]))
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
        self._program.append(Step("call", function, argc=argc))

    def _enter(self) -> None:
        if self._depth == self._limits.max_depth:
            raise ArithmeticInputError("nesting too deep", self._token.pos, f" (limit {self._limits.max_depth} levels)")
        self._depth += 1
        self._advance()

    def _leave(self, opening: Token) -> None:
        if self._token.kind != ")":
            raise self._unexpected(f"')' to close '(' at position {opening.pos}")
        self._advance()
        self._depth -= 1

    def _unexpected(self, expected: str) -> ArithmeticInputError:
        found = "end of input" if self._token.kind == "end" else repr(self._token.text)
        return ArithmeticInputError(f"unexpected {found}", self._token.pos, f"; expected {expected}")
