"""The smallest adapter of "Writing an adapter" (docs/writing-an-adapter.md) runs as written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agent_session_test_support import running_session_stack
from dex_agents import MessageRole
from dex_agents.testing import turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "writing-an-adapter.md"


def _tiny_runner_class() -> Any:
    (block,) = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    namespace: dict[str, Any] = {"__name__": "writing_an_adapter"}
    exec(compile(block, str(GUIDE), "exec"), namespace)
    return namespace["TinyRunner"]


def _model(text: str, results: list[str]) -> str | tuple[str, dict[str, object]]:
    if text.startswith("call "):
        name, _, order_id = text.removeprefix("call ").partition(" ")
        return (name, {"order_id": order_id})
    return f"Echo: {text}"


async def test_the_guide_s_runner_chats_and_calls_tools_with_the_kit_s_outcomes(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = _tiny_runner_class()(_model, {"lookup": lambda order_id: f"order {order_id} shipped"})
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        await stack.sessions.start_session("tiny", "hello")
        await wait_for_agent_snapshot(stack.sessions, "tiny", turn_ended(1))
        await stack.sessions.send_user_message("tiny", "call lookup 7")
        await wait_for_agent_snapshot(stack.sessions, "tiny", turn_ended(2))
        await stack.sessions.send_user_message("tiny", "call refund 7")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "tiny", turn_ended(3))

    answers = [m.text for m in snapshot.messages if m.role is MessageRole.ASSISTANT]
    assert answers == ["Echo: hello", "order 7 shipped", "Error: unknown tool refund"]
