"""``dex_agents_langgraph.testing``: scripted chat models and the shared suite's LangGraph runner.

``ScriptedChatModel`` (also exported by ``dex_agents_langgraph``) answers from a function;
:func:`reference_graph` is the one agent graph (model node, ``ToolNode``, and back) that the
suite's runner and the benchmark agent build; :func:`scenario_chat_model` answers with the shared
suite's ``scripted_reply``, and :data:`SCENARIO_RUNNER` builds the shared scenario agent (the
package's entry point ``langgraph`` in the group ``dex_agents.scenario_runners``). Needs
``dex_agents.testing``.

Example:
    >>> model = ScriptedChatModel(respond=lambda messages: AIMessage(content="Hello"))
"""

from dex_agents_langgraph._scripted_chat_model import ScriptedChatModel, ScriptedResponse
from dex_agents_langgraph.testing._reference_agent import (
    ModelForContext,
    reference_graph,
    turn_messages,
)
from dex_agents_langgraph.testing._scenario_runner import (
    SCENARIO_RUNNER,
    LangGraphScenarioRunner,
    ScenarioContext,
    context_window_chat_model,
    scenario_chat_model,
)

__all__ = [
    "SCENARIO_RUNNER",
    "LangGraphScenarioRunner",
    "ModelForContext",
    "ScenarioContext",
    "ScriptedChatModel",
    "ScriptedResponse",
    "context_window_chat_model",
    "reference_graph",
    "scenario_chat_model",
    "turn_messages",
]
