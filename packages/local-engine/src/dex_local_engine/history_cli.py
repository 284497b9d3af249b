"""``dex-local-engine history --address HOST:PORT FLOW_ID``: print a Flow's Step method history.

Reads the history page by page through FlowService ``GetHistoryEvents`` (so it works against
any Dex server) and prints one JSON object per line for each Step method event, oldest first::

    {"event_id": 7, "event_type": "step_execute_completed", "step_type": "RunModel",
     "step_execution_id": "RunModel-1", "attempt": 1, "from_step_execution_id": "AwaitUserMessage-1"}

(one line each). ``event_type`` is the ``FlowHistoryEvent`` oneof field name
(``step_wait_for_completed``, ``step_wait_for_failed``, ``step_execute_completed``,
``step_execute_failed``); ``attempt`` is the final attempt. Other events (Flow started/closed,
RPCs, Channel publishes, pending Steps) are not printed.

Public API: :func:`run_history` (``dex_local_engine.cli`` calls it) and :func:`step_event_lines`.

Exit status 0 on success; 1 with a message on stderr when the Flow does not exist, the server
cannot be reached, or it fails the request.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import TextIO

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

__all__ = ["STEP_METHOD_EVENT_TYPES", "run_history", "step_event_lines"]

STEP_METHOD_EVENT_TYPES = (
    "step_wait_for_completed",
    "step_wait_for_failed",
    "step_execute_completed",
    "step_execute_failed",
)
"""The ``FlowHistoryEvent`` payloads printed, one per finished Step method."""

_PAGE_SIZE = 100
_MAX_RECEIVE_BYTES = 64 * 1024 * 1024
"""A single history event may exceed gRPC's 4 MiB default (a server pages by bytes otherwise)."""
_CALL_TIMEOUT_SECONDS = 30.0


def step_event_lines(events: Iterator[pb.FlowHistoryEvent]) -> Iterator[str]:
    """The JSON line of each Step method event among ``events``, in order."""
    for event in events:
        event_type = event.WhichOneof("payload")
        if event_type not in STEP_METHOD_EVENT_TYPES:
            continue
        context = getattr(event, event_type).context
        yield json.dumps(
            {
                "event_id": event.event_id,
                "event_type": event_type,
                "step_type": context.step_type,
                "step_execution_id": context.step_execution_id,
                "attempt": context.final_attempt,
                "from_step_execution_id": context.from_step_execution_id,
            }
        )


def _history_events(
    stub: dex_pb2_grpc.FlowServiceStub, flow_id: str
) -> Iterator[pb.FlowHistoryEvent]:
    token = b""
    while True:
        response: pb.GetHistoryEventsResponse = stub.GetHistoryEvents(
            pb.GetHistoryEventsRequest(
                flow_id=flow_id, estimate_page_size=_PAGE_SIZE, next_page_token=token
            ),
            timeout=_CALL_TIMEOUT_SECONDS,
        )
        yield from response.events
        token = response.next_page_token
        if not token:
            return


def run_history(
    address: str, flow_id: str, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Print the Step method history of ``flow_id`` from the Dex server at ``address``.

    Args:
        address: ``HOST:PORT`` of a Dex FlowService.
        flow_id: The Flow whose (current run's) history to print.
        out: Where JSON lines go (default stdout); err: where errors go (default stderr).

    Returns:
        0 on success, 1 after printing an error (unknown Flow, unreachable server, failure).

    Example::

        raise SystemExit(run_history("127.0.0.1:8801", "session-42"))
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    if not flow_id:
        print("dex-local-engine history: FLOW_ID must not be empty", file=err)
        return 1
    options = [("grpc.max_receive_message_length", _MAX_RECEIVE_BYTES)]
    with grpc.insecure_channel(address, options=options) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            for line in step_event_lines(_history_events(stub, flow_id)):
                print(line, file=out)
        except grpc.RpcError as error:
            print(f"dex-local-engine history: {_describe(error, address, flow_id)}", file=err)
            return 1
    out.flush()
    return 0


def _describe(error: grpc.RpcError, address: str, flow_id: str) -> str:
    code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (error.details() if isinstance(error, grpc.Call) else "") or str(error)
    if code is grpc.StatusCode.NOT_FOUND:
        return f"flow {flow_id!r} does not exist ({details})"
    if code is grpc.StatusCode.UNAVAILABLE:
        return f"cannot reach a Dex server at {address}: {details}"
    return f"GetHistoryEvents for flow {flow_id!r} failed with {code.name}: {details}"
