"""``ReplyFunctionModel``, the scripted SDK ``Model`` of ``dex_agents_openai_agents.testing`` (whose
docstring has the example): each call asks the reply function for the response's output items,
then lets the SDK's own ``agents.testing.ScriptedModel`` turn them into the response and its
stream events (text deltas included).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from agents import Model, ModelResponse, Usage
from agents.items import TResponseOutputItem, TResponseStreamEvent
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from dex_agents import JsonObject, dump_json_text, estimate_text_tokens

__all__ = [
    "ModelCallInput",
    "ReplyFunction",
    "ReplyFunctionModel",
    "assistant_message",
    "function_call",
]


@dataclass(frozen=True)
class ModelCallInput:
    """What one model call received, as the SDK passed it to the ``Model``.

    Attributes:
        system_instructions: The agent's instructions for this call.
        items: The input items (Responses format).
        tool_names: The names of the offered tools and handoffs.
    """

    system_instructions: str | None
    items: tuple[JsonObject, ...]
    tool_names: tuple[str, ...]

    def last_user_index(self) -> int:
        """Index of the last user message, ``-1`` when there is none."""
        return max(
            (index for index, item in enumerate(self.items) if item.get("role") == "user"),
            default=-1,
        )

    def last_user_text(self) -> str:
        """The text of the last user message, ``""`` when there is none."""
        index = self.last_user_index()
        return _item_text(self.items[index]) if index >= 0 else ""

    def user_texts(self) -> list[str]:
        """The text of every user message, oldest first."""
        return [_item_text(item) for item in self.items if item.get("role") == "user"]

    def tool_outputs_since_user(self) -> list[str]:
        """The outputs of ``function_call_output`` items after the last user message, in order."""
        return [
            str(item.get("output"))
            for item in self.items[self.last_user_index() + 1 :]
            if item.get("type") == "function_call_output"
        ]

    def responses_since_user(self) -> int:
        """How many model responses the input holds after the last user message."""
        runs, previous = 0, False
        for item in self.items[self.last_user_index() + 1 :]:
            output = item.get("role") == "assistant" or item.get("type") in (
                "function_call",
                "reasoning",
            )
            runs += output and not previous
            previous = output
        return runs

    def estimated_tokens(self) -> int:
        """Three UTF-8 bytes per token over the instructions, the items and the tool names."""
        text = dump_json_text([self.system_instructions, list(self.items), list(self.tool_names)])
        return estimate_text_tokens(text)


ReplyFunction = Callable[[ModelCallInput], Awaitable[Sequence[TResponseOutputItem]]]
"""Answers one model call with the response's output items."""


class ReplyFunctionModel(Model):
    """An ``agents.Model`` that answers each call with ``reply(call)``.

    Usage reports the estimated input tokens of the call and one output token per three bytes of
    the output, so usage and spend figures move with the conversation.

    Args:
        reply: The function that answers each call.
        model: The model name the call reports, such as in ``ModelCallMetadata.request_model``.
    """

    def __init__(self, reply: ReplyFunction, *, model: str = "reply-function") -> None:
        self._reply = reply
        self.model = model

    # The SDK's ``Model`` methods take many arguments; each call passes them all on unchanged to a
    # one-step ``ScriptedModel`` whose step asks ``reply`` (``ModelStep.respond``).
    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """Answers through ``ScriptedModel.get_response``."""
        return await self._scripted().get_response(*args, **kwargs)

    async def stream_response(
        self, *args: Any, **kwargs: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        """Streams through ``ScriptedModel.stream_response``."""
        async for event in self._scripted().stream_response(*args, **kwargs):
            yield event

    def _scripted(self) -> ScriptedModel:
        return ScriptedModel([ModelStep.respond(self._step)])

    async def _step(self, model_call: ModelCall) -> ModelStep:
        input = model_call.input
        items: tuple[JsonObject, ...] = (
            ({"role": "user", "content": input},)
            if isinstance(input, str)
            else tuple(cast(JsonObject, item) for item in input)
        )
        call = ModelCallInput(
            model_call.system_instructions,
            items,
            (
                *(tool.name for tool in model_call.tools),
                *(handoff.tool_name for handoff in model_call.handoffs),
            ),
        )
        output = list(await self._reply(call))
        output_tokens = estimate_text_tokens(
            dump_json_text([item.model_dump(mode="json") for item in output])
        )
        input_tokens = call.estimated_tokens()
        usage = Usage(
            requests=1,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
        )
        return ModelStep(output=output, usage=usage, response_id=f"resp-{self.model}")


def _item_text(item: JsonObject) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(part.get("text", "")) for part in parts if isinstance(part, dict))
