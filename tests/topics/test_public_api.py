from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

import topics

SAM_HELPERS = [
    "get_agent_request_topic",
    "get_agent_response_topic",
    "get_peer_agent_status_topic",
    "get_agent_response_subscription_topic",
    "get_agent_status_subscription_topic",
    "get_gateway_response_topic",
    "get_gateway_status_topic",
    "get_gateway_response_subscription_topic",
    "get_gateway_status_subscription_topic",
    "get_agent_discovery_topic",
    "get_gateway_discovery_topic",
    "get_discovery_subscription_topic",
    "get_client_response_topic",
    "get_client_status_topic",
    "get_client_status_subscription_topic",
    "get_a2a_base_topic",
    "extract_task_id_from_topic",
]
MODULES = ["answers", "builders", "errors", "matching", "solace", "templates", "validation"]
PACKAGE = Path(topics.__file__).parent


def test_all_names_exist_once() -> None:
    assert len(topics.__all__) == len(set(topics.__all__))
    missing = [name for name in topics.__all__ if not hasattr(topics, name)]
    assert missing == []


def test_sam_helpers_are_exported() -> None:
    assert set(SAM_HELPERS) <= set(topics.__all__)
    assert all(callable(getattr(topics, name)) for name in SAM_HELPERS)


@pytest.mark.parametrize("module", MODULES)
def test_module_all_names_exist_and_are_reexported(module: str) -> None:
    loaded = importlib.import_module(f"topics.{module}")
    assert [name for name in loaded.__all__ if not hasattr(loaded, name)] == []
    assert set(loaded.__all__) - set(topics.__all__) <= {
        "IDENTIFIER_PATTERN",
        "NAMESPACE",
        "NAMESPACE_PATTERN",
        "SHARE_PREFIX",
    }


def test_error_tree() -> None:
    for name in topics.__all__:
        value = getattr(topics, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, topics.TopicError), name
    assert issubclass(topics.TopicError, ValueError)
    assert issubclass(topics.UnsupportedWildcardError, topics.InvalidFilterError)


def test_package_is_pure_standard_library() -> None:
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            outside = [root for root in roots if root not in sys.stdlib_module_names and root != "__future__"]
            assert outside == [], f"{path.name} imports {outside}"
