"""ScriptedModelClient: a ModelClient that answers from a function of the request.

It behaves like a real provider client: one request per call, the whole input every time, and
provider-exact output items (provider ``"scripted"``). Tool call IDs derive from the request, so
a rerun ``RunModel`` with the same committed state gets the same IDs.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dex_agents._values import AgentUsage
from dex_agents.exceptions import ConfigurationError, ConfigurationTypeError
from dex_agents.stepwise._json_schema import JsonValue
from dex_agents.stepwise._model_client import (
    ModelInputItem,
    ModelOutputItem,
    ModelOutputItemKind,
    ModelOutputWriter,
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    ModelToolResult,
    ModelUserText,
)

__all__ = [
    "SCRIPTED_PROVIDER",
    "ScriptedModelClient",
    "ScriptedModelReply",
    "ScriptedRespond",
    "ScriptedToolCall",
]

SCRIPTED_PROVIDER = "scripted"
"""The ``ModelOutputItem.provider`` of every item a ScriptedModelClient returns."""

_BYTES_PER_TOKEN = 3


@dataclass(frozen=True)
class ScriptedToolCall:
    """A tool call in a scripted reply.

    ``arguments`` is a JSON object, or JSON text sent as it is (so a script can send broken
    arguments). ``tool_call_id`` defaults to an ID derived from the request and the call's index.
    """

    name: str
    arguments: Mapping[str, JsonValue] | str = field(default_factory=dict)
    tool_call_id: str | None = None


@dataclass(frozen=True)
class ScriptedModelReply:
    """One scripted model response: reasoning, then text, then tool calls.

    Example:
        >>> ScriptedModelReply(text="Looking it up", tool_calls=[ScriptedToolCall("lookup_order",
        ...     {"order_id": "7"})]).tool_calls[0].name
        'lookup_order'
    """

    text: str | None = None
    tool_calls: Sequence[ScriptedToolCall] = ()
    reasoning: str | None = None


ScriptedRespond = Callable[[ModelRequest], ScriptedModelReply | Awaitable[ScriptedModelReply]]
"""The script: a sync or async function from the request to the reply."""


def _estimate_text_tokens(text: str) -> int:
    # An ASCII text is as long in UTF-8 as in characters; only other texts need the encoding.
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    return -(-size // _BYTES_PER_TOKEN)


def _item_json(payload: Mapping[str, JsonValue]) -> str:
    return json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


class ScriptedModelClient:
    """Answers each model call from ``respond(request)``, so an agent runs without a model key.

    Keep ``respond`` deterministic: a crashed ``RunModel`` calls it again with the same request.
    ``requests`` keeps the latest ``max_recorded_requests`` requests, oldest first.

    Example:
        >>> def reply(request: ModelRequest) -> ScriptedModelReply:
        ...     results = ScriptedModelClient.tool_results(request)
        ...     if results:
        ...         return ScriptedModelReply(text="; ".join(r.output for r in results))
        ...     return ScriptedModelReply(text=f"Echo: {ScriptedModelClient.user_texts(request)[-1]}")
        >>> model = ScriptedModelClient(reply)

    Raises:
        ConfigurationError: When ``max_recorded_requests`` is negative.
    """

    def __init__(self, respond: ScriptedRespond, max_recorded_requests: int = 100) -> None:
        if max_recorded_requests < 0:
            raise ConfigurationError(
                f"max_recorded_requests must be 0 or more, got {max_recorded_requests}"
            )
        self._respond = respond
        self._requests: deque[ModelRequest] = deque(maxlen=max_recorded_requests)
        # Tool Steps and model calls may run on several threads of one Worker.
        self._lock = threading.Lock()

    @property
    def requests(self) -> tuple[ModelRequest, ...]:
        """The latest recorded requests, oldest first."""
        with self._lock:
            return tuple(self._requests)

    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        """Records the request, runs the script once, and streams its reasoning and text.

        Raises:
            ConfigurationTypeError: When the script returns something other than a ScriptedModelReply.
            Exception: Whatever the script raises, which fails the model call.
        """
        with self._lock:
            self._requests.append(request)
        reply = self._respond(request)
        if inspect.isawaitable(reply):
            reply = await reply
        if not isinstance(reply, ScriptedModelReply):
            raise ConfigurationTypeError(
                f"the script of ScriptedModelClient returned {type(reply).__name__}, "
                "not a ScriptedModelReply"
            )
        items = self._output_items(request, reply)
        if reply.reasoning:
            output.write_reasoning_delta(reply.reasoning)
        if reply.text:
            output.write_text_delta(reply.text)
        output_text = "".join(item.item for item in items)
        usage = AgentUsage(
            input_tokens=self.estimate_input_tokens(request),
            output_tokens=_estimate_text_tokens(output_text),
            reasoning_tokens=_estimate_text_tokens(reply.reasoning or ""),
        )
        finish = "tool_calls" if reply.tool_calls else "stop"
        return ModelResponse(
            items=items,
            usage=usage,
            request_model=SCRIPTED_PROVIDER,
            response_model=SCRIPTED_PROVIDER,
            provider_name=SCRIPTED_PROVIDER,
            finish_reasons=(finish,),
        )

    def estimate_input_tokens(self, request: ModelRequest) -> int:
        """Counts three UTF-8 bytes per token over the instructions, input, and tools."""
        parts = [request.instructions]
        for item in request.input:
            match item:
                case ModelUserText(text=text):
                    parts.append(text)
                case ModelToolResult(output=output):
                    parts.append(output)
                case ModelOutputItem():
                    parts.append(item.item)
        parts.extend(
            _item_json(
                {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
            )
            for tool in request.tools
        )
        return sum(_estimate_text_tokens(part) for part in parts)

    @staticmethod
    def user_texts(request: ModelRequest) -> list[str]:
        """Every user text of the request's input, oldest first."""
        return [item.text for item in request.input if isinstance(item, ModelUserText)]

    @staticmethod
    def tool_results(request: ModelRequest) -> list[ModelToolResult]:
        """The tool results after the request's last user text, in order: this turn's results.

        Each result has ``tool_call_id``, ``tool_name``, and ``output``.
        """
        results: list[ModelToolResult] = []
        for item in request.input:
            if isinstance(item, ModelUserText):
                results = []
            elif isinstance(item, ModelToolResult):
                results.append(item)
        return results

    @staticmethod
    def _output_items(
        request: ModelRequest, reply: ScriptedModelReply
    ) -> tuple[ModelOutputItem, ...]:
        items: list[ModelOutputItem] = []
        if reply.reasoning:
            items.append(
                ModelOutputItem(
                    provider=SCRIPTED_PROVIDER,
                    kind=ModelOutputItemKind.REASONING,
                    item=_item_json({"type": "reasoning", "text": reply.reasoning}),
                )
            )
        if reply.text or not reply.tool_calls:
            text = reply.text or ""
            items.append(
                ModelOutputItem(
                    provider=SCRIPTED_PROVIDER,
                    kind=ModelOutputItemKind.MESSAGE,
                    item=_item_json({"type": "message", "text": text}),
                    text=text,
                )
            )
        # The digest reads the whole request, so it is made only for a call without its own ID.
        request_key = (
            _request_key(request) if any(not call.tool_call_id for call in reply.tool_calls) else ""
        )
        for index, call in enumerate(reply.tool_calls):
            items.append(_tool_call_item(call, call.tool_call_id or f"call_{request_key}_{index}"))
        return tuple(items)


def _request_key(request: ModelRequest) -> str:
    """A short digest of the request, so IDs differ between calls and repeat on a rerun."""
    # Fed field by field: a repr() of the whole input cost a Worker more than the digest itself.
    digest = hashlib.sha256(request.instructions.encode("utf-8"))
    for item in request.input:
        for part in _item_parts(item):
            encoded = part.encode("utf-8", "surrogatepass")
            # Length-prefixed, so no two different inputs feed the digest the same bytes.
            digest.update(len(encoded).to_bytes(8, "little"))
            digest.update(encoded)
    return digest.hexdigest()[:12]


def _item_parts(item: ModelInputItem) -> tuple[str, ...]:
    if isinstance(item, ModelUserText):
        return ("user", item.text)
    if isinstance(item, ModelToolResult):
        return ("result", item.tool_call_id, item.tool_name, item.output)
    return ("output", item.provider, item.kind.value, item.item, item.text or "")


def _tool_call_item(call: ScriptedToolCall, tool_call_id: str) -> ModelOutputItem:
    arguments = call.arguments if isinstance(call.arguments, str) else _item_json(call.arguments)
    return ModelOutputItem(
        provider=SCRIPTED_PROVIDER,
        kind=ModelOutputItemKind.TOOL_CALL,
        item=_item_json(
            {
                "type": "function_call",
                "call_id": tool_call_id,
                "name": call.name,
                "arguments": arguments,
            }
        ),
        tool_call=ModelToolCall(
            tool_call_id=tool_call_id, tool_name=call.name, arguments=arguments
        ),
    )
