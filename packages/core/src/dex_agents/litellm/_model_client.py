"""LiteLLMModelClient: one model call per RunModel through LiteLLM.

OpenAI models without an ``api_base`` use the Responses API with ``store=False`` and
``include=["reasoning.encrypted_content"]``, so no conversation state lives at the provider and
encrypted reasoning replays unchanged; every other provider uses streaming Chat Completions,
keeping Anthropic ``thinking_blocks`` with their signature. Each output item is stored as the
provider's JSON and replayed unchanged to the same provider and API; an item from another provider
or API replays as its text and tool calls.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

import litellm

from dex_agents import (
    AgentUsage,
    ConfigurationError,
    ConfigurationTypeError,
    JsonValue,
    dump_json_text,
)
from dex_agents.stepwise import (
    ModelInputItem,
    ModelOutputItem,
    ModelOutputItemKind,
    ModelOutputWriter,
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    ModelToolChoice,
    ModelToolResult,
    ModelUserText,
    ScriptedModelClient,
    ScriptedModelReply,
    replayable_input,
)

__all__ = [
    "CHAT_COMPLETIONS_API",
    "RESPONSES_API",
    "ApiKeyProvider",
    "LiteLLMApi",
    "LiteLLMModelClient",
]

LiteLLMApi: TypeAlias = Literal["responses", "chat_completions"]
"""Which provider API a LiteLLMModelClient calls."""
RESPONSES_API: Final = "responses"
"""``api=`` for the Responses API, the default for ``openai/`` models without an ``api_base``."""
CHAT_COMPLETIONS_API: Final = "chat_completions"
"""``api=`` for streaming Chat Completions, the default for every other provider."""
ApiKeyProvider: TypeAlias = Callable[[], str | Awaitable[str]]
"""Returns the API key for each model call, on the Worker; never stored in Flow state."""

_FORCED_TOOL_CHOICE_REFUSERS: Final = re.compile(r"claude-(opus|sonnet)-5[-._]5", re.IGNORECASE)
_CLAUDE: Final = re.compile(r"claude|anthropic", re.IGNORECASE)
_CLAUDE_HOSTS: Final = frozenset({"bedrock", "bedrock_converse", "vertex_ai", "vertex_ai_beta"})
# ScriptedModelClient's estimate is the core's rule for a model call (three UTF-8 bytes per token
# over the instructions, the input and the tools); it never runs its script here.
_TOKEN_ESTIMATE: Final = ScriptedModelClient(lambda request: ScriptedModelReply())
_RESERVED_OPTIONS: Final = frozenset(
    {"model", "input", "messages", "tools", "tool_choice", "stream", "api_key", "api_base"}
)


def _usage_int(source: Any, *path: str) -> int:
    value = source
    for name in path:
        value = getattr(value, name, None) if not isinstance(value, Mapping) else value.get(name)
        if value is None:
            return 0
    return int(value) if isinstance(value, (int, float)) else 0


@dataclass(frozen=True)
class _Route:
    provider: str
    api: LiteLLMApi

    @property
    def item_provider(self) -> str:
        """The ``ModelOutputItem.provider`` of this route: provider and API."""
        return f"{self.provider}.{self.api}"


class LiteLLMModelClient:
    """A ModelClient on LiteLLM: the Responses API for OpenAI models, streaming Chat Completions
    for every other provider.

    It makes one request per call with no retries of its own (``RunModel`` retries), sends the
    whole input every time, streams text to ``text_delta`` and reasoning summaries to
    ``reasoning_delta`` events, and reports usage.

    Args:
        model: A LiteLLM model name, such as ``"openai/gpt-5-mini"`` or
            ``"anthropic/claude-sonnet-4-5"``.
        api: ``"responses"`` or ``"chat_completions"``; ``None`` picks the Responses API for models
            LiteLLM routes to OpenAI without an ``api_base``, and Chat Completions otherwise.
        api_base: The provider endpoint, for a proxy or a local server. An OpenAI-compatible
            server (vLLM, Ollama, llama.cpp, LM Studio, most gateways) speaks only Chat
            Completions, so an ``api_base`` implies it unless ``api`` says otherwise.
        api_key_provider: Returns the API key for each call; without it LiteLLM reads the
            Worker's environment (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...). Credentials never
            come from Flow input or Attributes.
        request_options: More LiteLLM arguments for every request, such as ``{"temperature": 0}``;
            ``ModelRequest.settings`` (the AgentDefinition's ``model_settings``) win over them.

    Raises:
        ConfigurationError: For a blank model, an unknown API, a model LiteLLM cannot route, or
            request options that set what the client sets (model, input, tools, the API key).

    Example:
        >>> from dex_agents.stepwise import AgentDefinition
        >>> model = LiteLLMModelClient("openai/gpt-5-mini")
        >>> agent = AgentDefinition(name="support", instructions="...", model=model)
        >>> model.api
        'responses'
    """

    def __init__(
        self,
        model: str,
        api: LiteLLMApi | None = None,
        api_base: str | None = None,
        api_key_provider: ApiKeyProvider | None = None,
        request_options: Mapping[str, JsonValue] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"LiteLLMModelClient needs a model name, got {model!r}")
        if api is not None and api not in (RESPONSES_API, CHAT_COMPLETIONS_API):
            raise ConfigurationError(
                f'LiteLLMModelClient api must be "responses", "chat_completions" or None, got {api!r}'
            )
        if api_key_provider is not None and not callable(api_key_provider):
            raise ConfigurationTypeError("LiteLLMModelClient api_key_provider must be callable")
        options = dict(request_options or {})
        reserved = sorted(set(options) & _RESERVED_OPTIONS)
        if reserved:
            raise ConfigurationError(
                f"LiteLLMModelClient request_options must not set {', '.join(reserved)}: the client "
                "sets them (pass api_base= and api_key_provider= for the endpoint and key)"
            )
        try:
            _, provider, _, _ = litellm.get_llm_provider(model, api_base=api_base)
        except Exception as error:
            raise ConfigurationError(
                f"LiteLLM cannot route model {model!r}: {error}. Name it with its provider, "
                'such as "openai/gpt-5-mini"'
            ) from error
        chosen: LiteLLMApi = api or (
            RESPONSES_API if provider == "openai" and api_base is None else CHAT_COMPLETIONS_API
        )
        self._model = model
        self._route = _Route(provider, chosen)
        self._api_base = api_base
        self._api_key_provider = api_key_provider
        self._request_options = options

    @property
    def model(self) -> str:
        """The LiteLLM model name."""
        return self._model

    @property
    def api(self) -> LiteLLMApi:
        """The provider API this client calls."""
        return self._route.api

    @property
    def provider(self) -> str:
        """The provider LiteLLM routes the model to, such as ``"openai"`` or ``"anthropic"``."""
        return self._route.provider

    @property
    def item_provider(self) -> str:
        """The ``provider`` of the items this client returns, such as ``"openai.responses"``."""
        return self._route.item_provider

    def supports_forced_tool_choice(self, settings: Mapping[str, object]) -> bool:
        """Whether the model accepts a forced tool choice with these settings.

        Claude Opus 5.5, Claude Sonnet 5.5 and Anthropic extended thinking refuse one. For a model
        LiteLLM routes to Anthropic, or to Claude on Bedrock or Vertex AI, a ``thinking`` option
        that is not disabled, or a ``reasoning_effort`` other than ``"none"``, counts as extended
        thinking. Gemini and OpenAI models accept a forced tool choice with thinking or reasoning.

        Example:
            >>> LiteLLMModelClient("anthropic/claude-sonnet-4-5").supports_forced_tool_choice(
            ...     {"thinking": {"type": "enabled", "budget_tokens": 2048}})
            False
        """
        if _FORCED_TOOL_CHOICE_REFUSERS.search(self._model):
            return False
        routes_to_claude = self.provider == "anthropic" or (
            self.provider in _CLAUDE_HOSTS and bool(_CLAUDE.search(self._model))
        )
        if not routes_to_claude:
            return True
        merged = {**self._request_options, **settings}
        thinking = merged.get("thinking")
        if thinking is not None and not (
            isinstance(thinking, Mapping) and thinking.get("type") == "disabled"
        ):
            return False
        effort = merged.get("reasoning_effort")
        return effort is None or effort == "none"

    def estimate_input_tokens(self, request: ModelRequest) -> int:
        """Three UTF-8 bytes per token over the instructions, the input and the tools."""
        return _TOKEN_ESTIMATE.estimate_input_tokens(request)

    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        """Makes one streaming request and returns its items provider-exact.

        Raises:
            Exception: Whatever LiteLLM raises for the request (a rate limit, a server error, a
                broken or malformed stream); ``RunModel`` retries the call.
        """
        arguments: dict[str, Any] = {
            **self._request_options,
            **dict(request.settings),
            "model": self._model,
            "stream": True,
            # One request per call: RunModel owns the retries.
            "num_retries": 0,
            "max_retries": 0,
        }
        if self._api_base is not None:
            arguments["api_base"] = self._api_base
        if self._api_key_provider is not None:
            key = self._api_key_provider()
            arguments["api_key"] = await key if inspect.isawaitable(key) else key
        items = replayable_input(request, self.item_provider)
        if self.api == RESPONSES_API:
            return await self._responses(request, items, arguments, output)
        return await self._chat_completions(request, items, arguments, output)

    async def _responses(
        self,
        request: ModelRequest,
        items: tuple[ModelInputItem, ...],
        arguments: dict[str, Any],
        output: ModelOutputWriter,
    ) -> ModelResponse:
        arguments.update(
            input=_responses_input(items, self.item_provider),
            store=False,
            include=["reasoning.encrypted_content"],
        )
        if request.instructions:
            arguments["instructions"] = request.instructions
        if request.tools:
            arguments["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.parameters),
                }
                for tool in request.tools
            ]
            arguments["tool_choice"] = _tool_choice(request.tool_choice)
        completed: Any = None
        # stream=True: LiteLLM returns its streaming iterator (typed as a union).
        stream: Any = await litellm.aresponses(**arguments)
        async for event in stream:
            raw_kind = getattr(event, "type", "")
            # LiteLLM types some events with a str Enum, whose str() is its member name.
            kind = str(getattr(raw_kind, "value", raw_kind))
            if kind.endswith("output_text.delta"):
                output.write_text_delta(str(getattr(event, "delta", "")))
            elif kind.endswith("reasoning_summary_text.delta"):
                output.write_reasoning_delta(str(getattr(event, "delta", "")))
            elif kind.endswith("response.completed"):
                completed = event.response
            elif kind.endswith(("response.failed", "response.incomplete", "error")):
                raise RuntimeError(f"the Responses stream of {self._model} ended with {kind}")
        if completed is None:
            raise RuntimeError(f"the Responses stream of {self._model} ended before it completed")
        result_items = tuple(_responses_item(item, self.item_provider) for item in completed.output)
        calls = any(item.kind is ModelOutputItemKind.TOOL_CALL for item in result_items)
        return self._response(
            completed,
            result_items,
            _usage(completed.usage, "input_tokens", "output_tokens"),
            ("tool_calls" if calls else "stop",),
        )

    async def _chat_completions(
        self,
        request: ModelRequest,
        items: tuple[ModelInputItem, ...],
        arguments: dict[str, Any],
        output: ModelOutputWriter,
    ) -> ModelResponse:
        messages = _chat_messages(request.instructions, items, self.item_provider)
        arguments.update(messages=messages, stream_options={"include_usage": True})
        if request.tools:
            arguments["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": dict(tool.parameters),
                    },
                }
                for tool in request.tools
            ]
            arguments["tool_choice"] = _tool_choice(request.tool_choice)
        chunks: list[Any] = []
        finished = False
        stream: Any = await litellm.acompletion(**arguments)
        async for chunk in stream:
            chunks.append(chunk)
            for streamed in getattr(chunk, "choices", None) or ():
                finished = finished or bool(getattr(streamed, "finish_reason", None))
                delta = streamed.delta
                if getattr(delta, "reasoning_content", None):
                    output.write_reasoning_delta(str(delta.reasoning_content))
                if getattr(delta, "content", None):
                    output.write_text_delta(str(delta.content))
        if not finished:
            # A broken or malformed stream can end quietly; its message may be incomplete.
            raise RuntimeError(
                f"the Chat Completions stream of {self._model} ended without a finish reason"
            )
        full = litellm.stream_chunk_builder(chunks, messages=messages)
        if full is None or not full.choices:
            raise RuntimeError(f"the Chat Completions stream of {self._model} had no message")
        choice: Any = full.choices[0]
        return self._response(
            full,
            _chat_items(choice.message, self.item_provider),
            _usage(getattr(full, "usage", None), "prompt_tokens", "completion_tokens"),
            (str(choice.finish_reason),) if choice.finish_reason else (),
        )

    def _response(
        self,
        completed: Any,
        items: tuple[ModelOutputItem, ...],
        usage: AgentUsage,
        finish_reasons: tuple[str, ...],
    ) -> ModelResponse:
        return ModelResponse(
            items=items,
            usage=usage,
            request_model=self._model,
            response_model=getattr(completed, "model", None),
            provider_name=self.provider,
            response_id=getattr(completed, "id", None),
            finish_reasons=finish_reasons,
        )


def _usage(usage: Any, input_field: str, output_field: str) -> AgentUsage:
    """This call's usage; the APIs name the same counts differently (``input_tokens`` and
    ``input_tokens_details``, or ``prompt_tokens`` and ``prompt_tokens_details``)."""
    return AgentUsage(
        input_tokens=_usage_int(usage, input_field),
        output_tokens=_usage_int(usage, output_field),
        cached_input_tokens=_usage_int(usage, f"{input_field}_details", "cached_tokens"),
        reasoning_tokens=_usage_int(usage, f"{output_field}_details", "reasoning_tokens"),
    )


def _tool_choice(choice: ModelToolChoice) -> str:
    return "required" if choice is ModelToolChoice.REQUIRED else "auto"


def _responses_input(items: tuple[ModelInputItem, ...], provider: str) -> list[dict[str, Any]]:
    converted: list[dict[str, Any]] = []
    for item in items:
        match item:
            case ModelUserText(text=text):
                converted.append(
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": text}],
                    }
                )
            case ModelToolResult(tool_call_id=call_id, output=result):
                converted.append(
                    {"type": "function_call_output", "call_id": call_id, "output": result}
                )
            case ModelOutputItem() if item.provider == provider:
                converted.append(json.loads(item.item))
            case ModelOutputItem(tool_call=ModelToolCall() as call):
                converted.append(
                    {
                        "type": "function_call",
                        "call_id": call.tool_call_id,
                        "name": call.tool_name,
                        "arguments": call.arguments,
                    }
                )
            case ModelOutputItem(text=text) if text:
                converted.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text}],
                    }
                )
    return converted


def _model_json(value: Any) -> dict[str, Any]:
    dumped = (
        value.model_dump(mode="json", exclude_none=True) if hasattr(value, "model_dump") else value
    )
    return dict(dumped)


def _responses_item(item: Any, provider: str) -> ModelOutputItem:
    payload = _model_json(item)
    text = dump_json_text(payload)
    kind = payload.get("type")
    if kind == "function_call":
        call = ModelToolCall(
            str(payload["call_id"]), str(payload["name"]), str(payload["arguments"])
        )
        return ModelOutputItem(provider, ModelOutputItemKind.TOOL_CALL, text, tool_call=call)
    if kind == "message":
        visible = "".join(
            str(part.get("text", ""))
            for part in payload.get("content", [])
            if isinstance(part, Mapping) and part.get("type") == "output_text"
        )
        return ModelOutputItem(provider, ModelOutputItemKind.MESSAGE, text, text=visible)
    if kind == "reasoning":
        return ModelOutputItem(provider, ModelOutputItemKind.REASONING, text)
    return ModelOutputItem(provider, ModelOutputItemKind.OTHER, text)


def _chat_items(message: Any, provider: str) -> tuple[ModelOutputItem, ...]:
    """One assistant message as items: its reasoning, its text, then each tool call."""
    payload = _model_json(message)
    items: list[ModelOutputItem] = []
    reasoning = {
        key: payload[key] for key in ("thinking_blocks", "reasoning_content") if payload.get(key)
    }
    if reasoning:
        items.append(
            ModelOutputItem(provider, ModelOutputItemKind.REASONING, dump_json_text(reasoning))
        )
    content = payload.get("content")
    if isinstance(content, str) and content:
        items.append(
            ModelOutputItem(
                provider,
                ModelOutputItemKind.MESSAGE,
                dump_json_text({"content": content}),
                text=content,
            )
        )
    for call in payload.get("tool_calls") or ():
        function = call.get("function") or {}
        tool_call = ModelToolCall(
            str(call.get("id")), str(function.get("name")), str(function.get("arguments") or "{}")
        )
        entry = {"id": tool_call.tool_call_id, "type": "function", "function": function}
        items.append(
            ModelOutputItem(
                provider, ModelOutputItemKind.TOOL_CALL, dump_json_text(entry), tool_call=tool_call
            )
        )
    if not items:
        # LiteLLM ends a broken or malformed stream with a finish reason of its own, so a
        # message with nothing in it is a failed call (RunModel retries it), not an answer.
        raise RuntimeError("the Chat Completions stream ended with an empty message")
    return tuple(items)


def _chat_messages(
    instructions: str, items: tuple[ModelInputItem, ...], provider: str
) -> list[dict[str, Any]]:
    """Chat messages; consecutive output items are one assistant message, as the model sent it."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    assistant: dict[str, Any] | None = None
    for item in items:
        if not isinstance(item, ModelOutputItem):
            assistant = None
            if isinstance(item, ModelUserText):
                messages.append({"role": "user", "content": item.text})
            else:
                messages.append(
                    {"role": "tool", "tool_call_id": item.tool_call_id, "content": item.output}
                )
            continue
        if assistant is None:
            assistant = {"role": "assistant", "content": None}
            messages.append(assistant)
        _add_to_assistant(assistant, item, provider)
    return messages


def _add_to_assistant(assistant: dict[str, Any], item: ModelOutputItem, provider: str) -> None:
    if item.tool_call is not None:
        if item.provider == provider:
            entry = json.loads(item.item)
        else:
            call = item.tool_call
            entry = {
                "id": call.tool_call_id,
                "type": "function",
                "function": {"name": call.tool_name, "arguments": call.arguments},
            }
        assistant.setdefault("tool_calls", []).append(entry)
        return
    if item.kind is ModelOutputItemKind.MESSAGE:
        text = json.loads(item.item).get("content") if item.provider == provider else item.text
        if text:
            assistant["content"] = (assistant["content"] or "") + str(text)
        return
    if item.provider == provider and item.kind is ModelOutputItemKind.REASONING:
        # Thinking blocks and their signatures go back exactly as the provider sent them.
        assistant.update(json.loads(item.item))
