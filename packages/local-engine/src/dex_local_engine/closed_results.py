"""What a closed run reports: the ``FlowResult`` of ``WaitForFlow`` and of a SubFlow condition.

Dex Server reports a stopped or timed-out Flow as follows, and so does the engine:

=====================================  ==========  ===================  =============================
How the run closed                     status      error type           error message
=====================================  ==========  ===================  =============================
``StopFlow`` CANCEL (or unspecified)   CANCELED    none                 none, even with a reason
``StopFlow`` TERMINATE                 TERMINATED  none                 none (history keeps the reason)
``StopFlow`` FAIL                      FAILED      CLIENT_API_FAILED    the reason, else ``fail by client``
Flow timeout, policy FAIL              FAILED      FLOW_TIMEOUT         ``Flow timed out after N seconds``
Flow timeout, policy CANCEL            CANCELED    none                 none
=====================================  ==========  ===================  =============================

A canceled or terminated run's result never carries an error type or message; the history's
``flow_closed`` event of a terminated run keeps the reason the request gave.
"""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine.flow_state import FlowRun

__all__ = ["FAIL_BY_CLIENT_REASON", "flow_result", "flow_timeout_message"]

FAIL_BY_CLIENT_REASON = "fail by client"
"""The error message of a Flow failed by ``StopFlow`` FAIL without a reason (Dex's text)."""

_SILENT_STATUSES = frozenset({pb.FLOW_STATUS_CANCELED, pb.FLOW_STATUS_TERMINATED})


def flow_timeout_message(seconds: int) -> str:
    """The error message of a Flow failed by its timeout (Dex's text).

    Example::

        assert flow_timeout_message(5) == "Flow timed out after 5 seconds"
    """
    return f"Flow timed out after {seconds} seconds"


def flow_result(run: FlowRun, *, needs_results: bool = True) -> pb.FlowResult:
    """The result Dex reports for ``run`` (a running run reports only its status).

    Example::

        response = flow_result(run, needs_results=request.needs_results)
    """
    result = pb.FlowResult(flow_status=run.status)
    if run.status not in _SILENT_STATUSES:
        result.error_type = run.error_type
        result.error_message = run.error_message
    if needs_results:
        result.results.extend(run.results)
    return result
