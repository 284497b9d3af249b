"""ScriptedChatModel: a LangChain chat model that answers from a function, with no provider."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from dex_agents import ConfigurationTypeError
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field

__all__ = ["ScriptedChatModel", "ScriptedResponse"]

ScriptedResponse: TypeAlias = Callable[[list[BaseMessage]], AIMessage | Awaitable[AIMessage]]
"""Computes the model's answer from its input messages, sync or async."""


class ScriptedChatModel(BaseChatModel):
    """A chat model whose answer a function computes from the input messages.

    Use it where a graph needs a model but no provider should answer: a local demo, a tutorial, a
    test. ``bind_tools`` keeps the tools (as OpenAI-format schemas, passed to nothing), so prebuilt
    agents accept it. Keep ``respond`` deterministic in its input: a crashed ``RunModel`` reruns it.
    Every call is recorded, for a test that checks what the model saw: its input messages in
    ``calls`` and the names of the tools it was offered in ``offered_tools``, oldest first.

    Example:
        >>> def respond(messages: list[BaseMessage]) -> AIMessage:
        ...     return AIMessage(content=f"Echo: {messages[-1].text}")
        >>> model = ScriptedChatModel(respond=respond)
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    respond: ScriptedResponse
    model_name: str = "scripted"
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    offered_tools: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "dex-agents-scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def bind_tools(
        self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind the tools' schemas, as a provider's chat model does; ``respond`` decides calls."""
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self._respond(messages, kwargs)
        if inspect.isawaitable(reply):
            close = getattr(reply, "close", None)
            if callable(close):
                close()
            raise ConfigurationTypeError(
                "an async respond function answers only async calls (ainvoke)"
            )
        return _result(reply)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self._respond(messages, kwargs)
        if inspect.isawaitable(reply):
            reply = await reply
        return _result(reply)

    def _respond(
        self, messages: list[BaseMessage], options: dict[str, Any]
    ) -> AIMessage | Awaitable[AIMessage]:
        self.calls.append(list(messages))
        self.offered_tools.append([tool["function"]["name"] for tool in options.get("tools", [])])
        return self.respond(list(messages))


def _result(reply: object) -> ChatResult:
    if not isinstance(reply, AIMessage):
        raise ConfigurationTypeError(f"respond returned {type(reply).__name__}, not an AIMessage")
    return ChatResult(generations=[ChatGeneration(message=reply)])
