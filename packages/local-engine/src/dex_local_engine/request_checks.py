"""Every Client request is checked field by field before a servicer method sees it.

:func:`refuse_bad_request` runs :func:`~dex_local_engine.field_checks.field_problem` over the
whole request, with blob references refused: the engine hands Clients values, never blob IDs,
so a reference in a request is forged or stale, and storing it would break every later read of
that value (and, through an index, every ``SearchFlows``). ``LoadBlobs`` is the one request made
of references; it only reads, and an unknown ID answers NOT_FOUND.

Example::

    add_decoding_servicer(add_FlowServiceServicer_to_server, service, server, refuse_bad_request)
"""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb
from google.protobuf.message import Message

from dex_local_engine import errors
from dex_local_engine.field_checks import BlobReferences, field_problem

__all__ = ["refuse_bad_request"]


def refuse_bad_request(request: Message) -> None:
    """Raise INVALID_ARGUMENT naming the first field of ``request`` the engine refuses.

    Raises:
        EngineError: INVALID_ARGUMENT, e.g. ``StartFlowRequest.step_options.heartbeat_timeout_seconds
            must not be negative, got -1``.
    """
    if isinstance(request, pb.LoadBlobsRequest):
        return
    problem = field_problem(request, BlobReferences.REFUSED)
    if problem is not None:
        raise errors.invalid_argument(problem)
