"""The fenced blocks of a documentation page, as the doc test (tests/test_readme.py) reads them.

A block is opened by a fence (```` ``` ```` or ``~~~``, indented as its list item is) and an info
string: a kind, then at most one marker word. The kinds and what the doc test does with each:

==================================  ==========================================================
``console``                         run against the page's ``mesh up``; what it prints is checked
``console illustrative``            not run; every ``mesh`` command in it must parse
``sh`` / ``bash`` / ``shell``       run (``bash -e``, exit status 0) against the page's mesh
``sh illustrative`` (...)           not run; ``bash -n`` and every ``mesh`` command must parse
``yaml``                            a whole mesh config: loaded and its components built (with
                                    a top-level ``cases:``, an eval file: loaded by ``mesh eval``'s loader)
``yaml fragment``                   part of one: loaded by the config loader, not built
``python``                          a whole module: imported in a scratch dir (``test_*.py``:
                                    run by pytest, warnings as errors)
``python fragment``                 compiled only (top-level ``await`` allowed)
``toml``, ``json``                  parsed (``json``: a document or JSON Lines; ``json fragment``: not parsed)
``text``, ``mermaid``               shown as they are (program output, protocol logs, diagrams)
==================================  ==========================================================

A block whose first line is ``# <file name>`` (``# weather.py``, ``# agents.yaml``) is a file of
the examples: the doc test writes it into the page's scratch directory. A marked block
(``illustrative``, ``fragment``) needs a reason: the prose just before or after it says why,
with the marker word in it.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import re
import shlex
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

#: Each kind, and the marker words it may carry.
KINDS: dict[str, frozenset[str]] = {
    "console": frozenset({"illustrative"}),
    "sh": frozenset({"illustrative"}),
    "bash": frozenset({"illustrative"}),
    "shell": frozenset({"illustrative"}),
    "yaml": frozenset({"fragment"}),
    "python": frozenset({"fragment"}),
    "toml": frozenset(),
    "json": frozenset({"fragment"}),
    "text": frozenset(),
    "mermaid": frozenset(),
}
SHELLS = frozenset({"sh", "bash", "shell"})
FENCE = re.compile(
    r"^(?P<indent>[ ]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$", re.S | re.M
)
FILE_NAME = re.compile(r"# (?P<name>[\w-]+\.(?:py|yaml|yml|toml|json))\b")
REASON_LINES = 8  # how far from a marked block its reason may be


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, from 1
    kind: str
    marker: str  # "" or a word of KINDS[kind]
    body: str
    before: str  # the prose between the previous block and this one
    after: str  # ... and between this one and the next

    @property
    def name(self) -> str | None:
        """The file the block is, from its first line ``# <file name>``."""
        found = FILE_NAME.match(self.body)
        return found["name"] if found else None

    @property
    def runs(self) -> bool:
        return self.kind in ("console", *SHELLS) and not self.marker

    def __str__(self) -> str:
        return f"line {self.line} (```{self.kind} {self.marker}".rstrip() + ")"


def blocks(text: str) -> list[Block]:
    """The page's fenced blocks, in order (a malformed info string is :func:`problems`' to report)."""
    matches = list(FENCE.finditer(text))
    found = []
    for i, match in enumerate(matches):
        info = match["info"].split()
        indent = match["indent"]
        body = "".join(line.removeprefix(indent) for line in match["body"].splitlines(keepends=True))
        previous_end = matches[i - 1].end() if i else 0
        next_start = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        before = "\n".join(text[previous_end : match.start()].splitlines()[-REASON_LINES:])
        if found and not before.strip():  # blocks in a row share the prose before the first
            before = found[-1].before
        found.append(
            Block(
                line=text.count("\n", 0, match.start()) + 1,
                kind=info[0] if info else "",
                marker=" ".join(info[1:]),
                body=body,
                before=before,
                after="\n".join(text[match.end() : next_start].splitlines()[:REASON_LINES]),
            )
        )
    return found


def problems(block: Block) -> list[str]:
    """What is wrong with the block's info string, its reason, or (for the kinds checked without
    running anything) its text."""
    if block.kind not in KINDS:
        return [f"{block}: say what the block is: ```{' / ```'.join(KINDS)}"]
    if block.marker and block.marker not in KINDS[block.kind]:
        allowed = " or ".join(sorted(KINDS[block.kind])) or "no marker"
        return [f"{block}: unknown marker {block.marker!r}; a {block.kind} block takes {allowed}"]
    if block.marker and not re.search(rf"\b{block.marker}\b", f"{block.before}\n{block.after}", re.I):
        return [f"{block}: say near the block why it is {block.marker} (with the word {block.marker!r})"]
    if "\n```" in f"\n{block.body}":
        return [f"{block}: holds a fence: an opening fence without its closing one swallows what follows"]
    try:
        if block.kind == "python":
            flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if block.marker else 0
            compile(block.body, f"block at line {block.line}", "exec", flags=flags, dont_inherit=True)
        elif block.kind == "toml":
            import tomllib

            tomllib.loads(block.body)
        elif block.kind == "json" and not block.marker:
            import json

            try:
                json.loads(block.body)
            except ValueError:  # JSON Lines: one document a line
                for line in filter(None, block.body.splitlines()):
                    json.loads(line)
    except (SyntaxError, ValueError) as exc:
        return [f"{block}: {exc}"]
    if block.kind in SHELLS:
        syntax = subprocess.run(["bash", "-n"], input=block.body, text=True, capture_output=True, check=False)
        if syntax.returncode:
            return [f"{block}: bash -n: {syntax.stderr.strip()}"]
    return [f"{block}: `{' '.join(argv)}`: {error}" for argv, error in mesh_command_errors(block)]


def commands(block: Block) -> list[str]:
    """The commands of a console block (its ``$`` lines) or a shell block (its lines)."""
    if block.kind == "console":
        return [line[2:] for line in block.body.splitlines() if line.startswith("$ ")]
    if block.kind in SHELLS:
        return [block.body]
    return []


def mesh_invocations(script: str) -> list[list[str]]:
    """The argument lists of the ``mesh`` (or ``.venv/bin/mesh``) commands in a shell script."""
    found = []
    pending = ""
    for line in script.replace("\\\n", " ").splitlines():
        pending = f"{pending}\n{line}" if pending else line
        lexer = shlex.shlex(pending, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            tokens = list(lexer)
        except ValueError:  # a quote that closes on a later line
            continue
        pending = ""
        command: list[str] = []
        for token in [*tokens, ";"]:
            if token and set(token) <= set(";&|()"):
                while command and re.fullmatch(r"\w+=.*", command[0]):  # VAR=value mesh ...
                    command.pop(0)
                if command and (command[0] == "mesh" or command[0].endswith("/mesh")):
                    found.append(command[1:])
                command = []
            else:
                command.append(token)
    return found


def mesh_command_errors(block: Block) -> list[tuple[list[str], str]]:
    """Each ``mesh`` command of the block that the ``mesh`` parser refuses, with its message."""
    errors = []
    for script in commands(block):
        for argv in mesh_invocations(script):
            stderr = io.StringIO()
            try:
                with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
                    _parser().parse_args(argv)
            except SystemExit as exc:
                if exc.code not in (0, None):  # --help and --version exit 0
                    errors.append((["mesh", *argv], stderr.getvalue().strip().splitlines()[-1]))
    return errors


@cache
def _parser() -> argparse.ArgumentParser:
    from mesh.cli import build_parser

    return build_parser()


def page_blocks(page: Path) -> list[Block]:
    return blocks(page.read_text(encoding="utf-8"))
