"""How the helpers recognize a Dex Server whose Stream Store is disabled.

With ``streamStore.backend: disabled`` Dex keeps no Stream message: a Step's write is dropped
without failing the Step, and ``ReadStream``, ``ListStreamMessages`` and ``WriteStream`` answer
``FAILED_PRECONDITION`` before they look at the resume token. Stream RPCs need no Flow, so that
code has no other meaning for them. The session still runs and its snapshot still reads; only the
live events are gone, so the browser polls the snapshot instead.
"""

from __future__ import annotations

import grpc
from dex import DexServiceError

__all__ = ["STREAM_STORE_DISABLED_DETAIL", "is_stream_store_disabled"]

STREAM_STORE_DISABLED_DETAIL = (
    "the Dex Stream Store is disabled, so Dex keeps no events and no resume token is valid; "
    "open the stream with the snapshot's empty resume_token and poll the snapshot"
)
"""What :class:`InvalidAgentEventResumeTokenError` says of a non-empty token in that case."""


def is_stream_store_disabled(error: DexServiceError) -> bool:
    """Whether Dex answered a Stream read or listing this way because its Stream Store is off.

    Example:
        >>> from dex import ErrorSubStatus
        >>> error = DexServiceError(grpc.StatusCode.FAILED_PRECONDITION,
        ...     ErrorSubStatus.UNCATEGORIZED, "Stream Store is disabled", "read_stream", "s")
        >>> is_stream_store_disabled(error)
        True
    """
    return error.code is grpc.StatusCode.FAILED_PRECONDITION
