"""The ``FlowService`` gRPC servicer: requests in, :class:`~dex_local_engine.engine.Engine` calls.

Every method is wrapped by :func:`~dex_local_engine.errors.guard_servicer_method`, so a bad request
gets the typed Dex error the SDK expects and never takes the engine down.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any, cast

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from google.protobuf import empty_pb2

from dex_local_engine import __version__, errors
from dex_local_engine.closed_results import flow_result
from dex_local_engine.engine import Engine
from dex_local_engine.flow_state import FlowRun, StepPhase
from dex_local_engine.search_query import search_flows
from dex_local_engine.step_failures import step_method_failure
from dex_local_engine.streams import StreamStore
from dex_local_engine.wire_values import ensure_value

__all__ = ["HISTORY_PAGE_BYTES", "FlowService"]

_Context = grpc.aio.ServicerContext[Any, Any]

DEFAULT_LONG_POLL_SECONDS = 30.0
"""Wait of a long poll that asks for 0 seconds."""
MAX_LONG_POLL_SECONDS = 300.0
_DEFAULT_HISTORY_PAGE = 100

HISTORY_PAGE_BYTES = 2 * 1024 * 1024
"""Size budget of one ``GetHistoryEvents`` page, well under the 4 MiB an SDK channel receives.

A page ends early (with a ``next_page_token``) when the next event would pass it; a single larger
event is still sent alone."""
_STARTED_AT = time.time()

guard = errors.guard_servicer_method


def _wait_seconds(requested: int) -> float:
    if requested < 0:
        raise errors.invalid_argument(f"wait time must not be negative, got {requested}")
    return min(float(requested) or DEFAULT_LONG_POLL_SECONDS, MAX_LONG_POLL_SECONDS)


class FlowService(dex_pb2_grpc.FlowServiceServicer):
    """Serves the Dex FlowService over an :class:`Engine`.

    Example::

        dex_pb2_grpc.add_FlowServiceServicer_to_server(FlowService(engine, streams), server)
    """

    def __init__(self, engine: Engine, streams: StreamStore) -> None:
        self._engine = engine
        self._streams = streams

    async def _wait_for(self, run: FlowRun, ready: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not ready():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await self._engine.waiters.wait(run.run_id, remaining)
        return True

    # ------------------------------------------------------------------ server

    @guard
    async def GetServerInfo(self, request: empty_pb2.Empty, context: _Context) -> pb.ServerInfo:
        return pb.ServerInfo(
            server_version=f"dex-local-engine {__version__}",
            minimum_supported_protocol_version=1,
            current_protocol_version=3,
        )

    @guard
    async def HealthCheck(self, request: empty_pb2.Empty, context: _Context) -> pb.HealthInfo:
        return pb.HealthInfo(
            condition="OK",
            hostname=socket.gethostname(),
            duration=int(time.time() - _STARTED_AT),
        )

    @guard
    async def SyncAttributeIndexes(
        self, request: pb.SyncAttributeIndexRequest, context: _Context
    ) -> pb.SyncAttributeIndexResponse:
        self._engine.sync_attribute_indexes(
            {key: int(index_type) for key, index_type in request.attribute_indexes.items()}
        )
        return pb.SyncAttributeIndexResponse()

    @guard
    async def SearchFlows(
        self, request: pb.SearchFlowsRequest, context: _Context
    ) -> pb.SearchFlowsResponse:
        records = self._engine.search_records()
        known = {
            key: cast(pb.IndexType, value)
            for key, value in self._engine.attribute_index_types.items()
        }
        return search_flows(records, request, known)

    # ------------------------------------------------------------------ lifecycle

    @guard
    async def StartFlow(
        self, request: pb.StartFlowRequest, context: _Context
    ) -> pb.StartFlowResponse:
        return pb.StartFlowResponse(run_id=self._engine.start_flow(request))

    @guard
    async def StopFlow(self, request: pb.StopFlowRequest, context: _Context) -> empty_pb2.Empty:
        self._engine.stop_flow(request)
        return empty_pb2.Empty()

    @guard
    async def WaitForFlow(self, request: pb.WaitForFlowRequest, context: _Context) -> pb.FlowResult:
        run = self._engine.get_run(request.flow_id, request.run_id)
        timeout = _wait_seconds(request.wait_time_seconds)
        if not await self._wait_for(run, lambda: not run.is_running, timeout):
            raise errors.long_poll_timeout(f"flow {request.flow_id!r} to close")
        return flow_result(run, needs_results=request.needs_results)

    @guard
    async def GetFlowSummary(
        self, request: pb.GetFlowSummaryRequest, context: _Context
    ) -> pb.GetFlowSummaryResponse:
        run = self._engine.get_run(request.flow_id, request.run_id)
        response = pb.GetFlowSummaryResponse(
            flow_execution_id=pb.FlowExecutionID(flow_id=run.flow_id, run_id=run.run_id),
            first_run_id=run.run_id,
            request_id=run.request_id,
            flow_type=run.flow_type,
            flow_status=run.status,
            run_attempt=run.run_attempt,
        )
        response.start_time.FromNanoseconds(int(run.started_at * 1e9))
        if run.closed_at is not None:
            response.close_time.FromNanoseconds(int(run.closed_at * 1e9))
        return response

    @guard
    async def UpdateFlowConfig(
        self, request: pb.UpdateFlowConfigRequest, context: _Context
    ) -> empty_pb2.Empty:
        self._engine.update_config(request)
        return empty_pb2.Empty()

    @guard
    async def ResetFlow(
        self, request: pb.ResetFlowRequest, context: _Context
    ) -> pb.ResetFlowResponse:
        return pb.ResetFlowResponse(run_id=self._engine.reset_flow(request))

    @guard
    async def TriggerContinueAsNew(
        self, request: pb.TriggerContinueAsNewRequest, context: _Context
    ) -> empty_pb2.Empty:
        raise errors.unimplemented("TriggerContinueAsNew (continue-as-new)")

    # ------------------------------------------------------------------ Channels

    @guard
    async def PublishToChannel(
        self, request: pb.PublishToChannelRequest, context: _Context
    ) -> empty_pb2.Empty:
        self._engine.publish(request)
        return empty_pb2.Empty()

    @guard
    async def GetChannelMessages(
        self, request: pb.GetChannelMessagesRequest, context: _Context
    ) -> pb.GetChannelMessagesResponse:
        run = self._engine.get_run(request.flow_id, request.run_id)
        if not request.channel_name:
            raise errors.invalid_argument("GetChannelMessages: channel_name is required")
        response = pb.GetChannelMessagesResponse(
            messages=run.channels.get(request.channel_name, [])
        )
        self._engine.blobs.hydrate(response)
        return response

    @guard
    async def DeleteChannelMessage(
        self, request: pb.DeleteChannelMessageRequest, context: _Context
    ) -> empty_pb2.Empty:
        self._engine.delete_message(request)
        return empty_pb2.Empty()

    # ------------------------------------------------------------------ Streams

    @guard
    async def WriteStream(
        self, request: pb.WriteStreamRequest, context: _Context
    ) -> empty_pb2.Empty:
        self._streams.write(request)
        return empty_pb2.Empty()

    @guard
    async def ReadStream(
        self, request: pb.ReadStreamRequest, context: _Context
    ) -> pb.ReadStreamResponse:
        return await self._streams.read(request, time_remaining=context.time_remaining())

    @guard
    async def ListStreamMessages(
        self, request: pb.ListStreamMessagesRequest, context: _Context
    ) -> pb.ListStreamMessagesResponse:
        return self._streams.list(request)

    # ------------------------------------------------------------------ Attributes

    @guard
    async def GetAttributes(
        self, request: pb.GetAttributesRequest, context: _Context
    ) -> pb.GetAttributesResponse:
        run = self._engine.get_run(request.flow_id, request.run_id)
        if request.all_keys:
            keys = list(run.attributes)
        else:
            keys = [key for key in request.keys if key in run.attributes]
        response = pb.GetAttributesResponse(
            attributes=[pb.KV(key=key, value=run.attributes[key]) for key in keys]
        )
        self._engine.blobs.hydrate(response)
        return response

    @guard
    async def SetAttributes(
        self, request: pb.SetAttributesRequest, context: _Context
    ) -> empty_pb2.Empty:
        self._engine.set_attributes(request)
        return empty_pb2.Empty()

    @guard
    async def WaitForAttribute(
        self, request: pb.WaitForAttributeRequest, context: _Context
    ) -> pb.WaitForAttributeResponse:
        run = self._engine.get_running(request.flow_id)
        match = request.match
        if not match.key:
            raise errors.invalid_argument("WaitForAttribute: match.key is required")

        def current() -> pb.Value:
            return self._engine.blobs.resolve(ensure_value(run.attributes.get(match.key)))

        def matched() -> bool:
            return not run.is_running or _matches(current(), match)

        timeout = _wait_seconds(request.request_timeout_seconds)
        if not await self._wait_for(run, matched, timeout):
            raise errors.long_poll_timeout(f"Attribute {match.key!r} to match")
        value = current()
        if not _matches(value, match):
            raise errors.flow_not_active(request.flow_id)
        return pb.WaitForAttributeResponse(matched_value=value)

    @guard
    async def LoadBlobs(
        self, request: pb.LoadBlobsRequest, context: _Context
    ) -> pb.LoadBlobsResponse:
        return self._engine.blobs.load(request)

    # ------------------------------------------------------------------ RPCs and Steps

    @guard
    async def InvokeRPC(
        self, request: pb.InvokeRPCRequest, context: _Context
    ) -> pb.InvokeRPCResponse:
        return await self._engine.invoke_rpc(request)

    @guard
    async def SkipTimer(self, request: pb.SkipTimerRequest, context: _Context) -> empty_pb2.Empty:
        self._engine.skip_timer(request)
        return empty_pb2.Empty()

    @guard
    async def WaitForStepCompletion(
        self, request: pb.WaitForStepCompletionRequest, context: _Context
    ) -> pb.WaitForStepCompletionResponse:
        run = self._engine.get_run(request.flow_id)
        if not request.step_type or not request.step_execution_number:
            raise errors.invalid_argument(
                "WaitForStepCompletion: step_type and step_execution_number are required"
            )
        try:
            number = int(request.step_execution_number)
        except ValueError:
            raise errors.invalid_argument(
                f"WaitForStepCompletion: step_execution_number must be a positive integer, "
                f"got {request.step_execution_number!r}"
            ) from None
        step_id = f"{request.step_type}-{number}"
        timeout = _wait_seconds(request.request_timeout_seconds)
        done = await self._wait_for(
            run, lambda: run.has_finished(request.step_type, number) or not run.is_running, timeout
        )
        if not done:
            raise errors.long_poll_timeout(f"Step execution {step_id!r} to complete")
        if not run.has_finished(request.step_type, number):
            raise errors.flow_not_active(request.flow_id)
        return pb.WaitForStepCompletionResponse()

    @guard
    async def GetFlowState(
        self, request: pb.GetFlowStateRequest, context: _Context
    ) -> pb.GetFlowStateResponse:
        run = self._engine.get_run(request.flow_id, request.run_id)
        response = pb.GetFlowStateResponse(
            flow_config=run.config,
            attributes=[pb.KV(key=k, value=v) for k, v in run.attributes.items()],
            completed_steps=run.results,
        )
        for step in run.steps.values():
            state = response.active_step_executions.add(
                step_execution_id=step.step_execution_id,
                from_step_execution_id=step.from_step_execution_id,
                step_type=step.step_type,
                phase=pb.ACTIVE_STEP_PHASE_WAITING
                if step.phase is StepPhase.WAITING
                else pb.ACTIVE_STEP_PHASE_ACTIVE,
                movement=pb.StepMovement(
                    step_type=step.step_type, step_input=step.input, step_options=step.options
                ),
                step_execution_locals=[pb.KV(key=k, value=v) for k, v in step.locals.items()],
            )
            if step.waiting is not None:
                state.waiting_condition.waiting_condition_type = step.waiting.waiting_condition_type
                state.waiting_condition.timer_conditions.extend(step.waiting.timer_conditions)
                state.waiting_condition.channel_conditions.extend(step.waiting.channel_conditions)
                for timer, timer_state in zip(
                    step.waiting.timer_conditions, step.timers, strict=True
                ):
                    state.timers.add(
                        condition_id=timer.condition_id,
                        firing_unix_timestamp_seconds=int(timer_state.fire_at),
                        status=pb.INTERNAL_TIMER_STATUS_SKIPPED
                        if timer_state.skipped
                        else pb.INTERNAL_TIMER_STATUS_FIRED
                        if timer_state.completed
                        else pb.INTERNAL_TIMER_STATUS_PENDING,
                    )
            if step.last_failure is not None:
                # The attempt now pending (or running) is the next one after the failure.
                state.last_failure_info.CopyFrom(
                    step_method_failure(step.last_failure, step.attempt - 1)
                )
        for name, queue in run.channels.items():
            response.pending_channel_messages[name].messages.extend(queue)
        self._engine.blobs.hydrate(response)
        return response

    # ------------------------------------------------------------------ history

    @guard
    async def GetHistoryEvents(
        self, request: pb.GetHistoryEventsRequest, context: _Context
    ) -> pb.GetHistoryEventsResponse:
        run = self._engine.get_run(request.flow_id, request.run_id)
        start = request.start_internal_event_id
        if request.next_page_token:
            try:
                start = int(request.next_page_token.decode())
            except ValueError:
                raise errors.invalid_argument(
                    "GetHistoryEvents: malformed next_page_token"
                ) from None
        if request.estimate_page_size < 0:
            raise errors.invalid_argument(
                "GetHistoryEvents: estimate_page_size must not be negative"
            )
        limit = request.estimate_page_size or _DEFAULT_HISTORY_PAGE
        fetched = self._engine.history(run, max(start, 1), limit)
        events = _within_page_bytes(fetched)
        next_id = events[-1].event_id + 1 if events else max(start, 1)
        response = pb.GetHistoryEventsResponse(events=events, next_internal_event_id=next_id)
        if (len(fetched) == limit or len(events) < len(fetched)) and next_id < run.next_event_id:
            response.next_page_token = str(next_id).encode()
        return response

    @guard
    async def WaitForHistoryEvent(
        self, request: pb.WaitForHistoryEventRequest, context: _Context
    ) -> pb.WaitForHistoryEventResponse:
        run = self._engine.get_run(request.flow_id, request.run_id)
        wanted = max(request.next_internal_event_id, 1)
        await self._wait_for(
            run, lambda: run.next_event_id > wanted or not run.is_running, DEFAULT_LONG_POLL_SECONDS
        )
        available = run.next_event_id > wanted
        return pb.WaitForHistoryEventResponse(
            event_available=available,
            available_internal_event_id=run.next_event_id - 1,
            flow_status=run.status,
        )


def _within_page_bytes(events: list[pb.FlowHistoryEvent]) -> list[pb.FlowHistoryEvent]:
    """The leading events that fit :data:`HISTORY_PAGE_BYTES` (at least one)."""
    total = 0
    for index, event in enumerate(events):
        total += event.ByteSize() + 8  # repeated-field framing
        if total > HISTORY_PAGE_BYTES and index > 0:
            return events[:index]
    return events


_ORDERED_OPERATORS: dict[int, Callable[[Any, Any], bool]] = {
    pb.ATTRIBUTE_MATCH_OPERATOR_GREATER_THAN: lambda a, b: a > b,
    pb.ATTRIBUTE_MATCH_OPERATOR_GREATER_THAN_OR_EQUAL: lambda a, b: a >= b,
    pb.ATTRIBUTE_MATCH_OPERATOR_LESS_THAN: lambda a, b: a < b,
    pb.ATTRIBUTE_MATCH_OPERATOR_LESS_THAN_OR_EQUAL: lambda a, b: a <= b,
}


def _comparable(value: pb.Value) -> object:
    kind = value.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "obj_value":
        return (value.obj_value.encoding, value.obj_value.payload)
    return getattr(value, kind)


def _matches(current: pb.Value | None, match: pb.AttributeMatch) -> bool:
    left = _comparable(ensure_value(current))
    right = _comparable(ensure_value(match.operand))
    operator = match.operator
    if operator in (pb.ATTRIBUTE_MATCH_OPERATOR_EQUAL, pb.ATTRIBUTE_MATCH_OPERATOR_UNSPECIFIED):
        return left == right
    if operator == pb.ATTRIBUTE_MATCH_OPERATOR_NOT_EQUAL:
        return left != right
    compare = _ORDERED_OPERATORS.get(operator)
    if compare is None:
        raise errors.invalid_argument(f"WaitForAttribute: unknown operator {operator}")
    if left is None or right is None or type(left) is not type(right):
        return False
    try:
        return compare(left, right)
    except TypeError:
        return False
