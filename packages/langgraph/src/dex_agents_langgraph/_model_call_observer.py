"""What one ``RunModel`` learns from LangChain's callbacks: the model call, its usage and metadata.

The graph calls its chat model inside its own node, so the runner cannot wrap the call. A callback
handler on the run's config sees every chat model call the graph makes, in any node: it counts
them (a second one in one ``RunModel`` breaks the contract and is refused before it reaches the
provider), and reads the model's request name and provider from LangChain's tracing parameters
(``ls_model_name``, ``ls_provider``) and the usage, response ID, response model and finish reason
from the message the model returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from dex_agents import AgentUsage, ModelCallMetadata, RunnerContractError
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

__all__ = ["ModelCallObserver", "SecondModelCallError", "message_metadata", "message_usage"]


class SecondModelCallError(RunnerContractError):
    """The graph started a second chat model call in one ``RunModel``."""


class ModelCallObserver(AsyncCallbackHandler):
    """Counts the chat model calls of one graph run and keeps what the last one reported.

    Example:
        >>> observer = ModelCallObserver()
        >>> config = {"callbacks": [observer]}  # the run's config; see LangGraphRunner
    """

    raise_error = True
    run_inline = False

    def __init__(self) -> None:
        self.model_calls = 0
        self.request_model: str | None = None
        self.provider_name: str | None = None
        self.response: AIMessage | None = None
        self._node: str | None = None

    async def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        node = _node_of(metadata)
        if self.model_calls >= 1:
            raise SecondModelCallError(
                f"the graph started a second model call in one RunModel (node {node!r}, after "
                f"node {self._node!r}); dex-agents runs exactly one model call per RunModel Step, "
                "so a tool node must come between two model calls of a turn. Make summaries "
                "through the session's compaction policy, not a node that calls a model."
            )
        self.model_calls += 1
        self._node = node
        self.request_model = _text(metadata, "ls_model_name")
        self.provider_name = _text(metadata, "ls_provider")

    async def on_llm_end(
        self,
        response: LLMResult,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        for generations in response.generations:
            for generation in generations:
                if isinstance(generation, ChatGeneration) and isinstance(
                    generation.message, AIMessage
                ):
                    self.response = generation.message

    def usage(self) -> AgentUsage:
        """Usage of this run's model call; zero model calls when the graph made none."""
        if self.response is None:
            return AgentUsage(model_calls=self.model_calls)
        return message_usage(self.response, model_calls=self.model_calls)

    def metadata(self) -> ModelCallMetadata | None:
        """The call's model and response, or ``None`` when the graph made no model call."""
        if self.model_calls == 0:
            return None
        return message_metadata(
            self.response, request_model=self.request_model, provider_name=self.provider_name
        )


def message_usage(message: AIMessage, *, model_calls: int = 1) -> AgentUsage:
    """The usage LangChain reports on an AI message (``usage_metadata``), zero when it has none."""
    usage = message.usage_metadata
    if usage is None:
        return AgentUsage(model_calls=model_calls)
    input_details = usage.get("input_token_details") or {}
    output_details = usage.get("output_token_details") or {}
    return AgentUsage(
        input_tokens=usage.get("input_tokens", 0),
        output_tokens=usage.get("output_tokens", 0),
        cached_input_tokens=input_details.get("cache_read", 0) or 0,
        reasoning_tokens=output_details.get("reasoning", 0) or 0,
        model_calls=model_calls,
    )


def message_metadata(
    message: AIMessage | None,
    *,
    request_model: str | None = None,
    provider_name: str | None = None,
) -> ModelCallMetadata:
    """The ``ModelCallMetadata`` of one model call, from the AI message's response metadata."""
    metadata: Mapping[str, Any] = message.response_metadata if message is not None else {}
    finish = _text(metadata, "finish_reason") or _text(metadata, "stop_reason")
    return ModelCallMetadata(
        request_model=request_model,
        response_model=_text(metadata, "model_name") or _text(metadata, "model"),
        provider_name=_text(metadata, "model_provider") or provider_name,
        response_id=_text(metadata, "id") or _provider_message_id(message),
        finish_reasons=(finish,) if finish else (),
    )


def _provider_message_id(message: AIMessage | None) -> str | None:
    # LangChain names a message without a provider ID "lc_run--<run id>"; that is no response ID.
    if message is None or not message.id or message.id.startswith("lc_"):
        return None
    return message.id


def _node_of(metadata: Mapping[str, Any] | None) -> str | None:
    return _text(metadata, "langgraph_node")


def _text(mapping: Mapping[str, Any] | None, key: str) -> str | None:
    value = (mapping or {}).get(key)
    return value if isinstance(value, str) and value else None
