"""LLM agent tests never reach a real provider: model requests are refused unless a test
points the agent at its own fake server on loopback (and allows them itself)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("pydantic_ai", reason="the llm extra is not installed")

from pydantic_ai import models


@pytest.fixture(autouse=True)
def no_model_requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", False)
    yield
