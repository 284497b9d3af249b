"""Routes a stored tool call back to the tool source that built it, on any Worker.

A runner that offers the tools of ``ToolSource``s wraps each source call's own
``tool_source_reference`` with the source's name when it defers the call. The tool Step, a task
poll and a cancellation then find the source by that name and hand it the call with its own
reference again, without listing anything. Stepwise and the Claude Agent SDK runner route this
way, each under its own key.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass

from dex_agents._json_values import dump_json_text
from dex_agents._runner_contract import (
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
)
from dex_agents._tool_source import ToolSource
from dex_agents._values import AgentToolCall
from dex_agents.exceptions import DexAgentsError

__all__ = ["SourceTaskPoller", "ToolSourceMissingError", "ToolSourceRoutes"]

_REFERENCE_KEY = "reference"


class ToolSourceMissingError(DexAgentsError, LookupError):
    """A stored call names a tool source that this Worker's runner does not have."""


@dataclass(frozen=True)
class SourceTaskPoller:
    """Polls and cancels one stored call's task through the source that built the call."""

    source: ToolSource
    record: AgentToolCall
    """The stored call with the source's own ``tool_source_reference``."""

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Polls the task once through the source."""
        return await self.source.poll_tool_task(dataclasses.replace(poll, tool_call=self.record))

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Asks the source to cancel the task, when the source can; best effort."""
        cancel = getattr(self.source, "cancel_tool_task", None)
        if callable(cancel):
            await cancel(dataclasses.replace(cancellation, tool_call=self.record))


@dataclass(frozen=True)
class ToolSourceRoutes:
    """A runner's tool sources by name, and the routes of their stored calls back to them.

    Attributes:
        sources: The runner's sources by ``source_name``.
        key: The JSON key that names the source in a stored ``tool_source_reference``; each
            runner has its own, so it never takes another runner's call for its own.
        owner: Who has the sources (``"agent support"``), named when a stored call names a
            source it lacks.

    Example:
        >>> from dex_agents._tool_policy import ResolvedToolPolicy, ToolEffect
        >>> routes = ToolSourceRoutes({}, key="echo_tool_source", owner="EchoRunner")
        >>> policy = ResolvedToolPolicy(ToolEffect.READ, requires_approval=False)
        >>> call = DeferredToolCall("c1", "read", "{}", policy, tool_source_reference="r1")
        >>> routes.wrap("files", call).tool_source_reference
        '{"echo_tool_source":"files","reference":"r1"}'
    """

    sources: Mapping[str, ToolSource]
    key: str
    owner: str

    def wrap(self, source_name: str, call: DeferredToolCall) -> DeferredToolCall:
        """``call`` as the source ``source_name`` built it, with the reference that routes back."""
        reference = dump_json_text(
            {self.key: source_name, _REFERENCE_KEY: call.tool_source_reference}
        )
        return dataclasses.replace(call, tool_source_reference=reference)

    def route(self, record: AgentToolCall) -> tuple[ToolSource, AgentToolCall] | None:
        """The source that built a stored call and the record with the source's own reference;
        ``None`` for a call no source built.

        Raises:
            ToolSourceMissingError: When the call names a source that is not in ``sources``.
        """
        named = _read_reference(record.tool_source_reference, self.key)
        if named is None:
            return None
        source_name, reference = named
        source = self.sources.get(source_name)
        if source is None:
            raise ToolSourceMissingError(
                f"tool call {record.tool_call_id} names tool source {source_name}, which "
                f"{self.owner} does not have on this Worker"
            )
        return source, dataclasses.replace(record, tool_source_reference=reference)

    async def execute(self, call: DeferredToolExecution) -> DeferredToolOutcome | None:
        """Runs a source's call through its source; ``None`` for a call no source built.

        Raises:
            ToolSourceMissingError: When the call names a source that is not in ``sources``.
            Exception: Whatever the source raises.
        """
        routed = self.route(call.tool_call)
        if routed is None:
            return None
        source, record = routed
        return await source.execute_deferred_tool_call(dataclasses.replace(call, tool_call=record))

    def poller(self, record: AgentToolCall) -> SourceTaskPoller | None:
        """The poller of a source call's task; ``None`` for a call no source built.

        Raises:
            ToolSourceMissingError: When the call names a source that is not in ``sources``.
        """
        routed = self.route(record)
        return None if routed is None else SourceTaskPoller(*routed)


def _read_reference(text: str | None, key: str) -> tuple[str, str | None] | None:
    if text is None:
        return None
    try:
        decoded = json.loads(text)
    except ValueError:
        return None
    if not isinstance(decoded, Mapping) or not isinstance(decoded.get(key), str):
        return None
    reference = decoded.get(_REFERENCE_KEY)
    return decoded[key], reference if isinstance(reference, str) else None
