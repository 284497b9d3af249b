"""Shared pieces of the Pydantic AI adapter's tests: turns, events, scripted ``FunctionModel``s, and a local server that speaks OpenAI Chat Completions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dex_agents import AgentEvent, AgentSessionFlow
from dex_agents.testing import (
    InProcessWorker,
)
from dex_agents_pydantic_ai.testing import turn_view
from pydantic_ai.messages import ModelMessage, ToolReturnPart


async def session_events(
    worker: InProcessWorker, flow: AgentSessionFlow, session_id: str
) -> list[AgentEvent]:
    """Every retained AgentEvent of the session, oldest first."""
    page = await worker.client.list_stream_messages(
        worker.scoped(session_id), flow.agent_events, 500
    )
    return [message.value for message in reversed(page.messages)]


def turn_tool_results(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    """The tool returns after the last user prompt: the current turn's results."""
    return list(turn_view(messages).tool_returns)


@dataclass(frozen=True)
class ChatReply:
    """One Chat Completions answer: text, or tool calls ``(id, name, arguments JSON)``."""

    text: str | None = None
    tool_calls: tuple[tuple[str, str, str], ...] = ()


@dataclass
class ChatCompletionsServer:
    """A loopback HTTP server that speaks OpenAI Chat Completions, streamed (SSE) or not.

    ``answer`` maps each request body to a :class:`ChatReply`; every body is kept in ``requests``.
    """

    answer: Callable[[dict[str, Any]], ChatReply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}/v1"

    async def __aenter__(self) -> ChatCompletionsServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            headers = dict(
                line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line
            )
            length = int({k.lower(): v for k, v in headers.items()}.get("content-length", "0"))
            body = json.loads(await reader.readexactly(length))
            self.requests.append(body)
            reply = self.answer(body)
            if body.get("stream"):
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                )
                for chunk in _stream_chunks(len(self.requests), body["model"], reply):
                    writer.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    await writer.drain()
                writer.write(b"data: [DONE]\n\n")
            else:
                payload = json.dumps(_completion(len(self.requests), body["model"], reply)).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
            await writer.drain()
        finally:
            writer.close()


_USAGE = {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28}


def _finish_reason(reply: ChatReply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


def _tool_calls(reply: ChatReply) -> list[dict[str, Any]]:
    return [
        {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        for index, (call_id, name, arguments) in enumerate(reply.tool_calls)
    ]


def _completion(number: int, model: str, reply: ChatReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply)
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(reply)}],
        "usage": _USAGE,
    }


def _stream_chunks(number: int, model: str, reply: ChatReply) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    if reply.text:
        # Two deltas, so the session sees the text arrive in pieces.
        middle = len(reply.text) // 2
        chunks += [chunk({"content": reply.text[:middle]}), chunk({"content": reply.text[middle:]})]
    for call in _tool_calls(reply):
        arguments = call["function"]["arguments"]
        first = {**call, "function": {"name": call["function"]["name"], "arguments": arguments[:3]}}
        chunks.append(chunk({"tool_calls": [first]}))
        chunks.append(
            chunk(
                {"tool_calls": [{"index": call["index"], "function": {"arguments": arguments[3:]}}]}
            )
        )
    chunks.append(chunk({}, _finish_reason(reply)))
    chunks.append(
        {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": [],
            "usage": _USAGE,
        }
    )
    return chunks
