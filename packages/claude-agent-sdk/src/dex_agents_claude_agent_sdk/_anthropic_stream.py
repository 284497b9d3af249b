"""The Anthropic Messages API's streaming wire format: read a response from its Server-Sent Events,
and write a stored response back as the same events.

The relay reads every model response the Claude Code CLI receives, so the session stores it exactly
as the provider sent it (``message_start`` to ``message_stop``, every content block with its
signature or citations), and a later ``RunModel`` replays it to the CLI byte for byte in meaning.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "AnthropicStreamReader",
    "SseEventParser",
    "anthropic_error_body",
    "encode_sse_event",
    "message_sse_events",
]

JsonDict = dict[str, Any]

_STREAMED_TEXT_FIELDS: Final = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("signature", "signature"),
}


def encode_sse_event(name: str, data: JsonDict) -> bytes:
    """One Server-Sent Event frame with a JSON payload."""
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def anthropic_error_body(error_type: str, message: str) -> JsonDict:
    """The Messages API's error body, such as ``api_error`` or ``invalid_request_error``."""
    return {"type": "error", "error": {"type": error_type, "message": message}}


class SseEventParser:
    """Splits a byte stream into ``(event name, JSON data)`` pairs; feed it chunks as they come."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> Iterator[tuple[str, JsonDict]]:
        self._buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in self._buffer:
            frame, self._buffer = self._buffer.split(b"\n\n", 1)
            name, data_lines = "message", []
            for line in frame.decode("utf-8", errors="replace").split("\n"):
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data_lines.append(line[5:].lstrip())
            if data_lines:
                try:
                    data = json.loads("\n".join(data_lines))
                except ValueError:
                    continue
                if isinstance(data, dict):
                    yield name, data


@dataclass
class AnthropicStreamReader:
    """Accumulates one streamed response into the message JSON the non-streaming API returns.

    Attributes:
        message: The message so far (``id``, ``model``, ``content``, ``stop_reason``, ``usage``).
        complete: Whether ``message_stop`` arrived.
        error: The stream's ``error`` event payload, when the provider failed mid-stream.
    """

    message: JsonDict = field(default_factory=dict)
    complete: bool = False
    error: JsonDict | None = None
    _partial_json: dict[int, str] = field(default_factory=dict)

    def apply(self, name: str, data: JsonDict) -> str | None:
        """Apply one event; return the text of a ``text_delta``, for live text events."""
        kind = data.get("type", name)
        if kind == "message_start":
            self.message = copy.deepcopy(data.get("message") or {})
            self.message.setdefault("content", [])
        elif kind == "content_block_start":
            index = int(data.get("index", len(self._content)))
            block = copy.deepcopy(data.get("content_block") or {})
            if block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
                self._partial_json[index] = ""
            while len(self._content) <= index:
                self._content.append({})
            self._content[index] = block
        elif kind == "content_block_delta":
            return self._apply_delta(int(data.get("index", 0)), data.get("delta") or {})
        elif kind == "content_block_stop":
            self._finish_block(int(data.get("index", 0)))
        elif kind == "message_delta":
            self.message.update(data.get("delta") or {})
            usage = data.get("usage")
            if isinstance(usage, dict):
                self.message.setdefault("usage", {}).update(usage)
        elif kind == "message_stop":
            self.complete = True
        elif kind == "error":
            self.error = data.get("error") if isinstance(data.get("error"), dict) else data
        return None

    @property
    def _content(self) -> list[JsonDict]:
        content: list[JsonDict] = self.message.setdefault("content", [])
        return content

    def _apply_delta(self, index: int, delta: JsonDict) -> str | None:
        if index >= len(self._content):
            return None
        block = self._content[index]
        kind = delta.get("type")
        if kind == "input_json_delta":
            self._partial_json[index] = self._partial_json.get(index, "") + str(
                delta.get("partial_json", "")
            )
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        elif kind in _STREAMED_TEXT_FIELDS:
            source, target = _STREAMED_TEXT_FIELDS[kind]
            block[target] = str(block.get(target, "")) + str(delta.get(source, ""))
            if kind == "text_delta":
                return str(delta.get(source, ""))
        return None

    def _finish_block(self, index: int) -> None:
        if index in self._partial_json and index < len(self._content):
            text = self._partial_json.pop(index)
            self._content[index]["input"] = json.loads(text) if text.strip() else {}

    def tool_use_ids(self) -> list[str]:
        """IDs of the ``tool_use`` blocks seen so far, in order."""
        return [str(b["id"]) for b in self._content if b.get("type") == "tool_use" and "id" in b]


def message_sse_events(message: JsonDict) -> Iterator[bytes]:
    """The stream the Messages API sends for ``message``, as SSE frames.

    Every block is started with its fields empty and filled by deltas, the way the provider
    streams it, so a client's accumulator rebuilds ``message`` exactly; a block type without a
    delta form (such as a server tool result) is started whole.
    """
    start = {key: value for key, value in message.items() if key not in ("content", "stop_reason")}
    start.update(content=[], stop_reason=None, stop_sequence=None, type="message")
    start.setdefault("role", "assistant")
    yield encode_sse_event("message_start", {"type": "message_start", "message": start})
    for index, block in enumerate(message.get("content") or []):
        yield from _block_events(index, block)
    delta = {
        "stop_reason": message.get("stop_reason"),
        "stop_sequence": message.get("stop_sequence"),
    }
    usage = {"output_tokens": int((message.get("usage") or {}).get("output_tokens", 0))}
    yield encode_sse_event(
        "message_delta", {"type": "message_delta", "delta": delta, "usage": usage}
    )
    yield encode_sse_event("message_stop", {"type": "message_stop"})


def _block_events(index: int, block: JsonDict) -> Iterator[bytes]:
    kind = block.get("type")
    deltas: list[JsonDict] = []
    start = dict(block)
    if kind == "text":
        start["text"] = ""
        start.pop("citations", None)
        deltas = [{"type": "text_delta", "text": block.get("text", "")}]
        deltas += [{"type": "citations_delta", "citation": c} for c in block.get("citations") or []]
    elif kind == "thinking":
        start.update(thinking="", signature="")
        deltas = [{"type": "thinking_delta", "thinking": block.get("thinking", "")}]
        if block.get("signature"):
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
        start["input"] = {}
        text = json.dumps(block.get("input") or {}, separators=(",", ":"))
        deltas = [{"type": "input_json_delta", "partial_json": text}]
    yield encode_sse_event(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": start},
    )
    for delta in deltas:
        yield encode_sse_event(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )
    yield encode_sse_event("content_block_stop", {"type": "content_block_stop", "index": index})
