"""The model behind an LLM agent: built from the config, retried on 429/5xx, errors explained.

:func:`build_model` turns ``model`` / ``base_url`` / ``api_key_env`` into a pydantic-ai
:class:`~pydantic_ai.models.Model` (an OpenAI-compatible chat model when ``base_url`` is set);
:class:`RetryingModel` retries a request the provider answered 429 or 5xx (or could not be
reached), with bounded, jittered exponential backoff; :func:`explain` turns what the model
raised into the one line a failed task says: the provider, the status and the fix.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai import exceptions as errors
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, infer_model
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

from agents.llm.config import LlmConfig
from mesh.errors import ConfigError
from mesh.telemetry import tracing

__all__ = ["RetryingModel", "build_model", "explain"]

_BACKOFF_BASE_S = 0.5
_BACKOFF_CAP_S = 8.0
_OPENAI_COMPATIBLE = ("openai", "ollama", "openai-chat")


def build_model(config: LlmConfig) -> Model:
    """The configured model; a bad id or a missing key is a :class:`ConfigError` naming the fix."""
    provider_name, _, model_name = config.model.partition(":")
    api_key = _api_key(config)
    try:
        if config.base_url is not None:
            from pydantic_ai.models.openai import OpenAIChatModel
            from pydantic_ai.providers.openai import OpenAIProvider

            name = model_name if provider_name in _OPENAI_COMPATIBLE and model_name else config.model
            from openai import AsyncOpenAI

            # A local server needs no key, but the OpenAI client insists on one. Its own retries
            # are off: RetryingModel retries (bounded, jittered), and only what is worth it.
            client = AsyncOpenAI(base_url=config.base_url, api_key=api_key or "none", max_retries=0)
            provider = OpenAIProvider(openai_client=client)
            return OpenAIChatModel(name, provider=provider)
        if api_key is not None:
            from pydantic_ai.providers import infer_provider_class

            def provider_factory(name: str) -> Any:
                return infer_provider_class(name)(api_key=api_key)  # type: ignore[call-arg]

            return infer_model(config.model, provider_factory=provider_factory)
        return infer_model(config.model)
    except errors.UserError as exc:
        raise ConfigError(f"model {config.model!r}: {exc.message}; {_model_fix(provider_name)}") from None
    except (ValueError, ImportError) as exc:
        raise ConfigError(f"model {config.model!r}: {exc}; {_model_fix(provider_name)}") from None


def _api_key(config: LlmConfig) -> str | None:
    if config.api_key_env is None:
        return None
    key = os.environ.get(config.api_key_env)
    if not key:
        raise ConfigError(
            f"model {config.model!r}: the variable {config.api_key_env} (api_key_env) is not set; "
            f"export {config.api_key_env}=<your key> before starting the mesh"
        )
    return key


def _model_fix(provider: str) -> str:
    return (
        f"check the model id ('{provider}:<model>'), set the provider's API key variable "
        "(or api_key_env), and install the provider: pip install 'mqtt-agent-mesh[llm]'"
    )


class RetryingModel(WrapperModel):
    """Retries a request answered 429 or 5xx (or unreachable) up to ``retries`` times."""

    def __init__(self, wrapped: Model, *, retries: int, base_s: float = _BACKOFF_BASE_S) -> None:
        super().__init__(wrapped)
        self.retries = retries
        self.base_s = base_s

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        attempt = 0
        while True:
            span = self._span()
            try:
                response = await self.wrapped.request(messages, model_settings, model_request_parameters)
            except errors.ModelAPIError as exc:
                _end(span, exc)
                if attempt >= self.retries or not retryable(exc):
                    raise
                attempt += 1
                await asyncio.sleep(self._delay(attempt, exc))
            except BaseException as exc:
                _end(span, exc)
                raise
            else:
                _end(span, None, response)
                return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        attempt = 0
        while True:
            # Only opening the stream is retried: once chunks flowed, a retry would repeat them.
            opened = self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context)
            span = self._span()
            try:
                response = await opened.__aenter__()
            except errors.ModelAPIError as exc:
                _end(span, exc)
                if attempt >= self.retries or not retryable(exc):
                    raise
                attempt += 1
                await asyncio.sleep(self._delay(attempt, exc))
                continue
            except BaseException as exc:
                _end(span, exc)
                raise
            break
        try:
            yield response
        except BaseException as exc:
            _end(span, exc)
            if not await opened.__aexit__(type(exc), exc, exc.__traceback__):
                raise
        else:
            await opened.__aexit__(None, None, None)
            _end(span, None, response.get())

    def _span(self) -> Any:
        """A span for one model request, in the task's trace (when tracing is on)."""
        if not tracing.enabled:
            return None
        return tracing.start_span(f"llm {self.wrapped.model_name}", "client", attributes={"gen_ai.system": self.system})

    def _delay(self, attempt: int, exc: errors.ModelAPIError) -> float:
        ceiling = min(_BACKOFF_CAP_S, self.base_s * 2 ** (attempt - 1))
        after = exc.retry_after if isinstance(exc.retry_after, int | float) else None
        # Full jitter, so agents that hit a limit together do not retry together.
        delay = random.uniform(0, ceiling)  # noqa: S311 - jitter, not security
        return min(_BACKOFF_CAP_S, max(delay, after or 0.0))


def _end(span: Any, error: BaseException | None, response: ModelResponse | None = None) -> None:
    if span is None:
        return
    attributes: dict[str, Any] = {}
    if response is not None:
        usage = response.usage
        attributes = {
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
        }
    tracing.end_span(span, error, **attributes)


def retryable(exc: errors.ModelAPIError) -> bool:
    """429, 5xx and connection failures are worth another try; 4xx are not."""
    if isinstance(exc, errors.ModelHTTPError):
        return exc.status_code == 429 or exc.status_code >= 500
    return isinstance(exc, errors.ModelConnectionError | errors.ModelRateLimitError | errors.ModelUnavailableError)


def explain(exc: BaseException, config: LlmConfig) -> str:
    """One line for a failed task: what went wrong with which provider, and what to do."""
    model = config.model
    where = f" at {config.base_url}" if config.base_url else ""
    if isinstance(exc, errors.UsageLimitExceeded):
        limits = f"llm.max_model_calls: {config.max_model_calls}, llm.max_tool_calls: {config.max_tool_calls}"
        return f"the task reached a limit: {exc.message} ({limits}); raise the limit or simplify the request"
    if isinstance(exc, errors.ModelHTTPError):
        status = exc.status_code
        if status in (401, 403):
            fix = f"check the API key ({config.api_key_env or 'the provider key variable'})"
        elif status == 404:
            fix = "check the model name: the provider does not know it"
        elif status == 429 or status >= 500:
            fix = f"the provider is overloaded or failing (retried {config.retries} times); try again later"
        else:
            fix = "check the request settings (llm.settings) against the provider's documentation"
        return f"model {model}{where} answered HTTP {status}: {_short(exc.body)}; {fix}"
    if isinstance(exc, errors.ModelConnectionError):
        # No base_url: the provider's own endpoint, so there is no URL of the user's to check.
        reach = (
            "check base_url and that the server is running"
            if config.base_url
            else "check this machine's network and the provider's status (or set base_url for a server of your own)"
        )
        return f"model {model}: cannot reach the provider{where}: {exc.message}; {reach}"
    if isinstance(exc, errors.ModelAPIError):
        settings = "the model id, key and base_url" if config.base_url else "the model id and key"
        return f"model {model}{where} failed: {exc.message}; check {settings}"
    if isinstance(exc, errors.UnexpectedModelBehavior):
        return f"model {model} behaved unexpectedly: {exc.message}; try again or use a more capable model"
    if isinstance(exc, errors.UserError | errors.AgentRunError):
        return f"model {model}: {exc.message}"
    return f"model {model}: {type(exc).__name__}: {exc}"


def _short(body: object, limit: int = 200) -> str:
    text = str(body) if body is not None else "no body"
    return text if len(text) <= limit else text[:limit] + "..."
