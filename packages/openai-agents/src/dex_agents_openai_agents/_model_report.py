"""What the session learns about one SDK model call: its usage and its ``ModelCallMetadata``.

Every field comes from what the SDK reports for the call:

- ``request_model``: the model name the call used (``RunConfig.model``, else the agent's model,
  else the SDK's default model); for a ``Model`` object, its ``model`` attribute when it is text.
- ``response_model``: ``model`` of the provider's final ``Response`` in the stream.
- ``response_id``: ``ModelResponse.response_id``, unless it is the SDK's placeholder for providers
  without one (Chat Completions).
- ``finish_reasons``: the final ``Response``'s ``incomplete_details.reason`` when it is
  incomplete, else its ``status`` (the Responses API has no per-choice finish reason).
- ``provider_name``: ``openai`` for the SDK's OpenAI models and for model names the default
  provider resolves to them; ``None`` for any other model or provider.
"""

from __future__ import annotations

from typing import Any, Final

from agents import (
    Agent,
    Model,
    ModelResponse,
    MultiProvider,
    OpenAIChatCompletionsModel,
    OpenAIProvider,
    OpenAIResponsesModel,
    RunConfig,
    Usage,
)
from agents.models.default_models import get_default_model
from agents.models.fake_id import FAKE_RESPONSES_ID
from dex_agents import AgentUsage, ModelCallMetadata
from openai.types.responses import Response

__all__ = ["agent_usage", "model_call_metadata", "model_of"]

_OPENAI: Final = "openai"


def agent_usage(usage: Usage) -> AgentUsage:
    """The session's usage of one model call from the SDK's ``Usage``."""
    cached = usage.input_tokens_details.cached_tokens if usage.input_tokens_details else 0
    reasoning = usage.output_tokens_details.reasoning_tokens if usage.output_tokens_details else 0
    return AgentUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_input_tokens=cached or 0,
        reasoning_tokens=reasoning or 0,
    )


def model_of(agent: Agent[Any], run_config: RunConfig) -> str | Model:
    """The model a call of ``agent`` uses under ``run_config``, as the SDK picks it."""
    if run_config.model is not None:
        return run_config.model
    if agent.model is not None:
        return agent.model
    return get_default_model()


def model_call_metadata(
    model: str | Model,
    run_config: RunConfig,
    response: ModelResponse,
    completed: Response | None,
) -> ModelCallMetadata:
    """The ``chat`` span's metadata of one model call."""
    if isinstance(model, str):
        request_model: str | None = model
    else:
        name = getattr(model, "model", None)
        request_model = name if isinstance(name, str) else None
    response_id = response.response_id
    return ModelCallMetadata(
        request_model=request_model,
        response_model=completed.model if completed is not None else None,
        provider_name=_provider_name(model, run_config),
        response_id=None if response_id == FAKE_RESPONSES_ID else response_id,
        finish_reasons=_finish_reasons(completed),
    )


def _provider_name(model: str | Model, run_config: RunConfig) -> str | None:
    if isinstance(model, OpenAIResponsesModel | OpenAIChatCompletionsModel):
        return _OPENAI
    if isinstance(model, str) and isinstance(
        run_config.model_provider, MultiProvider | OpenAIProvider
    ):
        prefix, separator, _ = model.partition("/")
        if not separator or prefix == _OPENAI:
            return _OPENAI
    return None


def _finish_reasons(completed: Response | None) -> tuple[str, ...]:
    if completed is None:
        return ()
    details = completed.incomplete_details
    if details is not None and details.reason:
        return (details.reason,)
    return (completed.status,) if completed.status else ()
