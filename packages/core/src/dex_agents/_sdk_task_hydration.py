"""How a Worker task's values reach its Step with dex-python-sdk 1.23.0: inline values pass
through untouched, and hydrated ones keep each loaded Channel message's value on its own message.

The SDK's value hydrators (``ValueHydrator`` and ``AsyncValueHydrator``: ``wait_for_request``,
``execute_request`` and ``rpc_request``) turn blob references in a task into their values. Each
copies the whole request with ``CopyFrom``, checks every value, and copies every value back into
the copy, blob reference or not: about 4 µs per loaded value, so a ``RunModel`` task loading a
session's 500 messages paid about 2 ms before its Step began, in every model call. Almost every
task holds no blob reference (an engine sends one only for a value too large to travel inline), so
:func:`holds_only_inline_values` looks at each value's kind once (about 0.6 µs a value) and such a
task goes to its Step as it came. A task holding a reference, or a value the SDK would refuse (no
concrete kind, a double it checks for finiteness), goes through the SDK's hydrator as before.

That hydrator has a fault. It collects the values of the loaded Channel messages by iterating the
request's ``loaded_channel_messages`` map and writes them back by iterating the copy's map.
Protobuf leaves map iteration order unspecified, and under upb (whose string hash is seeded per
process) a map parsed from the wire and its copy iterate some pairs of keys in different orders,
which pairs depending on the process: the session's two message Channels crossed in 11 of
800 fresh processes checked. In such a Worker every invocation that loads two non-empty Channels
sees each Channel's message IDs with the other Channel's values: ``get_agent_snapshot`` listed
the steered message's text under the queued message's ID, and the queued one's text as
steered. The SDK writes the k-th collected value (request order) onto the k-th message of the copy
(copy order), so :func:`repair_channel_values` moves each value back to the message it was
collected from.

:func:`install_sdk_hydrator_patches` wraps the six hydrator methods for the SDK versions known to
have the fault (the pass-through mirrors their fields); a later SDK is left alone (the regression
test shows whether it still needs the repair).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator
from functools import wraps
from importlib import metadata
from typing import Final, TypeAlias, TypeVar

from dex.dexpb import dex_pb2 as pb

__all__ = [
    "FAULTY_SDK_VERSIONS",
    "holds_only_inline_values",
    "install_sdk_hydrator_patches",
    "repair_channel_values",
]

FAULTY_SDK_VERSIONS: Final = frozenset({"1.23.0"})
"""``dex-python-sdk`` versions whose hydrators pair Channel values by map iteration order."""

_HYDRATOR_METHODS: Final = ("wait_for_request", "execute_request", "rpc_request")

_INLINE_KINDS: Final = frozenset(
    {"string_value", "int_value", "bool_value", "null_value", "obj_value"}
)
"""Value kinds the SDK's hydrator keeps as they are; an object's encoding is checked where it is
decoded. A double goes through the hydrator, which refuses a non-finite one."""

_Request = TypeVar(
    "_Request",
    pb.InvokeWaitForMethodRequest,
    pb.InvokeExecuteMethodRequest,
    pb.InvokeWorkerRPCRequest,
)

_AnyRequest: TypeAlias = (
    pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest | pb.InvokeWorkerRPCRequest
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


def holds_only_inline_values(request: _AnyRequest) -> bool:
    """Whether every value the SDK's hydrator would look at in ``request`` is inline and of a
    kind it keeps as it is, so hydrating would return an equal copy.

    Example:
        >>> holds_only_inline_values(pb.InvokeWorkerRPCRequest(input=pb.Value(string_value="hi")))
        True
        >>> holds_only_inline_values(pb.InvokeWorkerRPCRequest())  # no input: the SDK refuses it
        False
    """
    inline = _INLINE_KINDS
    # The Attributes are nearly all of a task's values: looked at in a plain loop, without a
    # generator around each one.
    for entry in request.attributes:
        if entry.value.WhichOneof("kind") not in inline:
            return False
    return all(value.WhichOneof("kind") in inline for value in _other_values(request))


def _other_values(request: _AnyRequest) -> Iterator[pb.Value]:
    """The values other than Attributes that SDK 1.23.0's hydrator of ``request``'s type
    hydrates, in no particular order."""
    if isinstance(request, pb.InvokeWorkerRPCRequest):
        yield request.input
    else:
        if isinstance(request, pb.InvokeWaitForMethodRequest) or request.HasField("step_input"):
            yield request.step_input
        if request.context.HasField("last_heartbeat_value"):
            yield request.context.last_heartbeat_value
    if isinstance(request, pb.InvokeExecuteMethodRequest):
        for entry in request.step_exe_locals:
            yield entry.value
        for channel_result in request.condition_results.channel_results:
            yield from channel_result.values
        for flow_result in request.condition_results.sub_flow_results:
            for completion in flow_result.results:
                yield completion.completed_step_output
    for channel_values in request.loaded_channel_messages.values():
        for message in channel_values.messages:
            yield message.value


def install_sdk_hydrator_patches() -> bool:
    """Wrap the SDK's hydrator methods once per process: a task of inline values passes through
    (:func:`holds_only_inline_values`), any other is hydrated by the SDK and then
    :func:`repair_channel_values` puts its Channel values back on their messages.

    ``AgentSessionFlow`` calls it, so every Worker hosting a session gets it before it runs.

    Returns:
        ``True`` when the patches are installed (now or before), ``False`` for an SDK version not
        in :data:`FAULTY_SDK_VERSIONS`.

    Example:
        >>> install_sdk_hydrator_patches()
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
            setattr(ValueHydrator, name, _patched(getattr(ValueHydrator, name)))
            setattr(AsyncValueHydrator, name, _patched_async(getattr(AsyncValueHydrator, name)))
        _installed = True
        return True


def _patched(
    method: Callable[[object, _Request], _Request],
) -> Callable[[object, _Request], _Request]:
    @wraps(method)
    def hydrate(self: object, request: _Request) -> _Request:
        if holds_only_inline_values(request):
            return request
        result = method(self, request)
        repair_channel_values(request, result)
        return result

    return hydrate


def _patched_async(
    method: Callable[[object, _Request], Awaitable[_Request]],
) -> Callable[[object, _Request], Awaitable[_Request]]:
    @wraps(method)
    async def hydrate(self: object, request: _Request) -> _Request:
        if holds_only_inline_values(request):
            return request
        result = await method(self, request)
        repair_channel_values(request, result)
        return result

    return hydrate
