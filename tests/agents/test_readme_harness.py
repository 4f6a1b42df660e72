"""The README's Weather agent and the unit test of docs/agents.md ("Testing an agent"), verbatim.

test_the_readme_shows_this_code keeps those pages and this file in step.
"""

from __future__ import annotations

import re
from pathlib import Path

from agents import Agent, InputRequired, Reply, Status, TextArtifact
from agents.testing import AgentHarness
from mesh.a2a import AgentSkill, get_text_from_message

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", ROOT / "docs" / "agents.md")


class Weather(Agent):
    name = "weather"
    description = "Tells the weather"
    skills = [
        AgentSkill(
            id="forecast",
            name="Forecast",
            description="Weather for a city",
            tags=["weather"],
            examples=["weather in Paris"],
        )
    ]

    async def handle(self, message, ctx):  # an async generator...
        city = get_text_from_message(message).removeprefix("weather in").strip()
        if not city:
            answer = yield InputRequired("Which city?")  # the task waits; resumes here
            city = get_text_from_message(answer)
        yield Status(f"looking up {city}")  # a status-update event
        yield TextArtifact("forecast", f"{city}: sunny")  # an artifact-update event
        yield Reply(f"It is sunny in {city}.")  # completed, with this message


async def test_weather_asks_for_a_city_then_forecasts():
    async with AgentHarness(Weather()) as mesh:
        task = await mesh.send("weather in")  # no city: the task waits for one
        assert task.status.state == "input-required"
        assert mesh.text(task) == "Which city?"

        task = await mesh.send("Paris", task_id=task.id)  # the answer, on the same task
        assert task.status.state == "completed"
        assert mesh.text(task) == "It is sunny in Paris."

        *events, task = [e async for e in mesh.stream("weather in Rome")]  # the events, then the Task
        assert [mesh.text(e) for e in events] == ["", "looking up Rome", "Rome: sunny", "It is sunny in Rome."]
        assert mesh.text(task) == "It is sunny in Rome."


def readme_block(first_line: str) -> str:
    """The python code block of the README or docs/agents.md that starts with ``first_line``."""
    blocks = [b for page in PAGES for b in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)]
    [block] = [b for b in blocks if b.startswith(first_line)]
    return block


def test_the_readme_shows_this_code() -> None:
    source = Path(__file__).read_text()
    for header in ("# weather.py", "# test_weather.py"):
        lines = readme_block(header).splitlines()[1:]
        imports = [line for line in lines if line.startswith(("from ", "import "))]
        body = "\n".join(line for line in lines if line not in imports).strip()
        for line in imports:
            assert line == "from weather import Weather" or f"\n{line}\n" in source, line
        assert body in source, f"the README's {header} differs from {Path(__file__).name}"
