"""A failed Step method attempt as Dex reports it: ``StepMethodFailure``.

``GetFlowState`` lists it as an active Step execution's ``last_failure_info`` from the moment an
attempt fails until the method completes, and history events carry it in their context
(``step_*_pending``, ``step_*_failed``). Dex Server fills it from its backend's last failure, and
so does the engine:

- ``attempt``: the number of the attempt that failed.
- ``backend_error``: the failure's kind, ``FLOW_ERROR_TYPE_WORKER_API_FAIL`` for an error the
  Worker returned or a Worker that was lost, ``TIMEOUT_TYPE_START_TO_CLOSE`` or
  ``TIMEOUT_TYPE_HEARTBEAT`` for a timeout, ``FLOW_ERROR_TYPE_INTERNAL`` for a failure on the
  engine's side (a restart, a dispatch fault, a result too large).
- ``details``: for a Worker's error, its detail, type, stack trace and gRPC status
  (``original_worker_error_*``, sub-status ``WORKER_API_ERROR``, ``detail`` empty as on Dex);
  for a failure the engine saw, its own text in ``detail``. Dex leaves ``details`` empty for a
  timeout; the engine says which timeout there.

Dex's ``StepMethodFailure`` has no field for the Worker's ``retry_after_seconds``; the engine
honours it when it schedules the next attempt, and the next attempt's time is not reported.
"""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

__all__ = ["ENGINE_ERROR_PREFIX", "flow_failure_message", "step_method_failure"]

ENGINE_ERROR_PREFIX = "dex_local_engine."
"""Error types of failures the engine saw itself (not an error a Worker returned)."""

_WORKER_API_FAIL = pb.FlowErrorType.Name(pb.FLOW_ERROR_TYPE_WORKER_API_FAIL)
_INTERNAL = pb.FlowErrorType.Name(pb.FLOW_ERROR_TYPE_INTERNAL)
_START_TO_CLOSE = "TIMEOUT_TYPE_START_TO_CLOSE"
_HEARTBEAT = "TIMEOUT_TYPE_HEARTBEAT"


def step_method_failure(error: pb.WorkerErrorResponse, attempt: int) -> pb.StepMethodFailure:
    """The ``StepMethodFailure`` of attempt ``attempt`` that failed with ``error``.

    Example::

        failure = step_method_failure(pb.WorkerErrorResponse(detail="boom"), 1)
        assert failure.backend_error == "FLOW_ERROR_TYPE_WORKER_API_FAIL"
    """
    if not error.error_type.startswith(ENGINE_ERROR_PREFIX):
        return pb.StepMethodFailure(
            backend_error=_WORKER_API_FAIL,
            attempt=attempt,
            details=pb.ServiceErrorResponse(
                sub_status=pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                original_worker_error_detail=error.detail,
                original_worker_error_type=error.error_type,
                original_worker_error_status=error.grpc_status,
                original_worker_error_stack_trace=error.stack_trace,
            ),
        )
    kind = error.error_type.removeprefix(ENGINE_ERROR_PREFIX)
    if kind == "Timeout":
        backend_error = _HEARTBEAT if "heartbeat" in error.detail else _START_TO_CLOSE
        details = pb.ServiceErrorResponse(detail=error.detail)
    elif kind == "WorkerLost":
        backend_error = _WORKER_API_FAIL
        details = pb.ServiceErrorResponse(
            detail=error.detail,
            sub_status=pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
            original_worker_error_status=error.grpc_status,
        )
    else:
        backend_error = _INTERNAL
        details = pb.ServiceErrorResponse(
            detail=error.detail, sub_status=pb.ERROR_SUB_STATUS_UNCATEGORIZED
        )
    return pb.StepMethodFailure(backend_error=backend_error, attempt=attempt, details=details)


def flow_failure_message(error: pb.WorkerErrorResponse) -> str:
    """The error message of a Flow that a Step method's final failure failed, as Dex reports it.

    Dex reports the Worker's error detail alone (or the server's own text for a failure it saw).
    The attempt progress the engine appends to a recovery error is not part of it.

    Example::

        assert flow_failure_message(pb.WorkerErrorResponse(detail="boom")) == "boom"
    """
    return error.detail or error.error_type
