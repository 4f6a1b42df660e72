"""The one error of the evaluator: what is wrong with the expression, and where."""

from __future__ import annotations

__all__ = ["ArithmeticInputError"]


class ArithmeticInputError(ValueError):
    """The expression cannot be evaluated; the message names the problem and its position.

    ``position`` is a 0-based index into the evaluated text, for pointing at the culprit.
    """

    def __init__(self, problem: str, position: int, detail: str = "") -> None:
        super().__init__(f"{problem} at position {position}{detail}")
        self.problem = problem
        self.position = position
