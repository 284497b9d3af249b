"""Build :class:`~dex_local_engine.dispatch.DispatchTask`s to drive a dispatcher directly.

Example::

    task = execute_task("ProbeFlow", "ProbeStep", string_value("a"))
    frames = [frame async for frame in dispatcher.dispatch(task)]
"""

from __future__ import annotations

import itertools
import time
import uuid
from datetime import UTC, datetime, timedelta

from dex.dexpb import dex_pb2 as pb
from dex_local_engine.dispatch import DispatchTask, TaskRequest

_task_numbers = itertools.count(1)


def string_value(text: str) -> pb.Value:
    """A wire Value holding ``text`` (what the SDK's ``str`` codec reads)."""
    return pb.Value(string_value=text)


def _context(flow_id: str, step_execution_id: str, attempt: int) -> pb.Context:
    now_ms = int(time.time() * 1000)
    return pb.Context(
        flow_id=flow_id,
        run_id=f"{flow_id}-run",
        flow_started_timestamp=now_ms,
        step_execution_id=step_execution_id,
        first_attempt_timestamp=now_ms,
        attempt=attempt,
    )


def _task(flow_id: str, flow_type: str, request: TaskRequest, deadline: timedelta) -> DispatchTask:
    return DispatchTask(
        task_id=f"task-{next(_task_numbers)}-{uuid.uuid4().hex[:8]}",
        flow_id=flow_id,
        flow_type=flow_type,
        queue="",
        listening_address=None,
        request=request,
        deadline=datetime.now(UTC) + deadline,
    )


def execute_task(
    flow_type: str,
    step_type: str,
    step_input: pb.Value,
    *,
    flow_id: str | None = None,
    attempt: int = 1,
    deadline: timedelta = timedelta(minutes=2),
) -> DispatchTask:
    """A Step ``execute`` task for a pull Worker (default queue)."""
    flow = flow_id or f"flow-{uuid.uuid4().hex[:8]}"
    request = pb.InvokeExecuteMethodRequest(
        context=_context(flow, f"{step_type}-1", attempt),
        flow_type=flow_type,
        step_type=step_type,
        step_input=step_input,
    )
    return _task(flow, flow_type, request, deadline)


def rpc_task(
    flow_type: str,
    rpc_name: str,
    rpc_input: pb.Value,
    *,
    flow_id: str | None = None,
    deadline: timedelta = timedelta(minutes=2),
) -> DispatchTask:
    """An RPC task for a pull Worker (default queue)."""
    flow = flow_id or f"flow-{uuid.uuid4().hex[:8]}"
    request = pb.InvokeWorkerRPCRequest(
        context=_context(flow, "", 1), flow_type=flow_type, rpc_name=rpc_name, input=rpc_input
    )
    return _task(flow, flow_type, request, deadline)
