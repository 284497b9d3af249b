"""The reference Google ADK agent: tools and a scripted ``BaseLlm``, as one ``LlmAgent``.

The shared suite's runner (the scenario and context-window agents) and the benchmark agent
(``benchmarks/adapter_agents``) build their agents here instead of each writing the same
``LlmAgent(...)`` call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm

__all__ = ["reference_agent"]


def reference_agent(
    model: BaseLlm,
    tools: Sequence[Any] = (),
    *,
    name: str = "reference",
    instruction: str = "",
) -> LlmAgent:
    """An ``LlmAgent`` whose model is ``model`` (a scripted ``BaseLlm``, such as ``ScenarioLlm``),
    with ``tools`` as ADK takes them (plain functions, ``BaseTool``s, toolsets).

    Example:
        >>> agent = reference_agent(ScriptedGemini(model="scripted"), [lookup_order],
        ...                         instruction="You help with orders.")
        >>> flow = google_adk_session_flow(agent, flow_type="SupportAgent")
    """
    return LlmAgent(name=name, model=model, instruction=instruction, tools=list(tools))
