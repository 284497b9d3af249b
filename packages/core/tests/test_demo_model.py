"""``dex-agents demo --model``: the real-provider path, against a local OpenAI Responses server."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm_test_support
import pytest

pytest.importorskip("litellm", reason="the litellm extra (dex-agents[litellm]) is not installed")

import litellm
from demo_cli_child import run_demo_cli
from dex_agents._demo import (
    _PROVIDER_API_KEYS,
    TURN_FAILED_EXIT_STATUS,
    DemoError,
    _missing_provider_key,
    build_demo_flow,
)
from dex_agents.testing._fork_server import FORK_SERVER_ENV
from litellm_test_support.fake_providers import (
    CHAT,
    RESPONSES,
    FakeFailure,
    FakeProviderServer,
    FakeReply,
    FakeToolCall,
)

_OFFLINE = litellm_test_support.OFFLINE_ENVIRONMENT
# One xdist worker runs them all, so the demo runs fork from one warm parent (demo_cli_child).
pytestmark = pytest.mark.xdist_group("demo-cli")


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
    yield from _serving(FakeProviderServer(_script))


def _serving(server: FakeProviderServer) -> Iterator[FakeProviderServer]:
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
    """``dex-agents demo`` in a child forked from a parent that has imported LiteLLM already."""
    run = len(list(directory.glob("cli-run-*")))
    result, forked = run_demo_cli(
        ["demo", "--directory", str(directory), *arguments],
        env={**os.environ, **_OFFLINE, **env},
        output_dir=directory / f"cli-run-{run}",
        timeout=240,
    )
    assert forked or os.environ.get(FORK_SERVER_ENV) == "0", "demo_cli_child's preload failed"
    return result


def test_the_demo_runs_on_a_litellm_model(tmp_path: Path, provider: FakeProviderServer) -> None:
    result = _demo(
        tmp_path,
        "--model",
        "openai/gpt-5-mini",
        "--api-base",
        f"{provider.base_url}/v1",
        "--api",
        "responses",
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


def test_a_missing_key_is_told_before_litellm_is_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    # Importing dex_agents.litellm (LiteLLM, seconds) now fails: the key check must come first.
    monkeypatch.setitem(sys.modules, "dex_agents.litellm", None)
    with pytest.raises(DemoError, match="needs ANTHROPIC_API_KEY in the environment"):
        build_demo_flow("anthropic/claude-sonnet-4-5")


@pytest.mark.parametrize("provider", sorted(_PROVIDER_API_KEYS))
def test_the_keys_checked_before_litellm_is_imported_are_the_ones_litellm_asks_for(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = _PROVIDER_API_KEYS[provider]
    model = f"{provider}/some-model"
    monkeypatch.delenv(key, raising=False)
    assert _missing_provider_key(model) == key
    assert litellm.validate_environment(model=model)["missing_keys"] == [key]
    for value in ("", "dummy-key"):  # LiteLLM takes an empty key as set
        monkeypatch.setenv(key, value)
        assert _missing_provider_key(model) is None
        assert not litellm.validate_environment(model=model)["missing_keys"]


class _ChatOnlyServer:
    """An OpenAI-compatible server that speaks only Chat Completions (``/v1/responses`` is 404),
    whose first answer to the user text "Where is order 7?" is a 500 (a call retried once)."""

    def __init__(self) -> None:
        self.failed_once = False

    def script(self, api: str, body: dict[str, Any]) -> FakeReply | FakeFailure:
        messages = body.get("messages", [])
        if any(m.get("role") == "tool" for m in messages):
            return FakeReply(text="Order 7 is a ceramic teapot, delivered.")
        if "Where is order 7?" in str(messages[-1]) and not self.failed_once:
            self.failed_once = True
            return FakeFailure(status=500)
        return FakeReply(
            text="Looking it up.",
            tool_calls=(FakeToolCall("c1", "lookup_order", {"order_id": "7"}),),
        )


@pytest.fixture
def chat_only() -> Iterator[FakeProviderServer]:
    yield from _serving(FakeProviderServer(_ChatOnlyServer().script, apis=frozenset({CHAT})))


def test_an_openai_compatible_server_a_failed_turn_and_the_next_message(
    tmp_path: Path, chat_only: FakeProviderServer
) -> None:
    """Against a server that speaks only Chat Completions: told to use the Responses API (by
    the environment variable) the turn fails with one line that says what to do, no traceback
    and no internal field, and exit status 4; the next message to that session (``--session
    --message``) with ``--api-base`` alone uses Chat Completions, one failed attempt is one
    WARNING line, and ``--verbose`` adds its traceback."""
    base = f"{chat_only.base_url}/v1"
    key = {"OPENAI_API_KEY": "dummy-key"}
    failed = _demo(
        tmp_path,
        *("--model", "openai/local-model", "--api-base", base, "--message", "hi"),
        env={**key, "DEX_AGENTS_LITELLM_API": "responses"},
    )
    output = failed.stdout + failed.stderr
    assert failed.returncode == TURN_FAILED_EXIT_STATUS, output
    [line] = [text for text in failed.stdout.splitlines() if text.startswith("The turn failed")]
    assert "404" in line and "use --api chat_completions" in line
    assert "Traceback" not in output and "attempt_progress" not in output
    assert "Give Feedback" not in output and "Provider List" not in output
    attempts = [text for text in failed.stderr.splitlines() if "RunModel attempt" in text]
    assert attempts and all(text.startswith("WARNING ") for text in attempts), failed.stderr
    assert all("NotFoundError" in text for text in attempts)
    assert chat_only.bodies(CHAT) == []  # only /v1/responses was asked
    session_id = re.search(r"Session ID: (\S+)", failed.stdout)
    assert session_id is not None

    chat_only.requests.clear()
    continued = _demo(
        tmp_path,
        *("--session", session_id.group(1), "--message", "Where is order 7?"),
        *("--model", "openai/local-model", "--api-base", base, "--verbose"),
        env=key,
    )
    output = continued.stdout + continued.stderr
    assert continued.returncode == 0, output
    assert "assistant: Order 7 is a ceramic teapot, delivered." in continued.stdout
    retried = [text for text in continued.stderr.splitlines() if "RunModel attempt" in text]
    assert len(retried) == 1 and retried[0].startswith("WARNING "), continued.stderr
    assert "InternalServerError" in retried[0]
    assert "Traceback" in continued.stderr  # --verbose: the attempt's traceback at DEBUG
    bodies = chat_only.bodies(CHAT)
    assert len(bodies) == 3  # the failed attempt, its retry, and the answer after the tool
    # The session continued: the model sees the first message of the session too.
    assert [m["content"] for m in bodies[-1]["messages"] if m["role"] == "user"] == [
        "hi",
        "Where is order 7?",
    ]


_HOSTILE = "\x1b[2J\x1b]0;owned\x07\r\u202e"


def _hostile_script(api: str, body: dict[str, Any]) -> FakeReply:
    """A model and tools whose text carries terminal escape sequences and a bidi override."""
    outputs = [  # tool results, whichever API the demo speaks
        item
        for item in [*body.get("input", []), *body.get("messages", [])]
        if item.get("type") == "function_call_output" or item.get("role") == "tool"
    ]
    if not outputs:
        lookup = FakeToolCall("c1", "lookup_order", {"order_id": f"7{_HOSTILE}"})
        return FakeReply(text=f"Looking{_HOSTILE} it up.", tool_calls=(lookup,))
    if len(outputs) == 1:
        refund = FakeToolCall("c2", "refund_order", {"order_id": f"7{_HOSTILE}", "amount_cents": 1})
        return FakeReply(text="Refunding.", tool_calls=(refund,))
    return FakeReply(text=f"Done{_HOSTILE}\nfor real.")


@pytest.fixture
def hostile() -> Iterator[FakeProviderServer]:
    yield from _serving(FakeProviderServer(_hostile_script))


def test_the_demo_prints_model_and_tool_text_with_control_characters_escaped(
    tmp_path: Path, hostile: FakeProviderServer
) -> None:
    """Issue 36 case 10: no text of a model or a tool reaches the terminal as an escape."""
    result = _demo(
        tmp_path,
        "--model",
        "openai/gpt-5-mini",
        "--api-base",
        f"{hostile.base_url}/v1",
        "--approve",
        env={"OPENAI_API_KEY": "dummy-key"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for raw in ("\x1b", "\x07", "\r", "\u202e"):
        assert raw not in result.stdout, repr(raw)
    escaped = "\\x1b[2J\\x1b]0;owned\\x07\\x0d\\u202e"
    assert f"assistant: Looking{escaped} it up." in result.stdout  # model text
    # The approval line shows the tool arguments as JSON text: escaped there already.
    approval = next(line for line in result.stdout.splitlines() if "Approval needed" in line)
    assert approval.startswith('Approval needed for refund_order({"order_id": "7\\u001b[2J')
    # Model text keeps its own newlines.
    assert f"Done{escaped}\nfor real." in result.stdout
