"""``ScriptedModel``: a Strands ``Model`` whose replies come from a function (no provider, no key).

The reply function gets each call's ``ModelCall`` (messages, tool specs, system prompt) and returns
the assistant ``Message``; the model streams it back as a provider does (message start, one delta
per text block, the tool input JSON of each ``toolUse`` block, message stop, usage metadata), so
Strands' own stream processing builds the message exactly as it does for Bedrock or OpenAI.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from dex_agents import estimate_text_tokens
from pydantic import BaseModel
from strands.models import Model
from strands.types.content import Message, Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolResult, ToolSpec

__all__ = ["ModelCall", "ReplyFunction", "ScriptedModel", "text_reply", "tool_use_reply"]

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class ModelCall:
    """What one model call sends: the messages, the offered tool specs and the system prompt.

    Example:
        >>> call.last_user_text(), call.model_call_index(), call.tool_outputs()
        ('Where is order 7?', 2, ('shipped',))
    """

    messages: Messages
    tool_specs: tuple[ToolSpec, ...]
    system_prompt: str | None

    def _turn_start(self) -> int:
        """Index of the last message with a user text block (this turn's request)."""
        return max(
            (
                index
                for index, message in enumerate(self.messages)
                if message["role"] == "user" and any("text" in b for b in message["content"])
            ),
            default=-1,
        )

    def user_texts(self) -> list[str]:
        """Every user text block, oldest first."""
        return [
            block["text"]
            for message in self.messages
            if message["role"] == "user"
            for block in message["content"]
            if "text" in block
        ]

    def last_user_text(self) -> str:
        """The last user text block: the turn's request."""
        texts = self.user_texts()
        return texts[-1] if texts else ""

    def model_call_index(self) -> int:
        """The index of this call within the turn, from 1."""
        later = self.messages[self._turn_start() + 1 :]
        return 1 + sum(message["role"] == "assistant" for message in later)

    def tool_results(self) -> tuple[ToolResult, ...]:
        """The turn's tool results so far, in order."""
        later = self.messages[self._turn_start() + 1 :]
        return tuple(
            block["toolResult"]
            for message in later
            for block in message["content"]
            if "toolResult" in block
        )

    def tool_outputs(self) -> tuple[str, ...]:
        """The turn's tool results so far as the model reads them."""
        return tuple(
            "\n".join(
                block.get("text") or json.dumps(block.get("json")) for block in result["content"]
            )
            for result in self.tool_results()
        )

    def input_tokens(self) -> int:
        """The call's input in the core's token unit: system prompt, tool specs, message blocks."""
        texts = [self.system_prompt or "", json.dumps(list(self.tool_specs))]
        texts.extend(
            json.dumps(block, default=str) if "text" not in block else block["text"]
            for message in self.messages
            for block in message["content"]
        )
        return sum(estimate_text_tokens(text) for text in texts)


ReplyFunction = Callable[[ModelCall], "Message | Awaitable[Message]"]
"""Answers one model call with the assistant message."""


def text_reply(text: str) -> Message:
    """An assistant message with one text block.

    Example:
        >>> text_reply("Done.")
        {'role': 'assistant', 'content': [{'text': 'Done.'}]}
    """
    return {"role": "assistant", "content": [{"text": text}]}


def tool_use_reply(tool_use_id: str, name: str, arguments: dict[str, Any]) -> Message:
    """An assistant message that calls one tool.

    Example:
        >>> tool_use_reply("call-1", "lookup_order", {"order_id": "7"})["content"][0]["toolUse"]["name"]
        'lookup_order'
    """
    return {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": tool_use_id, "name": name, "input": arguments}}],
    }


class ScriptedModel(Model):
    """A Strands model answering with ``reply``, streamed like a provider's answer.

    Args:
        reply: The reply function, sync or async.
        model_id: The name the model reports (``get_config()["model_id"]``).

    Example:
        >>> model = ScriptedModel(lambda call: text_reply(f"Echo: {call.last_user_text()}"))
        >>> agent = Agent(model=model, callback_handler=None)
    """

    def __init__(self, reply: ReplyFunction, *, model_id: str = "scripted") -> None:
        self._reply = reply
        self._config: dict[str, Any] = {"model_id": model_id}

    def update_config(self, **model_config: Any) -> None:
        """Updates the configuration (only ``model_id`` means anything here)."""
        self._config.update(model_config)

    def get_config(self) -> dict[str, Any]:
        """The configuration: ``{"model_id": ...}``."""
        return dict(self._config)

    async def structured_output(
        self,
        output_model: type[T],
        prompt: Messages,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        """The reply's text parsed as ``output_model`` JSON.

        Raises:
            pydantic.ValidationError: When the text is not such JSON.
        """
        message = await self._answer(ModelCall(list(prompt), (), system_prompt))
        text = "".join(block.get("text", "") for block in message["content"])
        yield {"output": output_model.model_validate_json(text)}

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        """Stream the reply to this call."""
        call = ModelCall(list(messages), tuple(tool_specs or ()), system_prompt)
        message = await self._answer(call)
        async for event in _stream_events(message, call.input_tokens()):
            yield event

    async def _answer(self, call: ModelCall) -> Message:
        message = self._reply(call)
        if inspect.isawaitable(message):
            message = await message
        return message


async def _stream_events(message: Message, input_tokens: int) -> AsyncIterable[StreamEvent]:
    yield {"messageStart": {"role": "assistant"}}
    output_tokens = 0
    has_tool_use = False
    for block in message["content"]:
        if "text" in block:
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": block["text"]}}}
            output_tokens += estimate_text_tokens(block["text"])
        elif "toolUse" in block:
            has_tool_use = True
            use = block["toolUse"]
            arguments = json.dumps(use.get("input", {}))
            yield {
                "contentBlockStart": {
                    "start": {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
                }
            }
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": arguments}}}}
            output_tokens += estimate_text_tokens(arguments)
        else:
            continue
        yield {"contentBlockStop": {}}
    yield {"messageStop": {"stopReason": "tool_use" if has_tool_use else "end_turn"}}
    yield {
        "metadata": {
            "usage": {
                "inputTokens": input_tokens,
                "outputTokens": output_tokens,
                "totalTokens": input_tokens + output_tokens,
            },
            "metrics": {"latencyMs": 0},
        }
    }
