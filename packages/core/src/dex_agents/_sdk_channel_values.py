"""Keeps each loaded Channel message's value on its own message, around a dex-python-sdk fault.

The SDK's value hydrators (``ValueHydrator`` and ``AsyncValueHydrator``: ``wait_for_request``,
``execute_request`` and ``rpc_request``) copy a Worker task's request with ``CopyFrom``, collect
the values of its loaded Channel messages by iterating the request's
``loaded_channel_messages`` map, and write the hydrated values back by iterating the copy's map.
Protobuf leaves map iteration order unspecified, and under upb (whose string hash is seeded per
process) a map parsed from the wire and its copy iterate some pairs of keys in different orders,
which pairs depending on the process: the session's two message Channels crossed in 11 of
800 fresh processes checked. In such a Worker every invocation that loads two non-empty Channels
sees each Channel's message IDs with the other Channel's values: ``get_agent_snapshot`` listed
the steered message's text under the queued message's ID, and the queued one's text as
steered.

The SDK writes the k-th collected value (request order) onto the k-th message of the copy (copy
order), so :func:`repair_channel_values` moves each value back to the message it was collected
from. :func:`install_channel_value_repair` wraps the six hydrator methods for the SDK versions
known to have the fault; a later SDK is left alone (the regression test shows whether it still
needs the repair).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from functools import wraps
from importlib import metadata
from typing import Final, TypeVar

from dex.dexpb import dex_pb2 as pb

__all__ = [
    "FAULTY_SDK_VERSIONS",
    "install_channel_value_repair",
    "repair_channel_values",
]

FAULTY_SDK_VERSIONS: Final = frozenset({"1.23.0"})
"""``dex-python-sdk`` versions whose hydrators pair Channel values by map iteration order."""

_HYDRATOR_METHODS: Final = ("wait_for_request", "execute_request", "rpc_request")

_Request = TypeVar(
    "_Request",
    pb.InvokeWaitForMethodRequest,
    pb.InvokeExecuteMethodRequest,
    pb.InvokeWorkerRPCRequest,
)

_install_lock = threading.Lock()
_installed = False


def repair_channel_values(request: _Request, result: _Request) -> None:
    """Move the hydrated values of ``result``'s loaded Channel messages back to their messages.

    ``result`` is what a faulty SDK hydrator returned for ``request``: its k-th loaded message,
    in ``result``'s map order, holds the value of ``request``'s k-th loaded message, in
    ``request``'s map order. When both maps iterate their Channels in the same order, the values
    are already in place and nothing changes.
    """
    if list(request.loaded_channel_messages) == list(result.loaded_channel_messages):
        return
    hydrated = []
    for channel_values in result.loaded_channel_messages.values():
        for message in channel_values.messages:
            value = pb.Value()
            value.CopyFrom(message.value)
            hydrated.append(value)
    owners = [
        (name, index)
        for name, channel_values in request.loaded_channel_messages.items()
        for index in range(len(channel_values.messages))
    ]
    for (name, index), value in zip(owners, hydrated, strict=True):
        result.loaded_channel_messages[name].messages[index].value.CopyFrom(value)


def install_channel_value_repair() -> bool:
    """Wrap the SDK's hydrator methods with :func:`repair_channel_values`, once per process.

    ``AgentSessionFlow`` calls it, so every Worker hosting a session gets it before it runs.

    Returns:
        ``True`` when the repair is installed (now or before), ``False`` for an SDK version not
        in :data:`FAULTY_SDK_VERSIONS`.

    Example:
        >>> install_channel_value_repair()
        True
    """
    global _installed
    with _install_lock:
        if _installed:
            return True
        if metadata.version("dex-python-sdk") not in FAULTY_SDK_VERSIONS:
            return False
        # Private SDK modules, reached only for the versions checked above.
        from dex._async_value_hydrator import AsyncValueHydrator
        from dex._value_hydrator import ValueHydrator

        for name in _HYDRATOR_METHODS:
            setattr(ValueHydrator, name, _repairing(getattr(ValueHydrator, name)))
            setattr(AsyncValueHydrator, name, _repairing_async(getattr(AsyncValueHydrator, name)))
        _installed = True
        return True


def _repairing(
    method: Callable[[object, _Request], _Request],
) -> Callable[[object, _Request], _Request]:
    @wraps(method)
    def hydrate(self: object, request: _Request) -> _Request:
        result = method(self, request)
        repair_channel_values(request, result)
        return result

    return hydrate


def _repairing_async(
    method: Callable[[object, _Request], Awaitable[_Request]],
) -> Callable[[object, _Request], Awaitable[_Request]]:
    @wraps(method)
    async def hydrate(self: object, request: _Request) -> _Request:
        result = await method(self, request)
        repair_channel_values(request, result)
        return result

    return hydrate
