"""calculator: evaluates arithmetic safely (a hand-written parser, never eval)."""

from __future__ import annotations

from agents.agent import Agent
from agents.builtin.arithmetic import ArithmeticInputError, evaluate, extract_expression, format_number
from agents.context import TaskContext
from agents.updates import Reply, TaskFailed
from mesh.a2a import AgentSkill, Message, get_text_from_message


class CalculatorAgent(Agent):
    name = "calculator"
    description = "Evaluates arithmetic: + - * / // % ^, parentheses, sqrt, sin, log, pi, exact fractions."
    skills = (
        AgentSkill(
            id="arithmetic",
            name="Arithmetic",
            description="Evaluates an arithmetic expression exactly (fractions) where it can",
            tags=["math", "calculator", "arithmetic", "compute"],
            examples=["2 + 2", "what is (1/3) * 3?", "sqrt(2) ^ 2", "17 // 5"],
        ),
    )

    async def handle(self, message: Message, ctx: TaskContext) -> Reply:
        expression = extract_expression(get_text_from_message(message))
        try:
            value = evaluate(expression)
        except ArithmeticInputError as exc:
            raise TaskFailed(f"cannot evaluate {expression!r}: {exc}", data={"expression": expression}) from exc
        result = format_number(value)
        return Reply(result, data={"expression": expression, "result": result})
