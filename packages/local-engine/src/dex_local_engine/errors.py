"""Errors the engine returns over gRPC, in the exact shape the Dex SDK maps to typed errors.

Every failed FlowService call carries a rich ``google.rpc.Status`` whose ``details`` hold one packed
``dex.ServiceErrorResponse{detail, sub_status, original_worker_error_*}``. The SDK's
``translate_rpc_error`` reads the outer gRPC code and that sub status; the pairs used here are:

=====================  ==============================  =====================================
gRPC code              sub status                      SDK error
=====================  ==============================  =====================================
NOT_FOUND              FLOW_NOT_EXISTS                 FlowNotFoundError /
                                                       FlowNotActiveOrNotFoundError
ALREADY_EXISTS         FLOW_ALREADY_STARTED            FlowAlreadyStartedError
FAILED_PRECONDITION    FLOW_CLOSING                    FlowClosingError
DEADLINE_EXCEEDED      LONG_POLL_TIME_OUT              LongPollTimeoutError
DEADLINE_EXCEEDED      REQUEST_TIMEOUT                 RequestTimeoutError
ABORTED                WORKER_API_ERROR                RpcLockConflictError
FAILED_PRECONDITION    WORKER_API_ERROR                WorkerInvocationError (worker fields)
UNAVAILABLE            WORKER_API_ERROR                WorkerInvocationError (no Worker)
NOT_FOUND              CHANNEL_MESSAGE_NOT_FOUND       ChannelMessageNotFoundError
INVALID_ARGUMENT       UNCATEGORIZED                   DexServiceError
INTERNAL               UNCATEGORIZED                   DexServiceError
=====================  ==============================  =====================================

Public API:

* :class:`EngineError` -- raise it anywhere below a servicer method.
* Named constructors (``flow_not_found(flow_id)`` ...) -- one per row above.
* :func:`guard_servicer_method` -- decorator for grpc.aio servicer methods (unary or
  server-streaming): an :class:`EngineError` aborts the call with its rich status, any other
  exception aborts with INTERNAL naming the exception, so one bad request never crashes the engine.
* :func:`abort_with_engine_error` -- abort a call explicitly.

Example::

    class FlowService(dex_pb2_grpc.FlowServiceServicer):
        @guard_servicer_method
        async def DescribeFlow(self, request, context):
            raise flow_not_found(request.flow_id)
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar, cast

import grpc
from dex.dexpb import dex_pb2 as pb
from google.protobuf import any_pb2
from google.rpc import status_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status

from dex_local_engine.exceptions import DexLocalEngineError
from dex_local_engine.text_limits import (
    MAX_ERROR_DETAIL_BYTES,
    MAX_WORKER_STACK_TRACE_BYTES,
    clip_text,
)

__all__ = [
    "EngineError",
    "abort_with_engine_error",
    "channel_message_not_found",
    "failed_precondition",
    "flow_already_started",
    "flow_closing",
    "flow_not_active",
    "flow_not_found",
    "guard_servicer_method",
    "internal_error",
    "invalid_argument",
    "long_poll_timeout",
    "request_timeout",
    "rpc_lock_conflict",
    "unimplemented",
    "unknown_rpc",
    "worker_api_error",
    "worker_unavailable",
]

_log = logging.getLogger(__name__)

_ServicerT = TypeVar("_ServicerT")
_RequestT = TypeVar("_RequestT")
_ResponseT = TypeVar("_ResponseT")


class EngineError(DexLocalEngineError):
    """A request failure the engine reports to the caller as a Dex service error.

    Attributes:
        code: Outer gRPC status code.
        sub_status: A ``pb.ErrorSubStatus`` value classifying the failure for the SDK.
        detail: Human-readable text naming the problem (also the gRPC status message), clipped
            to ``MAX_ERROR_DETAIL_BYTES`` so the status always fits gRPC metadata.
        worker_error: For ``WORKER_API_ERROR`` failures caused by a Worker handler, the
            Worker's own error; its fields become ``original_worker_error_*``.
        worker_grpc_status: The Worker's gRPC status code number (``UNKNOWN`` = 2 for handler
            exceptions), or 0 when no Worker answered.
        dispatch_task_error_reason: A ``pb.DispatchTaskErrorReason`` when the Worker could not be
            reached, else unspecified.

    Example::

        raise EngineError(grpc.StatusCode.INVALID_ARGUMENT, pb.ERROR_SUB_STATUS_UNCATEGORIZED,
                          "page_size must not be negative, got -1")
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        sub_status: pb.ErrorSubStatus,
        detail: str,
        *,
        worker_error: pb.WorkerErrorResponse | None = None,
        worker_grpc_status: int = 0,
        dispatch_task_error_reason: pb.DispatchTaskErrorReason = (
            pb.DISPATCH_TASK_ERROR_REASON_UNSPECIFIED
        ),
    ) -> None:
        detail = clip_text(detail, MAX_ERROR_DETAIL_BYTES)
        super().__init__(detail)
        self.code = code
        self.sub_status = sub_status
        self.detail = detail
        self.worker_error = _clipped_worker_error(worker_error)
        self.worker_grpc_status = worker_grpc_status
        self.dispatch_task_error_reason = dispatch_task_error_reason

    def __repr__(self) -> str:
        return (
            f"EngineError({self.code.name}, "
            f"{pb.ErrorSubStatus.Name(self.sub_status)}, {self.detail!r})"
        )

    def service_error_response(self) -> pb.ServiceErrorResponse:
        """The ``dex.ServiceErrorResponse`` packed into the status details."""
        response = pb.ServiceErrorResponse(
            detail=self.detail,
            sub_status=self.sub_status,
            original_worker_error_status=self.worker_grpc_status,
            dispatch_task_error_reason=self.dispatch_task_error_reason,
        )
        if self.worker_error is not None:
            response.original_worker_error_detail = self.worker_error.detail
            response.original_worker_error_type = self.worker_error.error_type
            response.original_worker_error_stack_trace = self.worker_error.stack_trace
        return response

    def to_status(self) -> status_pb2.Status:
        """The rich ``google.rpc.Status`` sent as the call's final status."""
        packed = any_pb2.Any()
        packed.Pack(self.service_error_response())
        return status_pb2.Status(code=self.code.value[0], message=self.detail, details=[packed])


def _clipped_worker_error(error: pb.WorkerErrorResponse | None) -> pb.WorkerErrorResponse | None:
    """A Worker's error with its detail and stack trace clipped to what a status can carry."""
    if error is None:
        return None
    clipped = pb.WorkerErrorResponse()
    clipped.CopyFrom(error)
    clipped.detail = clip_text(error.detail, MAX_ERROR_DETAIL_BYTES)
    clipped.error_type = clip_text(error.error_type, MAX_ERROR_DETAIL_BYTES)
    clipped.stack_trace = clip_text(error.stack_trace, MAX_WORKER_STACK_TRACE_BYTES, keep="tail")
    return clipped


async def abort_with_engine_error(
    context: grpc.aio.ServicerContext[Any, Any], error: EngineError
) -> NoReturn:
    """Abort the current call with ``error``'s rich status.

    Raises:
        grpc.aio.AbortError: always (that is how grpc.aio ends a call), or
            asyncio.CancelledError when the caller already left.
    """
    if context.cancelled():
        # The caller left (its deadline passed): no status can reach it, and grpc would log
        # the failed send as an error.
        raise asyncio.CancelledError
    try:
        # types-grpcio omits aio abort_with_status; the runtime provides it.
        await cast(Any, context).abort_with_status(rpc_status.to_status(error.to_status()))
    except grpc.aio.AbortError:
        raise
    except Exception:
        if context.cancelled():  # the caller left while the status was being sent
            raise asyncio.CancelledError from None
        raise
    raise error  # pragma: no cover (abort_with_status always raises)


def _unexpected(method_name: str, exception: Exception) -> EngineError:
    _log.exception("unexpected error in %s", method_name)
    return internal_error(
        f"internal engine error in {method_name}: {type(exception).__name__}: {exception}"
    )


_UnaryMethod = Callable[
    [_ServicerT, _RequestT, grpc.aio.ServicerContext[Any, Any]], Awaitable[_ResponseT]
]
_StreamMethod = Callable[
    [_ServicerT, _RequestT, grpc.aio.ServicerContext[Any, Any]], AsyncIterator[_ResponseT]
]
_MethodT = TypeVar("_MethodT", bound=Callable[..., Any])


def guard_servicer_method(method: _MethodT) -> _MethodT:
    """Make a grpc.aio servicer method report every failure as a Dex service error.

    Works on ``async def`` methods (unary responses) and async generator methods (server
    streaming). :class:`EngineError` aborts with its rich status; any other ``Exception`` is
    logged and aborts with INTERNAL ``internal engine error in <Method>: <Type>: <message>``.
    Cancellation and an abort the method made itself pass through unchanged.

    Example::

        @guard_servicer_method
        async def GetFlowInfo(self, request, context): ...
    """
    name = method.__name__
    if inspect.isasyncgenfunction(method):
        stream_method = cast(_StreamMethod[Any, Any, Any], method)

        @functools.wraps(method)
        async def guarded_stream(
            self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            try:
                async for item in stream_method(self, request, context):
                    yield item
            except (asyncio.CancelledError, grpc.aio.AbortError):
                raise
            except EngineError as error:
                await abort_with_engine_error(context, error)
            except Exception as exception:
                await abort_with_engine_error(context, _unexpected(name, exception))

        return cast(_MethodT, guarded_stream)

    unary_method = cast(_UnaryMethod[Any, Any, Any], method)

    @functools.wraps(method)
    async def guarded_unary(
        self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> Any:
        try:
            return await unary_method(self, request, context)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except EngineError as error:
            await abort_with_engine_error(context, error)
        except Exception as exception:
            await abort_with_engine_error(context, _unexpected(name, exception))

    return cast(_MethodT, guarded_unary)


# --- Named constructors -------------------------------------------------------------------------


def flow_not_found(flow_id: str) -> EngineError:
    """No Flow with this ID exists (SDK: FlowNotFoundError / FlowNotActiveOrNotFoundError)."""
    return EngineError(
        grpc.StatusCode.NOT_FOUND,
        pb.ERROR_SUB_STATUS_FLOW_NOT_EXISTS,
        f"flow {flow_id!r} does not exist",
    )


def flow_not_active(flow_id: str) -> EngineError:
    """The Flow exists but is closed, for operations that need a running Flow.

    Dex does not distinguish a closed from a missing Flow here (SDK:
    FlowNotActiveOrNotFoundError for "active" operations).
    """
    return EngineError(
        grpc.StatusCode.NOT_FOUND,
        pb.ERROR_SUB_STATUS_FLOW_NOT_EXISTS,
        f"flow {flow_id!r} is not running (it is closed)",
    )


def flow_already_started(flow_id: str, detail: str = "") -> EngineError:
    """The ID reuse policy rejects a new run of this Flow ID (SDK: FlowAlreadyStartedError)."""
    return EngineError(
        grpc.StatusCode.ALREADY_EXISTS,
        pb.ERROR_SUB_STATUS_FLOW_ALREADY_STARTED,
        detail or f"flow {flow_id!r} is already started",
    )


def flow_closing(flow_id: str) -> EngineError:
    """An update-class request arrived while the Flow is closing (SDK: FlowClosingError)."""
    return EngineError(
        grpc.StatusCode.FAILED_PRECONDITION,
        pb.ERROR_SUB_STATUS_FLOW_CLOSING,
        f"flow {flow_id!r} is closing",
    )


def long_poll_timeout(what: str) -> EngineError:
    """A long poll ended before its condition held (SDK: LongPollTimeoutError).

    ``what`` names the awaited condition, e.g. ``"flow 'f1' to close"``.
    """
    return EngineError(
        grpc.StatusCode.DEADLINE_EXCEEDED,
        pb.ERROR_SUB_STATUS_LONG_POLL_TIME_OUT,
        f"long poll timed out waiting for {what}",
    )


def request_timeout(what: str) -> EngineError:
    """A caller-defined request budget expired (SDK: RequestTimeoutError)."""
    return EngineError(
        grpc.StatusCode.DEADLINE_EXCEEDED,
        pb.ERROR_SUB_STATUS_REQUEST_TIMEOUT,
        f"request timed out: {what}",
    )


def rpc_lock_conflict(attribute_keys: list[str] | tuple[str, ...] = ()) -> EngineError:
    """An RPC could not acquire its Attribute locks (SDK: RpcLockConflictError)."""
    suffix = f": {', '.join(attribute_keys)}" if attribute_keys else ""
    return EngineError(
        grpc.StatusCode.ABORTED,
        pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
        f"one or more attribute keys are locked{suffix}",
    )


def worker_api_error(
    worker_error: pb.WorkerErrorResponse, worker_grpc_status: int | None = None
) -> EngineError:
    """A Worker handler (an RPC) failed; the SDK raises WorkerInvocationError with its fields.

    As in Dex, the outer detail and the status message are the Worker's own detail, and the
    Worker's gRPC status (``worker_error.grpc_status``, default UNKNOWN) is kept.
    """
    status = worker_grpc_status
    if status is None:
        status = worker_error.grpc_status or grpc.StatusCode.UNKNOWN.value[0]
    return EngineError(
        grpc.StatusCode.FAILED_PRECONDITION,
        pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
        worker_error.detail or f"worker failed with {worker_error.error_type or 'an error'}",
        worker_error=worker_error,
        worker_grpc_status=status,
    )


def worker_unavailable(
    detail: str,
    reason: pb.DispatchTaskErrorReason = pb.DISPATCH_TASK_ERROR_REASON_NO_WORKER_AVAILABLE,
) -> EngineError:
    """No Worker could take a synchronous task (an RPC) (SDK: WorkerInvocationError).

    ``reason`` says why: no Worker available, the Worker disconnected, or unknown name.
    """
    return EngineError(
        grpc.StatusCode.UNAVAILABLE,
        pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
        detail,
        dispatch_task_error_reason=reason,
    )


def channel_message_not_found(channel_name: str, message_id: str) -> EngineError:
    """A pending Channel message ID no longer exists (SDK: ChannelMessageNotFoundError)."""
    return EngineError(
        grpc.StatusCode.NOT_FOUND,
        pb.ERROR_SUB_STATUS_CHANNEL_MESSAGE_NOT_FOUND,
        f"channel {channel_name!r} has no pending message {message_id!r}",
    )


def invalid_argument(detail: str) -> EngineError:
    """The request is malformed; ``detail`` names the bad field or token (SDK: DexServiceError)."""
    return EngineError(grpc.StatusCode.INVALID_ARGUMENT, pb.ERROR_SUB_STATUS_UNCATEGORIZED, detail)


def failed_precondition(detail: str) -> EngineError:
    """The request is well formed but the state forbids it (SDK: DexServiceError)."""
    return EngineError(
        grpc.StatusCode.FAILED_PRECONDITION, pb.ERROR_SUB_STATUS_UNCATEGORIZED, detail
    )


def unimplemented(method_name: str) -> EngineError:
    """The local engine does not implement this RPC or option (SDK: DexServiceError)."""
    return EngineError(
        grpc.StatusCode.UNIMPLEMENTED,
        pb.ERROR_SUB_STATUS_UNCATEGORIZED,
        f"{method_name} is not supported by dex-local-engine",
    )


def internal_error(detail: str) -> EngineError:
    """An engine invariant broke; the request failed but the engine keeps serving."""
    return EngineError(grpc.StatusCode.INTERNAL, pb.ERROR_SUB_STATUS_UNCATEGORIZED, detail)


def unknown_rpc(rpc_name: str, flow_type: str) -> EngineError:
    """No connected Worker of the Flow type knows the RPC (SDK: WorkerInvocationError, NOT_FOUND)."""
    return EngineError(
        grpc.StatusCode.NOT_FOUND,
        pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
        f"RPC {rpc_name!r} is unknown to every connected Worker of flow type {flow_type!r}",
        dispatch_task_error_reason=pb.DISPATCH_TASK_ERROR_REASON_UNKNOWN_NAME,
    )
