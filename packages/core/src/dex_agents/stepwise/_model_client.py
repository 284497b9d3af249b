"""The ModelClient protocol and the values of one model call.

A model call sends the whole input every time: the instructions, provider-neutral user text and
tool results, and the provider-exact items earlier calls returned. Each returned item keeps the
provider's own JSON text byte for byte, so opaque fields such as encrypted reasoning or thinking
signatures replay unchanged to the same provider and API. A client that receives an item from
another provider or API replays only its text and tool call and drops its reasoning; the
``text`` and ``tool_call`` fields give it that neutral view without parsing ``item``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from dex_agents._values import AgentUsage
from dex_agents.exceptions import ConfigurationError
from dex_agents.stepwise._json_schema import JsonSchema, JsonValue

__all__ = [
    "DiscardingModelOutputWriter",
    "ModelClient",
    "ModelInputItem",
    "ModelOutputItem",
    "ModelOutputItemKind",
    "ModelOutputWriter",
    "ModelRequest",
    "ModelResponse",
    "ModelToolCall",
    "ModelToolChoice",
    "ModelToolDefinition",
    "ModelToolResult",
    "ModelUserText",
    "replayable_input",
]


class ModelOutputItemKind(StrEnum):
    """What one provider output item is."""

    MESSAGE = "message"
    """Visible assistant text."""
    TOOL_CALL = "tool_call"
    """A request to call one tool."""
    REASONING = "reasoning"
    """Reasoning, replayed only to the provider and API that produced it."""
    OTHER = "other"
    """Any other provider item; replayed only to the same provider and API."""


class ModelToolChoice(StrEnum):
    """Whether the model may answer in text or must call a tool."""

    AUTO = "auto"
    REQUIRED = "required"


@dataclass(frozen=True)
class ModelToolCall:
    """The provider-neutral view of a tool call: its ID, tool name, and JSON arguments text."""

    tool_call_id: str
    tool_name: str
    arguments: str


@dataclass(frozen=True)
class ModelOutputItem:
    """One provider-exact output item of a model response.

    ``item`` is the provider's JSON text for the item, replayed unchanged to ``provider``.
    ``text`` and ``tool_call`` are the neutral view other providers replay.

    Example:
        >>> ModelOutputItem(provider="scripted", kind=ModelOutputItemKind.MESSAGE,
        ...                 item='{"type":"message","text":"Hi"}', text="Hi").text
        'Hi'
    """

    provider: str
    """Provider and API that produced the item, such as ``"openai.responses"``."""
    kind: ModelOutputItemKind
    item: str
    text: str | None = None
    tool_call: ModelToolCall | None = None

    def __post_init__(self) -> None:
        if (self.kind is ModelOutputItemKind.TOOL_CALL) != (self.tool_call is not None):
            raise ConfigurationError(
                "a ModelOutputItem has a tool_call exactly when its kind is tool_call"
            )


@dataclass(frozen=True)
class ModelUserText:
    """User text in the model input, stored provider-neutral."""

    text: str


@dataclass(frozen=True)
class ModelToolResult:
    """The result of one tool call in the model input, stored provider-neutral."""

    tool_call_id: str
    tool_name: str
    output: str


ModelInputItem = ModelUserText | ModelToolResult | ModelOutputItem
"""One item of the model input, in conversation order."""


@dataclass(frozen=True)
class ModelToolDefinition:
    """A tool offered to the model: its name, description, and JSON Schema of its arguments."""

    name: str
    description: str
    parameters: JsonSchema


@dataclass(frozen=True)
class ModelRequest:
    """The whole input of one model call.

    ``settings`` are the AgentDefinition's ``model_settings``, passed to the client as they are.
    """

    instructions: str
    input: tuple[ModelInputItem, ...]
    tools: tuple[ModelToolDefinition, ...] = ()
    settings: Mapping[str, JsonValue] = field(default_factory=dict)
    tool_choice: ModelToolChoice = ModelToolChoice.AUTO


@dataclass(frozen=True)
class ModelResponse:
    """What one model call returned: its output items in provider order, usage, and metadata.

    ``usage`` is this call's usage, with ``model_calls`` 1.

    The metadata fields name the session's ``chat`` span; leave them ``None`` when unknown.
    """

    items: tuple[ModelOutputItem, ...]
    usage: AgentUsage = field(default_factory=AgentUsage)
    request_model: str | None = None
    response_model: str | None = None
    provider_name: str | None = None
    response_id: str | None = None
    finish_reasons: tuple[str, ...] = ()

    @property
    def tool_calls(self) -> tuple[ModelToolCall, ...]:
        """The tool calls of the response, in model order."""
        return tuple(item.tool_call for item in self.items if item.tool_call is not None)

    @property
    def text(self) -> str:
        """The visible text of the response."""
        return "".join(
            item.text or "" for item in self.items if item.kind is ModelOutputItemKind.MESSAGE
        )


class ModelOutputWriter(Protocol):
    """Streams a model call's text and reasoning as they arrive.

    In ``RunModel`` this is the turn's ``AgentEventWriter``, which writes ``text_delta`` and
    ``reasoning_delta`` events. Writes are best effort and never fail the call.
    """

    def write_text_delta(self, text: str) -> None:
        """Writes a chunk of visible assistant text."""

    def write_reasoning_delta(self, text: str) -> None:
        """Writes a chunk of a provider-authored reasoning summary."""


@runtime_checkable
class ModelClient(Protocol):
    """Makes one model call per ``call_model``.

    A client makes one request per call with no retries of its own (``RunModel`` retries), sends
    the whole input every time with no provider-side conversation state, and returns every output
    item provider-exact.

    Example:
        >>> import asyncio
        >>> from dex_agents.stepwise import ScriptedModelClient, ScriptedModelReply
        >>> client: ModelClient = ScriptedModelClient(lambda request: ScriptedModelReply("Hi"))
        >>> request = ModelRequest(instructions="Be brief.", input=(ModelUserText("Hello"),))
        >>> asyncio.run(client.call_model(request, DiscardingModelOutputWriter())).text
        'Hi'
    """

    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        """Makes one model call, streaming text and reasoning to ``output``.

        Raises:
            Exception: Any error fails the ``RunModel`` attempt, which retries the call.
        """
        ...

    def estimate_input_tokens(self, request: ModelRequest) -> int:
        """Estimates the input tokens of ``request`` without I/O."""
        ...


class DiscardingModelOutputWriter:
    """A ModelOutputWriter that drops everything, for calling a client outside a turn."""

    def write_text_delta(self, text: str) -> None:
        """Drops the text."""

    def write_reasoning_delta(self, text: str) -> None:
        """Drops the reasoning."""


def replayable_input(request: ModelRequest, provider: str) -> tuple[ModelInputItem, ...]:
    """The request's input as a client for ``provider`` replays it.

    Items ``provider`` produced stay provider-exact. An item from another provider or API keeps
    only its neutral view: a message replays as its text and a tool call as its call, while
    reasoning and other provider-specific items are dropped.

    Example:
        >>> mine = ModelOutputItem("openai.responses", ModelOutputItemKind.REASONING, "{}")
        >>> theirs = ModelOutputItem("anthropic.messages", ModelOutputItemKind.REASONING, "{}")
        >>> request = ModelRequest("Be brief.", (ModelUserText("Hi"), mine, theirs))
        >>> [type(item).__name__ for item in replayable_input(request, "openai.responses")]
        ['ModelUserText', 'ModelOutputItem']
    """
    return tuple(
        item
        for item in request.input
        if not isinstance(item, ModelOutputItem)
        or item.provider == provider
        or item.kind in (ModelOutputItemKind.MESSAGE, ModelOutputItemKind.TOOL_CALL)
    )
