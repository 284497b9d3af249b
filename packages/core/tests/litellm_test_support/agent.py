"""Stepwise agents on LiteLLMModelClient against the fake provider server, one per wire API."""

from __future__ import annotations

import os
from typing import Any

from dex import Flow
from dex_agents import ToolEffect
from dex_agents.litellm import LiteLLMApi, LiteLLMModelClient
from dex_agents.stepwise import AgentDefinition, function_tool, stepwise_agent_session_flow

BASE_URL_ENV = "FAKE_PROVIDER_BASE_URL"
#: Flow type -> (LiteLLM model, API); each speaks another wire protocol to the fake server.
MODELS: dict[str, tuple[str, LiteLLMApi | None]] = {
    "ResponsesAgent": ("openai/gpt-5-mini", "responses"),
    "ChatAgent": ("openai/gpt-4o-mini", "chat_completions"),
    "AnthropicAgent": ("anthropic/claude-sonnet-4-5", None),
}


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return f"Order {order_id} ships tomorrow"


def build_flows(base_url: str) -> list[Flow[Any]]:
    flows = []
    for flow_type, (model, api) in MODELS.items():
        endpoint = base_url if model.startswith("anthropic/") else f"{base_url}/v1"
        client = LiteLLMModelClient(
            model, api=api, api_base=endpoint, api_key_provider=lambda: "dummy-key"
        )
        agent = AgentDefinition(
            name=flow_type, instructions="You help with orders.", model=client, tools=[lookup_order]
        )
        flows.append(stepwise_agent_session_flow(agent, flow_type=flow_type))
    return flows


def flows_from_environment() -> list[Flow[Any]]:
    return build_flows(os.environ[BASE_URL_ENV])
