"""Config errors that say where and how to fix: ``<file>: <key path>: <problem>; <fix>``.

The loader and every section factory (``agents:``, ``gateways:``...) report their problems
with these helpers, so all config errors read the same. Values are shown so the user can spot
the mistake, except where they may be secrets: under secret-looking keys, in models that hide
their input, and whole mappings or lists.
"""

from __future__ import annotations

import difflib
import inspect
import re
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from mesh.errors import ConfigError, short_repr
from mesh.redaction import is_secret_key

KeyPart = str | int

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def key_path(*parts: KeyPart) -> str:
    """``("agents", 0, "limits")`` -> ``agents[0].limits``; odd keys are quoted: ``x['a.b']``."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif isinstance(part, str) and _PLAIN_KEY.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text


def config_error(source: Path | str, path: str | Sequence[KeyPart], problem: str, fix: str) -> ConfigError:
    """Build the standard ``<file>: <key path>: <problem>; <fix>`` error (path may be empty)."""
    where = path if isinstance(path, str) else key_path(*path)
    prefix = f"{source}: {where}: " if where else f"{source}: "
    return ConfigError(f"{prefix}{problem}; {fix}")


def suggest(word: object, candidates: Iterable[str]) -> str | None:
    """The candidate closest to *word* (difflib), or ``None`` when nothing is close."""
    matches = difflib.get_close_matches(str(word), list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def check_keys(
    mapping: Mapping[Any, Any], allowed: Sequence[str], *, source: Path | str, path: Sequence[KeyPart] = ()
) -> None:
    """Raise for the first key of *mapping* not in *allowed*, suggesting the closest allowed key."""
    for key in mapping:
        if key not in allowed:
            close = suggest(key, allowed)
            hint = f"did you mean {close!r}? " if close else ""
            raise config_error(
                source,
                [*path, key],
                f"unknown key {key!r}",
                f"{hint}allowed keys: {', '.join(allowed)}",
            )


def validation_error_text(
    exc: ValidationError,
    *,
    source: Path | str,
    prefix: Sequence[KeyPart] = (),
    model: type[BaseModel] | None = None,
) -> str:
    """Render a pydantic ``ValidationError`` as config-error lines, one per problem.

    Each line is ``<file>: <prefix + loc>: <problem>, got <input>; <fix>``. With *model* (the
    class that was validated) unknown keys get a did-you-mean from the fields at their level
    and fixes quote the field's description. Raise it as ``ConfigError(text) from exc``.
    """
    lines = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        path = key_path(*prefix, *loc)
        owner = _model_at(model, loc[:-1])
        hidden = _hides_input(model, owner) or any(isinstance(p, str) and _holds_secrets(p) for p in loc)
        problem, fix = _explain(error, owner, loc[-1] if loc else "", hidden)
        lines.append(str(config_error(source, path, problem, fix)))
    return "\n".join(lines)


# Config keys whose values are collections of secrets: the HTTP gateway's ``auth`` section and
# its ``tokens`` / ``keys`` lists and ``users`` map. Their items have no secret-looking name of
# their own, so the shared rule cannot see them; the E2A log must not use this list, where
# ``tokens`` counts usage and ``auth`` is redacted field by field.
_SECRET_HOLDERS = frozenset({"auth", "tokens", "keys", "users"})


def _holds_secrets(key: str) -> bool:
    return is_secret_key(key) or key.lower() in _SECRET_HOLDERS


def _hides_input(*models: type[BaseModel] | None) -> bool:
    return any(m is not None and m.model_config.get("hide_input_in_errors") for m in models)


def _explain(error: Any, owner: type[BaseModel] | None, key: KeyPart, hidden: bool) -> tuple[str, str]:
    kind, value = error["type"], error.get("input")
    if hidden or isinstance(value, dict | list | tuple):
        # Secrets may sit anywhere inside a mapping; name the shape, never the content.
        value = _Redacted(type_name(value))
    fields = owner.model_fields if owner is not None else {}
    info = fields.get(key) if isinstance(key, str) else None
    if kind == "extra_forbidden":
        close = suggest(key, fields)
        hint = f"did you mean {close!r}? " if close else ""
        allowed = f"allowed keys: {', '.join(fields)}" if fields else "remove it"
        return f"unknown key {key!r}", hint + allowed
    if kind == "missing":
        return "required key is missing", f"add {key}: <value>"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        sub = _model_in(info.annotation) if info is not None else None
        keys = f" of keys such as {', '.join(list(sub.model_fields)[:4])}" if sub else ""
        return f"expected a mapping, got {short_repr(value)}", f"write {key} as a mapping{keys}"
    message = error["msg"][:1].lower() + error["msg"][1:]
    about = f" ({info.description})" if info is not None and info.description else ""
    return f"{message}, got {short_repr(value)}", f"set {key} to a valid value{about}"


def _model_at(model: type[BaseModel] | None, loc: Sequence[KeyPart]) -> type[BaseModel] | None:
    """The model that owns the last key of *loc*; list indexes keep the current model."""
    for part in loc:
        if model is None:
            return None
        if isinstance(part, str):
            info = model.model_fields.get(part)
            model = _model_in(info.annotation) if info is not None else None
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


class _Redacted(str):
    """What a config error shows instead of a value it must not repeat."""

    def __repr__(self) -> str:
        return str(self)


def type_name(value: object) -> str:
    """What kind of YAML value this is, in words (a mapping, a list...)."""
    names = {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing (null)"}
    return names.get(type(value), f"a {type(value).__name__}")
