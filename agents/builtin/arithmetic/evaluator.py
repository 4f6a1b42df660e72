"""The evaluator: parse an expression, then run its postfix program on a stack."""

from __future__ import annotations

from fractions import Fraction

from agents.builtin.arithmetic.errors import ArithmeticInputError
from agents.builtin.arithmetic.limits import DEFAULT_LIMITS, Limits
from agents.builtin.arithmetic.operations import Arithmetic, Value
from agents.builtin.arithmetic.parser import Parser

__all__ = ["Number", "evaluate"]

Number = int | Fraction | float


def evaluate(expression: str, limits: Limits = DEFAULT_LIMITS) -> Number:
    """The value of ``expression``: an ``int`` or ``Fraction`` when exact, else a ``float``."""
    if len(expression) > limits.max_length:
        raise ArithmeticInputError(f"expression longer than {limits.max_length} characters", limits.max_length)
    if not expression.strip():
        raise ArithmeticInputError("empty expression", 0)
    arithmetic = Arithmetic(limits)
    program = Parser(expression, arithmetic).parse()
    stack: list[Value] = []
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
