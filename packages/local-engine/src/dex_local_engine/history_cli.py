"""``dex-local-engine history --address HOST:PORT [--steps-only] FLOW_ID``: print a Flow's history.

Reads the history page by page through FlowService ``GetHistoryEvents`` (so it works against
any Dex server) and prints one JSON object per line, oldest first.

By default every event is printed: the Flow's start and close, each Step method's completion or
failure, each failed attempt that is retried (``step_execute_pending`` / ``step_wait_for_pending``
with the attempt's ``error``, so a stuck Flow shows why), RPCs that changed the Flow, Attribute
writes and Channel publishes and deletes of Clients. Every line has ``event_id``,
``event_type`` (the ``FlowHistoryEvent`` oneof field name), ``time`` (UTC, ISO 8601) and
``run_attempt``, then what that kind of event says (see :func:`event_fields`). Values themselves
are not printed.

``--steps-only`` prints only Step method events, with exactly these keys::

    {"event_id": 7, "event_type": "step_execute_completed", "step_type": "RunModel",
     "step_execution_id": "RunModel-1", "attempt": 1, "from_step_execution_id": "AwaitUserMessage-1"}

(one line each). ``event_type`` is ``step_wait_for_completed``, ``step_wait_for_failed``,
``step_execute_completed`` or ``step_execute_failed``; ``attempt`` is the final attempt.

Public API: :func:`run_history` (``dex_local_engine.cli`` calls it), :func:`event_lines` and
:func:`step_event_lines`.

Exit status 0 on success; 1 with a message on stderr when the Flow does not exist, the server
cannot be reached, or it fails the request.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from typing import TextIO

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from dex_local_engine.cli_errors import describe_call_error

__all__ = [
    "STEP_METHOD_EVENT_TYPES",
    "event_fields",
    "event_lines",
    "run_history",
    "step_event_lines",
]

STEP_METHOD_EVENT_TYPES = (
    "step_wait_for_completed",
    "step_wait_for_failed",
    "step_execute_completed",
    "step_execute_failed",
)
"""The ``FlowHistoryEvent`` payloads ``--steps-only`` prints, one per finished Step method."""

_RETRIED_ATTEMPT_EVENT_TYPES = ("step_wait_for_pending", "step_execute_pending")
_PAGE_SIZE = 100
_MAX_RECEIVE_BYTES = 64 * 1024 * 1024
"""A single history event may exceed gRPC's 4 MiB default (a server pages by bytes otherwise)."""
_CALL_TIMEOUT_SECONDS = 30.0

JsonFields = dict[str, object]


def _step_fields(context: pb.StepMethodEventContext) -> JsonFields:
    return {
        "step_type": context.step_type,
        "step_execution_id": context.step_execution_id,
        "attempt": context.final_attempt,
        "from_step_execution_id": context.from_step_execution_id,
    }


def step_event_lines(events: Iterator[pb.FlowHistoryEvent]) -> Iterator[str]:
    """The JSON line of each Step method event among ``events``, in order (``--steps-only``)."""
    for event in events:
        event_type = event.WhichOneof("payload")
        if event_type not in STEP_METHOD_EVENT_TYPES:
            continue
        fields = {"event_id": event.event_id, "event_type": event_type}
        fields.update(_step_fields(getattr(event, event_type).context))
        yield json.dumps(fields)


def event_lines(events: Iterator[pb.FlowHistoryEvent]) -> Iterator[str]:
    """The JSON line of every event among ``events``, in order."""
    for event in events:
        yield json.dumps(event_fields(event))


def _enum_name(enum: EnumTypeWrapper, number: int, prefix: str) -> str:
    if number not in enum.values():
        # The engine refuses such values where they enter; an older database may hold one.
        return str(number)
    return str(enum.Name(number)).removeprefix(prefix)


def _failure_fields(failure: pb.StepMethodFailure) -> JsonFields:
    # A Worker's error is in original_worker_error_*; a failure the server saw (a timeout, a lost
    # Worker) has its text in details.detail, or only its kind in backend_error.
    details = failure.details
    return {
        "error": details.original_worker_error_detail or details.detail or failure.backend_error,
        "error_type": details.original_worker_error_type or failure.backend_error,
    }


def _decision_fields(decision: pb.StepDecision) -> JsonFields:
    fields: JsonFields = {"next_steps": [movement.step_type for movement in decision.next_steps]}
    if decision.HasField("close_decision"):
        fields["close"] = _enum_name(
            pb.CloseDecisionType,
            decision.close_decision.close_decision_type,
            "CLOSE_DECISION_TYPE_",
        )
    cancelled = [*decision.cancel_step_types, *decision.cancel_sibling_step_types]
    if cancelled:
        fields["cancels"] = cancelled
    return fields


def _writes_fields(
    attributes: Iterable[pb.AttributeWrite],
    published: Iterable[pb.ChannelMessage],
    deleted: Iterable[pb.ChannelMessageDeletion],
) -> JsonFields:
    fields: JsonFields = {}
    keys = [write.key for write in attributes]
    if keys:
        fields["attributes"] = keys
    channels = [message.channel_name for message in published]
    if channels:
        fields["published"] = channels
    removed = [deletion.channel_name for deletion in deleted]
    if removed:
        fields["deleted"] = removed
    return fields


def event_fields(event: pb.FlowHistoryEvent) -> JsonFields:
    """What one history line says about ``event`` (no values, only names and outcomes).

    Example::

        event_fields(event)
        # {"event_id": 9, "event_type": "step_execute_pending", "time": "...", "run_attempt": 1,
        #  "step_type": "CallTool", ..., "attempt": 1, "error": "...", "error_type": "..."}
    """
    event_type = event.WhichOneof("payload") or "unknown"
    fields: JsonFields = {
        "event_id": event.event_id,
        "event_type": event_type,
        "time": event.event_time.ToDatetime().isoformat() + "Z",
        "run_attempt": event.run_attempt,
    }
    if event_type in (*STEP_METHOD_EVENT_TYPES, *_RETRIED_ATTEMPT_EVENT_TYPES):
        fields.update(_step_event_fields(getattr(event, event_type)))
    elif event_type == "flow_started_or_continued":
        started = event.flow_started_or_continued
        fields["flow_type"] = started.flow_type
        fields["start_step_type"] = started.initial_start.start_step_type
    elif event_type == "flow_closed":
        closed = event.flow_closed
        fields["status"] = _enum_name(pb.FlowStatus, closed.flow_status, "FLOW_STATUS_")
        if closed.error_type:
            fields["error_type"] = _enum_name(
                pb.FlowErrorType, closed.error_type, "FLOW_ERROR_TYPE_"
            )
        if closed.error_message:
            fields["error"] = closed.error_message
    elif event_type == "rpc_execution_completed":
        rpc = event.rpc_execution_completed
        fields["rpc_name"] = "SetAttributes" if rpc.is_set_attribute_api else rpc.rpc_name
        fields.update(_decision_fields(rpc.step_decision))
        fields.update(
            _writes_fields(rpc.upsert_attributes, rpc.publish_to_channel, rpc.delete_from_channel)
        )
    elif event_type == "time_travel_fork":
        fields["previous_run_id"] = event.time_travel_fork.previous_run_id
    elif event_type in ("channel_external_publish", "channel_external_delete"):
        messages = getattr(event, event_type).messages
        fields["channels"] = [message.channel_name for message in messages]
        fields["message_ids"] = [message.message_id for message in messages]
    return fields


def _step_event_fields(
    payload: pb.StepWaitForCompletedEvent
    | pb.StepWaitForFailedEvent
    | pb.StepExecuteCompletedEvent
    | pb.StepExecuteFailedEvent
    | pb.StepMethodPendingEvent,
) -> JsonFields:
    fields = _step_fields(payload.context)
    if isinstance(payload, pb.StepMethodPendingEvent):
        fields.update(_failure_fields(payload.context.last_failure_info))
    elif isinstance(payload, pb.StepWaitForFailedEvent | pb.StepExecuteFailedEvent):
        fields.update(_failure_fields(payload.output.failure))
    else:
        output = payload.output
        if isinstance(output, pb.StepExecuteCompletedOutput):
            fields.update(_decision_fields(output.step_decision))
        else:
            fields["waits"] = output.HasField("wait_for_condition")
        fields.update(
            _writes_fields(
                output.upsert_attributes, output.publish_to_channel, output.delete_from_channel
            )
        )
    return fields


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
    address: str,
    flow_id: str,
    *,
    steps_only: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Print the history of ``flow_id`` from the Dex server at ``address``.

    Args:
        address: ``HOST:PORT`` of a Dex FlowService.
        flow_id: The Flow whose (current run's) history to print.
        steps_only: Print only Step method events, in the ``--steps-only`` format.
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
    lines = step_event_lines if steps_only else event_lines
    options = [("grpc.max_receive_message_length", _MAX_RECEIVE_BYTES)]
    with grpc.insecure_channel(address, options=options) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            for line in lines(_history_events(stub, flow_id)):
                print(line, file=out)
        except grpc.RpcError as error:
            print(
                f"dex-local-engine history: {describe_call_error(error, 'GetHistoryEvents', address, flow_id)}",
                file=err,
            )
            return 1
    out.flush()
    return 0
