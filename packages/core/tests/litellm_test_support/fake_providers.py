"""A local HTTP server that speaks three provider wire protocols, for LiteLLM's tests.

- OpenAI Responses (``POST /responses``, SSE events ``response.*``),
- OpenAI Chat Completions (``POST /chat/completions``, SSE ``data:`` chunks),
- Anthropic Messages (``POST /v1/messages``, SSE ``message_start`` ... ``message_stop``).

A test gives it a script: a function of the API and the request body that returns a
``FakeReply`` (reasoning, text, tool calls) or a ``FakeFailure`` (an HTTP status, a malformed
stream, or a stream that stops at an ``asyncio.Event`` so a test can kill the Worker mid-stream).
Every request is recorded.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

RESPONSES = "responses"
CHAT = "chat"
ANTHROPIC = "anthropic"
SIGNATURE = "EqQBCkYIARgCKkD+/sig==\n"  # odd bytes on purpose: must come back unchanged
ENCRYPTED = "gAAAAB-encrypted/reasoning+blob=="


@dataclass(frozen=True)
class FakeToolCall:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class FakeReply:
    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[FakeToolCall, ...] = ()


@dataclass(frozen=True)
class FakeFailure:
    """An HTTP error status, or (without one) a stream whose first event is not JSON."""

    status: int | None = None


@dataclass(frozen=True)
class FakeStall:
    """The first events of ``reply``, then nothing until ``until`` is set (or the client leaves)."""

    reply: FakeReply
    until: asyncio.Event


Script = Callable[[str, dict[str, Any]], FakeReply | FakeFailure | FakeStall]


@dataclass
class FakeProviderServer:
    script: Script
    apis: frozenset[str] = frozenset({RESPONSES, CHAT, ANTHROPIC})
    """The APIs served; a request to another one gets 404, as from a server without it."""
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bodies(self, api: str) -> list[dict[str, Any]]:
        return [body for seen, body in self.requests if seen == api]

    async def __aenter__(self) -> FakeProviderServer:
        app = web.Application()
        routes = {
            RESPONSES: ("/responses", "/v1/responses"),
            CHAT: ("/chat/completions", "/v1/chat/completions"),
            ANTHROPIC: ("/v1/messages",),
        }
        for api in sorted(self.apis):
            for path in routes[api]:
                app.router.add_post(path, self._handler(api))
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        sockets = site._server.sockets if site._server is not None else ()  # type: ignore[union-attr]
        self.port = sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _handler(self, api: str) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            self.requests.append((api, body))
            self.headers.append(dict(request.headers))
            outcome = self.script(api, body)
            if isinstance(outcome, FakeFailure) and outcome.status is not None:
                error = {"error": {"message": f"fake status {outcome.status}", "type": "fake"}}
                return web.json_response(error, status=outcome.status)
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            if isinstance(outcome, FakeFailure):
                await response.write(b"data: {this is not json\n\n")
                return response
            reply = outcome.reply if isinstance(outcome, FakeStall) else outcome
            events = _EVENTS[api](reply, body)
            sent = 0
            if isinstance(outcome, FakeStall):
                for event, payload in events[:2]:
                    await response.write(_sse(event, payload))
                sent = 2
                await outcome.until.wait()
            for event, payload in events[sent:]:
                await response.write(_sse(event, payload))
            if api == CHAT:
                await response.write(b"data: [DONE]\n\n")
            return response

        return handle


def _sse(event: str, payload: Any) -> bytes:
    line = f"data: {json.dumps(payload)}\n\n"
    return (f"event: {event}\n" + line if event else line).encode()


def _responses_events(reply: FakeReply, body: dict[str, Any]) -> list[tuple[str, Any]]:
    model = body.get("model", "gpt-5-mini")
    output: list[dict[str, Any]] = []
    events: list[tuple[str, Any]] = []
    if reply.reasoning:
        item = {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": reply.reasoning}],
            "encrypted_content": ENCRYPTED,
        }
        events.append(
            (
                "response.reasoning_summary_text.delta",
                {
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": "rs_1",
                    "output_index": len(output),
                    "summary_index": 0,
                    "delta": reply.reasoning,
                    "sequence_number": 1,
                },
            )
        )
        output.append(item)
    if reply.text:
        half = len(reply.text) // 2
        for index, delta in enumerate((reply.text[:half], reply.text[half:])):
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": "msg_1",
                        "output_index": len(output),
                        "content_index": 0,
                        "delta": delta,
                        "sequence_number": 2 + index,
                        "logprobs": [],
                    },
                )
            )
        output.append(
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call in reply.tool_calls:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{call.call_id}",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": json.dumps(call.arguments),
                "status": "completed",
            }
        )
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 120,
            "output_tokens": 30,
            "total_tokens": 150,
            "input_tokens_details": {"cached_tokens": 20},
            "output_tokens_details": {"reasoning_tokens": 10},
        },
    }
    events.append(
        (
            "response.completed",
            {
                "type": "response.completed",
                "response": response,
                "sequence_number": 9,
            },
        )
    )
    return events


def _chat_events(reply: FakeReply, body: dict[str, Any]) -> list[tuple[str, Any]]:
    model = body.get("model", "model")

    def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> Any:
        payload: dict[str, Any] = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            payload["choices"] = []
            payload["usage"] = usage
        return ("", payload)

    events = [chunk({"role": "assistant", "content": ""})]
    if reply.reasoning:
        events.append(chunk({"reasoning_content": reply.reasoning}))
    half = len(reply.text) // 2
    for delta in (reply.text[:half], reply.text[half:]):
        if delta:
            events.append(chunk({"content": delta}))
    for index, call in enumerate(reply.tool_calls):
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.call_id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": json.dumps(call.arguments),
                            },
                        }
                    ]
                }
            )
        )
    events.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    events.append(
        chunk({}, usage={"prompt_tokens": 80, "completion_tokens": 12, "total_tokens": 92})
    )
    return events


def _anthropic_events(reply: FakeReply, body: dict[str, Any]) -> list[tuple[str, Any]]:
    model = body.get("model", "claude-sonnet-4-5")
    events: list[tuple[str, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 90, "output_tokens": 1},
                },
            },
        )
    ]
    index = 0

    def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1

    if reply.reasoning:
        block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [
                {"type": "thinking_delta", "thinking": reply.reasoning},
                {"type": "signature_delta", "signature": SIGNATURE},
            ],
        )
    if reply.text:
        block({"type": "text", "text": ""}, [{"type": "text_delta", "text": reply.text}])
    for call in reply.tool_calls:
        block(
            {"type": "tool_use", "id": call.call_id, "name": call.name, "input": {}},
            [
                {"type": "input_json_delta", "partial_json": json.dumps(call.arguments)},
            ],
        )
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": 25},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


_EVENTS: dict[str, Callable[[FakeReply, dict[str, Any]], list[tuple[str, Any]]]] = {
    RESPONSES: _responses_events,
    CHAT: _chat_events,
    ANTHROPIC: _anthropic_events,
}
