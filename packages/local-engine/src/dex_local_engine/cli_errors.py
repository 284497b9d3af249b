"""How the command lines that call a Dex server (``history``, ``reset``) describe a failed call."""

from __future__ import annotations

import grpc

__all__ = ["describe_call_error"]


def describe_call_error(error: grpc.RpcError, call: str, address: str, flow_id: str) -> str:
    """One line naming what went wrong with ``call`` for ``flow_id`` on the server at ``address``.

    Example::

        print(f"dex-local-engine reset: {describe_call_error(error, 'ResetFlow', address, 'f')}")
    """
    code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (error.details() if isinstance(error, grpc.Call) else "") or str(error)
    if code is grpc.StatusCode.NOT_FOUND:
        return f"flow {flow_id!r} does not exist ({details})"
    if code is grpc.StatusCode.UNAVAILABLE:
        return f"cannot reach a Dex server at {address}: {details}"
    return f"{call} for flow {flow_id!r} failed with {code.name}: {details}"
