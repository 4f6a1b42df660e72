"""Loading mesh config files: core keys, env substitution, sections, errors, building."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

import mesh.config
import mesh.config.sections
from mesh.broker import BrokerSettings
from mesh.component import BuildContext, Component
from mesh.config import MeshConfig, configured_broker, load_config, load_many
from mesh.config.errors import check_keys, config_error, key_path, validation_error_text
from mesh.config.sections import build_components, build_many, check_unique_components, section_names
from mesh.errors import ConfigError

WriteConfig = Callable[..., Path]


@pytest.fixture
def write(tmp_path: Path) -> WriteConfig:
    """Write a config file into tmp_path; returns its path."""

    def write(text: str, name: str = "mesh.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


def error_of(path: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ=environ or {})
    return str(caught.value)


# ---------------------------------------------------------------- test sections


@dataclass
class Widget:
    """A Component built by the test section factory."""

    name: str
    context: BuildContext
    kind: str = "widget"

    async def start(self) -> None:
        raise NotImplementedError("never started in these tests")

    async def stop(self) -> None:
        raise NotImplementedError("never started in these tests")


def build_widgets(entries: Sequence[Any], ctx: BuildContext) -> list[Component]:
    return [Widget(entry["name"], ctx) for entry in entries]


@dataclass
class FakeEntryPoint:
    """An entry point whose distribution the test chooses (``EntryPoint`` is immutable)."""

    value: str
    dist: Any = None

    def load(self) -> Any:
        return EntryPoint("x", self.value, "mesh.sections").load()


@dataclass
class FakeDist:
    name: str
    requires: list[str]


@pytest.fixture
def sections(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Installed sections for the test: widgets works, gadgets' package is missing."""
    installed: dict[str, Any] = {
        "widgets": FakeEntryPoint("tests.mesh.test_config:build_widgets"),
        "gadgets": FakeEntryPoint("tests.mesh.no_such_package.config:build_gadgets"),
    }
    monkeypatch.setattr(mesh.config.sections, "_section_entry_points", lambda: installed)
    return installed


# ---------------------------------------------------------------- core keys


def test_defaults(write: WriteConfig) -> None:
    config = load_config(write("agents: []\n"), environ={})
    assert config == MeshConfig(source=config.source, sections={"agents": []})
    assert (config.broker, config.namespace, config.log_level) == (None, "mesh", "info")


def test_every_core_key_and_section_order(write: WriteConfig) -> None:
    path = write(
        "broker: mqtts://broker.example:8883\n"
        "namespace: acme/ai/\n"
        "log_level: DEBUG\n"
        "gateways:\n  - kind: http\n"
        "agents:\n  - class: a:B\n  - class: c:D\n"
    )
    config = load_config(path, environ={})
    assert config.source == path
    assert config.broker == "mqtts://broker.example:8883"
    assert config.namespace == "acme/ai"  # SAM's trailing slash is dropped
    assert config.log_level == "debug"
    assert list(config.sections) == ["gateways", "agents"]
    assert config.sections["agents"] == [{"class": "a:B"}, {"class": "c:D"}]


def test_empty_file_and_empty_section(write: WriteConfig) -> None:
    assert load_config(write("# nothing yet\n"), environ={}).sections == {}
    assert load_config(write("agents:\n  # - class: a:B\n"), environ={}).sections == {"agents": []}


def test_empty_broker_means_not_configured(write: WriteConfig) -> None:
    assert load_config(write("broker: ${MESH_BROKER:-}\n"), environ={}).broker is None


def test_file_not_found(tmp_path: Path) -> None:
    message = error_of(tmp_path / "missing.yaml")
    assert "missing.yaml: file not found; check the path" in message


def test_directory_is_refused(tmp_path: Path) -> None:
    assert error_of(tmp_path) == f"{tmp_path}: is a directory; pass a YAML file such as mesh.yaml"


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("namespace: caf\xe9\n".encode("latin-1"))
    assert error_of(path) == f"{path}: is not UTF-8 text (bad byte at offset 14); save it as UTF-8"


def test_yaml_syntax_error_gives_line_and_column(write: WriteConfig) -> None:
    path = write("agents:\n  - class: a:B\n   name: x\n")
    message = error_of(path)
    assert message.startswith(f"{path}: line 3, column 4: ")
    assert "expected <block end>" in message
    assert message.endswith("; fix the YAML syntax there (indentation, a space after ':', unclosed quotes or brackets)")


def test_control_character(write: WriteConfig) -> None:
    path = write("namespace: a\nlog_level: in\x07fo\n")
    assert error_of(path) == (
        f"{path}: line 2, column 14: unacceptable character #x0007; "
        "remove it: YAML allows no control characters except tab and newline"
    )


def test_unsafe_tag_is_refused(write: WriteConfig) -> None:
    path = write("namespace: !!python/name:os.system x\n")
    message = error_of(path)
    assert message.startswith(f"{path}: line 1, column 12: ")
    assert "could not determine a constructor for the tag 'tag:yaml.org,2002:python/name:os.system'" in message


def test_duplicate_yaml_key(write: WriteConfig) -> None:
    path = write("agents: []\nnamespace: a\nagents: []\n")
    assert error_of(path) == (
        f"{path}: line 3, column 1: duplicate key 'agents' (first at line 1); "
        "YAML keeps only the last one silently; merge the two into one"
    )


def test_merge_keys_may_override(write: WriteConfig, sections: dict[str, Any]) -> None:
    path = write("widgets:\n  - &base {name: a, size: 1}\n  - <<: *base\n    name: b\n")
    assert load_config(path, environ={}).sections["widgets"][1] == {"name": "b", "size": 1}


def test_top_level_must_be_a_mapping(write: WriteConfig) -> None:
    path = write("- class: a:B\n")
    assert error_of(path) == (
        f"{path}: top level: expected a mapping of keys, got a list; "
        "start the file with keys such as 'namespace: mesh' and 'agents:'"
    )


def test_unknown_top_level_key_suggests_a_section(write: WriteConfig) -> None:
    path = write("agent:\n  - class: a:B\n")
    assert error_of(path) == (
        f"{path}: agent: unknown key 'agent'; did you mean 'agents'? "
        "allowed keys: broker, tls, namespace, log_level, trust, artifacts, emqx, agents, gateways, schedules"
    )


def test_unknown_key_without_a_close_match(write: WriteConfig, sections: dict[str, Any]) -> None:
    path = write("zzz: 1\n")
    assert (
        error_of(path)
        == f"{path}: zzz: unknown key 'zzz'; allowed keys: broker, tls, namespace, log_level, trust, artifacts, emqx, "
        "gadgets, widgets"
    )


def test_section_must_be_a_list(write: WriteConfig) -> None:
    path = write("agents:\n  class: a:B\n")
    assert error_of(path) == (
        f"{path}: agents: expected a list of entries, got a mapping; "
        "write each entry as a list item starting with '- ' under 'agents:'"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a/+/b", "namespace: invalid namespace 'a/+/b': contains the wildcard character +; namespace levels"),
        ("42", "namespace: invalid namespace 42: expected a str; use one or more non-empty '/'-separated levels"),
        ("''", "namespace: invalid namespace '': must not be empty; use one or more"),
    ],
)
def test_bad_namespace_reuses_the_topics_message(write: WriteConfig, value: str, expected: str) -> None:
    path = write(f"namespace: {value}\n")
    assert error_of(path).startswith(f"{path}: {expected}")


def test_bad_log_level(write: WriteConfig) -> None:
    path = write("log_level: warn\n")
    assert error_of(path) == (
        f"{path}: log_level: unknown log level 'warn'; did you mean 'warning'? use one of: debug, info, warning, error"
    )


def test_bad_broker_url(write: WriteConfig) -> None:
    path = write("broker: http://localhost\n")
    assert error_of(path) == (
        f"{path}: broker: broker URL 'http://localhost': unsupported scheme 'http'; "
        "use mqtt://host:1883 or mqtts://host:8883"
    )
    path = write("broker: 1883\n")
    assert error_of(path) == f"{path}: broker: expected a URL string, got 1883; write broker: mqtt://host:1883"


@pytest.mark.parametrize("url", ["127.0.0.1:1884", "localhost:1884", "broker.example"])
def test_a_broker_url_without_scheme_suggests_mqtt(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerSettings.from_url(url)
    assert str(caught.value) == f"broker URL {url!r} has no scheme; write it as mqtt://{url} (or mqtts:// for TLS)"


# ---------------------------------------------------------------- environment variables


def test_env_set_default_and_empty(write: WriteConfig) -> None:
    path = write("namespace: ${NS}\nlog_level: ${LEVEL:-warning}\nbroker: ${URL:-mqtt://fallback:1883}\n")
    config = load_config(path, environ={"NS": "acme/ai", "URL": ""})
    assert config.namespace == "acme/ai"
    assert config.log_level == "warning"
    assert config.broker == "mqtt://fallback:1883"  # ':-' also replaces an empty value, as in the shell


def test_env_defaults_to_os_environ(write: WriteConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MESH_TEST_CONFIG_NS", "from/env")
    assert load_config(write("namespace: ${MESH_TEST_CONFIG_NS}\n")).namespace == "from/env"


def test_env_unset_is_an_error_naming_file_key_and_variable(write: WriteConfig) -> None:
    path = write("namespace: ${MESH_NS}\n", name="agents.yaml")
    assert error_of(path) == (
        f"{path}: namespace: environment variable MESH_NS is not set; export it, or write ${{MESH_NS:-default}}"
    )


def test_env_error_has_the_full_key_path(write: WriteConfig) -> None:
    path = write("agents:\n  - class: a:B\n    config: {keys: [x, '${TOKEN}']}\n")
    assert error_of(path).startswith(f"{path}: agents[0].config.keys[1]: environment variable TOKEN is not set;")


def test_env_several_per_string_and_escape(write: WriteConfig, sections: dict[str, Any]) -> None:
    path = write("widgets:\n  - name: '${HOST}:${PORT:-1883} $${literal} $$ ${HOST}'\n")
    entry = load_config(path, environ={"HOST": "h"}).sections["widgets"][0]
    assert entry == {"name": "h:1883 ${literal} $$ h"}


def test_env_values_cannot_change_the_structure(write: WriteConfig, sections: dict[str, Any]) -> None:
    path = write("widgets:\n  - name: ${EVIL}\n    size: ${SIZE}\n    ${KEY}: kept\n")
    entry = load_config(path, environ={"EVIL": "x\n- name: injected", "SIZE": "5"}).sections["widgets"][0]
    # Still text: the model reading the entry coerces "5" to a number if it wants one.
    assert entry == {"name": "x\n- name: injected", "size": "5", "${KEY}": "kept"}


@pytest.mark.parametrize("reference", ["${A:-${B}}", "${1X}", "abc${X", "${}"])
def test_bad_substitution(write: WriteConfig, reference: str) -> None:
    path = write(f"namespace: '{reference}'\n")
    message = error_of(path, {"A": "a", "B": "b"})
    assert message.startswith(f"{path}: namespace: bad substitution ")
    assert repr(reference) in message
    assert message.endswith("; write ${NAME} or ${NAME:-default} (no nesting); for a literal '${' write '$${'")


def test_non_string_scalars_are_left_alone(write: WriteConfig, sections: dict[str, Any]) -> None:
    path = write("widgets:\n  - {name: a, size: 3, enabled: true, ratio: 0.5, none: null}\n")
    assert load_config(path, environ={}).sections["widgets"] == [
        {"name": "a", "size": 3, "enabled": True, "ratio": 0.5, "none": None}
    ]


# ---------------------------------------------------------------- sections and factories


def test_installed_sections_come_from_entry_points() -> None:
    assert {"agents", "gateways"} <= section_names()


def test_load_config_imports_no_section_package(write: WriteConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    for module in list(sys.modules):
        if module.split(".")[0] in ("agents", "gateways"):
            monkeypatch.delitem(sys.modules, module)
    config = load_config(write("agents:\n  - class: a:B\ngateways:\n  - kind: http\n"), environ={})
    assert set(config.sections) == {"agents", "gateways"}
    assert not [m for m in sys.modules if m.split(".")[0] in ("agents", "gateways")]


def test_build_components_passes_the_context(write: WriteConfig, sections: dict[str, Any]) -> None:
    path = write("namespace: acme\nwidgets:\n  - name: a\n  - name: b\ngadgets: []\n")
    broker = BrokerSettings(host="example")
    components = build_components(load_config(path, environ={}), broker)
    assert [c.name for c in components] == ["a", "b"]
    assert all(isinstance(c, Component) for c in components)
    context = components[0].context  # type: ignore[attr-defined]
    assert context == BuildContext(broker=broker, namespace="acme", source=path, section="widgets")


def test_missing_section_package_names_what_to_install(write: WriteConfig, sections: dict[str, Any]) -> None:
    path = write("gadgets:\n  - kind: x\n")
    with pytest.raises(ConfigError) as caught:
        build_components(load_config(path, environ={}), BrokerSettings())
    assert str(caught.value) == (
        f"{path}: gadgets: cannot load the section's factory tests.mesh.no_such_package.config:build_gadgets "
        "(No module named 'tests.mesh.no_such_package'); "
        "reinstall tests (pip install --force-reinstall tests), or remove the 'gadgets' section"
    )


def test_missing_dependency_points_at_the_extra(
    write: WriteConfig, sections: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fancy_section.py").write_text("import starlette_not_installed_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    requires = [
        "pyyaml>=6",
        "starlette-not-installed-xyz>=1; extra == 'dev'",
        "starlette_not_installed_xyz>=1; extra == 'http'",
    ]
    sections["fancy"] = FakeEntryPoint("fancy_section:build", FakeDist("mqtt-agent-mesh", requires))
    sections["plain"] = FakeEntryPoint("fancy_section:build")
    path = write("fancy: [{}]\nplain: [{}]\n")
    config = load_config(path, environ={})
    with pytest.raises(ConfigError) as caught:
        build_components(config, BrokerSettings())
    assert str(caught.value).endswith("; install the 'http' extra: pip install 'mqtt-agent-mesh[http]'")
    assert "(No module named 'starlette_not_installed_xyz')" in str(caught.value)
    del config.sections["fancy"]
    with pytest.raises(ConfigError) as caught:
        build_components(config, BrokerSettings())
    assert str(caught.value).endswith(
        "; install the package that provides 'starlette_not_installed_xyz' (pip install starlette_not_installed_xyz)"
    )


def test_section_without_a_factory(sections: dict[str, Any], tmp_path: Path) -> None:
    config = MeshConfig(source=tmp_path / "x.yaml", sections={"other": [{}]})
    with pytest.raises(ConfigError) as caught:
        build_components(config, BrokerSettings())
    assert str(caught.value) == (
        f"{tmp_path / 'x.yaml'}: other: no installed package provides this section; "
        "install one, or remove it; installed sections: gadgets, widgets"
    )


# ---------------------------------------------------------------- several files


def test_load_many_and_the_same_file_twice(write: WriteConfig) -> None:
    first, second = write("namespace: a\n", "a.yaml"), write("namespace: b\n", "b.yaml")
    assert [c.namespace for c in load_many([first, second], environ={})] == ["a", "b"]
    with pytest.raises(ConfigError) as caught:
        load_many([first, second, first.parent / "." / "a.yaml"], environ={})
    assert str(caught.value) == f"{first}: given twice (also as {first}); pass each file once"


def test_duplicate_component_across_files(write: WriteConfig, sections: dict[str, Any]) -> None:
    first = write("widgets:\n  - name: a\n  - name: b\n", "one.yaml")
    second = write("widgets:\n  - name: c\n  - name: b\n", "two.yaml")
    configs = load_many([first, second], environ={})
    with pytest.raises(ConfigError) as caught:
        build_many(configs, BrokerSettings())
    assert str(caught.value) == (
        f"{second}: widget 'b' in namespace 'mesh' is also defined in {first}; "
        "give each one a unique name, or run the files in separate namespaces"
    )


def test_same_name_in_other_namespace_or_kind_is_fine(write: WriteConfig, sections: dict[str, Any]) -> None:
    first = write("widgets:\n  - name: a\n", "one.yaml")
    second = write("namespace: other\nwidgets:\n  - name: a\n", "two.yaml")
    components = build_many(load_many([first, second], environ={}), BrokerSettings())
    assert [(c.name, c.context.namespace) for c in components] == [("a", "mesh"), ("a", "other")]  # type: ignore[attr-defined]
    gadget = Widget("a", components[0].context, kind="gadget")  # type: ignore[attr-defined]
    check_unique_components([(load_config(first, environ={}), [components[0], gadget])])


def test_configured_broker(write: WriteConfig) -> None:
    none = load_config(write("namespace: a\n", "none.yaml"), environ={})
    one = load_config(write("broker: mqtt://one:1883\n", "one.yaml"), environ={})
    same = load_config(write("broker: mqtt://one:1883\n", "same.yaml"), environ={})
    other = load_config(write("broker: mqtt://u:s3cret@two:1883\n", "other.yaml"), environ={})
    assert configured_broker([]) is None
    assert configured_broker([none, one, same]) == "mqtt://one:1883"
    with pytest.raises(ConfigError) as caught:
        configured_broker([none, one, other])
    assert str(caught.value) == (
        f"{other.source}: broker: 'mqtt://u:***@two:1883' differs from 'mqtt://one:1883' in {one.source}; "
        "components run together share one broker: set it in one file, or pass --broker"
    )


# ---------------------------------------------------------------- helpers for section factories


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_parts: int = Field(100, gt=0, description="parts in one message")
    max_bytes: int = 10


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    port: int
    interval_s: float = Field(1.0, gt=0, description="how often")
    limits: Inner = Field(default_factory=Inner)
    items: list[Inner] = []


def outer_error(data: dict[str, Any]) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(data)
    return caught.value


def test_validation_error_text_one_line_per_problem() -> None:
    error = outer_error({"port": "x", "limits": {"max_part": 1, "max_parts": -1}, "interval_s": 0})
    lines = validation_error_text(error, source="gw.yaml", prefix=("gateways", 2), model=Outer).splitlines()
    assert lines == [
        "gw.yaml: gateways[2].port: input should be a valid integer, unable to parse string as an integer, "
        "got 'x'; set port to a valid value",
        "gw.yaml: gateways[2].interval_s: input should be greater than 0, got 0; "
        "set interval_s to a valid value (how often)",
        "gw.yaml: gateways[2].limits.max_parts: input should be greater than 0, got -1; "
        "set max_parts to a valid value (parts in one message)",
        "gw.yaml: gateways[2].limits.max_part: unknown key 'max_part'; did you mean 'max_parts'? "
        "allowed keys: max_parts, max_bytes",
    ]


def test_validation_error_text_missing_mapping_and_list_items() -> None:
    error = outer_error({"limits": 5, "items": [{}, {"max_byts": 1}], "colour": "red"})
    lines = validation_error_text(error, source="gw.yaml", model=Outer).splitlines()
    assert lines == [
        "gw.yaml: port: required key is missing; add port: <value>",
        "gw.yaml: limits: expected a mapping, got 5; write limits as a mapping of keys such as max_parts, max_bytes",
        "gw.yaml: items[1].max_byts: unknown key 'max_byts'; did you mean 'max_bytes'? "
        "allowed keys: max_parts, max_bytes",
        "gw.yaml: colour: unknown key 'colour'; allowed keys: port, interval_s, limits, items",
    ]


def test_validation_error_text_without_a_model() -> None:
    error = outer_error({"port": 1, "extra": "x" * 100})
    assert (
        validation_error_text(error, source="f.yaml", prefix=("s", 0))
        == "f.yaml: s[0].extra: unknown key 'extra'; remove it"
    )


def test_key_path_and_config_error() -> None:
    assert key_path("agents", 0, "limits", "max_parts") == "agents[0].limits.max_parts"
    assert key_path("a", "b.c", 3, "d e") == "a['b.c'][3]['d e']"
    assert key_path() == ""
    assert str(config_error("f.yaml", ("a", 1), "bad", "fix it")) == "f.yaml: a[1]: bad; fix it"
    assert str(config_error(Path("f.yaml"), "", "bad", "fix it")) == "f.yaml: bad; fix it"


def test_check_keys() -> None:
    check_keys({"kind": 1}, ["kind", "port"], source="f.yaml", path=("gateways", 0))
    with pytest.raises(ConfigError) as caught:
        check_keys({"kind": 1, "prot": 2}, ["kind", "port"], source="f.yaml", path=("gateways", 0))
    assert str(caught.value) == (
        "f.yaml: gateways[0].prot: unknown key 'prot'; did you mean 'port'? allowed keys: kind, port"
    )


def test_validation_errors_never_repeat_secrets() -> None:
    from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

    class Auth(BaseModel):
        model_config = ConfigDict(extra="forbid")
        mode: str
        tokens: list[str]

        @field_validator("tokens")
        @classmethod
        def distinct(cls, tokens: list[str]) -> list[str]:
            if len(set(tokens)) != len(tokens):
                raise ValueError("tokens holds the same secret twice")
            return tokens

    class Edge(BaseModel):
        model_config = ConfigDict(extra="forbid")
        auth: Auth
        password: int = 0

    cases = [
        {"auth": {"mode": "bearer", "tokens": ["s3cret-tok", "s3cret-tok"]}},  # the whole mapping is the input
        {"auth": {"mode": 1, "tokens": ["s3cret-tok"]}, "password": "hunter2-not-int"},  # a secret-named key
    ]
    for case in cases:
        try:
            Edge.model_validate(case)
        except ValidationError as exc:
            text = validation_error_text(exc, source="gw.yaml", prefix=("gateways", 0), model=Edge)
        else:
            raise AssertionError("expected a validation error")
        assert "gw.yaml: gateways[0]" in text
        assert "s3cret" not in text and "hunter2" not in text, text
