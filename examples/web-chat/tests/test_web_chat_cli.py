"""``dex-agents-web-chat`` as a user starts it: the embedded engine, an in-process Worker, the
login link it prints, a turn through its routes, and a clean stop on Ctrl+C."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import httpx
from dex_agents.testing import wait_until
from dex_agents_web_chat.cli import READY_LINE_PREFIX, TOKEN_ENV
from foreground_job import default_interrupt_signal

_READY = re.compile(re.escape(READY_LINE_PREFIX) + r"(\S+)/ \(log in: (\S+)\)")
_STARTUP_SECONDS = 90.0


async def test_the_command_serves_a_chat_turn_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    token = "a-token-for-the-cli-test-only"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dex_agents_web_chat",
        "--port",
        "0",
        "--directory",
        str(tmp_path / "chat"),
        "--word-delay-ms",
        "1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, TOKEN_ENV: token},
        # A process group of its own stands for a terminal's foreground group: Ctrl+C signals
        # every process in it, the engine child included unless it has a group of its own.
        start_new_session=True,
        preexec_fn=default_interrupt_signal,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), _STARTUP_SECONDS)
        ready = _READY.match(line.decode())
        assert ready, line
        base_url, login_link = ready.groups()
        assert login_link == f"{base_url}/login?token={token}"

        async with httpx.AsyncClient(base_url=base_url, timeout=30) as browser_like:
            assert (await browser_like.get("/")).status_code == 401
            assert (await browser_like.get(login_link)).status_code == 303
            started = await browser_like.post("/sessions", json={"message": "where is order 8?"})
            session_id = started.json()["session_id"]

            async def reply() -> str | None:
                response = await browser_like.get(f"/sessions/{session_id}/snapshot")
                snapshot = response.json()["snapshot"]
                state = snapshot["state"]
                if state is None or state["turn_count"] != 1 or state["active_turn_id"]:
                    return None
                return str(snapshot["messages"][-1]["text"])

            text = await wait_until("the first turn to end", reply)
            assert text == "Order 8 is two espresso cups, in transit."
            assert (tmp_path / "chat" / "engine.db").exists()
            # Ctrl+C while a page follows the session: its event stream is open.
            async with browser_like.stream("GET", f"/sessions/{session_id}/events") as events:
                assert events.status_code == 200
                os.killpg(process.pid, signal.SIGINT)
                status = await asyncio.wait_for(process.wait(), 30)
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    stderr = (await process.stderr.read() if process.stderr else b"").decode()
    stdout = (await process.stdout.read() if process.stdout else b"").decode()
    assert status == 130, stderr
    # One line, and nothing else: no traceback, no Worker complaining about the engine.
    assert stderr == "", stderr
    assert stdout.strip().splitlines() == [
        f"dex-agents-web-chat stopped; the sessions stay in {tmp_path / 'chat'}"
    ], stdout
