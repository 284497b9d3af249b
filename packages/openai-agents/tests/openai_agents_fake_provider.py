"""A loopback HTTP server that speaks the OpenAI Responses and Chat Completions APIs.

The SDK's real ``OpenAIResponsesModel`` and ``OpenAIChatCompletionsModel`` talk to it through the
real ``openai`` client (``base_url`` pointing here, any API key), streaming included: Responses
answers are Server-Sent Events of the Responses stream, Chat Completions answers are
``chat.completion.chunk`` events ending with ``[DONE]``. Every request body is kept, so a test sees
exactly what the SDK sent, such as the ``function_call_output`` of a deferred call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents import ModelSettings, ModelTracing, Usage
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

__all__ = ["FakeOpenAIServer", "ProviderReply", "ProviderRequest"]

RESPONSE_MODEL = "gpt-test-2026-01-01"
"""The model name every answer reports, distinct from any request's model."""


@dataclass(frozen=True)
class ProviderRequest:
    """One request the server received: its path and JSON body."""

    path: str
    body: dict[str, Any]

    @property
    def streamed(self) -> bool:
        return bool(self.body.get("stream"))


@dataclass(frozen=True)
class ProviderReply:
    """One model answer: text, or tool calls ``(call_id, name, arguments JSON)``."""

    text: str | None = None
    tool_calls: tuple[tuple[str, str, str], ...] = ()
    incomplete_reason: str | None = None


@dataclass
class FakeOpenAIServer:
    """Answers each request with ``reply(request)``; start it with ``async with``."""

    reply: Callable[[ProviderRequest], ProviderReply]
    requests: list[ProviderRequest] = field(default_factory=list)
    _server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}/v1"

    async def __aenter__(self) -> FakeOpenAIServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def requests_to(self, path_suffix: str) -> list[ProviderRequest]:
        return [request for request in self.requests if request.path.endswith(path_suffix)]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = (await reader.readline()).decode()
            headers: dict[str, str] = {}
            while (line := (await reader.readline()).decode().strip()) != "":
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            path = request_line.split(" ")[1]
            request = ProviderRequest(path, json.loads(body or b"{}"))
            self.requests.append(request)
            answer = self.reply(request)
            if path.endswith("/responses"):
                events = await _responses_events(answer)
                payload = _sse(events, named=True) if request.streamed else events[-1]["response"]
            elif path.endswith("/chat/completions"):
                chunks = _chat_chunks(answer)
                payload = (
                    _sse(chunks, named=False) if request.streamed else _chat_completion(answer)
                )
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                return
            _write_response(writer, payload, streamed=request.streamed)
            await writer.drain()
        finally:
            writer.close()


def _write_response(writer: asyncio.StreamWriter, payload: object, *, streamed: bool) -> None:
    data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
    content_type = "text/event-stream" if streamed else "application/json"
    writer.write(
        f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
        "Connection: close\r\nx-request-id: req_test\r\n\r\n".encode()
    )
    writer.write(data)


def _sse(events: list[dict[str, Any]], *, named: bool) -> str:
    frames = [
        (f"event: {event['type']}\n" if named else "") + f"data: {json.dumps(event)}\n\n"
        for event in events
    ]
    if not named:
        frames.append("data: [DONE]\n\n")
    return "".join(frames)


async def _responses_events(answer: ProviderReply) -> list[dict[str, Any]]:
    """The Responses stream of ``answer``, as the SDK's own scripted model builds its events."""
    output = (
        [
            function_call(name, arguments, call_id=call_id)
            for call_id, name, arguments in answer.tool_calls
        ]
        if answer.tool_calls
        else [assistant_message(answer.text or "", item_id="msg_1")]
    )
    usage = Usage(requests=1, input_tokens=21, output_tokens=5, total_tokens=26)
    step = ModelStep(output=output, usage=usage, response_id=f"resp_{len(answer.tool_calls)}")
    events: list[dict[str, Any]] = []
    async for event in ScriptedModel([step]).stream_response(
        None,
        "",
        ModelSettings(),
        [],
        None,
        [],
        ModelTracing.DISABLED,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
    ):
        events.append(event.model_dump(mode="json"))
    for event in events:
        if "response" in event:
            event["response"]["model"] = RESPONSE_MODEL
            if answer.incomplete_reason is not None and event["type"] == "response.completed":
                event["response"]["status"] = "incomplete"
                event["response"]["incomplete_details"] = {"reason": answer.incomplete_reason}
    return events


def _chat_chunks(answer: ProviderReply) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": RESPONSE_MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    if answer.tool_calls:
        for index, (call_id, name, arguments) in enumerate(answer.tool_calls):
            chunks.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": name, "arguments": arguments},
                            }
                        ]
                    }
                )
            )
        chunks.append(chunk({}, "tool_calls"))
    else:
        text = answer.text or ""
        for start in range(0, len(text), 4):
            chunks.append(chunk({"content": text[start : start + 4]}))
        chunks.append(chunk({}, "stop"))
    usage_chunk = chunk({})
    usage_chunk["choices"] = []
    usage_chunk["usage"] = {"prompt_tokens": 17, "completion_tokens": 4, "total_tokens": 21}
    chunks.append(usage_chunk)
    return chunks


def _chat_completion(answer: ProviderReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.tool_calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for call_id, name, arguments in answer.tool_calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": RESPONSE_MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if answer.tool_calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 17, "completion_tokens": 4, "total_tokens": 21},
    }
