"""``mesh send --data`` (a DataPart) and ``--file`` (FileParts, large ones by artifact:// URI),
the real ``mesh`` command against agents on the real broker; its errors; the inline size it prints."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path
from typing import Any

from agents import Agent, TaskContext
from agents.updates import FileArtifact, Reply
from agents.workflow import WorkflowAgent, load_workflow
from mesh.a2a import DataPart, FilePart, FileWithBytes, FileWithUri, Message, get_text_from_message
from tests.agents.workflow_agents import Upper
from tests.conftest import ServeAgent
from tests.mesh.cli_process import Result, mesh, mesh_env

PAIR = """
input_schema:
  type: object
  properties: {word: {type: string}, times: {type: integer}}
  required: [word, times]
nodes:
  - {id: shout, agent: upper, input: "{{ (input.word ~ ' ') * input.times }}"}
output: {said: "{{ shout.output.text | trim }}"}
"""


class Files(Agent):
    """``files``: says what came: its text, its data, each file's name, size and how it came; asked
    ``give``, answers with a 5-byte inline file."""

    name = "files"

    async def handle(self, message: Message, ctx: TaskContext) -> Any:
        if get_text_from_message(message) == "give":
            yield FileArtifact("fine.txt", content=b"fine\n", mime_type="text/plain")
            return
        lines = [f"text: {get_text_from_message(message) or '-'}"]
        for part in message.parts:
            if isinstance(part, DataPart):
                lines.append(f"data: {json.dumps(part.data, sort_keys=True)}")
            elif isinstance(part, FilePart) and isinstance(part.file, FileWithBytes):
                content = base64.b64decode(part.file.bytes)
                lines.append(f"file {part.file.name} {part.file.mime_type}: {len(content)} bytes inline")
            elif isinstance(part, FilePart) and isinstance(part.file, FileWithUri):
                content = await ctx.load_artifact(part.file.uri)
                uri = part.file.uri.replace(message.context_id or "?", "CTX")
                lines.append(f"file {part.file.name}: {len(content)} bytes by {uri}, starts {content[:5]!r}")
        yield Reply("\n".join(lines))


async def send_stdin(env: dict[str, str], stdin: str, *args: str) -> Result:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mesh.cli", "send", *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=mesh_env(**env),
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 30)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


async def test_data_calls_a_workflow_whose_input_has_two_properties(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(Upper())
    await serve_agent(WorkflowAgent(name="pair", graph=load_workflow(PAIR, name="pair")))
    env = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}

    given = await mesh("send", "pair", "--data", '{"word": "hey", "times": 3}', **env)
    assert (given.code, given.stdout) == (0, "HEY HEY HEY\n"), given.stderr
    data_file = tmp_path / "input.json"
    data_file.write_text('{"word": "file", "times": 2}')
    from_file = await mesh("send", "pair", "--data", f"@{data_file}", **env)
    assert (from_file.code, from_file.stdout) == (0, "FILE FILE\n"), from_file.stderr
    piped = await send_stdin(env, '{"word": "pipe", "times": 1}\n', "pair", "--data", "-")
    assert (piped.code, piped.stdout) == (0, "PIPE\n"), piped.stderr

    # Text alone cannot say two properties: the workflow refuses it, as before.
    text = await mesh("send", "pair", "hey", **env)
    assert text.code != 0 and "lacks the required property" in text.stdout + text.stderr


async def test_bad_data_and_missing_files_are_told_with_the_fix(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(Files())
    env = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
    cases = [
        (["--data", '{"word": "hey",}'], ["--data is not JSON (", "give a JSON object, e.g. --data '{"]),
        (["--data", "[1, 2]"], ["--data is a JSON list, not an object"]),
        (["--data", f"@{tmp_path / 'nope.json'}"], ["cannot read", "No such file or directory", "JSON file"]),
        (["--file", str(tmp_path / "nope.txt")], [f"--file {tmp_path / 'nope.txt'}: no such file"]),
        (["--file", str(tmp_path)], ["is a folder; give a file"]),
        ([], ["give the message: TEXT, --data JSON or --file PATH"]),
    ]
    for args, expected in cases:
        result = await mesh("send", "files", *args, **env)
        said = f"mesh send files {' '.join(args)}: {result}"
        assert result.code == 2 and result.stdout == "", said
        assert all(text in result.stderr for text in expected), said
        assert "Traceback" not in result.stderr, said
    both = await send_stdin(env, "{}", "files", "-", "--data", "-")
    assert both.code == 2 and "both read standard input" in both.stderr and "Traceback" not in both.stderr


async def test_files_go_inline_or_by_artifact_uri_above_the_threshold(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(Files())
    env = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
    small = tmp_path / "notes.txt"
    small.write_text("hello")
    large = tmp_path / "big.bin"
    large.write_bytes(b"BIG!!" + bytes(1_200_000))  # past the 1 MB threshold

    sent = await mesh("send", "files", "look", "--file", str(small), "--data", '{"n": 1}', **env)
    assert sent.code == 0, sent.stderr
    assert sent.stdout == 'text: look\ndata: {"n": 1}\nfile notes.txt text/plain: 5 bytes inline\n'

    sent = await mesh("send", "files", "--file", str(large), "--file", str(small), **env)
    assert sent.code == 0, sent.stderr
    assert sent.stdout == (
        "text: -\n"
        "file big.bin: 1200005 bytes by artifact://CTX/big.bin?version=1, starts b'BIG!!'\n"
        "file notes.txt text/plain: 5 bytes inline\n"
    )


async def test_an_inline_file_is_printed_with_its_decoded_size(
    serve_agent: ServeAgent, broker_url: str, namespace: str
) -> None:
    await serve_agent(Files())
    given = await mesh("send", "files", "give", MESH_BROKER_URL=broker_url, MESH_NAMESPACE=namespace)
    assert (given.code, given.stdout) == (0, "[artifact fine.txt]\n<file fine.txt 5 bytes inline>\n"), given
