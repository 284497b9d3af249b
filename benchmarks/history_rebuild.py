"""Benchmark: what one model call of the Pydantic AI, LangGraph, OpenAI Agents and Strands
runners pays to rebuild the framework's history from the stored messages of a long session, in
one process.

Every ``RunModel`` of these runners rebuilds the whole history from the stored items; each item is
decoded once per process (``KeptDecodes``) and every call gets its own copy. This times that
rebuild (Pydantic AI's ``decode_history``, the LangGraph runner's ``langchain_message`` for every
stored message, and that with ``pending_tool_calls``, which pairs the open calls as every
LangGraph model call does, the OpenAI Agents runner's ``read_transcript``, the Strands runner's
``decode_messages``) for a session of ``--turns`` read turns (user message, tool call, tool
result, answer: four stored messages a turn), after one warm-up rebuild that decodes every item.

Compare revisions by running it with each revision's packages first on the path::

    PYTHONPATH=$(ls -d BEFORE_WORKTREE/packages/*/src | paste -sd:) \\
        uv run python benchmarks/history_rebuild.py --turns 100
    uv run python benchmarks/history_rebuild.py --turns 100
"""

from __future__ import annotations

import argparse
import functools
import timeit
from collections.abc import Callable

from dex_agents import AgentMessage, FrameworkMessage
from dex_agents_langgraph import _transcript as langgraph_transcript
from dex_agents_openai_agents import _transcript as openai_agents_transcript
from dex_agents_pydantic_ai import _transcript as pydantic_ai_transcript
from dex_agents_strands import _transcript as strands_transcript
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.usage import RequestUsage


def _pydantic_ai_session(turns: int) -> list[FrameworkMessage]:
    stored: list[FrameworkMessage] = []
    for n in range(turns):
        stored.append(pydantic_ai_transcript.user_message(f"What is the status of order {n}?"))
        call = ToolCallPart("lookup_order", {"order_id": str(n)}, tool_call_id=f"call_{n}")
        stored.extend(
            pydantic_ai_transcript.encode_messages(
                [
                    ModelResponse(parts=[call], usage=RequestUsage(input_tokens=100 + n)),
                    ModelRequest(
                        parts=[
                            ToolReturnPart(
                                "lookup_order", f"order {n}", tool_call_id=call.tool_call_id
                            )
                        ]
                    ),
                    ModelResponse(
                        parts=[TextPart(f"Order {n} shipped.")],
                        usage=RequestUsage(input_tokens=150 + n),
                    ),
                ]
            )
        )
    return stored


def _langgraph_session(turns: int) -> list[FrameworkMessage]:
    messages: list[BaseMessage] = []
    for n in range(turns):
        call = {"name": "lookup_order", "args": {"order_id": str(n)}, "id": f"call_{n}"}
        messages += [
            HumanMessage(f"What is the status of order {n}?"),
            AIMessage(
                "",
                tool_calls=[call],
                usage_metadata={"input_tokens": 10, "output_tokens": 3, "total_tokens": 13},
            ),
            ToolMessage(f"order {n}", tool_call_id=call["id"]),
            AIMessage(f"Order {n} shipped."),
        ]
    return [langgraph_transcript.framework_message(message) for message in messages]


def _openai_agents_session(turns: int) -> list[FrameworkMessage]:
    stored: list[FrameworkMessage] = []
    agent = "Orders"
    for n in range(turns):
        call_id = f"call_{n}"
        call = {
            "type": "function_call",
            "call_id": call_id,
            "name": "lookup_order",
            "arguments": f'{{"order_id": "{n}"}}',
            "id": f"fc_{n}",
            "status": "completed",
        }
        answer = {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{n}",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"Order {n} shipped.", "annotations": []}],
        }
        stored += [
            openai_agents_transcript.stored_message(
                openai_agents_transcript.user_message_item(f"What is the status of order {n}?"),
                None,
            ),
            openai_agents_transcript.stored_message(call, agent),
            openai_agents_transcript.stored_message(
                openai_agents_transcript.function_call_output_item(call_id, f"order {n}"),
                agent,
                tool_name="lookup_order",
            ),
            openai_agents_transcript.stored_message(answer, agent),
        ]
    return stored


def _strands_session(turns: int) -> list[FrameworkMessage]:
    stored: list[FrameworkMessage] = []
    for n in range(turns):
        use = {"toolUseId": f"call_{n}", "name": "lookup_order", "input": {"order_id": str(n)}}
        result = {
            "toolUseId": f"call_{n}",
            "status": "success",
            "content": [{"text": f"order {n}"}],
        }
        stored += [
            strands_transcript.user_message(f"What is the status of order {n}?"),
            *strands_transcript.encode_message(
                {"role": "assistant", "content": [{"toolUse": use}]}
            ),
            *strands_transcript.encode_message(
                {"role": "user", "content": [{"toolResult": result}]}
            ),
            *strands_transcript.encode_message(
                {"role": "assistant", "content": [{"text": f"Order {n} shipped."}]}
            ),
        ]
    return stored


def _stored(messages: list[FrameworkMessage]) -> list[AgentMessage]:
    return [
        AgentMessage.from_framework_message(
            message, sequence=index + 1, turn_id=f"turn-{index // 4}", created_at=None
        )
        for index, message in enumerate(messages)
    ]


def _best_ms(rebuild: Callable[[], object], rounds: int) -> float:
    rebuild()  # validates every item once, as the first RunModel of a Worker does
    return min(timeit.repeat(rebuild, number=rounds, repeat=7)) / rounds * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--turns", type=int, default=100, help="read turns in the session (default 100)"
    )
    parser.add_argument("--rounds", type=int, default=20, help="rebuilds per timing (default 20)")
    args = parser.parse_args()
    rebuilds: list[tuple[str, list[AgentMessage], Callable[[list[AgentMessage]], object]]] = [
        (
            "pydantic-ai decode_history",
            _stored(_pydantic_ai_session(args.turns)),
            pydantic_ai_transcript.decode_history,
        ),
        (
            "langgraph langchain_message",
            _stored(_langgraph_session(args.turns)),
            lambda stored: [langgraph_transcript.langchain_message(m) for m in stored],
        ),
        (
            "langgraph + pending_tool_calls",
            _stored(_langgraph_session(args.turns)),
            lambda stored: langgraph_transcript.pending_tool_calls(
                [langgraph_transcript.langchain_message(m) for m in stored], len(stored)
            ),
        ),
        (
            "openai-agents read_transcript",
            _stored(_openai_agents_session(args.turns)),
            lambda stored: openai_agents_transcript.read_transcript(stored, stored[-1].turn_id),
        ),
        (
            "strands decode_messages",
            _stored(_strands_session(args.turns)),
            strands_transcript.decode_messages,
        ),
    ]
    print(f"history_rebuild: {args.turns} turns, best of 7 x {args.rounds} rebuilds")
    for name, stored, rebuild in rebuilds:
        milliseconds = _best_ms(functools.partial(rebuild, stored), args.rounds)
        print(f"{name:30} {len(stored):4} stored messages {milliseconds:6.2f} ms a model call")


if __name__ == "__main__":
    main()
