"""The model relay: a loopback HTTP server between the Claude Code CLI and the Messages API.

Each ``RunModel`` points the CLI's ``ANTHROPIC_BASE_URL`` at its own route of this relay, which
does three things the CLI cannot be asked for:

- it **replays** the model responses this turn already stored, in order, so a resumed ``RunModel``
  walks the CLI through the turn again without a model call, up to the tool calls whose results
  Dex recorded, and only then calls the model;
- it **forwards** every other request to the real API (``upstream_base_url``), streaming the
  response through, and reads it, so the session stores each response exactly as the provider sent
  it, with its usage, model and stop reason;
- it tells the harness when a response is complete, so a tool call is decided only once every tool
  call of its response is known;
- it puts the tool results of each request in the order of their calls: the CLI lists the results
  of parallel inline reads in the order they finished, while the stored messages (and so every
  rebuilt transcript) keep call order, so the model sees the same request live and after a resume.

One relay serves every ``RunModel`` of an event loop; it is started lazily and never leaves the
loopback interface.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from dex_agents_claude_agent_sdk._anthropic_stream import (
    AnthropicStreamReader,
    SseEventParser,
    message_sse_events,
)
from dex_agents_claude_agent_sdk._loopback_http import (
    HttpRequest,
    HttpResponder,
    LoopbackHttpServer,
)
from dex_agents_claude_agent_sdk._per_event_loop import PerEventLoop

__all__ = ["ModelRelay", "RelayRun", "RelayedExchange", "model_relay"]

JsonDict = dict[str, Any]

_ROUTE_PREFIX: Final = "/run/"
_DROPPED_REQUEST_HEADERS: Final = frozenset(
    {"host", "content-length", "connection", "accept-encoding", "transfer-encoding"}
)
_UPSTREAM_TIMEOUT: Final = httpx.Timeout(connect=30.0, read=None, write=60.0, pool=30.0)


@dataclass
class RelayedExchange:
    """One model request of a run and the response it got.

    Attributes:
        request: The request body the CLI sent (its ``messages`` are what the model saw).
        response: The response message, once complete; ``None`` while it streams or after a
            failure.
        replayed: Whether the relay replayed a stored response instead of calling the model.
    """

    request: JsonDict
    response: JsonDict | None = None
    replayed: bool = False


@dataclass
class RelayRun:
    """One ``RunModel``'s route through the relay.

    Attributes:
        upstream_base_url: Where requests that are not replayed go.
        recorded_responses: Responses this turn already stored, replayed in order.
        on_text_delta: Receives each text delta of a response from the model.
        exchanges: Every model request of the run, in order.
        failure: What went wrong with the model, such as an HTTP error status and its body.
    """

    upstream_base_url: str
    recorded_responses: Sequence[JsonDict] = ()
    on_text_delta: Callable[[str], None] = lambda text: None
    exchanges: list[RelayedExchange] = field(default_factory=list)
    failure: str | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def model_calls(self) -> int:
        """Requests that reached the model (not replayed)."""
        return sum(1 for exchange in self.exchanges if not exchange.replayed)

    def fresh_responses(self) -> list[JsonDict]:
        """Complete responses from the model in this run, in order."""
        return [e.response for e in self.exchanges if not e.replayed and e.response is not None]

    async def response_with_tool_use(self, tool_use_id: str) -> tuple[int, JsonDict]:
        """Wait until the response holding ``tool_use_id`` is complete; return its index."""
        while True:
            for index, exchange in enumerate(self.exchanges):
                response = exchange.response
                if response is not None and any(
                    block.get("id") == tool_use_id for block in response.get("content") or []
                ):
                    return index, response
            self._changed.clear()
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()


class ModelRelay:
    """The loopback relay of one event loop; see the module documentation."""

    def __init__(self) -> None:
        self._server = LoopbackHttpServer(self._handle)
        self._runs: dict[str, RelayRun] = {}
        self._client = httpx.AsyncClient(timeout=_UPSTREAM_TIMEOUT)

    async def start(self) -> None:
        """Starts listening on a free loopback port."""
        await self._server.start()

    def open_run(self, run: RelayRun) -> str:
        """Register ``run``; return the base URL the CLI uses for it."""
        token = secrets.token_hex(12)
        self._runs[token] = run
        return f"{self._server.base_url}{_ROUTE_PREFIX}{token}"

    def close_run(self, base_url: str) -> None:
        self._runs.pop(base_url.rsplit("/", 1)[-1], None)

    async def _handle(self, request: HttpRequest, responder: HttpResponder) -> None:
        token, _, rest = request.path.removeprefix(_ROUTE_PREFIX).partition("/")
        run = self._runs.get(token)
        if run is None or not request.path.startswith(_ROUTE_PREFIX):
            await responder.send_json(404, {"type": "error", "error": {"type": "not_found_error"}})
            return
        path = "/" + rest
        body = request.json()
        if request.method == "POST" and _is_model_request(path, body):
            await self._model_request(run, path, request, body, responder)
        else:
            await self._forward_whole(run, path, request, responder)

    async def _model_request(
        self,
        run: RelayRun,
        path: str,
        request: HttpRequest,
        body: JsonDict,
        responder: HttpResponder,
    ) -> None:
        index = len(run.exchanges)
        exchange = RelayedExchange(request=body)
        run.exchanges.append(exchange)
        if index < len(run.recorded_responses):
            exchange.replayed = True
            await responder.start(200, {"Content-Type": "text/event-stream"})
            for frame in message_sse_events(run.recorded_responses[index]):
                await responder.write(frame)
            exchange.response = run.recorded_responses[index]
            run._notify()
            return
        content = request.body
        if _order_tool_results(body.get("messages") or []):
            content = json.dumps(body).encode()
        await self._forward_stream(run, exchange, path, request, content, responder)

    async def _forward_stream(
        self,
        run: RelayRun,
        exchange: RelayedExchange,
        path: str,
        request: HttpRequest,
        content: bytes,
        responder: HttpResponder,
    ) -> None:
        reader, parser = AnthropicStreamReader(), SseEventParser()
        upstream = self._client.build_request(
            request.method,
            _upstream_url(run, path),
            headers=_forwarded_headers(request),
            content=content,
        )
        try:
            response = await self._client.send(upstream, stream=True)
        except httpx.HTTPError as error:
            run.failure = f"the model API at {run.upstream_base_url} could not be reached: {error}"
            run._notify()
            raise
        try:
            await responder.start(response.status_code, _response_headers(response))
            failure_body = b""
            async for chunk in response.aiter_raw():
                await responder.write(chunk)
                if response.status_code != 200:
                    failure_body += chunk
                    continue
                for name, data in parser.feed(chunk):
                    text = reader.apply(name, data)
                    if text:
                        run.on_text_delta(text)
            if response.status_code != 200:
                run.failure = (
                    f"the model API answered HTTP {response.status_code}: "
                    f"{failure_body.decode(errors='replace')[:2000]}"
                )
            elif reader.error is not None:
                run.failure = f"the model API failed mid-response: {reader.error}"
            elif reader.complete:
                exchange.response = reader.message
        finally:
            await response.aclose()
            run._notify()

    async def _forward_whole(
        self, run: RelayRun, path: str, request: HttpRequest, responder: HttpResponder
    ) -> None:
        response = await self._client.request(
            request.method,
            _upstream_url(run, path),
            headers=_forwarded_headers(request),
            content=request.body,
        )
        await responder.send(
            response.status_code,
            response.content,
            response.headers.get("content-type", "application/json"),
        )


def _is_model_request(path: str, body: JsonDict) -> bool:
    route = path.split("?", 1)[0].rstrip("/")
    return route.endswith("/v1/messages") and body.get("stream") is True


def _order_tool_results(messages: Sequence[JsonDict]) -> bool:
    """Sort each user message's ``tool_result`` blocks (in place, other blocks where they stand)
    by the order of the calls in the assistant message before it; ``True`` when one moved."""
    calls: dict[str, int] = {}
    moved = False
    previous_role = None
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role == "assistant":
            if previous_role != "assistant":  # one response may come as several messages
                calls = {}
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    calls.setdefault(str(block.get("id")), len(calls))
        elif role == "user" and isinstance(content, list):
            slots = [i for i, b in enumerate(content) if _is_tool_result(b)]
            results = [content[i] for i in slots]
            ordered = sorted(
                results, key=lambda b: calls.get(str(b.get("tool_use_id")), len(calls))
            )
            if ordered != results:
                for slot, block in zip(slots, ordered, strict=True):
                    content[slot] = block
                moved = True
        previous_role = role
    return moved


def _is_tool_result(block: object) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def _upstream_url(run: RelayRun, path: str) -> str:
    return run.upstream_base_url.rstrip("/") + path


def _forwarded_headers(request: HttpRequest) -> dict[str, str]:
    headers = {k: v for k, v in request.headers.items() if k not in _DROPPED_REQUEST_HEADERS}
    headers["accept-encoding"] = "identity"  # the relay reads the stream as it passes
    return headers


def _response_headers(response: httpx.Response) -> dict[str, str]:
    kept = ("content-type", "request-id", "anthropic-organization-id", "retry-after")
    return {name: response.headers[name] for name in kept if name in response.headers}


_RELAYS: Final = PerEventLoop(ModelRelay, ModelRelay.start)


async def model_relay() -> ModelRelay:
    """The started relay of the running event loop."""
    return await _RELAYS.get()
