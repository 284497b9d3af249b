"""``AdapterRunner``: what every framework runner does alike, written once."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType

from dex_agents._compaction import estimate_stored_input_tokens, select_turn_boundary_cutoff
from dex_agents._runner_contract import (
    AgentTurnContext,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPoller,
    ToolTaskPollOutcome,
)
from dex_agents._tool_source_routes import ToolSourceRoutes
from dex_agents._values import AgentToolCall
from dex_agents.exceptions import (
    ConfigurationError,
    ConfigurationTypeError,
    ToolTaskPollerMissingError,
)

__all__ = ["AdapterRunner", "check_tool_task_pollers"]


def check_tool_task_pollers(
    pollers: Mapping[str, object] | None,
    tool_names: Collection[str] | None = None,
    *,
    argument: str = "tool_task_pollers",
) -> dict[str, ToolTaskPoller]:
    """A runner's pollers by tool name, checked where they are given.

    Raises:
        ConfigurationTypeError: When a poller has no ``poll_tool_task`` method.
        ConfigurationError: When ``tool_names`` is given and a poller names another tool.

    Example:
        >>> check_tool_task_pollers({"report": object()})
        Traceback (most recent call last):
        ...
        dex_agents.exceptions.ConfigurationTypeError: tool_task_pollers['report'] (object) has no poll_tool_task method
    """
    checked: dict[str, ToolTaskPoller] = {}
    for name, poller in (pollers or {}).items():
        if tool_names is not None and name not in tool_names:
            raise ConfigurationError(
                f"{argument} names tool {name!r}, which the agent does not have; its tools: "
                f"{', '.join(sorted(tool_names)) or '(none)'}"
            )
        if not isinstance(poller, ToolTaskPoller):
            raise ConfigurationTypeError(
                f"{argument}[{name!r}] ({type(poller).__name__}) has no poll_tool_task method"
            )
        checked[name] = poller
    return checked


class AdapterRunner:
    """Base class of a framework runner: one tool-task router and the compaction defaults.

    A subclass implements the runner contract's ``build_user_message``, ``run_model_step`` and
    ``execute_deferred_tool_call`` for its framework, and says where a call's task poller is:
    ``tool_task_pollers`` by tool name, ``tool_source_routes`` for the calls of its
    ``ToolSource``s, or its own ``find_tool_task_poller``. It inherits:

    - ``poll_tool_task`` / ``cancel_tool_task``: route to that poller; a call without one raises
      ``ToolTaskPollerMissingError``, which the session records at once by the tool's effect, so
      every runner records the same outcome;
    - ``estimate_input_tokens``: the stored messages plus ``fixed_input_tokens(turn)`` (what the
      runner adds itself: instructions, tool definitions), for a runner that cannot measure its
      model input;
    - ``select_compaction_cutoff``: between turns only (``select_turn_boundary_cutoff``).

    Override any of them where the framework knows better. For the error policy of calls that
    cannot run as asked, raise ``unknown_tool_error`` and ``invalid_arguments_error``.

    Example:
        >>> class MyRunner(AdapterRunner):
        ...     def __init__(self, pollers):
        ...         self.tool_task_pollers = check_tool_task_pollers(pollers)
        ...     # build_user_message, run_model_step, execute_deferred_tool_call ...
    """

    tool_task_pollers: Mapping[str, ToolTaskPoller] = MappingProxyType({})
    """The runner's pollers by tool name (checked with ``check_tool_task_pollers``), for a runner
    that takes them so; ``find_tool_task_poller`` finds a call's poller here when no tool source
    built the call."""

    tool_source_routes: ToolSourceRoutes | None = None
    """The routes of the runner's ``ToolSource`` calls back to their sources, for a runner that
    offers sources; ``find_tool_task_poller`` finds a source call's poller through them."""

    async def find_tool_task_poller(
        self, flow_id: str, tool_call: AgentToolCall
    ) -> ToolTaskPoller | None:
        """The poller of the task that ``tool_call`` of session ``flow_id`` started; ``None``:
        this runner has none on this Worker. Here: the tool source that built the call, through
        ``tool_source_routes``, else the poller of the call's tool in ``tool_task_pollers``.

        Raises:
            ToolSourceMissingError: When the call names a tool source the runner does not have.
        """
        routes = self.tool_source_routes
        poller = None if routes is None else routes.poller(tool_call)
        return poller if poller is not None else self.tool_task_pollers.get(tool_call.tool_name)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Polls the call's task once through its poller.

        Raises:
            ToolTaskPollerMissingError: When no poller on this Worker polls the call's task.
            Exception: Whatever the poller raises.
        """
        poller = await self.find_tool_task_poller(poll.flow_id, poll.tool_call)
        if poller is None:
            raise ToolTaskPollerMissingError(
                f"tool {poll.tool_call.tool_name} started a task, but no task poller on this "
                f"Worker polls it ({type(self).__name__})"
            )
        return await poller.poll_tool_task(poll)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Asks the call's poller to cancel its task, when it can; best effort."""
        poller = await self.find_tool_task_poller(cancellation.flow_id, cancellation.tool_call)
        cancel = getattr(poller, "cancel_tool_task", None)
        if callable(cancel):
            await cancel(cancellation)

    def fixed_input_tokens(self, turn: AgentTurnContext) -> int:
        """Tokens the runner adds to every model input beyond the stored messages; 0 here."""
        return 0

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """The stored messages and the summary note, plus ``fixed_input_tokens(turn)``."""
        return estimate_stored_input_tokens(turn, fixed_input_tokens=self.fixed_input_tokens(turn))

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        """Cuts between turns only, so every tool call stays with its result."""
        return select_turn_boundary_cutoff(turn, retained_token_budget)
