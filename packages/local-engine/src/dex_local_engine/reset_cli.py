"""``dex-local-engine reset``: time travel, a new run of a Flow from a point in its history.

Sends FlowService ``ResetFlow`` (so it works against any Dex server), then prints one JSON line
with the Flow ID and the new run's ID::

    {"flow_id": "order-7", "run_id": "5b0c..."}

Exactly one reset point: ``--beginning``, ``--to-time`` (RFC 3339, e.g.
``2026-12-01T22:31:07Z``), ``--to-step-type TYPE``, or ``--to-step-execution ID`` with
``--method wait_for|execute``. ``--reason`` is recorded; ``--skip-writes-reapply`` drops the RPC
and Channel writes that came after the reset point instead of applying them again.

Exit status 0 on success; 1 with a message on stderr when the Flow does not exist, the server
cannot be reached, or it refuses the reset.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TextIO

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

from dex_local_engine.cli_errors import describe_call_error
from dex_local_engine.exceptions import EngineConfigurationError

__all__ = ["ResetPoint", "run_reset"]

_CALL_TIMEOUT_SECONDS = 60.0
_METHODS = {
    "wait_for": pb.FLOW_RESET_STEP_METHOD_WAIT_FOR,
    "execute": pb.FLOW_RESET_STEP_METHOD_EXECUTE,
}


@dataclass(frozen=True)
class ResetPoint:
    """Where the new run starts: set exactly one of the selectors (``beginning`` by default).

    Example::

        ResetPoint(step_execution_id="Ship-1", method="execute")
    """

    time: str = ""
    step_type: str = ""
    step_execution_id: str = ""
    method: str = ""

    def request(self, flow_id: str, reason: str, skip_writes_reapply: bool) -> pb.ResetFlowRequest:
        """The ``ResetFlowRequest`` for ``flow_id``.

        Raises:
            EngineConfigurationError: (a ValueError) when more than one selector is set, or ``method`` is unknown or given
                without ``step_execution_id``.
        """
        chosen = [
            name for name in ("time", "step_type", "step_execution_id") if getattr(self, name)
        ]
        if len(chosen) > 1:
            raise EngineConfigurationError(f"choose one reset point, not {' and '.join(chosen)}")
        if self.method and not self.step_execution_id:
            raise EngineConfigurationError("--method goes with --to-step-execution")
        request = pb.ResetFlowRequest(
            flow_id=flow_id, reason=reason, skip_writes_reapply=skip_writes_reapply
        )
        if self.time:
            request.reset_type = pb.FLOW_RESET_TYPE_HISTORY_EVENT_TIME
            request.history_event_time = self.time
        elif self.step_type:
            request.reset_type = pb.FLOW_RESET_TYPE_STEP_TYPE
            request.step_type = self.step_type
        elif self.step_execution_id:
            if self.method not in _METHODS:
                raise EngineConfigurationError(
                    "--to-step-execution needs --method wait_for or execute"
                )
            request.reset_type = pb.FLOW_RESET_TYPE_STEP_EXECUTION_ID
            request.step_execution_id = self.step_execution_id
            request.step_method = _METHODS[self.method]
        else:
            request.reset_type = pb.FLOW_RESET_TYPE_BEGINNING
        return request


def run_reset(
    address: str,
    flow_id: str,
    point: ResetPoint,
    *,
    reason: str = "",
    skip_writes_reapply: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Reset ``flow_id`` on the Dex server at ``address`` and print its new run ID.

    Returns:
        0 on success, 1 after printing an error (bad reset point, unknown Flow, unreachable
        server, refused reset).

    Example::

        raise SystemExit(run_reset("127.0.0.1:8801", "order-7", ResetPoint(step_type="Ship")))
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        if not flow_id:
            raise EngineConfigurationError("FLOW_ID must not be empty")
        request = point.request(flow_id, reason, skip_writes_reapply)
    except ValueError as problem:
        print(f"dex-local-engine reset: {problem}", file=err)
        return 1
    with grpc.insecure_channel(address) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            response: pb.ResetFlowResponse = stub.ResetFlow(request, timeout=_CALL_TIMEOUT_SECONDS)
        except grpc.RpcError as error:
            print(
                f"dex-local-engine reset: {describe_call_error(error, 'ResetFlow', address, flow_id)}",
                file=err,
            )
            return 1
    print(json.dumps({"flow_id": flow_id, "run_id": response.run_id}), file=out)
    out.flush()
    return 0
