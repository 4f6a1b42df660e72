"""The documentation holds together: every relative link of README.md and docs/*.md resolves to
a file of the repository (and, with ``#anchor``, to a heading of it), every docs page can be
reached from the README, and docs/cli.md is what the parser generates."""

from __future__ import annotations

import re
from pathlib import Path

from mesh.cli.reference import DEFAULT_PATH, generate

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The text without code blocks and inline code: links there are not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a page's headings (lower case, punctuation dropped, spaces to
    hyphens; a repeated one gets -1, -2...)."""
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(FENCE.sub("", path.read_text(encoding="utf-8"))):
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match["title"])  # a linked heading: its text
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(page: Path) -> list[str]:
    return [m["target"] for m in LINK.finditer(prose(page.read_text(encoding="utf-8")))]


def is_external(target: str) -> bool:
    return re.match(r"[a-z][a-z0-9+.-]*:", target) is not None  # http:, https:, mailto:...


def test_every_relative_link_resolves_inside_the_repository() -> None:
    broken = []
    for page in PAGES:
        for target in links(page):
            if is_external(target):
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not resolved.is_relative_to(ROOT):
                broken.append(f"{where} leaves the repository")
            elif not resolved.exists():
                broken.append(f"{where} names no file")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{where} names no heading of {resolved.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)
    assert sum(len(links(page)) for page in PAGES) > 20  # the checker did see the links


def test_the_checker_sees_a_broken_link_and_an_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A title, with `code`!\n\n## Twice\n## Twice\n\n```\n[not](a-link.md)\n```\n[x](y.md)\n")
    assert anchors(page) == {"a-title-with-code", "twice", "twice-1"}
    assert links(page) == ["y.md"]


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    reached = {ROOT / "README.md"}
    queue = [ROOT / "README.md"]
    while queue:
        page = queue.pop()
        for target in links(page):
            file_part = target.partition("#")[0]
            if is_external(target) or not file_part.endswith(".md"):
                continue
            linked = (page.parent / file_part).resolve()
            if linked.exists() and linked not in reached:
                reached.add(linked)
                queue.append(linked)
    unreached = [str(p.relative_to(ROOT)) for p in PAGES if p not in reached]
    assert not unreached, f"no link from README.md leads to {unreached}"


def test_the_cli_reference_is_what_the_parser_generates() -> None:
    assert DEFAULT_PATH == ROOT / "docs" / "cli.md"
    page = generate()
    assert "## `mesh send`" in page and "--stream" in page
    assert DEFAULT_PATH.read_text(encoding="utf-8") == page, (
        "docs/cli.md differs from the parser: run `.venv/bin/python -m mesh.cli.reference`"
    )


def test_the_configuration_reference_names_every_setting() -> None:
    from agents.settings import AgentSettings
    from gateways.http.settings import HttpGatewaySettings

    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [
        f"{model.__name__}.{name}"
        for model in (AgentSettings, HttpGatewaySettings)
        for name in model.model_fields
        if f"`{name}" not in page and f".{name}`" not in page
    ]
    assert not missing, f"docs/configuration.md lacks {missing}; add them to its tables"


def test_the_readme_stays_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines; move the details into a docs/ page and link it"


def test_the_architecture_page_names_every_folder_and_every_module_at_the_top_of_mesh() -> None:
    """docs/architecture.md is drawn from the tree: a folder or a top-level module of mesh/ that it
    does not name is one it does not describe."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    folders = [
        f"{path.relative_to(ROOT).as_posix()}/"
        for package in ("mesh", "agents", "gateways")
        for path in sorted((ROOT / package).iterdir())
        if path.is_dir() and (path / "__init__.py").exists()
    ]
    modules = [path.name for path in sorted((ROOT / "mesh").glob("*.py")) if path.name != "__init__.py"]
    missing = [name for name in [*folders, *modules] if f"`{name}`" not in page and f"**{name}**" not in page]
    assert not missing, f"docs/architecture.md does not describe {missing}"
