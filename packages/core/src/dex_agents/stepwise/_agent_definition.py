"""AgentDefinition: a Stepwise agent in Dex terms, with no framework."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Literal

from dex_agents._built_in_tools import BuiltInTool, parse_built_in_tools
from dex_agents._compaction import CompactionPolicy
from dex_agents._session.options import (
    DEFAULT_EVENT_STREAM_CAPACITY_BYTES,
    check_stream_and_interrupt_limits,
)
from dex_agents._tool_policy import ToolEffect, ToolPolicy
from dex_agents.exceptions import ConfigurationError, ConfigurationTypeError
from dex_agents.stepwise._function_tool import FunctionTool
from dex_agents.stepwise._json_schema import JsonValue
from dex_agents.stepwise._model_client import ModelClient
from dex_agents.stepwise._tool_sources import ToolSource, declared_tool_names, validate_tool_sources

__all__ = [
    "DEFAULT_MAX_MODEL_CALLS_PER_TURN",
    "DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT",
    "AgentDefinition",
    "InstructionContext",
    "Instructions",
    "PlanningToolChoice",
    "built_in_tool_name_conflict_message",
]

DEFAULT_MAX_MODEL_CALLS_PER_TURN = 100
"""Model calls one turn may make before the next call offers no tools."""

DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT = timedelta(seconds=10)
"""How long each RunModel waits for one tool source's listing."""

PlanningToolChoice = Literal["auto", "required"]
"""Whether the first model call of a planning turn may answer in text or must call write_todos."""


@dataclass(frozen=True)
class InstructionContext:
    """What an instructions function sees in every RunModel.

    Attributes:
        flow_id: The session ID.
        turn_id: ``turn-<n>``.
        session_settings: The settings the turn started with; empty when there are none.
        interaction_mode: ``chat``, ``planning``, or ``executing``.
    """

    flow_id: str
    turn_id: str
    session_settings: Mapping[str, object] = field(default_factory=dict)
    interaction_mode: str = "chat"


Instructions = str | Callable[[InstructionContext], str | Awaitable[str]]
"""Instructions text, or a sync or async function of InstructionContext that returns it."""


def built_in_tool_name_conflict_message(tool_name: str) -> str:
    """The error text of a tool named like an enabled built-in tool."""
    return f"tool {tool_name} uses the name of an enabled built-in tool"


@dataclass(frozen=True)
class AgentDefinition:
    """A Stepwise agent: instructions, a model client, tools, and session options.

    ``stepwise_agent_session_flow`` turns it into the session Flow. Fields that map to
    ``AgentSessionOptions`` (``tool_policies``, ``default_tool_effect``, ``built_in_tools``,
    ``interrupt_deadline``, ``event_stream_capacity_bytes``, ``plan_mode_enabled``,
    ``compaction``) become the Flow's options.

    Attributes:
        name: The agent's name, such as ``"support"``.
        instructions: Text, or a function of InstructionContext evaluated in every RunModel.
        model: The ModelClient of every model call.
        model_settings: Passed to the client as ``ModelRequest.settings``.
        tools: Function tools, offered first.
        tool_sources: Sources of tools listed at run time (see ToolSource).
        tool_policies: Explicit policies by tool name; they win over each tool's own effect.
        default_tool_effect: Effect of a tool with neither a policy nor an effect of its own.
        built_in_tools: Built-in tools to enable; their names are reserved.
        max_model_calls_per_turn: After this many model calls in one turn, the next call offers
            no tools and the turn ends.
        interrupt_deadline: How long approvals and questions wait; ``None`` waits forever.
        event_stream_capacity_bytes: Capacity of the AgentEvents Stream.
        plan_mode_enabled: Whether the session accepts plan-mode messages.
        planning_tool_choice: ``"required"`` forces ``write_todos`` on a planning turn's first
            model call while no draft exists.
        resolve_model: Maps the turn's session settings to the ModelClient of each model call.
        compaction: The session's compaction policy, or ``None``.
        max_output_tokens: The most output tokens a model call may produce, if set; a summary
            request leaves room for it within the policy's ``context_window_tokens``.
        tool_source_listing_timeout: How long each RunModel waits for one source's listing.

    Raises:
        ConfigurationError: For a blank name, duplicate tool names, a tool named like an enabled built-in
            tool, an unknown built-in tool, plan mode without ``write_todos``, a non-positive
            limit, or an unknown ``planning_tool_choice``.
        ConfigurationTypeError: For a value of the wrong kind, such as a tool that is not a FunctionTool.

    Example:
        >>> from dex_agents.stepwise import ScriptedModelClient, ScriptedModelReply
        >>> support_agent = AgentDefinition(
        ...     name="support",
        ...     instructions="You help customers with their orders.",
        ...     model=ScriptedModelClient(lambda request: ScriptedModelReply(text="Hello")),
        ...     tools=[lookup_order],
        ... )
    """

    name: str
    instructions: Instructions
    model: ModelClient
    model_settings: Mapping[str, JsonValue] = field(default_factory=dict)
    tools: Sequence[FunctionTool] = ()
    tool_sources: Sequence[ToolSource] = ()
    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=dict)
    default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED
    built_in_tools: Set[BuiltInTool] = frozenset()
    max_model_calls_per_turn: int = DEFAULT_MAX_MODEL_CALLS_PER_TURN
    interrupt_deadline: timedelta | None = None
    event_stream_capacity_bytes: int = DEFAULT_EVENT_STREAM_CAPACITY_BYTES
    plan_mode_enabled: bool = False
    planning_tool_choice: PlanningToolChoice = "auto"
    resolve_model: Callable[[Mapping[str, object]], ModelClient] | None = None
    compaction: CompactionPolicy | None = None
    max_output_tokens: int | None = None
    tool_source_listing_timeout: timedelta = DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigurationError(
                f"AgentDefinition.name must be non-blank text, got {self.name!r}"
            )
        if not isinstance(self.instructions, str) and not callable(self.instructions):
            raise ConfigurationTypeError(
                "AgentDefinition.instructions must be a str or a function of InstructionContext"
            )
        for member in ("call_model", "estimate_input_tokens"):
            if not callable(getattr(self.model, member, None)):
                raise ConfigurationTypeError(
                    f"AgentDefinition.model is not a ModelClient: it has no {member}"
                )
        # Read-only copies, so a caller's later change never reaches a running Worker.
        object.__setattr__(self, "model_settings", MappingProxyType(dict(self.model_settings)))
        object.__setattr__(self, "tool_policies", MappingProxyType(dict(self.tool_policies)))
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "tool_sources", validate_tool_sources(tuple(self.tool_sources)))
        object.__setattr__(self, "built_in_tools", parse_built_in_tools(self.built_in_tools))
        self._check_tools()
        self._check_limits()

    @property
    def tools_by_name(self) -> Mapping[str, FunctionTool]:
        """The function tools by name."""
        return {tool.name: tool for tool in self.tools}

    @property
    def tool_sources_by_name(self) -> Mapping[str, ToolSource]:
        """The tool sources by ``source_name``."""
        return {source.source_name: source for source in self.tool_sources}

    def _check_tools(self) -> None:
        names: set[str] = set()
        for index, tool in enumerate(self.tools):
            if not isinstance(tool, FunctionTool):
                raise ConfigurationTypeError(
                    f"AgentDefinition.tools[{index}] must be a FunctionTool (use @function_tool), "
                    f"got {type(tool).__name__}"
                )
            if tool.name in names:
                raise ConfigurationError(f"two tools are named {tool.name}")
            names.add(tool.name)
        check_built_in_tool_names(names, self.built_in_tools)
        for name, policy in self.tool_policies.items():
            if not isinstance(policy, ToolPolicy):
                raise ConfigurationTypeError(
                    f"tool_policies[{name!r}] must be a ToolPolicy, got {policy!r}"
                )
        declared: set[str] = set()
        for source in self.tool_sources:
            for tool_name in declared_tool_names(source):
                if tool_name in self.built_in_tools:
                    raise ConfigurationError(built_in_tool_name_conflict_message(tool_name))
                if tool_name in names:
                    raise ConfigurationError(
                        f"tool {tool_name} of a tool source uses the name of a function tool"
                    )
                if tool_name in declared:
                    raise ConfigurationError(f"two tool sources list a tool named {tool_name}")
                declared.add(tool_name)

    def _check_limits(self) -> None:
        if self.compaction is not None and not isinstance(self.compaction, CompactionPolicy):
            raise ConfigurationTypeError(
                f"AgentDefinition.compaction must be a CompactionPolicy or None, "
                f"got {self.compaction!r}"
            )
        tokens = self.max_output_tokens
        if tokens is not None and (
            isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1
        ):
            raise ConfigurationError(
                f"max_output_tokens must be a positive int or None, got {tokens!r}"
            )
        if self.max_model_calls_per_turn < 1:
            raise ConfigurationError(
                f"max_model_calls_per_turn must be at least 1, got {self.max_model_calls_per_turn}"
            )
        check_stream_and_interrupt_limits(self.event_stream_capacity_bytes, self.interrupt_deadline)
        if self.tool_source_listing_timeout <= timedelta(0):
            raise ConfigurationError(
                "tool_source_listing_timeout must be positive, "
                f"got {self.tool_source_listing_timeout}"
            )
        if self.plan_mode_enabled and BuiltInTool.WRITE_TODOS not in self.built_in_tools:
            raise ConfigurationError(
                "plan_mode_enabled needs BuiltInTool.WRITE_TODOS in built_in_tools, "
                "because a planning turn writes its plan with write_todos"
            )
        if self.planning_tool_choice not in ("auto", "required"):
            raise ConfigurationError(
                f'planning_tool_choice must be "auto" or "required", got {self.planning_tool_choice!r}'
            )
        if self.planning_tool_choice == "required":
            supports = getattr(self.model, "supports_forced_tool_choice", None)
            if callable(supports) and supports(self.model_settings) is False:
                raise ConfigurationError(
                    'planning_tool_choice "required" needs a model that accepts a forced tool '
                    "choice, and this model client refuses it with these model_settings"
                )

    def model_for(self, session_settings: Mapping[str, object]) -> ModelClient:
        """The ModelClient of a model call with these session settings.

        Raises:
            Exception: Whatever ``resolve_model`` raises.
            ConfigurationTypeError: When ``resolve_model`` returns something that is not a ModelClient.
        """
        if self.resolve_model is None:
            return self.model
        model = self.resolve_model(session_settings)
        if not callable(getattr(model, "call_model", None)):
            raise ConfigurationTypeError(
                f"resolve_model returned {type(model).__name__}, not a ModelClient"
            )
        return model


def check_built_in_tool_names(tool_names: Set[str], enabled_built_in_tools: Set[str]) -> None:
    """Refuses a function tool named like an enabled built-in tool.

    Raises:
        ConfigurationError: ``tool <name> uses the name of an enabled built-in tool``.
    """
    for name in sorted(tool_names):
        if name in enabled_built_in_tools:
            raise ConfigurationError(built_in_tool_name_conflict_message(name))
