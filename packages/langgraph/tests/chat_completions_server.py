"""The local OpenAI Chat Completions server of the LangGraph and Strands provider tests.

It answers from the request alone, so a retried request gets the same answer: a request whose last
message is a tool result (or that offers no tool) gets a text answer naming the results; any other
request gets one call of the first offered tool. Every request body is kept for assertions.
"""

from __future__ import annotations

import json
from typing import Any

from dex_agents.testing import ChatCompletionReply, ChatCompletionsServer

MODEL = "gpt-local-test"
RESPONSE_MODEL = "gpt-local-test-2026-11-01"
USAGE = {
    "prompt_tokens": 40,
    "completion_tokens": 9,
    "total_tokens": 49,
    "prompt_tokens_details": {"cached_tokens": 8},
    "completion_tokens_details": {"reasoning_tokens": 2},
}


def chat_completions_server() -> ChatCompletionsServer:
    """The server (use it in a ``with`` block), answering as the module docstring says."""
    return ChatCompletionsServer(_answer, response_model=RESPONSE_MODEL, usage=USAGE)


def _answer(body: dict[str, Any]) -> ChatCompletionReply:
    messages = body["messages"]
    if messages[-1]["role"] == "tool" or not body.get("tools"):
        results = [m["content"] for m in messages if m["role"] == "tool"]
        return ChatCompletionReply(
            text="Answer: " + "; ".join(results) if results else "Summary: nothing much."
        )
    tool = body["tools"][0]["function"]
    arguments = json.dumps({"order_id": "7"})
    return ChatCompletionReply(tool_calls=((f"call_{len(messages)}", tool["name"], arguments),))
