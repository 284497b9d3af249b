"""The benchmark agent of ``adapter_turns.py``, one module per runner.

Each module here is named after its runner (``-`` becomes ``_``: ``openai_agents.py`` for
``--framework openai-agents``) and defines
``build_benchmark_agent(model_latency_seconds: float) -> BenchmarkAgent``: the same small agent in
that framework. Its model sleeps ``model_latency_seconds`` (``asyncio.sleep``) on every call; the
first call asks for ``lookup_order`` with ``{"order_id": "7"}``, a READ tool that returns
:func:`lookup_order_result`, and the second answers with text that starts with
:data:`FINAL_PREFIX`. So one turn is two model calls and one tool call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from dex_agents import AgentSessionFlow

__all__ = [
    "FINAL_PREFIX",
    "ORDER",
    "USER_TEXT",
    "BenchmarkAgent",
    "final_answer",
    "lookup_order_result",
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
