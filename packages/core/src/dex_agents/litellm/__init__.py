"""LiteLLMModelClient: a Stepwise ModelClient on LiteLLM.

Install LiteLLM with the extra, ``pip install "dex-agents[litellm]"``. OpenAI models use the
Responses API (``store=False``, encrypted reasoning kept); every other provider uses streaming Chat
Completions, keeping Anthropic thinking blocks with their signatures. Credentials come from the
Worker's environment, as LiteLLM reads them, or from ``api_key_provider``; never from Flow input or
Attributes.

Example:
    >>> from dex_agents.litellm import LiteLLMModelClient
    >>> model = LiteLLMModelClient("openai/gpt-5-mini")
"""

try:
    import litellm as _litellm  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        'dex_agents.litellm needs LiteLLM: install it with pip install "dex-agents[litellm]"'
    ) from error

from dex_agents.litellm._model_client import (
    CHAT_COMPLETIONS_API,
    RESPONSES_API,
    ApiKeyProvider,
    LiteLLMApi,
    LiteLLMModelClient,
)

__all__ = [
    "CHAT_COMPLETIONS_API",
    "RESPONSES_API",
    "ApiKeyProvider",
    "LiteLLMApi",
    "LiteLLMModelClient",
]
