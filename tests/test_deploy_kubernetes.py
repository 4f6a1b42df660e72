"""deploy/kubernetes/: valid Kubernetes objects (kubernetes-validate's schemas of the API), a
StatefulSet whose pods take their broker slot from their index, a Secret per component that
only that component's pods mount, and an agent config the mesh loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agents import AgentSettings
from mesh.config import load_config
from mesh.store import is_postgres_url, parse_store_url

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="the dev extra's kubernetes-validate")

KUBERNETES = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes"
#: The oldest Kubernetes with the pod-index label (apps.kubernetes.io/pod-index, 1.28).
VERSION = "1.28"


def documents() -> list[dict[str, Any]]:
    found = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        found += [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    return found


def test_every_manifest_is_a_valid_kubernetes_object() -> None:
    docs = documents()
    assert {d["kind"] for d in docs} >= {"StatefulSet", "Secret", "ConfigMap", "Service"}
    for doc in docs:
        for version in (VERSION, kubernetes_validate.latest_version()):
            kubernetes_validate.validate(doc, version, strict=True)  # raises, naming the field


def test_the_validator_refuses_a_broken_manifest() -> None:
    """So the test above checks something: a misspelt field and a wrong type are errors."""
    [stateful] = [d for d in documents() if d["kind"] == "StatefulSet"]
    misspelt = {**stateful, "spec": {**stateful["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, VERSION, strict=True)
    wrong = {**stateful, "spec": {**stateful["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, VERSION, strict=True)


def test_each_replica_takes_its_slot_from_its_pod_index_and_mounts_only_its_own_secret() -> None:
    docs = documents()
    secrets = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
    for stateful in (d for d in docs if d["kind"] == "StatefulSet"):
        name = stateful["metadata"]["name"]
        pod = stateful["spec"]["template"]["spec"]
        [container] = pod["containers"]
        env = {e["name"]: e for e in container["env"]}
        slot = env["MESH_REPLICA_SLOT"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert slot == "metadata.labels['apps.kubernetes.io/pod-index']"
        assert env["MESH_STORE_PASSWORD_FILE"]["value"].startswith("/run/secrets/")
        mounted = {
            source["secret"]["name"]
            for volume in pod["volumes"]
            for source in volume.get("projected", {}).get("sources", [])
            if "secret" in source
        }
        assert mounted == {name, "mesh-public"} and mounted <= secrets  # its own, and the public one


def test_the_config_map_holds_an_agent_config_on_the_shared_store(tmp_path: Path) -> None:
    [config_map] = [d for d in documents() if d["kind"] == "ConfigMap"]
    path = tmp_path / "echo.yaml"
    path.write_text(config_map["data"]["echo.yaml"], encoding="utf-8")
    config = load_config(path)
    assert config.artifacts is not None and config.artifacts.is_object_store
    [entry] = config.sections["agents"]
    settings = AgentSettings.model_validate({k: v for k, v in entry.items() if k in AgentSettings.model_fields})
    assert settings.shared_subscription and is_postgres_url(settings.store)
    assert parse_store_url(settings.store, {"MESH_STORE_PASSWORD": "x"}).password == "x"
