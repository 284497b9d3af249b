"""A local Anthropic Messages API for tests and demos: the real Claude Code CLI, no key, no network.

:class:`FakeAnthropicServer` answers ``POST /v1/messages`` (streaming, Server-Sent Events) on the
loopback interface with a function of the request, so an agent runs through the real CLI and the
real relay while a script plays the model. Point the runner's ``upstream_base_url`` at
:meth:`FakeAnthropicServer.route` and give the CLI any API key (``ANTHROPIC_API_KEY``): nothing
checks it.

Example:
    >>> async def respond(request: FakeModelRequest) -> FakeModelReply:
    ...     if request.tool_outputs:
    ...         return FakeModelReply(text="Order 7 " + request.tool_outputs[-1])
    ...     return FakeModelReply(tool_calls=(FakeToolCall("lookup_order", {"order_id": "7"}),))
    >>> server = FakeAnthropicServer()
    >>> await server.start()
    >>> runner = ClaudeAgentSdkRunner(instructions="...", upstream_base_url=server.route("demo", respond),
    ...                               env={"ANTHROPIC_API_KEY": "not-checked"})
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from dex_agents import estimate_text_tokens

from dex_agents_claude_agent_sdk._anthropic_stream import anthropic_error_body, message_sse_events
from dex_agents_claude_agent_sdk._loopback_http import (
    HttpRequest,
    HttpResponder,
    LoopbackHttpServer,
)

__all__ = [
    "FAKE_API_KEY_ENVIRONMENT",
    "FakeAnthropicServer",
    "FakeModelReply",
    "FakeModelRequest",
    "FakeModelResponder",
    "FakeToolCall",
]

JsonDict = dict[str, Any]

FAKE_API_KEY_ENVIRONMENT: Final[Mapping[str, str]] = {
    "ANTHROPIC_API_KEY": "fake-key-for-a-local-test-server",
    # One request per model call: a failure reaches the session as it happened.
    "CLAUDE_CODE_MAX_RETRIES": "0",
}
"""Environment for a runner whose upstream is a :class:`FakeAnthropicServer`."""

_SYSTEM_REMINDER: Final = "<system-reminder>"


@dataclass(frozen=True)
class FakeToolCall:
    """A tool call the scripted model makes: the agent's tool name and its arguments."""

    name: str
    arguments: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class FakeModelReply:
    """What the scripted model answers: text, tool calls (in one response), or both."""

    text: str | None = None
    tool_calls: Sequence[FakeToolCall] = ()


@dataclass(frozen=True)
class FakeModelRequest:
    """One ``POST /v1/messages`` as the CLI sent it, with the readings a script needs."""

    body: JsonDict

    @property
    def model(self) -> str:
        return str(self.body.get("model") or "")

    @property
    def system_text(self) -> str:
        system = self.body.get("system")
        if isinstance(system, str):
            return system
        return "\n".join(str(b.get("text", "")) for b in system or [] if isinstance(b, dict))

    @property
    def messages(self) -> list[JsonDict]:
        """The conversation without the CLI's ``system`` role context messages."""
        return [
            m for m in self.body.get("messages") or [] if m.get("role") in ("user", "assistant")
        ]

    @property
    def tool_names(self) -> list[str]:
        return [str(t.get("name")) for t in self.body.get("tools") or [] if t.get("name")]

    def _last_user_index(self) -> int:
        for index in range(len(self.messages) - 1, -1, -1):
            if _user_texts(self.messages[index]):
                return index
        return -1

    @property
    def last_user_text(self) -> str:
        """The last text of the newest user message that has text (this turn's prompt)."""
        index = self._last_user_index()
        return _user_texts(self.messages[index])[-1] if index >= 0 else ""

    @property
    def user_texts(self) -> list[str]:
        """Every user text of the conversation, oldest first."""
        return [text for message in self.messages for text in _user_texts(message)]

    @property
    def model_call_index(self) -> int:
        """1 + the model responses since the last user text: the call's index in the turn."""
        later = self.messages[self._last_user_index() + 1 :]
        return 1 + sum(1 for message in later if message.get("role") == "assistant")

    @property
    def tool_outputs(self) -> list[str]:
        """The text of every tool result since the last user text, in order."""
        later = self.messages[self._last_user_index() + 1 :]
        return [
            _result_text(block)
            for message in later
            if isinstance(message.get("content"), list)
            for block in message["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]

    @property
    def input_tokens(self) -> int:
        """The request's size in the session's token estimate (three bytes per token)."""
        measured = {key: self.body.get(key) for key in ("system", "messages", "tools")}
        return estimate_text_tokens(json.dumps(measured))


FakeModelResponder = Callable[[FakeModelRequest], "FakeModelReply | Awaitable[FakeModelReply]"]
"""The scripted model: a sync or async function of the request. An exception it raises is
answered as an ``api_error`` (HTTP 500) naming it."""


class FakeAnthropicServer:
    """A streaming Messages API on ``127.0.0.1``; each :meth:`route` is its own scripted model.

    One server can serve many agents (routes), so a test session or a Worker process shares one.
    """

    def __init__(self) -> None:
        self._server = LoopbackHttpServer(self._handle)
        self._routes: dict[str, FakeModelResponder] = {}
        self.requests: list[FakeModelRequest] = []

    async def start(self) -> None:
        await self._server.start()

    async def close(self) -> None:
        await self._server.close()

    def route(self, name: str, respond: FakeModelResponder) -> str:
        """Serve ``respond`` under ``name``; return the base URL to use as ``upstream_base_url``."""
        self._routes[name] = respond
        return f"{self._server.base_url}/{name}"

    async def _handle(self, request: HttpRequest, responder: HttpResponder) -> None:
        name, _, rest = request.path.lstrip("/").partition("/")
        respond = self._routes.get(name)
        if respond is None or not rest.split("?", 1)[0].startswith("v1/messages"):
            await responder.send_json(404, anthropic_error_body("not_found_error", request.path))
            return
        if "count_tokens" in rest:
            await responder.send_json(
                200, {"input_tokens": FakeModelRequest(request.json()).input_tokens}
            )
            return
        model_request = FakeModelRequest(request.json())
        self.requests.append(model_request)
        try:
            reply = respond(model_request)
            if inspect.isawaitable(reply):
                reply = await reply
        except Exception as error:
            await responder.send_json(
                500, anthropic_error_body("api_error", f"{type(error).__name__}: {error}")
            )
            return
        message = _response_message(model_request, reply)
        await responder.start(
            200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        for frame in message_sse_events(message):
            await responder.write(frame)


def _response_message(request: FakeModelRequest, reply: FakeModelReply) -> JsonDict:
    digest = hashlib.sha256(json.dumps(request.messages, sort_keys=True).encode()).hexdigest()
    content: list[JsonDict] = []
    if reply.text is not None:
        content.append({"type": "text", "text": reply.text})
    for index, call in enumerate(reply.tool_calls):
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{digest[:16]}{index}",
                "name": _offered_name(request, call.name),
                "input": dict(call.arguments),
            }
        )
    return {
        "id": f"msg_{digest[16:40]}",
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": request.input_tokens,
            "output_tokens": max(1, len(json.dumps(content)) // 4),
        },
    }


def _offered_name(request: FakeModelRequest, name: str) -> str:
    """The offered tool the script means: its exact name, or an MCP tool ``mcp__<server>__name``."""
    offered = request.tool_names
    if name in offered:
        return name
    return next((tool for tool in offered if tool.endswith(f"__{name}")), name)


def _user_texts(message: Mapping[str, Any]) -> list[str]:
    if message.get("role") != "user":
        return []
    content = message.get("content")
    if isinstance(content, str):
        return [] if content.startswith(_SYSTEM_REMINDER) else [content]
    return [
        str(block.get("text", ""))
        for block in content or []
        if isinstance(block, dict)
        and block.get("type") == "text"
        and not str(block.get("text", "")).startswith(_SYSTEM_REMINDER)
    ]


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))
