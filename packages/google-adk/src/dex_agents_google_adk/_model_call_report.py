"""Usage and ``ModelCallMetadata`` of one ADK model call, from what ADK reports.

ADK's ``LlmResponse`` carries ``usage_metadata`` (Gemini's counts, which ``LiteLlm`` fills from the
provider's usage), ``model_version`` and ``finish_reason``; it has no response ID, so
``ModelCallMetadata.response_id`` stays unset. The provider name follows the model class:
``Gemini`` (and its subclasses) is ``gcp.gemini``, ``AnthropicLlm`` (``Claude``) is
``anthropic``, and ``LiteLlm`` names its provider by
the prefix of its model string (``openai/gpt-5`` is ``openai``).
"""

from __future__ import annotations

from collections.abc import Sequence

from dex_agents import AgentUsage, ModelCallMetadata
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse

__all__ = ["model_call_metadata", "model_call_usage", "provider_name"]

_PROVIDERS_BY_CLASS = {"Gemini": "gcp.gemini", "AnthropicLlm": "anthropic"}


def model_call_usage(events: Sequence[LlmResponse], *, model_calls: int = 1) -> AgentUsage:
    """The usage of the one model call whose events these are (the last report counts);
    ``model_calls`` is 0 when a callback answered before the model was asked."""
    usage = next((event.usage_metadata for event in reversed(events) if event.usage_metadata), None)
    if usage is None:
        return AgentUsage(model_calls=model_calls)
    return AgentUsage(
        input_tokens=usage.prompt_token_count or 0,
        output_tokens=usage.candidates_token_count or 0,
        cached_input_tokens=usage.cached_content_token_count or 0,
        reasoning_tokens=usage.thoughts_token_count or 0,
        model_calls=model_calls,
    )


def provider_name(model: BaseLlm) -> str | None:
    """The GenAI provider name of an ADK model, when its class says it."""
    for cls in type(model).__mro__:
        if cls.__name__ == "LiteLlm":
            prefix, separator, _ = model.model.partition("/")
            return prefix if separator else None
        if cls.__name__ in _PROVIDERS_BY_CLASS:
            return _PROVIDERS_BY_CLASS[cls.__name__]
    return None


def model_call_metadata(model: BaseLlm, events: Sequence[LlmResponse]) -> ModelCallMetadata:
    """What ADK reports about the model call: request and response model, finish reason."""
    response_model = next(
        (event.model_version for event in reversed(events) if event.model_version), None
    )
    finish_reasons = tuple(
        event.finish_reason.value.lower() for event in events if event.finish_reason is not None
    )
    return ModelCallMetadata(
        request_model=model.model or None,
        response_model=response_model,
        provider_name=provider_name(model),
        finish_reasons=finish_reasons[-1:],
    )
