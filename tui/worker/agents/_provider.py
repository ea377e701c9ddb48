"""The model of a model profile (`tui.config.ModelProfile`) for the model agent
(`tui.worker.agents.model`): the pydantic-ai model of its provider, its context window, the URL its
requests go to, the one retry loop of its requests (rate limits, server errors), and the one line
a failed request ends the turn with (`failure`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelContextWindowExceededError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelServerError,
    ModelUnavailableError,
)
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from tui.config import ModelProfile
from tui.errors import InvalidModel

__all__ = [
    "BACKOFF_SECONDS",
    "CONTEXT_WINDOWS",
    "DEFAULT_URLS",
    "LOCAL_CONTEXT_WINDOW",
    "MAX_TRIES",
    "RETRY_AFTER_CAP",
    "build_model",
    "context_window",
    "failure",
    "server_url",
]

log = logging.getLogger("tui.worker.model")

MAX_TRIES = 3
"""Tries of one model request when the provider is rate-limited or fails (429, 5xx)."""
BACKOFF_SECONDS = (1.0, 4.0)
"""The wait before the second and the third try, unless the provider says how long (retry-after)."""
RETRY_AFTER_CAP = 60.0
"""The longest retry-after we honour; a longer one fails the turn at once."""
CONTEXT_WINDOWS = {"openai": 128_000, "anthropic": 200_000, "google": 1_048_576}
"""A profile's window when it names none (a ``base_url`` server: `LOCAL_CONTEXT_WINDOW`)."""
LOCAL_CONTEXT_WINDOW = 32_768
DEFAULT_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "google": "https://generativelanguage.googleapis.com",
}


def context_window(profile: ModelProfile) -> int:
    """The profile's context window in tokens: its own, else the provider's usual one."""
    if profile.context_window is not None:
        return profile.context_window
    if profile.base_url is not None:
        return LOCAL_CONTEXT_WINDOW
    return CONTEXT_WINDOWS.get(profile.provider, LOCAL_CONTEXT_WINDOW)


def server_url(profile: ModelProfile) -> str:
    """The URL the profile's requests go to (for messages)."""
    return profile.base_url or DEFAULT_URLS.get(profile.provider, profile.provider)


def build_model(profile: ModelProfile, environ: dict[str, str] | None = None) -> Model:
    """The pydantic-ai model of `profile`, its key read from the environment, the SDK's retries off.

    Raises:
        InvalidModel: the provider is not one this version speaks to.
    """
    key = profile.api_key(environ)
    if profile.provider == "openai":
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIResponsesModel
        from pydantic_ai.providers.openai import OpenAIProvider

        from tui.worker.agents._chat import CoalescingChatModel

        # A local server takes any key; the SDK refuses none at all.
        client = AsyncOpenAI(api_key=key or "none", base_url=profile.base_url, max_retries=0)
        provider = OpenAIProvider(openai_client=client)
        if profile.api == "responses":
            return OpenAIResponsesModel(profile.model, provider=provider)
        return CoalescingChatModel(profile.model, provider=provider)
    if profile.provider == "anthropic":
        from anthropic import AsyncAnthropic
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        anthropic = AsyncAnthropic(api_key=key or "none", base_url=profile.base_url, max_retries=0)
        return AnthropicModel(profile.model, provider=AnthropicProvider(anthropic_client=anthropic))
    if profile.provider == "google":
        from pydantic_ai.models.google import GoogleModel
        from pydantic_ai.providers.google import GoogleProvider

        return GoogleModel(profile.model, provider=GoogleProvider(api_key=key, base_url=profile.base_url))
    raise InvalidModel(f"the provider {profile.provider!r} is not one of openai, anthropic, google")


class _Retrying(WrapperModel):
    """A model whose requests are tried again on a rate limit or a server error (our one retry loop)."""

    def __init__(
        self, wrapped: Model, *, waiting: Callable[[str], None], sleep: Callable[[float], Any]
    ) -> None:
        super().__init__(wrapped)
        self._waiting = waiting
        self._sleep = sleep

    async def _delay(self, exc: ModelAPIError, tries: int) -> float | None:
        if tries >= MAX_TRIES:
            return None
        delay = exc.retry_after if exc.retry_after is not None else BACKOFF_SECONDS[tries - 1]
        return None if delay > RETRY_AFTER_CAP else max(0.0, delay)

    @contextlib.asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncIterator[StreamedResponse]:
        tries = 0
        async with contextlib.AsyncExitStack() as stack:
            while True:
                tries += 1
                opening = self.wrapped.request_stream(
                    messages, model_settings, model_request_parameters, run_context
                )
                try:
                    stream = await stack.enter_async_context(opening)
                except (ModelRateLimitError, ModelUnavailableError, ModelServerError) as exc:
                    delay = await self._delay(exc, tries)
                    if delay is None:
                        raise
                    log.info("model request failed (%s); try %d in %.1f s", exc, tries + 1, delay)
                    self._waiting(f"retrying in {delay:.0f} s ({_why(exc)})")
                    await self._sleep(delay)
                    self._waiting("")
                    continue
                break
            yield stream


def _why(exc: ModelAPIError) -> str:
    status = getattr(exc, "status_code", None)
    if isinstance(exc, ModelRateLimitError):
        return f"rate-limited, HTTP {status}" if status else "rate-limited"
    return f"HTTP {status}" if status else "the server failed"


def failure(exc: Exception, name: str | None, profile: ModelProfile) -> str:
    """One line saying what went wrong and what to do."""
    status = getattr(exc, "status_code", None)
    if isinstance(exc, ModelAuthenticationError) or status in (401, 403):
        variable = profile.key_variable
        fix = (
            f"check the key in {variable}" if variable else f"set api_key_env in the [models.{name}] profile"
        )
        return f"{server_url(profile)} refused the key of model {name!r} (HTTP {status or 401}): {fix}"
    if isinstance(exc, ModelConnectionError):
        if exc.phase == "read" or exc.in_stream:
            return f"the connection to {server_url(profile)} broke off during the reply: {_short(exc)}"
        return f"cannot reach {server_url(profile)} (model {name!r}): {_short(exc)}"
    if isinstance(exc, ModelContextWindowExceededError):
        return f"the conversation is too long for model {name!r}; start a new session or set context_window"
    if isinstance(exc, ModelAPIError) and exc.in_stream:
        # an error the provider sent inside the reply: not tried again, its own words say why
        return f"model {name!r} failed during the reply ({_why(exc)}): {_said(exc)}; try again"
    if isinstance(exc, ModelRateLimitError | ModelUnavailableError | ModelServerError):
        return f"model {name!r} failed {MAX_TRIES} times ({_why(exc)}); try again later"
    if isinstance(exc, ModelHTTPError):
        return f"model {name!r} answered HTTP {exc.status_code}: {_short(exc)}"
    return f"model {name!r} failed: {_short(exc)}"


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


def _said(exc: ModelAPIError) -> str:
    """The provider's own message in an error's body (OpenAI's and Anthropic's shapes), else the error."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error")
        message = (inner if isinstance(inner, dict) else body).get("message")
        if isinstance(message, str) and message.strip():
            return message.strip().splitlines()[0][:300]
    return _short(exc)
