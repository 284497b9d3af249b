"""The chat's agent: a Stepwise support agent whose scripted model streams its text word by word.

It looks orders up (a read tool), refunds them (a non-idempotent write that waits for approval),
and asks the user when it needs a choice (the built-in ``ask_user``). With a refund ledger
(``refund_ledger``), each refund is written there by its idempotency key and the refund tool
declares an outcome check against it, so a refund whose Worker died mid-call is confirmed after
the restart instead of recorded ``outcome_unknown``. No model key is needed: the
replies come from a script of the conversation, and the model writes them as text deltas a few
milliseconds apart, the way a provider streams, so the page shows live text.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Final

from dex_agents import (
    AgentSessionFlow,
    BuiltInTool,
    ToolEffect,
    ToolOutcomeCheck,
    ToolOutcomeCheckRequest,
    ToolOutcomeCheckResult,
)
from dex_agents.stepwise import (
    AgentDefinition,
    FunctionTool,
    ModelOutputWriter,
    ModelRequest,
    ModelResponse,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    ToolCallContext,
    function_tool,
    stepwise_agent_session_flow,
)

__all__ = [
    "DEFAULT_WORD_DELAY",
    "WEB_CHAT_FLOW_TYPE",
    "ModelPause",
    "RefundPause",
    "StreamingScriptedModel",
    "build_web_chat_flow",
    "web_chat_model_reply",
]

WEB_CHAT_FLOW_TYPE: Final = "WebChatSupportAgent"
DEFAULT_WORD_DELAY: Final = timedelta(milliseconds=30)
"""The pause between two streamed words."""

ModelPause = Callable[[ModelRequest], Awaitable[None]]
"""Awaited after a model call streamed its first word: a hook that holds a call (tests, demos)."""

RefundPause = Callable[[str], Awaitable[None]]
"""Awaited with the order ID after a refund was written to the ledger, before the tool returns: a
hook that holds a refund mid-call (tests)."""

_ORDERS: Final[dict[str, dict[str, str | int]]] = {
    "7": {"item": "a ceramic teapot", "status": "delivered", "total_cents": 2599},
    "8": {"item": "two espresso cups", "status": "in transit", "total_cents": 1850},
}
_GIFT_CHOICES: Final = ("teapot", "espresso cups")


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> dict[str, str | int]:
    """Look up an order by its ID."""
    order = _ORDERS.get(order_id)
    if order is None:
        return {"order_id": order_id, "status": "not found"}
    return {"order_id": order_id, **order}


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
async def refund_order(order_id: str, amount_cents: int, context: ToolCallContext) -> str:
    """Refund an order; a person approves each refund first."""
    return _refund_text(order_id, amount_cents, context.idempotency_key)


def _refund_text(order_id: str, amount_cents: int, idempotency_key: str) -> str:
    return (
        f"Refunded {amount_cents / 100:.2f} USD on order {order_id} "
        f"(idempotency key {idempotency_key})."
    )


def _ledger_refunds(ledger: Path) -> dict[str, str]:
    if not ledger.exists():
        return {}
    refunds: dict[str, str] = json.loads(ledger.read_text(encoding="utf-8"))
    return refunds


def _ledger_refund_tool(ledger: Path, pause: RefundPause | None) -> FunctionTool:
    """``refund_order`` writing each refund to ``ledger`` (a JSON object by idempotency key), with
    an outcome check that looks the refund up there."""

    def refund_applied(request: ToolOutcomeCheckRequest) -> ToolOutcomeCheckResult:
        text = _ledger_refunds(ledger).get(request.idempotency_key)
        if text is None:
            return ToolOutcomeCheckResult.not_applied("the ledger has no refund with this key")
        return ToolOutcomeCheckResult.applied(text)

    @function_tool(
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        name="refund_order",
        outcome_check=ToolOutcomeCheck(refund_applied, run_again_if_not_applied=True),
    )
    async def refund_with_ledger(order_id: str, amount_cents: int, context: ToolCallContext) -> str:
        """Refund an order; a person approves each refund first."""
        text = _refund_text(order_id, amount_cents, context.idempotency_key)
        refunds = _ledger_refunds(ledger)
        refunds.setdefault(context.idempotency_key, text)
        ledger.parent.mkdir(parents=True, exist_ok=True)
        ledger.write_text(json.dumps(refunds), encoding="utf-8")
        if pause is not None:
            await pause(order_id)
        return text

    return refund_with_ledger


def web_chat_model_reply(request: ModelRequest) -> ScriptedModelReply:
    """The scripted conversation.

    - A message naming an order number looks the order up and reports it.
    - A message asking for a refund looks the order up, then refunds it (approval needed).
    - A message about a gift asks the user to choose (``ask_user``), then confirms the choice.
    - Anything else is echoed.
    """
    user_text = ScriptedModelClient.user_texts(request)[-1]
    results = ScriptedModelClient.tool_results(request)
    lowered = user_text.lower()
    if "gift" in lowered:
        if not results:
            return ScriptedModelReply(
                text="Happy to help you choose a gift.",
                tool_calls=[
                    ScriptedToolCall(
                        "ask_user",
                        {
                            "question": "Which gift would you like?",
                            "choices": list(_GIFT_CHOICES),
                            "allows_free_text": True,
                        },
                    )
                ],
            )
        return ScriptedModelReply(text=f"Noted. {_describe_answer(results[-1].output)}")
    order_id = _order_id(user_text)
    if order_id is None:
        return ScriptedModelReply(text=f"You said: {user_text}")
    if not results:
        return ScriptedModelReply(
            text=f"Let me look up order {order_id}.",
            tool_calls=[ScriptedToolCall("lookup_order", {"order_id": order_id})],
        )
    if len(results) == 1 and "refund" in lowered:
        amount = _ORDERS.get(order_id, {}).get("total_cents", 0)
        return ScriptedModelReply(
            text=f"Order {order_id} is {_order_summary(results[0].output)}. "
            "I will refund it in full once you approve.",
            tool_calls=[
                ScriptedToolCall("refund_order", {"order_id": order_id, "amount_cents": amount})
            ],
        )
    if "refund" in lowered:
        return ScriptedModelReply(text=f"Refund result: {results[-1].output}")
    return ScriptedModelReply(text=f"Order {order_id} is {_order_summary(results[-1].output)}.")


class StreamingScriptedModel:
    """A ``ModelClient``: the script's replies, their text streamed one word per ``text_delta``.

    Args:
        pause: Awaited after the first word of every call, to hold the call at that point.
        word_delay: The pause between two words.

    Example:
        >>> model = StreamingScriptedModel(word_delay=timedelta(milliseconds=10))
    """

    def __init__(
        self, pause: ModelPause | None = None, word_delay: timedelta = DEFAULT_WORD_DELAY
    ) -> None:
        self._script = ScriptedModelClient(web_chat_model_reply)
        self._pause = pause
        self._word_delay = word_delay.total_seconds()

    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        """One scripted model call, its text streamed to ``output`` word by word."""
        buffered = _BufferedOutput()
        response = await self._script.call_model(request, buffered)
        for text in buffered.reasoning:
            output.write_reasoning_delta(text)
        for index, word in enumerate(_words("".join(buffered.text))):
            if index > 0:
                await asyncio.sleep(self._word_delay)
            output.write_text_delta(word)
            if index == 0 and self._pause is not None:
                await self._pause(request)
        return response

    def estimate_input_tokens(self, request: ModelRequest) -> int:
        """The scripted client's estimate."""
        return self._script.estimate_input_tokens(request)


def build_web_chat_flow(
    *,
    pause: ModelPause | None = None,
    word_delay: timedelta = DEFAULT_WORD_DELAY,
    refund_ledger: Path | None = None,
    refund_pause: RefundPause | None = None,
) -> AgentSessionFlow:
    """The chat's session Flow: the support agent with ``ask_user`` enabled.

    The web server and the Worker build the same Flow; only the Worker runs its model and tools,
    so only the Worker's ``pause``, ``refund_ledger`` and ``refund_pause`` matter. With
    ``refund_ledger``, refunds are written there and checked there after a lost attempt.
    """
    agent = AgentDefinition(
        name="support",
        instructions="You help customers with their orders.",
        model=StreamingScriptedModel(pause, word_delay),
        tools=[
            lookup_order,
            refund_order
            if refund_ledger is None
            else _ledger_refund_tool(refund_ledger, refund_pause),
        ],
        built_in_tools=frozenset({BuiltInTool.ASK_USER}),
    )
    return stepwise_agent_session_flow(agent, flow_type=WEB_CHAT_FLOW_TYPE)


class _BufferedOutput:
    """Collects what the script writes, so the model can stream it again word by word."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []

    def write_text_delta(self, text: str) -> None:
        self.text.append(text)

    def write_reasoning_delta(self, text: str) -> None:
        self.reasoning.append(text)


def _words(text: str) -> list[str]:
    """``text`` in chunks of one word each, the spaces kept, so the chunks join back to it."""
    return re.findall(r"\S+\s*|\s+", text)


def _order_id(text: str) -> str | None:
    match = re.search(r"\b(\d+)\b", text)
    return match.group(1) if match else None


def _order_summary(output: str) -> str:
    try:
        order = json.loads(output)
    except json.JSONDecodeError:
        return output
    if not isinstance(order, dict) or "item" not in order:
        return str(order.get("status", output)) if isinstance(order, dict) else output
    return f"{order['item']}, {order['status']}"


def _describe_answer(output: str) -> str:
    try:
        result = json.loads(output)
    except json.JSONDecodeError:
        return output
    if isinstance(result, dict) and result.get("status") == "answered":
        return f"You chose: {result.get('answer')}."
    return output
