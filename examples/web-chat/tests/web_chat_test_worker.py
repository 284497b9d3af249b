"""The Worker child of the web chat tests: the chat's agent, its model held at FileGates.

A user message with ``slow:<gate>`` holds the first model call of its turn right after the first
streamed word, until the test releases FileGate ``<gate>`` (in ``$WEB_CHAT_TEST_GATE_DIR``). Each
attempt arrives at the gate again, so a test sees a retried call after a Worker crash. Refunds go
to the ledger ``refunds.json`` in that directory; a refund of an order for which the test created
``hold-refund-<order>`` there stops at FileGate ``refund-<order>`` after it was written.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Final

from dex_agents.stepwise import ModelRequest, ScriptedModelClient
from dex_agents.testing import FileGate, run_agent_worker
from dex_agents_web_chat import build_web_chat_flow

GATE_DIR_ENV = "WEB_CHAT_TEST_GATE_DIR"
WORD_DELAY: Final = timedelta(milliseconds=1)
"""The pause between streamed words: a test holds a call at a gate to watch it mid-stream, so the
chat's own 30 ms a word would only make every turn slower."""
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


async def hold_refund(order_id: str) -> None:
    """Stop a refund the test asked to hold at its gate, after the ledger has it."""
    gate_dir = Path(os.environ[GATE_DIR_ENV])
    if not (gate_dir / f"hold-refund-{order_id}").exists():
        return
    gate = FileGate(gate_dir, f"refund-{order_id}")
    gate.mark_reached()
    await gate.wait_for_release()


def preload_worker() -> None:
    """Import what the Worker child imports, in the warm parent it forks from (``AgentTestStack``'s
    ``worker_preload_env``): a Worker restarted after a kill starts without importing again."""
    build_web_chat_flow(pause=hold_at_gate, word_delay=WORD_DELAY, refund_pause=hold_refund)


if __name__ == "__main__":
    run_agent_worker(
        [
            build_web_chat_flow(
                pause=hold_at_gate,
                word_delay=WORD_DELAY,
                refund_ledger=Path(os.environ[GATE_DIR_ENV]) / "refunds.json",
                refund_pause=hold_refund,
            )
        ]
    )
