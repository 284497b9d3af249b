"""Requests that cannot be decoded are refused with INVALID_ARGUMENT, not a traceback.

gRPC decodes a request before the servicer sees it; a body that is not the method's message (bad
UTF-8 in a string field, corrupt bytes) makes the generated deserializer raise, and grpc.aio
then logs a traceback and answers ``UNKNOWN``. :func:`add_decoding_servicer` registers a
servicer whose deserializers never raise: an undecodable body becomes an
:class:`UndecodableRequest`, which a unary method answers with INVALID_ARGUMENT naming the
message type and the decoder's reason, and which a stream handler reads like any other frame
(:func:`is_undecodable`) and refuses the same way.

Example::

    add_decoding_servicer(dex_pb2_grpc.add_FlowServiceServicer_to_server, service, server)
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeGuard, cast

import grpc

from dex_local_engine import errors

__all__ = ["UndecodableRequest", "add_decoding_servicer", "is_undecodable"]

_Context = grpc.aio.ServicerContext[Any, Any]


@dataclass(frozen=True)
class UndecodableRequest:
    """A request body (or stream frame) that is not a valid message of its type."""

    message_type: str
    reason: str

    @property
    def problem(self) -> str:
        """The sentence the caller gets back."""
        return f"the request is not a valid {self.message_type}: {self.reason}"


def is_undecodable(request: object) -> TypeGuard[UndecodableRequest]:
    """Whether ``request`` is a body gRPC could not decode."""
    return isinstance(request, UndecodableRequest)


def _safe_deserializer(
    deserialize: Callable[[bytes], object] | None,
) -> Callable[[bytes], object] | None:
    if deserialize is None:
        return None
    message_type = getattr(getattr(deserialize, "__self__", None), "__name__", "message")
    qualified = getattr(getattr(deserialize, "__self__", None), "DESCRIPTOR", None)
    if qualified is not None:
        message_type = qualified.full_name

    def deserialize_or_mark(data: bytes) -> object:
        try:
            return deserialize(data)
        except Exception as error:  # DecodeError, and whatever a corrupt body makes it raise
            return UndecodableRequest(message_type, str(error) or type(error).__name__)

    return deserialize_or_mark


def _refusing_unary(
    method: Callable[[Any, _Context], Awaitable[Any]],
    check: Callable[[Any], None] | None,
) -> Callable[[Any, _Context], Awaitable[Any]]:
    @functools.wraps(method)
    async def refuse_undecodable(request: Any, context: _Context) -> Any:
        if is_undecodable(request):
            await errors.abort_with_engine_error(context, errors.invalid_argument(request.problem))
        if check is not None:
            try:
                check(request)
            except errors.EngineError as error:
                await errors.abort_with_engine_error(context, error)
        return await method(request, context)

    return refuse_undecodable


def _decoding_handler(handler: Any, check: Callable[[Any], None] | None) -> Any:
    """``handler`` (a generated ``grpc.RpcMethodHandler`` namedtuple) with a deserializer that
    marks bad bodies, and a unary method that refuses them.

    A streaming-request method reads frames itself and checks each with :func:`is_undecodable`.
    """
    changes: dict[str, Any] = {
        "request_deserializer": _safe_deserializer(handler.request_deserializer)
    }
    if not handler.request_streaming and not handler.response_streaming:
        changes["unary_unary"] = _refusing_unary(handler.unary_unary, check)
    return handler._replace(**changes)


class _HandlerCapture:
    """Stands in for the server while a generated ``add_*_to_server`` registers its handlers."""

    def __init__(self) -> None:
        self.services: dict[str, dict[str, Any]] = {}

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        del handlers  # the same methods arrive through add_registered_method_handlers

    def add_registered_method_handlers(self, service_name: str, handlers: dict[str, Any]) -> None:
        self.services[service_name] = handlers


def add_decoding_servicer(
    add_to_server: Callable[[Any, Any], None],
    servicer: object,
    server: grpc.aio.Server,
    check: Callable[[Any], None] | None = None,
) -> None:
    """Register ``servicer`` as ``add_to_server`` would, with undecodable bodies refused.

    Args:
        add_to_server: a generated ``dex_pb2_grpc.add_<Service>Servicer_to_server``.
        servicer: the servicer instance.
        server: the grpc.aio server (not yet started).
        check: runs on every decoded unary request before the servicer; an ``EngineError`` it
            raises is the call's answer.
    """
    capture = _HandlerCapture()
    add_to_server(servicer, capture)
    for service_name, handlers in capture.services.items():
        decoding = {name: _decoding_handler(h, check) for name, h in handlers.items()}
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service_name, decoding),)
        )
        # Missing from the grpc stubs; the generated add_*_to_server calls it too.
        cast(Any, server).add_registered_method_handlers(service_name, decoding)
