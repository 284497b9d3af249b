"""The agent of ``load.py``, imported by its ``dex-agents worker`` processes and by its client.

One turn of the peers benchmark's shape: the model (it sleeps ``$LOAD_MODEL_LATENCY_MS`` on every
call) asks for ``lookup_order`` (a READ tool), then for ``add_order_note`` (a non-idempotent
WRITE, which waits for an approval), then answers. The write's note is the user's text, which
carries the session and turn, so the write appends ``<note>\\t<wall seconds>`` to
``$LOAD_MARKS_FILE`` when it starts running: the client matches it to the moment it approved.

Serve it with ``dex-agents worker load_agent:build_flow`` from this directory.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Final

from dex_agents import AgentSessionFlow, ToolEffect
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ModelUserText,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    function_tool,
    stepwise_agent_session_flow,
)

FLOW_TYPE: Final = "LoadBenchmarkAgent"
MODEL_LATENCY_ENV: Final = "LOAD_MODEL_LATENCY_MS"
MARKS_FILE_ENV: Final = "LOAD_MARKS_FILE"
FINAL_TEXT: Final = "Noted on order 7."
_ORDER: Final = {"order_id": "7", "item": "teapot", "status": "shipped"}


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return {**_ORDER, "order_id": order_id}


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
async def add_order_note(order_id: str, note: str) -> str:
    """Add a note to an order (waits for an approval: a non-idempotent write)."""
    marks = os.environ.get(MARKS_FILE_ENV)
    if marks:
        # One short line per write with O_APPEND: whole lines even from several Workers.
        with open(marks, "a", encoding="utf-8") as file:
            file.write(f"{note}\t{time.time():.6f}\n")
    return f"note added to order {order_id}"


def _last_user_text(request: ModelRequest) -> str:
    texts = [item.text for item in request.input if isinstance(item, ModelUserText)]
    return texts[-1] if texts else ""


def _script(latency_seconds: float) -> Callable[[ModelRequest], Awaitable[ScriptedModelReply]]:
    async def respond(request: ModelRequest) -> ScriptedModelReply:
        await asyncio.sleep(latency_seconds)
        done = len(ScriptedModelClient.tool_results(request))
        if done == 0:
            return ScriptedModelReply(
                tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"})]
            )
        if done == 1:
            note = _last_user_text(request)
            return ScriptedModelReply(
                tool_calls=[ScriptedToolCall("add_order_note", {"order_id": "7", "note": note})]
            )
        return ScriptedModelReply(text=FINAL_TEXT)

    return respond


def build_flow() -> AgentSessionFlow:
    """The load benchmark's session Flow (the model latency from ``$LOAD_MODEL_LATENCY_MS``)."""
    latency_ms = float(os.environ.get(MODEL_LATENCY_ENV, "100"))
    definition = AgentDefinition(
        name="load-support",
        instructions="You note things on orders.",
        model=ScriptedModelClient(_script(latency_ms / 1000.0), max_recorded_requests=0),
        tools=[lookup_order, add_order_note],
    )
    return stepwise_agent_session_flow(definition, flow_type=FLOW_TYPE)
