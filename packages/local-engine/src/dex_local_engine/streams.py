"""Dex Streams: best-effort, resumable message logs kept in engine memory.

Like the Dex server's memory Stream Store, messages live only in this process (a restart loses
them) and each (Flow type, Stream name) pair has one approximate byte budget shared by all its
Flow instances: when usage reaches 90 % of ``stream_capacity_bytes`` the oldest messages of that
pair, across instances, are trimmed until usage is at most 80 %. A message is charged its
serialized value, its Flow ID, its source and a fixed overhead. One message's serialized value is
limited to 100 KiB.

Reads are resumable. A resume token is opaque to clients; it names the Flow type, Flow ID, Stream
name and message it came from, and a token of another Flow, Flow type or Stream, or one this
engine never issued, is rejected with INVALID_ARGUMENT (SDK: ``DexServiceError`` with
``code == grpc.StatusCode.INVALID_ARGUMENT``). Tokens carry a MAC under a key of this engine
process, so a token written by hand, or one issued before a restart (whose messages the restart
lost anyway), is refused rather than read from a position nobody was given. An empty token, or a token older than the retained
head, reads from the oldest retained message. When no message follows the token, ``ReadStream``
long-polls until one is written or the wait ends with ``LongPollTimeoutError``
(DEADLINE_EXCEEDED + LONG_POLL_TIME_OUT).

With the Stream Store disabled (``StreamStoreBackend.DISABLED``, ``serve --stream-store
disabled``, like Dex's ``streamStore.backend: disabled``), nothing is kept: a Step's Stream write
is dropped without failing the Step, and ``WriteStream``, ``ReadStream`` and
``ListStreamMessages`` answer FAILED_PRECONDITION ("Stream Store is disabled"), the read before
it looks at the resume token, as Dex does.

Public API (the FlowService servicer and the scheduler use it):

* :class:`StreamStoreBackend` -- ``memory`` (default) or ``disabled``.
* :class:`StreamStore` -- ``write`` (WriteStream), ``write_from_step`` (a Step's
  ``StepStreamWrite`` frame), ``await read`` (ReadStream), ``list`` (ListStreamMessages).

Example::

    store = StreamStore()
    store.write(pb.WriteStreamRequest(flow_id="f", flow_type="T", stream_name="Progress",
                                      stream_capacity_bytes=1 << 20, value=value, source="ui"))
    response = await store.read(pb.ReadStreamRequest(flow_id="f", flow_type="T",
                                                     stream_name="Progress"))
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

from dex.dexpb import dex_pb2 as pb
from google.protobuf import timestamp_pb2

from dex_local_engine.errors import (
    EngineError,
    failed_precondition,
    invalid_argument,
    long_poll_timeout,
)

__all__ = [
    "DEFAULT_READ_WAIT_SECONDS",
    "MAX_LIST_PAGE_SIZE",
    "MAX_MESSAGE_BYTES",
    "StreamStore",
    "StreamStoreBackend",
]

MAX_MESSAGE_BYTES = 100 * 1024
"""Largest serialized Stream value accepted (Dex's default)."""
MAX_LIST_PAGE_SIZE = 1000
"""Largest ListStreamMessages page size."""
DEFAULT_READ_WAIT_SECONDS = 30.0
"""Long-poll wait of a ReadStream that asks for 0 seconds (the SDK's "no timeout")."""
MAX_READ_WAIT_SECONDS = 300.0
"""Longest long-poll wait granted, like Dex's configured maximum wait."""

_MESSAGE_OVERHEAD_BYTES = 64
_TRIM_TRIGGER_PERCENT = 90
_TRIM_TARGET_PERCENT = 80
_TOKEN_VERSION = 1
_TOKEN_MAC_BYTES = 16
_ISSUED_TOKENS_KEPT = 4096
"""Issued tokens remembered for a decode without the MAC (an older one is checked in full)."""

_log = logging.getLogger(__name__)


class StreamStoreBackend(StrEnum):
    """Where Stream messages live (``serve --stream-store``), named as Dex's ``streamStore``."""

    MEMORY = "memory"
    """In this engine process's memory; a restart loses them."""
    DISABLED = "disabled"
    """Nowhere: Step writes are dropped and Client Stream calls answer FAILED_PRECONDITION."""


_MessageId = tuple[int, int]
"""(creation time in Unix milliseconds, sequence within that millisecond); strictly increasing."""


@dataclass(frozen=True)
class _Message:
    message_id: _MessageId
    value: pb.Value
    source: str
    charged_bytes: int


@dataclass
class _Instance:
    """The messages of one Flow ID's Stream, oldest first, and readers waiting for more."""

    messages: list[_Message] = field(default_factory=list)
    head: int = 0
    """Index of the oldest retained message; trimming advances it, compaction resets it."""
    changed: asyncio.Event | None = None
    waiters: int = 0

    def retained(self) -> list[_Message]:
        return self.messages[self.head :]

    def first_after(self, message_id: _MessageId) -> _Message | None:
        index = bisect.bisect_right(self.messages, message_id, lo=self.head, key=_id_of)
        return self.messages[index] if index < len(self.messages) else None

    def drop_oldest(self) -> None:
        self.head += 1
        if self.head > 256 and self.head * 2 > len(self.messages):
            del self.messages[: self.head]
            self.head = 0


@dataclass
class _Scope:
    """All instances of one (Flow type, Stream name): one capacity, one trim order."""

    capacity_bytes: int
    used_bytes: int = 0
    order: deque[tuple[str, _Message]] = field(default_factory=deque)
    """(Flow ID, message) oldest first across instances, for trimming."""


def _id_of(message: _Message) -> _MessageId:
    return message.message_id


class StreamStore:
    """In-memory Stream storage implementing WriteStream, ReadStream and ListStreamMessages.

    All methods run on the engine's event loop thread. ``read`` waits; the others return at once.
    With ``backend=StreamStoreBackend.DISABLED`` it keeps nothing (see the module docstring).
    """

    def __init__(
        self,
        *,
        default_read_wait_seconds: float = DEFAULT_READ_WAIT_SECONDS,
        backend: StreamStoreBackend = StreamStoreBackend.MEMORY,
    ) -> None:
        self._default_read_wait_seconds = default_read_wait_seconds
        self.backend = StreamStoreBackend(backend)
        self._dropped_step_writes = 0
        self._scopes: dict[tuple[str, str], _Scope] = {}
        self._instances: dict[tuple[str, str, str], _Instance] = {}
        self._last_id: _MessageId = (0, 0)
        self._token_key = secrets.token_bytes(32)
        # Tokens issued lately and what they name: a reader hands back the token of the message it
        # just read, so most reads find it here and skip the base64, MAC and JSON of a decode.
        self._issued_tokens: dict[str, tuple[tuple[str, str, str], _MessageId]] = {}

    # --- writes ----------------------------------------------------------------------------

    def write(self, request: pb.WriteStreamRequest) -> None:
        """Append a Client's message (WriteStream). The Flow need not exist.

        Raises:
            EngineError: INVALID_ARGUMENT naming an empty or invalid field, or a value over
                100 KiB or over the Stream's whole capacity; FAILED_PRECONDITION when the Stream
                Store is disabled.
        """
        _require_scope_fields(request.flow_id, request.flow_type, request.stream_name)
        self._require_enabled("WriteStream")
        if not request.source:
            raise invalid_argument("WriteStream source must not be empty")
        if request.stream_capacity_bytes <= 0:
            raise invalid_argument(
                f"WriteStream stream_capacity_bytes must be positive, got "
                f"{request.stream_capacity_bytes}"
            )
        if not request.HasField("value"):
            raise invalid_argument("WriteStream value is required")
        self._append(
            request.flow_type,
            request.flow_id,
            request.stream_name,
            request.stream_capacity_bytes,
            request.value,
            request.source,
        )

    def write_from_step(
        self, flow_type: str, flow_id: str, step_execution_id: str, frame: pb.StepStreamWrite
    ) -> bool:
        """Append a message a Step wrote while running (a ``stream_write`` output frame).

        The source is ``#<step_execution_id>``, as in Dex. Like Dex, a message the store cannot
        take, or any message while the Stream Store is disabled, is dropped without failing the
        Step.

        Returns:
            True if the message was stored, False if it was dropped (and logged; while disabled,
            only the first drop is logged).
        """
        if self.backend is StreamStoreBackend.DISABLED:
            if self._dropped_step_writes == 0:
                _log.warning(
                    "the Stream Store is disabled (--stream-store disabled): Step Stream "
                    "messages, starting with one of %s %s step %s, are dropped",
                    flow_type,
                    flow_id,
                    step_execution_id,
                )
            self._dropped_step_writes += 1
            return False
        try:
            if not frame.stream_name or frame.stream_capacity_bytes <= 0:
                raise invalid_argument("StepStreamWrite needs a stream name and a capacity")
            self._append(
                flow_type,
                flow_id,
                frame.stream_name,
                frame.stream_capacity_bytes,
                frame.value,
                f"#{step_execution_id}",
            )
        except EngineError as error:
            _log.warning(
                "dropped Stream message of %s %s step %s: %s",
                flow_type,
                flow_id,
                step_execution_id,
                error.detail,
            )
            return False
        return True

    def _append(
        self,
        flow_type: str,
        flow_id: str,
        stream_name: str,
        capacity_bytes: int,
        value: pb.Value,
        source: str,
    ) -> None:
        payload_bytes = value.ByteSize()
        if payload_bytes > MAX_MESSAGE_BYTES:
            raise invalid_argument(
                f"Stream {stream_name!r} message is {payload_bytes} bytes serialized; "
                f"the limit is {MAX_MESSAGE_BYTES}"
            )
        charged = payload_bytes + len(flow_id) + len(source) + _MESSAGE_OVERHEAD_BYTES
        if charged > capacity_bytes:
            raise invalid_argument(
                f"Stream {stream_name!r} message needs about {charged} bytes, more than the "
                f"Stream's whole capacity of {capacity_bytes} bytes"
            )
        scope = self._scopes.get((flow_type, stream_name))
        if scope is None:
            scope = self._scopes[(flow_type, stream_name)] = _Scope(capacity_bytes)
        scope.capacity_bytes = capacity_bytes
        message = _Message(self._next_id(), _copy(value), source, charged)
        instance = self._instance(flow_type, flow_id, stream_name)
        instance.messages.append(message)
        scope.order.append((flow_id, message))
        scope.used_bytes += charged
        self._trim(flow_type, stream_name, scope)
        if instance.changed is not None:
            instance.changed.set()
            instance.changed = None

    def _trim(self, flow_type: str, stream_name: str, scope: _Scope) -> None:
        if scope.used_bytes * 100 < scope.capacity_bytes * _TRIM_TRIGGER_PERCENT:
            return
        target = scope.capacity_bytes * _TRIM_TARGET_PERCENT // 100
        # Never trim the message just written: the writer's reader may be waiting for it.
        while scope.used_bytes > target and len(scope.order) > 1:
            flow_id, message = scope.order.popleft()
            scope.used_bytes -= message.charged_bytes
            key = (flow_type, flow_id, stream_name)
            instance = self._instances[key]
            instance.drop_oldest()
            self._forget_if_unused(key)

    def _next_id(self) -> _MessageId:
        now_ms = time.time_ns() // 1_000_000
        last_ms, last_sequence = self._last_id
        self._last_id = (now_ms, 0) if now_ms > last_ms else (last_ms, last_sequence + 1)
        return self._last_id

    def _instance(self, flow_type: str, flow_id: str, stream_name: str) -> _Instance:
        key = (flow_type, flow_id, stream_name)
        instance = self._instances.get(key)
        if instance is None:
            instance = self._instances[key] = _Instance()
        return instance

    # --- reads -----------------------------------------------------------------------------

    async def read(
        self, request: pb.ReadStreamRequest, *, time_remaining: float | None = None
    ) -> pb.ReadStreamResponse:
        """Return the first retained message after the request's resume token (ReadStream).

        Waits up to ``wait_time_seconds`` (0 means the default wait), and never longer than
        ``time_remaining`` (the caller's gRPC deadline, from ``context.time_remaining()``).

        Raises:
            EngineError: INVALID_ARGUMENT for an empty scope field, a negative wait or a token
                that is not a valid token of this Flow's Stream; DEADLINE_EXCEEDED +
                LONG_POLL_TIME_OUT when no message arrives in time; FAILED_PRECONDITION when the
                Stream Store is disabled, whatever the token.
        """
        _require_scope_fields(request.flow_id, request.flow_type, request.stream_name)
        self._require_enabled("ReadStream")
        if request.wait_time_seconds < 0:
            raise invalid_argument(
                f"ReadStream wait_time_seconds must not be negative, got "
                f"{request.wait_time_seconds}"
            )
        after = self._decode_token(
            request.resume_token, request.flow_type, request.flow_id, request.stream_name
        )
        wait = float(request.wait_time_seconds) or self._default_read_wait_seconds
        wait = min(wait, MAX_READ_WAIT_SECONDS)
        if time_remaining is not None:
            wait = min(wait, time_remaining)
        deadline = asyncio.get_running_loop().time() + wait
        key = (request.flow_type, request.flow_id, request.stream_name)
        while True:
            instance = self._instance(*key)
            message = instance.first_after(after)
            if message is not None:
                return pb.ReadStreamResponse(message=self._to_proto(key, message))
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                self._forget_if_unused(key)
                raise long_poll_timeout(
                    f"a message on Stream {request.stream_name!r} of flow {request.flow_id!r}"
                )
            try:
                await self._wait_for_change(instance, remaining)
            except asyncio.CancelledError:
                self._forget_if_unused(key)
                raise

    def _forget_if_unused(self, key: tuple[str, str, str]) -> None:
        instance = self._instances.get(key)
        if instance is not None and instance.waiters == 0 and not instance.retained():
            del self._instances[key]

    async def _wait_for_change(self, instance: _Instance, timeout: float) -> None:
        if instance.changed is None:
            instance.changed = asyncio.Event()
        changed = instance.changed
        instance.waiters += 1
        try:
            # asyncio.timeout, not wait_for: wait_for runs the wait in a task of its own, which
            # costs the reader extra event-loop turns between a write and its response.
            async with asyncio.timeout(timeout):
                await changed.wait()
        except TimeoutError:
            pass
        finally:
            instance.waiters -= 1

    def list(self, request: pb.ListStreamMessagesRequest) -> pb.ListStreamMessagesResponse:
        """Return one newest-first page of retained messages (ListStreamMessages); never waits.

        ``before_page_token`` (a page token or a resume token of this Stream) pages to older
        messages; the response's ``next_page_token`` is empty on the last page.

        Raises:
            EngineError: INVALID_ARGUMENT for an empty scope field, a page size outside
                1..1000 or an invalid token; FAILED_PRECONDITION when the Stream Store is
                disabled.
        """
        _require_scope_fields(request.flow_id, request.flow_type, request.stream_name)
        self._require_enabled("ListStreamMessages")
        if not 1 <= request.page_size <= MAX_LIST_PAGE_SIZE:
            raise invalid_argument(
                f"ListStreamMessages page_size must be between 1 and {MAX_LIST_PAGE_SIZE}, "
                f"got {request.page_size}"
            )
        key = (request.flow_type, request.flow_id, request.stream_name)
        retained = self._instances[key].retained() if key in self._instances else []
        end = len(retained)
        if request.before_page_token:
            before = self._decode_token(request.before_page_token, *key)
            end = bisect.bisect_left(retained, before, key=_id_of)
        start = max(0, end - request.page_size)
        page = retained[start:end]
        page.reverse()
        next_token = self._encode_token(key, page[-1].message_id) if start > 0 else ""
        return pb.ListStreamMessagesResponse(
            messages=[self._to_proto(key, message) for message in page],
            next_page_token=next_token,
        )

    def _require_enabled(self, method_name: str) -> None:
        if self.backend is StreamStoreBackend.DISABLED:
            raise failed_precondition(
                f"Stream Store is disabled: {method_name} has no Stream to use, because this "
                "engine runs with --stream-store disabled and keeps no Stream messages; start it "
                "with --stream-store memory to keep them"
            )

    # --- tokens ----------------------------------------------------------------------------

    def _to_proto(self, key: tuple[str, str, str], message: _Message) -> pb.StreamMessage:
        created = timestamp_pb2.Timestamp()
        created.FromMilliseconds(message.message_id[0])
        return pb.StreamMessage(
            value=message.value,
            resume_token=self._encode_token(key, message.message_id),
            created_time=created,
            source=message.source,
        )

    def _encode_token(self, key: tuple[str, str, str], message_id: _MessageId) -> str:
        token = self._token_text(key, message_id)
        issued = self._issued_tokens
        if len(issued) >= _ISSUED_TOKENS_KEPT:
            del issued[next(iter(issued))]  # the oldest: dicts keep insertion order
        issued[token] = (key, message_id)
        return token

    def _token_text(self, key: tuple[str, str, str], message_id: _MessageId) -> str:
        flow_type, flow_id, stream_name = key
        payload = json.dumps(
            {
                "v": _TOKEN_VERSION,
                "t": flow_type,
                "f": flow_id,
                "s": stream_name,
                "i": f"{message_id[0]}-{message_id[1]}",
            },
            separators=(",", ":"),
        ).encode()
        return f"{_b64(payload)}.{_b64(self._token_mac(payload))}"

    def _token_mac(self, payload: bytes) -> bytes:
        return hmac.digest(self._token_key, payload, hashlib.sha256)[:_TOKEN_MAC_BYTES]

    def _decode_token(
        self, token: str, flow_type: str, flow_id: str, stream_name: str
    ) -> _MessageId:
        if not token:
            return (-1, -1)
        issued = self._issued_tokens.get(token)
        if issued is not None:
            # The very string this engine made (and MACed) for a message of this scope or another.
            scope, message_id = issued
            if scope != (flow_type, flow_id, stream_name):
                raise _other_stream(scope, flow_type, flow_id, stream_name)
            return message_id
        try:
            encoded_payload, encoded_mac = token.split(".")
            payload = _unb64(encoded_payload)
            if not hmac.compare_digest(_unb64(encoded_mac), self._token_mac(payload)):
                raise _token_not_issued()  # forged, or issued before a restart
            fields = json.loads(payload)
            if not isinstance(fields, dict) or fields.get("v") != _TOKEN_VERSION:
                raise _token_not_issued()  # another token format
            milliseconds, sequence = (int(part) for part in str(fields["i"]).split("-"))
            scope = (fields["t"], fields["f"], fields["s"])
        except (ValueError, KeyError, TypeError, UnicodeError, binascii.Error):
            raise _token_not_issued() from None
        if scope != (flow_type, flow_id, stream_name):
            raise _other_stream(scope, flow_type, flow_id, stream_name)
        return (milliseconds, sequence)


def _other_stream(
    scope: tuple[str, str, str], flow_type: str, flow_id: str, stream_name: str
) -> EngineError:
    return invalid_argument(
        f"invalid Stream resume token: it belongs to another Stream (flow type "
        f"{scope[0]!r}, flow {scope[1]!r}, stream {scope[2]!r}), not flow type "
        f"{flow_type!r}, flow {flow_id!r}, stream {stream_name!r}"
    )


def _token_not_issued() -> EngineError:
    return invalid_argument(
        "invalid Stream resume token: it is not a token this engine issued (tokens "
        "issued before an engine restart are refused too); read from the Stream's head "
        "with an empty token instead"
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode((text + "=" * (-len(text) % 4)).encode("ascii"))


def _require_scope_fields(flow_id: str, flow_type: str, stream_name: str) -> None:
    for name, value in (
        ("flow_id", flow_id),
        ("flow_type", flow_type),
        ("stream_name", stream_name),
    ):
        if not value:
            raise invalid_argument(f"Stream request {name} must not be empty")


def _copy(value: pb.Value) -> pb.Value:
    copied = pb.Value()
    copied.CopyFrom(value)
    return copied
