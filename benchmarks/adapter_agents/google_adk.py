"""The benchmark agent as a Google ADK ``LlmAgent``; in process it runs under ADK's own Runner."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator

from dex_agents import AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents_google_adk import google_adk_session_flow
from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

from adapter_agents import BenchmarkAgent, final_answer, lookup_order_result


def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return lookup_order_result(order_id)


class BenchmarkLlm(BaseLlm):
    """Sleeps like a remote model, asks for the order, then answers with what the tool found."""

    latency_seconds: float

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        await asyncio.sleep(self.latency_seconds)
        contents = llm_request.contents
        # This turn's tool results: the durable session keeps every earlier turn in the request.
        turn_start = max(
            (i for i, c in enumerate(contents) if c.role == "user" and _has_text(c)), default=0
        )
        responses = [
            part.function_response.response or {}
            for content in contents[turn_start:]
            for part in content.parts or ()
            if part.function_response is not None
        ]
        if not responses:
            call = types.FunctionCall(name="lookup_order", args={"order_id": "7"})
            part = types.Part(function_call=call)
        else:
            output = json.dumps(responses[-1], separators=(",", ":"))
            part = types.Part(text=final_answer(output))
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def _has_text(content: types.Content) -> bool:
    return any(part.text for part in content.parts or ())


def build_benchmark_agent(model_latency_seconds: float) -> BenchmarkAgent:
    """The benchmark agent as an ADK agent whose model is a sleeping ``BaseLlm``."""
    agent = LlmAgent(
        name="benchmark_support",
        model=BenchmarkLlm(model="benchmark", latency_seconds=model_latency_seconds),
        instruction="You answer questions about orders.",
        tools=[lookup_order],
    )
    flow = google_adk_session_flow(
        agent,
        flow_type="AdapterTurnsGoogleAdk",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
    runner = InMemoryRunner(agent=agent, app_name="benchmark_support")

    async def run_in_process(text: str) -> str:
        session = await runner.session_service.create_session(
            app_name=runner.app_name, user_id="benchmark"
        )
        message = types.Content(role="user", parts=[types.Part(text=text)])
        answer = ""
        async for event in runner.run_async(
            user_id="benchmark", session_id=session.id, new_message=message
        ):
            if event.is_final_response() and event.content is not None:
                answer = "".join(part.text or "" for part in event.content.parts or ())
        return answer

    return BenchmarkAgent(flow=flow, run_in_process=run_in_process)
