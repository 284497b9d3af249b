"""The benchmark agent as a Google ADK ``LlmAgent``; in process it runs under ADK's own Runner.

``build_llm_agent`` gives the plain ``LlmAgent`` too, so ``peers.py`` can make the same agent
durable with DBOS (``DBOSPlugin``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable
from typing import Any, Final

from dex_agents_google_adk import google_adk_session_flow
from dex_agents_google_adk.testing import reference_agent
from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner, Runner
from google.genai import types

from adapter_agents import (
    BenchmarkAgent,
    TurnShape,
    add_order_note_result,
    benchmark_session_options,
    lookup_order_result,
    next_model_action,
)

ToolWrapper = Callable[[Callable[..., Any]], Callable[..., Any]]
APP_NAME = "benchmark_support"
USER_ID = "benchmark"


async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return lookup_order_result(order_id)


async def add_order_note(order_id: str, note: str) -> dict[str, str]:
    """Add a note to an order."""
    return add_order_note_result(order_id, note)


_TOKENS_PER_CONTENT: Final = 20
"""The usage the benchmark model reports: this many tokens per request content, and its answer."""


class BenchmarkLlm(BaseLlm):
    """Sleeps like a remote model, then asks for the next tool of its shape or answers."""

    latency_seconds: float
    shape: TurnShape = TurnShape.READ

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        await asyncio.sleep(self.latency_seconds)
        contents = llm_request.contents
        # This turn's tool results: the session keeps every earlier turn in the request.
        turn_start = max(
            (i for i, c in enumerate(contents) if c.role == "user" and _has_text(c)), default=0
        )
        outputs = [
            json.dumps(part.function_response.response or {}, separators=(",", ":"))
            for content in contents[turn_start:]
            for part in content.parts or ()
            if part.function_response is not None
        ]
        action = next_model_action(self.shape, outputs)
        if isinstance(action, str):
            part = types.Part(text=action)
        else:
            call = types.FunctionCall(name=action.name, args=dict(action.arguments))
            part = types.Part(function_call=call)
        # A real model reports usage; without it ADK's telemetry logs a warning per model call.
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=_TOKENS_PER_CONTENT * len(contents),
            candidates_token_count=_TOKENS_PER_CONTENT,
            total_token_count=_TOKENS_PER_CONTENT * (len(contents) + 1),
        )
        yield LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=usage)


def _has_text(content: types.Content) -> bool:
    return any(part.text for part in content.parts or ())


def _unchanged(function: Callable[..., Any]) -> Callable[..., Any]:
    return function


def build_llm_agent(
    model_latency_seconds: float,
    shape: TurnShape = TurnShape.READ,
    *,
    wrap_tool: ToolWrapper = _unchanged,
) -> LlmAgent:
    """The benchmark agent; ``wrap_tool`` wraps each tool function (``peers.py``: DBOS steps)."""
    tools = [wrap_tool(lookup_order)]
    if shape is TurnShape.READ_WRITE:
        tools.append(wrap_tool(add_order_note))
    return reference_agent(
        BenchmarkLlm(model="benchmark", latency_seconds=model_latency_seconds, shape=shape),
        tools,
        name=APP_NAME,
        instruction="You answer questions about orders.",
    )


async def run_adk_turn(runner: Runner, session_id: str, text: str) -> str:
    """One turn of ``runner``'s agent in session ``session_id``; the final response's text."""
    message = types.Content(role="user", parts=[types.Part(text=text)])
    answer = ""
    async for event in runner.run_async(
        user_id=USER_ID, session_id=session_id, new_message=message
    ):
        if event.is_final_response() and event.content is not None:
            answer = "".join(part.text or "" for part in event.content.parts or ())
    return answer


def build_benchmark_agent(
    model_latency_seconds: float, shape: TurnShape = TurnShape.READ
) -> BenchmarkAgent:
    """The benchmark agent as an ADK agent whose model is a sleeping ``BaseLlm``."""
    agent = build_llm_agent(model_latency_seconds, shape)
    flow = google_adk_session_flow(
        agent,
        flow_type="AdapterTurnsGoogleAdk",
        options=benchmark_session_options(shape),
    )

    runner = InMemoryRunner(agent=agent, app_name=APP_NAME)
    session_ids: list[str] = []

    async def run_in_process(text: str) -> str:
        # One ADK session across turns: the durable session keeps the conversation too.
        if not session_ids:
            session = await runner.session_service.create_session(
                app_name=APP_NAME, user_id=USER_ID
            )
            session_ids.append(session.id)
        return await run_adk_turn(runner, session_ids[0], text)

    return BenchmarkAgent(flow=flow, run_in_process=run_in_process)
