"""LiteLLMModelClient: a Stepwise ModelClient on LiteLLM.

Install LiteLLM with the extra, ``pip install "dex-agents[litellm]"``. OpenAI models use the
Responses API (``store=False``, encrypted reasoning kept); every other provider uses streaming Chat
Completions, keeping Anthropic thinking blocks with their signatures. Credentials come from the
Worker's environment, as LiteLLM reads them, or from ``api_key_provider``; never from Flow input or
Attributes.

Importing this package keeps LiteLLM quiet and local: its "Provider List" and "Give Feedback"
banners are off (``litellm.suppress_debug_info``), and it reads the model cost map bundled with it
instead of downloading one at import (``LITELLM_LOCAL_MODEL_COST_MAP=True``), unless the
environment sets ``LITELLM_LOCAL_MODEL_COST_MAP`` itself (``False`` fetches the remote map). Import
it before ``litellm`` for the cost map default to apply.

Example:
    >>> from dex_agents.litellm import LiteLLMModelClient
    >>> model = LiteLLMModelClient("openai/gpt-5-mini")
"""

import os as _os

# Before LiteLLM's import, which reads it: without it a machine without network access spends
# about 15 s retrying the download of a map that ships with LiteLLM anyway.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

try:
    import litellm as _litellm
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

# The banners are prints, not log records: only this switch turns them off.
_litellm.suppress_debug_info = True

__all__ = [
    "CHAT_COMPLETIONS_API",
    "RESPONSES_API",
    "ApiKeyProvider",
    "LiteLLMApi",
    "LiteLLMModelClient",
]
