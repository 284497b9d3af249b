"""What every Step of a Pydantic AI session needs from the runner's arguments."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic

from dex_agents import ConfigurationError, DeferredToolExecution
from dex_agents.adapters import agent_type_error
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.usage import UsageLimits

__all__ = ["DepsRequest", "ModelResolver", "RunnerConfig"]

ModelResolver = Callable[[Mapping[str, object]], "Model | str"]
"""Maps a turn's session settings to the model of its calls (a ``Model`` or a model name)."""


@dataclass(frozen=True)
class DepsRequest:
    """What a deps factory receives: the Step that needs the agent's dependencies.

    The factory builds ``deps`` in the Worker that runs the Step, from this and the Worker's own
    resources (clients, pools, configuration), never from Flow state: a tool Step may run in
    another process than the model call that requested it.

    Attributes:
        flow_id: The session ID.
        turn_id: The turn, ``turn-<n>``.
        session_settings: The turn's session settings in a model Step; empty in a tool Step (tool
            calls do not receive session settings).
        tool_call: The call a tool Step runs, or ``None`` in a model Step.

    Example:
        >>> def build_deps(request: DepsRequest) -> SupportDeps:
        ...     return SupportDeps(db=worker_pool, session_id=request.flow_id)
    """

    flow_id: str
    turn_id: str
    session_settings: Mapping[str, object] = field(default_factory=dict)
    tool_call: DeferredToolExecution | None = None


@dataclass(frozen=True)
class RunnerConfig(Generic[AgentDepsT]):
    """The agent and how to run it; shared by the model, tool and summary Steps."""

    agent: Agent[AgentDepsT, Any]
    resolve_model: ModelResolver | None
    deps_factory: Callable[[DepsRequest], AgentDepsT | Awaitable[AgentDepsT]] | None
    usage_limits: UsageLimits | None
    stream: bool

    def __post_init__(self) -> None:
        if not isinstance(self.agent, Agent):
            raise agent_type_error("PydanticAIRunner", "a pydantic_ai.Agent", self.agent)
        if self.agent.model is None and self.resolve_model is None:
            raise ConfigurationError(
                f"agent {self.agent.name or '(unnamed)'} has no model: give the Agent a model or "
                "pass resolve_model= to PydanticAIRunner"
            )
        for name in ("resolve_model", "deps_factory"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise ConfigurationError(f"PydanticAIRunner {name} must be callable, got {value!r}")

    def model_for(self, settings: Mapping[str, object]) -> Model | str | None:
        """The model of a call with these session settings; ``None`` keeps the agent's own."""
        if self.resolve_model is None:
            return None
        return self.resolve_model(settings)

    async def deps_for(self, request: DepsRequest) -> AgentDepsT | None:
        """The agent's deps for one Step, from the factory; ``None`` without one."""
        if self.deps_factory is None:
            return None
        deps = self.deps_factory(request)
        if inspect.isawaitable(deps):
            return await deps
        return deps
