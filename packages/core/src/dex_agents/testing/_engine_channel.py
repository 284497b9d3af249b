"""The gRPC channel through which a test helper calls the engine's FlowService."""

from __future__ import annotations

import grpc

MAX_RECEIVE_BYTES = 256 * 1024 * 1024
"""The largest response the channel accepts: a whole session's Attributes, or a single history
event, can pass gRPC's 4 MiB default receive limit."""


def engine_channel(server_address: str) -> grpc.aio.Channel:
    """Open an insecure ``grpc.aio`` channel to the Dex server at ``server_address``.

    The channel accepts responses up to :data:`MAX_RECEIVE_BYTES`; use it as an async context
    manager so that it closes.

    Example:
        >>> import asyncio
        >>> async def open_and_close() -> str:
        ...     async with engine_channel("127.0.0.1:1") as channel:
        ...         return type(channel).__name__
        >>> asyncio.run(open_and_close())
        'Channel'
    """
    options = [("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
    return grpc.aio.insecure_channel(server_address, options=options)
