"""The benchmark agent of ``adapter_turns.py``, one module per runner.

Each module here is named after its runner (``-`` becomes ``_``: ``openai_agents.py`` for
``--framework openai-agents``) and defines
``build_benchmark_agent(model_latency_seconds: float) -> BenchmarkAgent``: the same small agent in
that framework. Its model sleeps ``model_latency_seconds`` (``asyncio.sleep``) on every call; the
first call asks for ``lookup_order`` with ``{"order_id": "7"}``, a READ tool that returns
:func:`lookup_order_result`, and the second answers with text that starts with
:data:`FINAL_PREFIX`. So one turn is two model calls and one tool call.

A module may also take ``shape=TurnShape.READ_WRITE`` (``peers.py`` uses it): after the lookup the
model asks for ``add_order_note``, a non-idempotent WRITE tool that needs no approval, and then
answers; three model calls and two tool calls. :func:`next_model_action` is that script, the same
in every framework.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy

__all__ = [
    "FINAL_PREFIX",
    "LOOKUP_TOOL",
    "NOTE_TEXT",
    "NOTE_TOOL",
    "ORDER",
    "USER_TEXT",
    "BenchmarkAgent",
    "ToolRequest",
    "TurnShape",
    "add_order_note_result",
    "benchmark_session_options",
    "final_answer",
    "lookup_order_result",
    "next_model_action",
]

USER_TEXT: Final = "Where is order 7?"
"""The user message of every benchmark turn."""

ORDER: Final = {"order_id": "7", "item": "teapot", "status": "shipped"}
FINAL_PREFIX: Final = "Order 7: "
"""Every final answer starts with this, so both sides check that the turn really completed."""


def lookup_order_result(order_id: str) -> dict[str, str]:
    """What ``lookup_order`` returns.

    Raises:
        KeyError: For any order but 7.
    """
    if order_id != ORDER["order_id"]:
        raise KeyError(order_id)
    return dict(ORDER)


def final_answer(tool_output: str) -> str:
    """The model's final answer, given the tool's output text."""
    return FINAL_PREFIX + tool_output


class TurnShape(StrEnum):
    """Which tools one benchmark turn calls."""

    READ = "read"
    """``lookup_order``, then the answer: two model calls, one tool call."""
    READ_WRITE = "read-write"
    """``lookup_order``, then ``add_order_note``, then the answer: three model calls, two tools."""


LOOKUP_TOOL: Final = "lookup_order"
NOTE_TOOL: Final = "add_order_note"
"""The WRITE tool of a ``READ_WRITE`` turn; frameworks mark it non-idempotent, without approval."""
NOTE_TEXT: Final = "customer asked where it is"


def add_order_note_result(order_id: str, note: str) -> dict[str, str]:
    """What ``add_order_note`` returns (the benchmark keeps no notes: the write is the call).

    Raises:
        KeyError: For any order but 7.
    """
    if order_id != ORDER["order_id"]:
        raise KeyError(order_id)
    return {"order_id": order_id, "note": note, "status": "noted"}


def benchmark_session_options(shape: TurnShape) -> AgentSessionOptions:
    """The session options of a framework whose tools carry no effect of their own: the turn's
    tools' policies, ``lookup_order`` a READ and ``add_order_note`` (``READ_WRITE``) a
    non-idempotent WRITE that needs no approval."""
    policies = {LOOKUP_TOOL: ToolPolicy(ToolEffect.READ)}
    if shape is TurnShape.READ_WRITE:
        policies[NOTE_TOOL] = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
    return AgentSessionOptions(tool_policies=policies)


@dataclass(frozen=True)
class ToolRequest:
    """A tool call the benchmark model asks for."""

    name: str
    arguments: dict[str, str]
    call_id: str


def next_model_action(shape: TurnShape, tool_outputs: Sequence[str]) -> ToolRequest | str:
    """The benchmark model's next move, given the tool outputs of this turn so far, in order.

    Returns:
        The next tool call, or the final answer's text once every tool of ``shape`` answered.
    """
    plan = [ToolRequest(LOOKUP_TOOL, {"order_id": ORDER["order_id"]}, "lookup_1")]
    if shape is TurnShape.READ_WRITE:
        plan.append(
            ToolRequest(NOTE_TOOL, {"order_id": ORDER["order_id"], "note": NOTE_TEXT}, "note_1")
        )
    if len(tool_outputs) < len(plan):
        return plan[len(tool_outputs)]
    return final_answer(tool_outputs[0])


@dataclass(frozen=True)
class BenchmarkAgent:
    """One runner's benchmark agent.

    Attributes:
        flow: The durable agent, the same Flow type in the client and the Worker child.
        run_in_process: Runs one turn of the same agent directly in the framework, with no Dex,
            and returns the final answer's text.
    """

    flow: AgentSessionFlow
    run_in_process: Callable[[str], Awaitable[str]]
