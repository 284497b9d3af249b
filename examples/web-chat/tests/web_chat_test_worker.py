"""The Worker child of the web chat tests: the chat's agent, its model held at FileGates.

A user message with ``slow:<gate>`` holds the first model call of its turn right after the first
streamed word, until the test releases FileGate ``<gate>`` (in ``$WEB_CHAT_TEST_GATE_DIR``). Each
attempt arrives at the gate again, so a test sees a retried call after a Worker crash.
"""

from __future__ import annotations

import os
import re

from dex_agents.stepwise import ModelRequest, ScriptedModelClient
from dex_agents.testing import FileGate, run_agent_worker
from dex_agents_web_chat import build_web_chat_flow

GATE_DIR_ENV = "WEB_CHAT_TEST_GATE_DIR"
HOLD = re.compile(r"\bslow:(\w+)")


async def hold_at_gate(request: ModelRequest) -> None:
    """Wait at the message's gate during the first model call of a ``slow:<gate>`` turn."""
    if ScriptedModelClient.tool_results(request):
        return
    match = HOLD.search(ScriptedModelClient.user_texts(request)[-1])
    if match is None:
        return
    gate = FileGate(os.environ[GATE_DIR_ENV], match.group(1))
    gate.mark_reached()
    await gate.wait_for_release()


if __name__ == "__main__":
    run_agent_worker([build_web_chat_flow(pause=hold_at_gate)])
