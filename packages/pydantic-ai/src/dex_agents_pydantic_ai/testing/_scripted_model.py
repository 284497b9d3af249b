"""Scripted models for the shared scenarios, built on Pydantic AI's own ``FunctionModel``.

A script answers each request with a whole ``ModelResponse``; the model streams it back through
``FunctionModel``'s ``stream_function`` (text as one chunk, each tool call as one delta), so the
agent's streamed graph runs exactly as with a provider.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from dex_agents import estimate_text_tokens
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_core import to_json

__all__ = ["TurnView", "measured_input_tokens", "scripted_function_model", "turn_view"]

Script = Callable[[list[ModelMessage], AgentInfo], Awaitable[ModelResponse]]


def scripted_function_model(
    script: Script, *, model_name: str, stream: bool = True
) -> FunctionModel:
    """A ``FunctionModel`` that answers with ``script``, streamed or not; with ``stream=False`` it
    is a model that cannot stream (no ``stream_function``)."""

    async def stream_parts(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        response = await script(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {
                    index: DeltaToolCall(
                        name=part.tool_name,
                        json_args=part.args_as_json_str(),
                        tool_call_id=part.tool_call_id,
                    )
                }

    if not stream:
        return FunctionModel(script, model_name=model_name)
    return FunctionModel(script, stream_function=stream_parts, model_name=model_name)


@dataclass(frozen=True)
class TurnView:
    """What a script reads from a request: the turn's user text, the index of this model call in
    the turn (from 1), the tool results the turn got so far, in order, and every user text of the
    request, oldest first (a ``ScenarioModelCall`` of ``dex_agents.testing.scenarios``)."""

    user_text: str
    model_call_index: int
    tool_returns: tuple[ToolReturnPart, ...]
    user_texts: tuple[str, ...]

    @property
    def tool_outputs(self) -> tuple[str, ...]:
        """Each result as the model reads it."""
        return tuple(part.model_response_str() for part in self.tool_returns)


def turn_view(messages: Sequence[ModelMessage]) -> TurnView:
    """Read the current turn from a request's messages: everything after its last user text."""
    last_user = max(
        (
            index
            for index, message in enumerate(messages)
            if isinstance(message, ModelRequest)
            and any(isinstance(part, UserPromptPart) for part in message.parts)
        ),
        default=-1,
    )
    user_text = ""
    if last_user >= 0:
        prompts = [part for part in messages[last_user].parts if isinstance(part, UserPromptPart)]
        content = prompts[-1].content
        user_text = content if isinstance(content, str) else ""
    later = messages[last_user + 1 :]
    return TurnView(
        user_text=user_text,
        model_call_index=1 + sum(isinstance(message, ModelResponse) for message in later),
        tool_returns=tuple(
            part
            for message in later
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ),
        user_texts=tuple(
            part.content
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, UserPromptPart) and isinstance(part.content, str)
        ),
    )


def measured_input_tokens(messages: Sequence[ModelMessage], info: AgentInfo) -> int:
    """The model-visible input of a request in the core's token unit: instructions, tool
    definitions, and each part's text, arguments or result (no JSON envelope)."""
    texts = [info.instructions or ""]
    texts.append(
        to_json(
            [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters_json_schema,
                }
                for tool in [*info.function_tools, *info.output_tools]
            ]
        ).decode()
    )
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart | TextPart) and isinstance(part.content, str):
                texts.append(part.content)
            elif isinstance(part, ToolCallPart):
                texts.append(part.tool_name + part.args_as_json_str())
            elif isinstance(part, ToolReturnPart):
                texts.append(part.model_response_str())
            elif hasattr(part, "content") and isinstance(part.content, str):
                texts.append(part.content)
    return sum(estimate_text_tokens(text) for text in texts)
