"""What the runner hands a graph through its ``RunnableConfig``: tools to offer, the call's key.

LangGraph passes one ``RunnableConfig`` down to every node, model and tool of a run, so the runner
puts two plain values into ``config["configurable"]``:

- in ``RunModel``, what this model call may offer (the enabled built-in tools, and whether the
  turn is a planning turn), read by :func:`model_tools` inside the graph's model node;
- in a tool Step, the call's idempotency key, read by :func:`get_tool_call_idempotency_key`
  inside the tool.

Outside a Dex session neither is there: :func:`model_tools` returns the tools unchanged, so the same
graph also runs as plain LangGraph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias

from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    BuiltInTool,
    NoDeferredToolExecutionError,
    current_deferred_tool_execution,
)
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.tools import BaseTool

__all__ = [
    "IDEMPOTENCY_KEY_CONFIG_KEY",
    "OFFER_CONFIG_KEY",
    "ModelTool",
    "get_tool_call_idempotency_key",
    "model_offer",
    "model_tools",
]

OFFER_CONFIG_KEY: Final = "__dex_agents_model_offer"
"""``configurable`` key of what one model call may offer (JSON: built-in tools, planning)."""
IDEMPOTENCY_KEY_CONFIG_KEY: Final = "__dex_agents_idempotency_key"
"""``configurable`` key of the running tool call's idempotency key."""

ModelTool: TypeAlias = BaseTool | Callable[..., Any] | dict[str, Any]
"""What ``bind_tools`` takes: a LangChain tool, a function, or an OpenAI-format tool schema."""


def model_offer(built_in_tools: Sequence[str], *, planning: bool) -> dict[str, Any]:
    """The ``configurable`` value of :data:`OFFER_CONFIG_KEY` for one model call."""
    return {"built_in_tools": sorted(built_in_tools), "planning": planning}


def model_tools(
    tools: Sequence[ModelTool], config: RunnableConfig | None = None
) -> list[ModelTool]:
    """The tools a model node binds for this model call: pass its own tools, bind the result.

    Inside a Dex session it adds the session's enabled built-in tools (``ask_user``,
    ``durable_wait``, ``write_todos``) as OpenAI-format schemas, and in a planning turn returns
    ``write_todos`` alone, so plan mode offers only the plan. Outside a session it returns
    ``tools`` unchanged. ``config`` defaults to the config of the running node.

    Example:
        >>> async def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        ...     bound = model.bind_tools(model_tools([lookup_order]))
        ...     return {"messages": [await bound.ainvoke(state["messages"])]}
    """
    offer = ensure_config(config).get("configurable", {}).get(OFFER_CONFIG_KEY)
    if not isinstance(offer, Mapping):
        return list(tools)
    enabled = set(offer.get("built_in_tools", ()))
    if offer.get("planning"):
        enabled &= {BuiltInTool.WRITE_TODOS.value}
    built_ins: list[ModelTool] = [
        {
            "type": "function",
            "function": {
                "name": definition.name.value,
                "description": definition.description,
                "parameters": definition.to_json()["parameters"],
            },
        }
        for definition in BUILT_IN_TOOL_DEFINITIONS
        if definition.name.value in enabled
    ]
    if offer.get("planning"):
        return built_ins
    return [*tools, *built_ins]


def get_tool_call_idempotency_key(config: RunnableConfig | None = None) -> str:
    """The idempotency key of the tool call a tool Step runs, ``<flow_id>/<turn_id>/<tool_call_id>``.

    Call it inside a tool with the ``RunnableConfig`` LangChain hands the tool (a parameter typed
    ``RunnableConfig``, or ``runtime.config`` of a ``ToolRuntime``); without one it reads the
    config of the running tool. The key is the same on every attempt of the call, so pass it to
    the system the tool writes to, and that system drops a repeated write.

    Raises:
        NoDeferredToolExecutionError: Outside a tool Step of a Dex session.

    Example:
        >>> @tool
        ... async def refund_order(order_id: str, config: RunnableConfig) -> str:
        ...     \"\"\"Refund an order.\"\"\"
        ...     key = get_tool_call_idempotency_key(config)
        ...     return await payments.refund(order_id, idempotency_key=key)
    """
    key = ensure_config(config).get("configurable", {}).get(IDEMPOTENCY_KEY_CONFIG_KEY)
    if isinstance(key, str) and key:
        return key
    execution = current_deferred_tool_execution()
    if execution is not None:
        return execution.idempotency_key
    raise NoDeferredToolExecutionError(
        "get_tool_call_idempotency_key was called outside a tool Step: the tool runs only with "
        "a key when a Dex agent session runs it (execute_deferred_tool_call of LangGraphRunner)"
    )
