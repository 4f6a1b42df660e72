"""``mesh eval`` on the real broker: an eval file over the built-in agents passes; a wrong
expectation fails with a readable diff; tool calls, tokens and an LLM judge with scripted models;
JUnit XML parsed back; a baseline's regressions."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage

from agents.builtin.calculator import CalculatorAgent
from agents.builtin.countdown import CountdownAgent
from agents.testing import llm_agent
from mesh.a2a import DataPart, FilePart, TextPart
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.errors import ConfigError
from mesh.evals.progress import ProgressBar
from mesh.evals.runner import CaseResult, message_of, run_suite
from mesh.evals.scorers import Answer, Check
from mesh.evals.spec import load_suite
from tests.agents.llm.scripts import Chunk, call, scripted, tool_returns, user_texts
from tests.conftest import ServeAgent
from tests.mesh.cli_process import mesh

SUITE = """\
concurrency: 3
cases:
  - name: adds
    agent: calculator
    input: "2 + 2"
    expect: {exact: "4", number: {value: 4}, max_latency_s: 30}
  - name: fractions
    agent: calculator
    input: "what is (1/3) * 3?"
    expect: {regex: "^1$", json_schema: {type: object, required: [result], properties: {result: {const: "1"}}}}
  - name: counts
    agent: countdown
    input: "3"
    expect: {contains: ["Liftoff", "from 3"], python: "checks:counted_from_three"}
  - name: asks back
    agent: countdown
    input: "soon"
    expect: {state: input-required, contains: "Count down from how many"}
"""

CHECKS = """\
def counted_from_three(answer):
    if "3" not in answer.text:
        return f"no 3 in {answer.text!r}"
"""


@pytest.fixture
async def builtins(serve_agent: ServeAgent) -> None:
    await serve_agent(CalculatorAgent())
    await serve_agent(CountdownAgent(interval_s=0.01))


def env_of(broker_url: str, namespace: str) -> dict[str, str]:
    return {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}


async def test_an_eval_file_over_the_builtin_agents_passes_and_writes_junit_and_json(
    builtins: None, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    (tmp_path / "evals.yaml").write_text(SUITE)
    (tmp_path / "checks.py").write_text(CHECKS)
    junit, report = tmp_path / "out.xml", tmp_path / "out.json"
    result = await mesh(
        "eval", str(tmp_path / "evals.yaml"), "--junit", str(junit), "--json", str(report),
        **env_of(broker_url, namespace),
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[0].split() == ["RESULT", "CASE", "AGENT", "SECONDS", "DETAIL"]
    assert result.stdout.strip().endswith("4 of 4 passed")
    assert result.stderr == ""  # the progress bar is for terminals only
    suite = ET.parse(junit).getroot()  # noqa: S314 - the test's own report
    assert (suite.tag, suite.get("tests"), suite.get("failures")) == ("testsuite", "4", "0")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {"adds", "fractions", "counts", "asks back"}
    assert cases["adds"].get("classname") == "calculator" and cases["adds"].find("failure") is None
    assert cases["adds"].findtext("system-out") == "4"
    data = json.loads(report.read_text())
    assert (data["passed"], data["failed"]) == (4, 0)
    asked = next(c for c in data["cases"] if c["name"] == "asks back")
    # The task left waiting for input was canceled: the eval leaves nothing hanging.
    async with MeshClient.connect(broker_url, namespace) as client:
        task = await client.get_task("countdown", asked["task_id"])
    assert task.status.state.value == "canceled"


async def test_a_wrong_expectation_fails_with_a_readable_diff_and_a_baseline_shows_the_regression(
    builtins: None, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    good = tmp_path / "good.json"
    (tmp_path / "evals.yaml").write_text(
        "agent: calculator\ncases:\n  - {name: adds, input: '2 + 2', expect: {exact: '4'}}\n"
        "  - {name: poem, input: '1+1', expect: {exact: '2'}}\n"
    )
    first = await mesh("eval", str(tmp_path / "evals.yaml"), "--json", str(good), **env_of(broker_url, namespace))
    assert first.code == 0, first.stdout + first.stderr
    (tmp_path / "evals.yaml").write_text(
        "agent: calculator\ncases:\n  - {name: adds, input: '2 + 2', expect: {exact: '5'}}\n"
        "  - name: poem\n    input: '1+1'\n    expect: {exact: \"two\\nlines\"}\n"
        "  - {name: added, input: '3*3', expect: {number: {value: 9.5, tolerance: 0.1}}}\n"
    )
    junit = tmp_path / "out.xml"
    second = await mesh(
        "eval", str(tmp_path / "evals.yaml"), "--baseline", str(good), "--junit", str(junit),
        **env_of(broker_url, namespace),
    )  # fmt: skip
    assert second.code == 1, second.stdout + second.stderr
    lines = second.stdout.splitlines()
    adds = next(line for line in lines if " adds " in line)
    assert adds.startswith("FAIL") and adds.endswith('exact: expected "5", got "4"')
    # A multi-line expectation is shown as a diff under its row.
    poem = lines.index(next(line for line in lines if " poem " in line))
    assert lines[poem + 1 : poem + 6] == ["    +++ answer", "    @@ -1,2 +1 @@", "    -two", "    -lines", "    +2"]
    assert any("number: expected 9.5 ± 0.1, got 9.0 (off by 0.5)" in line for line in lines)
    assert "0 of 3 passed, 3 failed" in lines
    assert "regression: adds passed in the baseline and fails now" in lines
    assert "regression: poem passed in the baseline and fails now" in lines
    assert "new: added is not in the baseline" in lines
    report = ET.parse(junit).getroot()  # noqa: S314 - the test's own report
    failure = report.find("testcase[@name='adds']/failure")
    assert failure is not None and failure.get("message") == 'exact: expected "5", got "4"'


async def test_tool_calls_tokens_and_an_llm_judge_with_scripted_models(
    serve_agent: ServeAgent, broker_settings: BrokerSettings, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(CalculatorAgent())

    def assistant(messages: list[ModelMessage]) -> list[Chunk]:
        returned = tool_returns(messages)
        return [f"It is {returned[0].content['text']}."] if returned else [call("calculator", {"message": "6*7"})]

    await serve_agent(llm_agent({"model": "test", "peers": ["calculator"]}, scripted(assistant)))

    def verdict(messages: list[ModelMessage]) -> list[str]:
        prompt = user_texts(messages)[-1]
        answer = prompt.rpartition("The agent's answer:\n")[2]
        return ["PASS"] if "42" in answer else [f"FAIL the answer {answer!r} does not say 42"]

    await serve_agent(llm_agent({"model": "test"}, scripted(verdict), name="judge"))
    path = tmp_path / "evals.yaml"
    judged = {"agent": "judge", "criteria": "It gives the product, 42."}
    cases: list[dict[str, Any]] = [
        {
            "name": "multiplies",
            "agent": "assistant",
            "input": "what is 6 times 7?",
            "expect": {
                "contains": "42",
                "tools": [{"name": "calculator", "arguments": {"message": "6*7"}}],
                "max_tokens": 100000,
                "judge": judged,
            },
        },
        {"name": "judged wrong", "agent": "calculator", "input": "6*6", "expect": {"judge": judged}},
        {"name": "no tool", "agent": "calculator", "input": "1", "expect": {"tools": [{"name": "calculator"}]}},
        {"name": "too few tokens", "agent": "assistant", "input": "6*7", "expect": {"max_tokens": 1}},
    ]
    path.write_text(json.dumps({"cases": cases}))
    async with MeshClient.connect(broker_settings, namespace) as client:
        results = {r.case.name: r for r in await run_suite(client, load_suite(path))}
    assert results["multiplies"].passed, results["multiplies"].checks
    assert results["multiplies"].answer.tool_calls[0].name == "calculator"
    wrong = [c for c in results["judged wrong"].checks if not c.passed]
    assert [(c.scorer, c.detail) for c in wrong] == [("judge", "the answer '36' does not say 42")]
    assert [c.detail for c in results["no tool"].checks if not c.passed] == ["calculator was not called (calls: none)"]
    tokens = next(c for c in results["too few tokens"].checks if c.scorer == "tokens")
    assert not tokens.passed and tokens.detail.startswith("used ") and tokens.detail.endswith(" tokens > 1")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cases: []", "cases: tuple should have at least 1 item"),
        ("cases:\n  - {name: a, input: x}", "cases[0]: no agent to ask; add agent: NAME"),
        ("agent: calc\ncases:\n  - {name: a, input: x, expect: {exakt: x}}", "unknown key"),
        ("agent: calc\ncases:\n  - {name: a, input: x, expect: {regex: '('}}", "not a regular expression"),
        ("agent: calc\ncases:\n  - {name: a, input: x, expect: {json_schema: {type: 7}}}", "not a valid JSON Schema"),
        ("agent: calc\ncases:\n  - {name: a, input: x}\n  - {name: a, input: y}", "cases[1].name: 'a' is taken"),
        ("agent: calc\ncases:\n  - {name: a, input: {files: [nope.txt]}}", "no file nope.txt"),
    ],
)
def test_a_bad_eval_file_is_refused_with_the_fix(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "evals.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_suite(path)
    assert str(refused.value).startswith(f"{path}: ") and message in str(refused.value)


async def test_an_unknown_agent_ends_the_run_before_any_case(broker_url: str, namespace: str, tmp_path: Path) -> None:
    (tmp_path / "evals.yaml").write_text("agent: nobody\ncases:\n  - {name: a, input: x}\n")
    result = await mesh("eval", str(tmp_path / "evals.yaml"), "--wait", "0.5", **env_of(broker_url, namespace))
    assert result.code == 4, result.stdout + result.stderr
    assert "nobody" in result.stderr and result.stdout == ""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_is_drawn_on_a_terminal_and_erased_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "evals.yaml"
    path.write_text("agent: calculator\ncases:\n  - {name: a, input: '1'}\n  - {name: b, input: '2'}\n")
    suite = load_suite(path)
    terminal, pipe = Terminal(), io.StringIO()
    passed = CaseResult(suite.cases[0], "calculator", 1, Answer(state="completed", text="1"), [Check("state", True)])
    failed = CaseResult(suite.cases[1], "calculator", 1, Answer(state="failed", text=""), [Check("state", False)])
    for stream in (terminal, pipe):
        with ProgressBar(2, stream) as bar:
            bar.done(passed)
            bar.done(failed)
    drawn = terminal.getvalue().split("\r\x1b[K")
    assert drawn == ["", "[------------------------] 0/2  0 passed", "[############------------] 1/2  1 passed",
                     "[########################] 2/2  1 passed  1 failed", ""]  # fmt: skip
    assert pipe.getvalue() == ""


def test_a_case_input_carries_text_data_and_files_beside_the_eval_file(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("some notes")
    path = tmp_path / "evals.yaml"
    path.write_text(
        "agent: echo\ncases:\n  - name: a\n"
        "    input: {text: hi, data: {n: 1}, files: [notes.txt], metadata: {skill: x}}\n"
    )
    suite = load_suite(path)
    message = message_of(suite, suite.cases[0])
    text, data, file = message.parts
    assert isinstance(text, TextPart) and text.text == "hi"
    assert isinstance(data, DataPart) and data.data == {"n": 1}
    assert isinstance(file, FilePart) and file.file.name == "notes.txt"
    assert message.metadata == {"skill": "x"}
