"""Which Steps of a Flow ran, and with which attempt, read from the engine's history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc

from dex_agents.exceptions import DexAgentsError
from dex_agents.testing._engine_channel import engine_channel

EXECUTE_COMPLETED_EVENT = "step_execute_completed"
"""``event_type`` of a Step whose Execute completed."""

EXECUTE_FAILED_EVENT = "step_execute_failed"
"""``event_type`` of a Step whose Execute failed after its last attempt."""

WAIT_FOR_COMPLETED_EVENT = "step_wait_for_completed"
"""``event_type`` of a Step whose WaitFor completed."""

WAIT_FOR_FAILED_EVENT = "step_wait_for_failed"
"""``event_type`` of a Step whose WaitFor failed."""

_STEP_METHOD_EVENT_TYPES = (
    EXECUTE_COMPLETED_EVENT,
    EXECUTE_FAILED_EVENT,
    WAIT_FOR_COMPLETED_EVENT,
    WAIT_FOR_FAILED_EVENT,
)
_HISTORY_TIMEOUT_SECONDS = 60.0
_PAGE_SIZE = 100


class StepHistoryError(DexAgentsError, RuntimeError):
    """The history of a Flow could not be read."""


@dataclass(frozen=True)
class StepHistoryEntry:
    """One Step method event of a Flow's history.

    Attributes:
        event_type: ``step_execute_completed``, ``step_execute_failed``,
            ``step_wait_for_completed`` or ``step_wait_for_failed``.
        step_type: The Step type, such as ``RunModel`` or ``CallTool``.
        step_execution_id: The Step execution, shared by all its attempts.
        final_attempt: The attempt that produced the event (1 for a first try).
    """

    event_type: str
    step_type: str
    step_execution_id: str
    final_attempt: int


async def read_step_history(server_address: str, flow_id: str) -> list[StepHistoryEntry]:
    """Read the Step method events of ``flow_id``, oldest first.

    Reads the history page by page through the FlowService ``GetHistoryEvents`` RPC with the
    SDK's protobuf stubs (the RPC ``dex-local-engine history --steps-only`` prints), in this
    process, so it works against any Dex server, the embedded engine or ``dexcli dev``, and
    costs no interpreter start.

    Raises:
        StepHistoryError: The server refused the call (an unknown Flow, say) or could not be
            reached; the message carries its status and details.

    Example:
        >>> import asyncio
        >>> from dex_agents.testing import in_process_worker, wait_for_agent_snapshot
        >>> async def completed_steps() -> list[str]:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         sessions = dex.sessions(flow)
        ...         await sessions.start_session("history-example", "Hi")
        ...         await wait_for_agent_snapshot(sessions, "history-example",
        ...             lambda snapshot: snapshot.state and snapshot.state.turn_count == 1
        ...             and snapshot.state.active_turn_id is None)
        ...     history = await read_step_history(server_address, "history-example")
        ...     return [entry.step_type for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]
        >>> asyncio.run(completed_steps())
        ['StartAgentSession', 'RunModel']
    """
    entries: list[StepHistoryEntry] = []
    token = b""
    try:
        async with engine_channel(server_address) as channel:
            stub = pb_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
            while True:
                request = pb.GetHistoryEventsRequest(
                    flow_id=flow_id, estimate_page_size=_PAGE_SIZE, next_page_token=token
                )
                response = await stub.GetHistoryEvents(request, timeout=_HISTORY_TIMEOUT_SECONDS)
                entries.extend(_step_entries(response.events))
                token = response.next_page_token
                if not token:
                    return entries
    except grpc.aio.AioRpcError as failure:
        raise StepHistoryError(
            f"cannot read the history of {flow_id} from {server_address}: "
            f"{failure.code().name} {failure.details()}"
        ) from failure


def _step_entries(events: Sequence[pb.FlowHistoryEvent]) -> list[StepHistoryEntry]:
    entries = []
    for event in events:
        event_type = event.WhichOneof("payload")
        if event_type not in _STEP_METHOD_EVENT_TYPES:
            continue
        context = getattr(event, event_type).context
        entries.append(
            StepHistoryEntry(
                event_type=event_type,
                step_type=context.step_type,
                step_execution_id=context.step_execution_id,
                final_attempt=context.final_attempt,
            )
        )
    return entries
