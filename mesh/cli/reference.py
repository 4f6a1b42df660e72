"""The CLI reference (``docs/cli.md``), generated from the ``mesh`` parser so it cannot drift.

::

    python -m mesh.cli.reference            # rewrite docs/cli.md
    python -m mesh.cli.reference --check    # exit 1 when docs/cli.md differs from the parser

Each command's ``--help``, as the parser prints it at a fixed width of 100 columns (so the
page does not depend on the terminal that wrote it), under a heading of its own.
``tests/test_docs.py`` checks that the page equals what the parser generates.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["DEFAULT_PATH", "generate", "main"]

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
WIDTH = "100"

_HEADER = """\
# CLI reference

Every `mesh` command with its options, as `mesh COMMAND --help` prints them. This page is
generated from the parser: after changing a command, run `python -m mesh.cli.reference` (a test
fails while it differs). Exit codes, the broker and namespace defaults and the environment
variables are in [configuration.md](configuration.md); the commands in use are in the
[README](../README.md).

"""


@contextmanager
def _fixed_width() -> Iterator[None]:
    """argparse wraps at the terminal's width (``$COLUMNS`` first): fix it while generating."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        yield
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            choices: dict[str, argparse.ArgumentParser] = action.choices
            return choices
    return {}


def _sections(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, str]]:
    yield path, parser.format_help()
    for name, sub in _subcommands(parser).items():
        yield from _sections(sub, f"{path} {name}")


def generate() -> str:
    """The page: the contents, then each command's help in a ``text`` block."""
    from mesh.cli import build_parser  # the whole CLI, only when generating

    with _fixed_width():
        sections = list(_sections(build_parser(), "mesh"))
    contents = [f"- [`{path}`](#{_anchor(path)})" for path, _ in sections[1:]]
    body = [f"## `{path}`\n\n```text\n{text.rstrip()}\n```\n" for path, text in sections]
    return _HEADER + "\n".join(contents) + "\n\n" + "\n".join(body)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a ``## `mesh send` `` heading: ``mesh-send``."""
    return heading.lower().replace(" ", "-")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mesh.cli.reference", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_PATH, help="the page to write (default: docs/cli.md)")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the page differs")
    args = parser.parse_args(argv)
    page = generate()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != page:
            print(f"{args.out} differs from the parser; run python -m mesh.cli.reference", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(page, encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
