"""The ADK plugin that makes one ``RunModel`` activation exactly one model call.

ADK's ``Runner`` loops model call, tool calls, model call, until a final response. In a
``RunModel`` Step the runner installs this plugin first, so its callbacks run before every other
plugin's and the agent's own:

- ``before_model_callback`` adds the session's built-in tools to the request (only ``write_todos``
  in a planning turn) and refuses a second model call in the same activation;
- ``before_tool_callback`` answers every tool call the model made with a placeholder and sets
  ``skip_summarization``, ADK's documented way to end the invocation after a tool response
  without another model call. The tool never runs here; the runner returns the calls as
  ``ToolCallsRequested`` and drops the placeholder event. Each call then runs in its own tool Step.

``set_model_response``, the tool through which ADK returns an ``output_schema`` answer, is part of
producing the model's answer, so it runs inline (it only validates the answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    BuiltInToolDefinition,
    ConfigurationError,
    RunnerContractError,
)
from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

__all__ = [
    "DEFERRED_PLACEHOLDER",
    "INLINE_TOOL_NAMES",
    "BuiltInAdkTool",
    "DeferredAdkCall",
    "ModelCallPlugin",
]

INLINE_TOOL_NAMES: Final = frozenset({"set_model_response"})
"""ADK tools that produce the model's answer itself, run inside the model call."""

DEFERRED_PLACEHOLDER: Final = {"status": "deferred to its own Dex tool Step"}
"""What ADK sees in ``RunModel`` as the response of a deferred call; never stored."""

PLUGIN_NAME: Final = "dex_agents_model_call"


class BuiltInAdkTool(BaseTool):
    """A session built-in tool (``ask_user``, ``durable_wait``, ``write_todos``) offered to ADK.

    The session routes its calls to its own Steps, so ADK never runs it.
    """

    def __init__(self, definition: BuiltInToolDefinition) -> None:
        super().__init__(name=definition.name.value, description=definition.description)
        self._parameters = definition.parameters

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema=self._parameters,
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        raise RunnerContractError(
            f"built-in tool {self.name} ran inside ADK; the session routes its calls instead"
        )


def built_in_adk_tools(enabled: frozenset[str]) -> tuple[BuiltInAdkTool, ...]:
    """The enabled built-in tools as ADK tools, in canonical order."""
    return tuple(
        BuiltInAdkTool(definition)
        for definition in BUILT_IN_TOOL_DEFINITIONS
        if definition.name.value in enabled
    )


@dataclass(frozen=True)
class DeferredAdkCall:
    """A tool call the plugin held back, and what ADK knew about its tool.

    Attributes:
        tool: The tool ADK resolved, or ``None`` when the model named a tool it was not offered.
        requires_confirmation: Whether the tool asked for ADK's confirmation of these arguments
            (``require_confirmation``); the session's approval stands in for it.
    """

    tool: BaseTool | None
    requires_confirmation: bool


class ModelCallPlugin(BasePlugin):
    """Holds one ``RunModel`` activation to a single model call and defers every tool call."""

    def __init__(self, *, built_in_tools: tuple[BuiltInAdkTool, ...], planning: bool) -> None:
        super().__init__(name=PLUGIN_NAME)
        self._built_in_tools = built_in_tools
        self._planning = planning
        self._offered: dict[str, BaseTool] = {}
        self.model_calls = 0
        self.deferred: dict[str, DeferredAdkCall] = {}

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        self.model_calls += 1
        if self.model_calls > 1:
            raise RunnerContractError(
                "the ADK agent asked for a second model call in one RunModel Step; dex-agents "
                "makes exactly one per Step (a code executor or an agent transfer that runs "
                "inside the model loop cannot be deferred)"
            )
        if self._planning:
            # A planning turn writes the plan and nothing else.
            llm_request.config.tools = None
            llm_request.tools_dict.clear()
        for tool in self._built_in_tools:
            if tool.name in llm_request.tools_dict:
                raise ConfigurationError(
                    f"the agent has a tool named {tool.name}, the name of a built-in tool the "
                    "session enables; rename the tool or leave the built-in tool out of "
                    "AgentSessionOptions.built_in_tools"
                )
        llm_request.append_tools(list(self._built_in_tools))
        self._offered = dict(llm_request.tools_dict)
        return None

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        if tool.name in INLINE_TOOL_NAMES:
            return None
        call_id = tool_context.function_call_id
        if call_id is None:
            raise RunnerContractError(f"ADK called tool {tool.name} without a function call ID")
        offered = self._offered.get(tool.name)
        requires_confirmation = offered is not None and (
            await offered.check_require_confirmation(tool_args, tool_context) is True
        )
        self.deferred[call_id] = DeferredAdkCall(offered, requires_confirmation)
        # ADK's documented way to end the invocation after this response, with no model call.
        tool_context.actions.skip_summarization = True
        return dict(DEFERRED_PLACEHOLDER)
