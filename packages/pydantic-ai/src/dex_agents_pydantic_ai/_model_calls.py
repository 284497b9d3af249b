"""Usage and metadata of one model call, as the session records them."""

from __future__ import annotations

from dex_agents import AgentUsage, ModelCallMetadata
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import Model

__all__ = ["agent_usage", "model_call_metadata"]


def agent_usage(response: ModelResponse | None) -> AgentUsage:
    """The usage of the call that produced ``response``; no call when ``None``."""
    if response is None:
        return AgentUsage(model_calls=0)
    usage = response.usage
    return AgentUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_input_tokens=usage.cache_read_tokens,
        reasoning_tokens=usage.output_reasoning_tokens,
    )


def model_call_metadata(
    model: Model | None, response: ModelResponse | None
) -> ModelCallMetadata | None:
    """Every field Pydantic AI reports for the call: the requested model's name, and the
    response's model name, provider, provider response ID and finish reason."""
    if response is None:
        return None
    return ModelCallMetadata(
        request_model=model.model_name if model is not None else None,
        response_model=response.model_name,
        provider_name=response.provider_name or (model.system if model is not None else None),
        response_id=response.provider_response_id,
        finish_reasons=(response.finish_reason,) if response.finish_reason else (),
    )
