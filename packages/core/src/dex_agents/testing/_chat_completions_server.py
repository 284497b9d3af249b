"""``ChatCompletionsServer``: an OpenAI Chat Completions endpoint on loopback, for adapters' tests
of a framework's own OpenAI-compatible model class (streamed or not) without a network."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

#: The ``created`` time of every completion (a fixed instant, so answers repeat exactly).
_CREATED = 1_800_000_000


@dataclass(frozen=True)
class ChatCompletionReply:
    """One answer of :class:`ChatCompletionsServer`: text, or tool calls.

    Attributes:
        text: The assistant's text (``None`` with tool calls).
        tool_calls: ``(call_id, tool_name, arguments_json)`` of each call, in order.
    """

    text: str | None = None
    tool_calls: tuple[tuple[str, str, str], ...] = ()

    @property
    def finish_reason(self) -> str:
        """``"tool_calls"`` when the reply calls tools, else ``"stop"``."""
        return "tool_calls" if self.tool_calls else "stop"

    def message(self) -> dict[str, Any]:
        """The reply as a Chat Completions assistant message."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
                for call_id, name, args in self.tool_calls
            ]
        return message


@dataclass
class ChatCompletionsServer:
    """OpenAI Chat Completions on ``127.0.0.1`` (a free port) while its ``with`` block runs.

    ``answer`` maps each request body to a :class:`ChatCompletionReply`; every body is kept in
    :attr:`requests`. A streamed request gets Server-Sent Events: the text in two deltas, each
    call's arguments in two, then the finish reason, and ``usage`` in a last chunk when the request
    asks for it (``stream_options.include_usage``). Completion IDs are ``chatcmpl-<n>`` for the
    n-th request. The server runs in its own thread, so a test's event loop may block on it.

    Attributes:
        answer: The reply to each request body.
        response_model: The model the answers name; ``None`` repeats the request's.
        usage: The ``usage`` object of every answer.
        requests: Every request body, oldest first.

    Example:
        >>> import json, urllib.request
        >>> reply = ChatCompletionReply(text="hello")
        >>> with ChatCompletionsServer(lambda body: reply) as server:
        ...     request = urllib.request.Request(
        ...         server.base_url + "/chat/completions",
        ...         data=json.dumps({"model": "m", "messages": []}).encode(),
        ...         headers={"Content-Type": "application/json"},
        ...     )
        ...     with urllib.request.urlopen(request) as response:
        ...         completion = json.load(response)
        >>> completion["choices"][0]["message"]["content"], completion["model"]
        ('hello', 'm')
    """

    answer: Callable[[dict[str, Any]], ChatCompletionReply]
    response_model: str | None = None
    usage: Mapping[str, Any] = field(
        default_factory=lambda: {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28}
    )
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the ``base_url`` an OpenAI client takes."""
        assert self._server is not None, "use ChatCompletionsServer in a with block"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> ChatCompletionsServer:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def completion(self, body: dict[str, Any]) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
        """Record ``body``; the whole completion, and the chunks of its streamed form."""
        self.requests.append(body)
        reply = self.answer(body)
        base = {
            "id": f"chatcmpl-{len(self.requests)}",
            "created": _CREATED,
            "model": self.response_model or body.get("model", ""),
        }
        choice = {"index": 0, "message": reply.message(), "finish_reason": reply.finish_reason}
        whole = {**base, "object": "chat.completion", "choices": [choice], "usage": self.usage}
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return whole, _chunks(base, reply, self.usage if include_usage else None)


def _chunks(
    base: Mapping[str, Any], reply: ChatCompletionReply, usage: Mapping[str, Any] | None
) -> Iterator[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return {**base, "object": "chat.completion.chunk", "choices": [choice]}

    if reply.text:
        middle = len(reply.text) // 2
        yield chunk({"role": "assistant", "content": reply.text[:middle]})
        yield chunk({"content": reply.text[middle:]})
    for index, (call_id, name, arguments) in enumerate(reply.tool_calls):
        middle = len(arguments) // 2
        head = {"name": name, "arguments": arguments[:middle]}
        call = {"index": index, "id": call_id, "type": "function", "function": head}
        yield chunk({"role": "assistant", "tool_calls": [call]})
        tail = {"index": index, "function": {"arguments": arguments[middle:]}}
        yield chunk({"tool_calls": [tail]})
    yield chunk({}, reply.finish_reason)
    if usage is not None:
        yield {**base, "object": "chat.completion.chunk", "choices": [], "usage": dict(usage)}


def _handler(server: ChatCompletionsServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            whole, chunks = server.completion(body)
            if not body.get("stream"):
                data = json.dumps(whole).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for payload in chunks:
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            del format, args  # no request log on the test's stderr

    return _Handler
