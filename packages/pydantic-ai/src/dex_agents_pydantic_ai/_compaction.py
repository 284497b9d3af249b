"""The context summary of a Pydantic AI session.

The estimate (the stored messages plus what the runner's last model request offered) and the
cutoff (only between turns) are the kit's ``AdapterRunner`` defaults; the summary is one request through ``pydantic_ai.direct.model_request`` to the
turn's model, with ``CONTEXT_SUMMARY_INSTRUCTIONS`` and the core's plain text prompt, no tools.
"""

from __future__ import annotations

from typing import Any

from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    ContextSummaryRequest,
    ContextSummaryResult,
    build_context_summary_prompt,
)
from pydantic_ai.direct import model_request
from pydantic_ai.messages import ModelRequest, UserPromptPart
from pydantic_ai.models import Model, infer_model
from pydantic_ai.settings import ModelSettings

from dex_agents_pydantic_ai._model_calls import agent_usage, model_call_metadata
from dex_agents_pydantic_ai._runner_config import RunnerConfig

__all__ = ["summarize_context"]


async def summarize_context(
    config: RunnerConfig[Any], request: ContextSummaryRequest, max_output_tokens: int | None
) -> ContextSummaryResult:
    """One summary request to the turn's model.

    Raises:
        ValueError: When the budget cannot hold the prompt's headers.
        Exception: Whatever the model raises.
    """
    prompt = build_context_summary_prompt(request, reserved_tokens=max_output_tokens or 0)
    model = _model(config, request)
    settings = ModelSettings(max_tokens=max_output_tokens) if max_output_tokens else None
    response = await model_request(
        model,
        [ModelRequest(parts=[UserPromptPart(prompt)], instructions=CONTEXT_SUMMARY_INSTRUCTIONS)],
        model_settings=settings,
    )
    return ContextSummaryResult(
        text=response.text or "",
        usage=agent_usage(response),
        model_call_metadata=model_call_metadata(model, response),
    )


def _model(config: RunnerConfig[Any], request: ContextSummaryRequest) -> Model:
    chosen = config.model_for(request.session_settings)
    if chosen is None:
        chosen = config.agent.model
    assert chosen is not None  # RunnerConfig refuses an agent without a model source
    return infer_model(chosen)
