"""The model behind an LLM agent: built from the config, retried on 429/5xx, errors explained.

:func:`build_model` turns ``model`` / ``base_url`` / ``api_key_env`` into a pydantic-ai
:class:`~pydantic_ai.models.Model` (an OpenAI-compatible chat model when ``base_url`` is set);
:class:`RetryingModel` retries a request the provider answered 429 or 5xx (or could not be
reached), with bounded, jittered exponential backoff; :func:`explain` turns what the model
raised into the one line a failed task says: the provider, the status and the fix.

``model: demo`` is the scripted demo model of :mod:`agents.llm.demo` (no provider, no key); a
model that cannot be built (no key, an unknown id, a provider not installed) is a
:class:`ConfigError` in the mesh's words: the variable to set, or ``model: demo`` to try
without one (not pydantic-ai's advice for its Python API).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
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
from agents.llm.demo import DEMO_MODEL, demo_model
from mesh.errors import ConfigError
from mesh.telemetry import tracing

__all__ = ["TRY_DEMO", "RetryingModel", "build_model", "explain", "model_error"]

_BACKOFF_BASE_S = 0.5
_BACKOFF_CAP_S = 8.0
_OPENAI_COMPATIBLE = ("openai", "ollama", "openai-chat")
#: What to try without a key or a provider, in every model error that could end there.
TRY_DEMO = "or try without one: --model demo (mesh up) or model: demo (a scripted demo model, no provider)"
_KEYLESS_HINT = "To try Pydantic AI without an API key"
_VARIABLES = re.compile(r"Set the ((?:`\w+`(?:,? or |, )?)+) environment variable")
_PACKAGE = re.compile(r"""pip install ["']([^"']+)["']""")


def build_model(config: LlmConfig) -> Model:
    """The configured model; a bad id or a missing key is a :class:`ConfigError` naming the fix."""
    if config.model == DEMO_MODEL:
        return demo_model()
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
        raise ConfigError(model_error(config.model, exc.message)) from None
    except (ValueError, ImportError) as exc:
        raise ConfigError(model_error(config.model, str(exc))) from None


def _api_key(config: LlmConfig) -> str | None:
    if config.api_key_env is None:
        return None
    key = os.environ.get(config.api_key_env)
    if not key:
        raise ConfigError(
            f"model {config.model!r}: the variable {config.api_key_env} (api_key_env) is not set; "
            f"export {config.api_key_env}=<your key> before starting the mesh, {TRY_DEMO}"
        )
    return key


def model_error(model: str, message: str) -> str:
    """What the mesh says when pydantic-ai cannot build ``model``: the fix in the mesh's terms.

    pydantic-ai's own advice is for its Python API (``OpenAIProvider(api_key=...)``,
    ``Agent('test')``); here it is a variable to set, a package to install or ``model: demo``.
    """
    provider = model.partition(":")[0] if ":" in model else None
    if _KEYLESS_HINT in message or "API key" in message:
        names = re.findall(r"`(\w+)`", found[1]) if (found := _VARIABLES.search(message)) else []
        variable = " or ".join(names) or "the provider's API key variable"
        return (
            f"model {model!r}: no API key; set {variable} (export {names[0] if names else 'ITS_NAME'}=<your key> "
            f"before starting the mesh; llm.api_key_env names another variable), {TRY_DEMO}"
        )
    if (package := _PACKAGE.search(message)) is not None:
        return f"model {model!r}: the {provider or model} provider is not installed; pip install '{package[1]}'"
    if message.startswith("Unknown model"):
        hint = message.partition(". ")[2].strip()  # pydantic-ai's "Did you mean ...?", when it has one
        return (
            f"model {model!r}: unknown model id{'; ' + hint if hint else ''}; write provider:model "
            f"(openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5, ollama:llama3.2 with base_url), "
            "or model: demo (a scripted demo model, no provider)"
        )
    return (
        f"model {model!r}: {message.rstrip('.')}; check the model id and the provider's settings, "
        + TRY_DEMO.replace("one", "a provider", 1)
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
    if type(exc).__name__ == "BudgetExceeded":  # agents.llm.budgets: its message names the budget
        return str(exc)
    if isinstance(exc, errors.UsageLimitExceeded):
        limits = f"llm.max_model_calls: {config.max_model_calls}, llm.max_tool_calls: {config.max_tool_calls}"
        if config.max_tokens is not None:
            limits += f", llm.max_tokens: {config.max_tokens}"
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
