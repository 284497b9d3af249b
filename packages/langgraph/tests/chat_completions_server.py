"""A local OpenAI Chat Completions server for tests: loopback only, streaming and not.

It answers from the request alone, so a retried request gets the same answer: a request whose last
message is a tool result gets a text answer naming the results; any other request gets one call of
the first offered tool. Every request body is kept for assertions.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "gpt-local-test"
RESPONSE_MODEL = "gpt-local-test-2026-11-01"


@dataclass
class ChatCompletionsServer:
    """The running server: its base URL (for ``ChatOpenAI(base_url=...)``) and its requests."""

    base_url: str
    requests: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def chat_completions_server() -> Iterator[ChatCompletionsServer]:
    """Serve Chat Completions on 127.0.0.1 on a free port while the block runs."""
    requests: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append(body)
            completion_id = f"chatcmpl-{len(requests)}"
            message, finish = _answer(body)
            if body.get("stream"):
                self._stream(completion_id, message, finish, body)
            else:
                self._send_json(_completion(completion_id, message, finish))

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _send_json(self, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(
            self, completion_id: str, message: dict[str, Any], finish: str, body: dict[str, Any]
        ) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for delta in _deltas(message):
                self._event(_chunk(completion_id, delta, None))
            self._event(_chunk(completion_id, {}, finish))
            if (body.get("stream_options") or {}).get("include_usage"):
                usage_chunk = _chunk(completion_id, {}, None)
                usage_chunk["choices"] = []
                usage_chunk["usage"] = _usage()
                self._event(usage_chunk)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, payload: dict[str, Any]) -> None:
            self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield ChatCompletionsServer(f"http://{host}:{port}/v1", requests)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _answer(body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    messages = body["messages"]
    if messages[-1]["role"] == "tool" or not body.get("tools"):
        results = [m["content"] for m in messages if m["role"] == "tool"]
        text = "Answer: " + "; ".join(results) if results else "Summary: nothing much."
        return {"role": "assistant", "content": text}, "stop"
    tool = body["tools"][0]["function"]
    call = {
        "id": f"call_{len(messages)}",
        "type": "function",
        "function": {"name": tool["name"], "arguments": json.dumps({"order_id": "7"})},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"


def _deltas(message: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if message.get("content"):
        text: str = message["content"]
        middle = len(text) // 2
        yield {"role": "assistant", "content": text[:middle]}
        yield {"content": text[middle:]}
        return
    for index, call in enumerate(message["tool_calls"]):
        arguments: str = call["function"]["arguments"]
        yield {
            "role": "assistant",
            "tool_calls": [
                {
                    "index": index,
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": arguments[:5]},
                }
            ],
        }
        yield {"tool_calls": [{"index": index, "function": {"arguments": arguments[5:]}}]}


def _chunk(completion_id: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": 1_800_000_000,
        "model": RESPONSE_MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _completion(completion_id: str, message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 1_800_000_000,
        "model": RESPONSE_MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(),
    }


def _usage() -> dict[str, Any]:
    return {
        "prompt_tokens": 40,
        "completion_tokens": 9,
        "total_tokens": 49,
        "prompt_tokens_details": {"cached_tokens": 8},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }
