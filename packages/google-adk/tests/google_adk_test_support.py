"""What the Google ADK adapter's tests share: a scripted ADK model, turn contexts, a session run."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from dex_agents import (
    AgentEvent,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSnapshot,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    InProcessWorker,
    read_step_history,
    turn_ended,
    wait_for_agent_snapshot,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field

ScriptStep = Callable[[LlmRequest], LlmResponse | Sequence[LlmResponse]]
"""One scripted model call: the request in, the response (or streamed responses) out."""


class ScriptedLlm(BaseLlm):
    """An ADK model that answers each call with the next step of its script, and records the
    requests it received. A step that raises makes the model call fail."""

    script: list[ScriptStep]
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        index = len(self.requests)
        self.requests.append(llm_request.model_copy(deep=True))
        step = self.script[min(index, len(self.script) - 1)]
        answer = step(llm_request)
        for response in [answer] if isinstance(answer, LlmResponse) else answer:
            yield response


def text_reply(text: str) -> ScriptStep:
    """A step that answers with text."""
    return lambda request: LlmResponse(
        content=types.Content(role="model", parts=[types.Part(text=text)]),
        finish_reason=types.FinishReason.STOP,
    )


def call_reply(*calls: tuple[str, dict[str, Any]]) -> ScriptStep:
    """A step that calls tools, ``(name, arguments)`` each, in one response (ADK assigns IDs)."""
    return lambda request: LlmResponse(
        content=types.Content(
            role="model",
            parts=[
                types.Part(function_call=types.FunctionCall(name=name, args=args))
                for name, args in calls
            ],
        )
    )


def function_responses(request: LlmRequest) -> list[types.FunctionResponse]:
    """Every function response in a model request, in order."""
    return [
        part.function_response
        for content in request.contents
        for part in content.parts or ()
        if part.function_response is not None
    ]


@dataclass(frozen=True)
class SessionStack:
    """An in-process Worker on the test session's engine, and what tests ask of it."""

    dex: InProcessWorker

    def sessions(self, flow: AgentSessionFlow) -> AgentSessionClient:
        return self.dex.sessions(flow)

    async def run_turn(self, flow: AgentSessionFlow, session_id: str, text: str) -> AgentSnapshot:
        """Start ``session_id`` with ``text`` and return the snapshot once the turn ended."""
        sessions = self.sessions(flow)
        await sessions.start_session(session_id, text)
        return await wait_for_agent_snapshot(
            sessions, session_id, turn_ended(), description="the turn to end"
        )

    async def executed_step_types(self, session_id: str) -> list[str]:
        """The Steps whose Execute completed, in history order."""
        history = await read_step_history(self.dex.server_address, self.dex.scoped(session_id))
        return [entry.step_type for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]

    async def events(self, flow: AgentSessionFlow, session_id: str) -> list[AgentEvent]:
        """Every retained AgentEvent of the session, oldest first."""
        page = await self.dex.client.list_stream_messages(
            self.dex.scoped(session_id), flow.agent_events, 1000
        )
        return [message.value for message in reversed(page.messages)]


@asynccontextmanager
async def running_session(
    workers: InProcessWorkerFactory, flows: Sequence[AgentSessionFlow]
) -> AsyncIterator[SessionStack]:
    """An in-process Worker serving ``flows`` on the test session's engine while the block runs
    (``workers`` is the ``dex_in_process_worker`` fixture)."""
    async with workers(flows) as dex:
        yield SessionStack(dex)
