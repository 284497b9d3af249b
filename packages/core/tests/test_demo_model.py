"""``dex-agents demo --model``: the real-provider path, against a local OpenAI Responses server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm_test_support
import pytest

pytest.importorskip("litellm", reason="the litellm extra (dex-agents[litellm]) is not installed")

from litellm_test_support.fake_providers import (
    RESPONSES,
    FakeProviderServer,
    FakeReply,
    FakeToolCall,
)

_OFFLINE = litellm_test_support.OFFLINE_ENVIRONMENT


def _script(api: str, body: dict[str, Any]) -> FakeReply:
    outputs = [item for item in body.get("input", []) if item.get("type") == "function_call_output"]
    if not outputs:
        return FakeReply(
            text="Looking it up.",
            tool_calls=(FakeToolCall("c1", "lookup_order", {"order_id": "7"}),),
        )
    if len(outputs) == 1:
        refund = FakeToolCall("c2", "refund_order", {"order_id": "7", "amount_cents": 2599})
        return FakeReply(text="Refunding it.", tool_calls=(refund,))
    return FakeReply(text="Your teapot is refunded.")


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    """The fake provider on its own loop, so the demo subprocess can call it at any time."""
    server = FakeProviderServer(_script)
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.__aenter__())
        started.set()
        loop.run_forever()
        loop.run_until_complete(server.__aexit__(None, None, None))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(30)
    yield server
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


def _demo(
    directory: Path, *arguments: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dex_agents.cli", "demo", "--directory", str(directory), *arguments],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **_OFFLINE, **env},
    )


def test_the_demo_runs_on_a_litellm_model(tmp_path: Path, provider: FakeProviderServer) -> None:
    result = _demo(
        tmp_path,
        "--model",
        "openai/gpt-5-mini",
        "--api-base",
        f"{provider.base_url}/v1",
        "--approve",
        env={"OPENAI_API_KEY": "dummy-key"},
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "Your teapot is refunded." in result.stdout
    bodies = provider.bodies(RESPONSES)
    assert len(bodies) == 3
    # The real refund tool ran after the approval, and its result went back to the model.
    assert "Refunded 25.99 USD on order 7" in bodies[2]["input"][-1]["output"]
    assert {tool["name"] for tool in bodies[0]["tools"]} == {"lookup_order", "refund_order"}
    assert all(headers.get("Authorization") == "Bearer dummy-key" for headers in provider.headers)


def test_without_a_key_the_demo_says_which_one_it_needs(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "ANTHROPIC_API_KEY"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "dex_agents.cli",
            "demo",
            "--directory",
            str(tmp_path),
            "--model",
            "anthropic/claude-sonnet-4-5",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env={**env, **_OFFLINE},
    )
    assert result.returncode == 1
    assert "needs ANTHROPIC_API_KEY in the environment" in result.stderr
    assert not (tmp_path / "engine.db").exists()  # nothing started
