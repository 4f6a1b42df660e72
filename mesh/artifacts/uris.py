"""Artifact names and ``artifact://{context_id}/{name}[?version=N]`` URIs (the seed's FilePart form).

Allowed characters (documented in docs/artifacts.md):

- a **name** is 1-255 characters of ``A-Z a-z 0-9 . _ -``, with ``/`` separating folders
  (``charts/q3.png``); no empty segment, no segment ``.`` or ``..``, none starting with ``.``;
- a **context id** is 1-128 characters of ``A-Z a-z 0-9 . _ - : @``, not starting with ``.``.

Anything else is refused with :class:`~mesh.artifacts.errors.InvalidArtifactName`, so a name
can never reach outside its folder nor need escaping in a URI. ``encode_segment`` turns any
string (a namespace) into one safe, reversible path segment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from mesh.artifacts.errors import InvalidArtifactName, InvalidArtifactUri

__all__ = ["SCHEME", "ArtifactRef", "encode_segment", "is_artifact_uri", "validate_context_id", "validate_name"]

SCHEME = "artifact"
MAX_NAME_LENGTH = 255
MAX_CONTEXT_LENGTH = 128
_SEGMENT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
_CONTEXT = re.compile(r"[A-Za-z0-9_:@-][A-Za-z0-9._:@-]*")
_SAFE = re.compile(r"[A-Za-z0-9.-]")
_NAME_RULE = "use 1-255 characters of A-Z a-z 0-9 . _ - with '/' between folders, no segment starting with '.'"
_CONTEXT_RULE = "use 1-128 characters of A-Z a-z 0-9 . _ - : @, not starting with '.'"


def validate_name(name: object) -> str:
    """``name`` if the store accepts it, else :class:`InvalidArtifactName` saying why."""
    if not isinstance(name, str) or not name:
        raise InvalidArtifactName(f"artifact name {name!r} is empty or not a string; {_NAME_RULE}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArtifactName(f"artifact name of {len(name)} characters is too long; {_NAME_RULE}")
    for segment in name.split("/"):
        if not _SEGMENT.fullmatch(segment):
            raise InvalidArtifactName(f"artifact name {name[:80]!r} has a bad segment {segment[:40]!r}; {_NAME_RULE}")
    return name


def validate_context_id(context_id: object) -> str:
    """``context_id`` if it can name an artifact's context, else :class:`InvalidArtifactName`."""
    if not isinstance(context_id, str) or len(context_id) > MAX_CONTEXT_LENGTH or not _CONTEXT.fullmatch(context_id):
        shown = context_id[:80] if isinstance(context_id, str) else context_id
        raise InvalidArtifactName(f"context id {shown!r} cannot hold artifacts; {_CONTEXT_RULE}")
    return context_id


def encode_segment(value: str) -> str:
    """``value`` as one path segment: ``A-Z a-z 0-9 . -`` kept, every other byte (``_`` and a
    leading ``.`` too) as ``_XX``; injective, so ``acme/ai`` and ``acme_ai`` never meet."""
    out = []
    for index, char in enumerate(value):
        if _SAFE.fullmatch(char) and not (index == 0 and char == "."):
            out.append(char)
        else:
            out.extend(f"_{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
    return "".join(out)


def is_artifact_uri(uri: object) -> bool:
    return isinstance(uri, str) and uri.startswith(f"{SCHEME}://")


@dataclass(frozen=True, slots=True)
class ArtifactRef:
    """One artifact (``version`` ``None``: the latest), built from parts or parsed from a URI."""

    context_id: str
    name: str
    version: int | None = None

    def __post_init__(self) -> None:
        validate_context_id(self.context_id)
        validate_name(self.name)
        if self.version is not None and (isinstance(self.version, bool) or self.version < 1):
            raise InvalidArtifactUri(f"artifact version {self.version!r} is not a positive integer")

    @property
    def uri(self) -> str:
        version = "" if self.version is None else f"?version={self.version}"
        return f"{SCHEME}://{self.context_id}/{self.name}{version}"

    @classmethod
    def parse(cls, uri: str) -> ArtifactRef:
        """The reference a URI names; :class:`InvalidArtifactUri` for a foreign or malformed one."""
        if not is_artifact_uri(uri):
            shown = uri[:80] if isinstance(uri, str) else uri
            raise InvalidArtifactUri(
                f"{shown!r} is not an artifact URI; expected artifact://{{context_id}}/{{name}}[?version=N]"
            )
        rest = uri[len(SCHEME) + 3 :]
        context_id, slash, tail = rest.partition("/")
        parts = urlsplit("x:/" + tail)
        if not slash or not parts.path[1:] or parts.fragment:
            raise InvalidArtifactUri(f"{uri[:80]!r} names no artifact; expected artifact://{{context_id}}/{{name}}")
        query = parse_qs(parts.query, keep_blank_values=True, max_num_fields=4)
        if set(query) - {"version"} or len(query.get("version", [])) > 1:
            raise InvalidArtifactUri(f"{uri[:80]!r}: the only query parameter is one 'version'")
        version: int | None = None
        if "version" in query:
            text = query["version"][0]
            if not text.isdigit() or len(text) > 9:
                raise InvalidArtifactUri(f"{uri[:80]!r}: version {text[:20]!r} is not a positive integer")
            version = int(text)
        try:
            return cls(context_id, parts.path[1:], version)
        except InvalidArtifactName as exc:
            raise InvalidArtifactUri(f"{uri[:80]!r}: {exc}") from exc

    def at(self, version: int) -> ArtifactRef:
        return ArtifactRef(self.context_id, self.name, version)
