"""The chat page in headless Chromium: it clicks, types and reads the page of a real session.

The module shares one engine, Worker child and Chromium; each test serves its own app and opens
its own session. A ``slow:<gate>`` message holds its first model call after the first streamed
word until the test releases the gate.
"""

from __future__ import annotations

import asyncio
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "playwright.async_api", reason="Playwright is not installed: uv sync --all-packages"
)

from dex_agents import TURN_CANCELLED_NOTE, ToolOutcomeCheckStatus
from playwright.async_api import expect
from web_chat_page import SHORT_VIEWPORT, ChatPage
from web_chat_test_support import ChatStack, RunningChat, chat_stack, serving_chat

# One xdist worker runs the module, so one Chromium, engine and Worker child serve every page.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("web-chat-browser")]

SCREENSHOT_ENV = "DEX_WEB_CHAT_SCREENSHOT"
"""Where the approval test saves its screenshot of the page (the README's image)."""

_ORDER_7 = "Order 7 is a ceramic teapot, delivered."
_AT_LEAST_2 = re.compile(r"^([2-9]|\d{2,})$")


async def test_a_turn_streams_live_text_then_shows_the_stored_reply(
    browser: Any, stack: ChatStack, chat: RunningChat
) -> None:
    page = await ChatPage.open(browser, chat)
    await page.send("slow:live where is order 7?")
    await stack.gate("live").wait_until_reached()
    # The model call is held after its first word: the page shows it as live text.
    await expect(page.live_text()).to_have_text(["Let "])
    await expect(page.live_text()).to_have_attribute("data-attempt", "1")
    await expect(page.page.locator("#stop")).to_be_enabled()
    stack.gate("live").release()

    await page.wait_for_turn_end()
    await expect(page.stored_replies()).to_have_text(["Let me look up order 7.", _ORDER_7])
    await expect(page.tool_call("lookup_order")).to_have_attribute("data-status", "done")
    await expect(page.tool_call("lookup_order")).to_contain_text('"item": "a ceramic teapot"')
    await expect(page.user_messages()).to_have_text(["slow:live where is order 7?"])
    assert page.errors == []


async def test_approve_and_reject_in_the_page(
    browser: Any, chat: RunningChat, tmp_path: Path
) -> None:
    page = await ChatPage.open(browser, chat)
    await page.send("Please refund order 7")
    approval = page.prompt("approval")
    await expect(approval).to_contain_text("Approve refund_order?")
    await expect(approval.locator(".arguments")).to_have_text(
        '{"amount_cents":2599,"order_id":"7"}'
    )
    await expect(page.tool_call("refund_order")).to_have_attribute(
        "data-status", "awaiting_approval"
    )
    await page.page.screenshot(path=os.environ.get(SCREENSHOT_ENV) or tmp_path / "approval.png")
    await approval.locator("button.approve").click()
    await page.wait_for_turn_end()
    await expect(approval).to_have_count(0)
    await expect(page.stored_replies().last).to_contain_text(
        "Refund result: Refunded 25.99 USD on order 7"
    )

    await page.send("Please refund order 8")
    approval = page.prompt("approval")
    await expect(approval.locator(".arguments")).to_contain_text('"order_id":"8"')
    await approval.locator("input.reason").fill("it is still in transit")
    await approval.locator("button.reject").click()
    await page.wait_for_turn_end()
    await expect(page.stored_replies().last).to_have_text(
        "Refund result: The user rejected this tool call. Reason: it is still in transit"
    )
    await expect(page.actions("approve", accepted=True)).to_have_count(1)
    await expect(page.actions("reject", accepted=True)).to_have_count(1)
    assert page.errors == []


async def test_answer_a_question_in_the_page(browser: Any, chat: RunningChat) -> None:
    page = await ChatPage.open(browser, chat)
    await page.send("Help me choose a gift")
    question = page.prompt("question")
    await expect(question.locator("h2")).to_have_text("Which gift would you like?")
    await expect(question.locator("button.choice")).to_have_text(["teapot", "espresso cups"])
    await question.locator("button.choice", has_text="espresso cups").click()
    await page.wait_for_turn_end()
    await expect(question).to_have_count(0)
    await expect(page.stored_replies().last).to_have_text("Noted. You chose: espresso cups.")

    # An answer in the user's own words.
    await page.send("Another gift, please")
    question = page.prompt("question")
    await question.locator("input.answer-text").fill("a tea towel")
    await question.locator("button.answer").click()
    await page.wait_for_turn_end()
    await expect(page.stored_replies().last).to_have_text("Noted. You chose: a tea towel.")
    assert page.errors == []


async def test_stop_pressed_twice_stops_the_turn_once_and_shows_it_stopped(
    browser: Any, stack: ChatStack, chat: RunningChat
) -> None:
    page = await ChatPage.open(browser, chat)
    await page.send("slow:stop tell me everything about order 7")
    await stack.gate("stop").wait_until_reached()
    await expect(page.live_text()).to_have_text(["Let "])
    # A double click: the first press disables Stop until the turn ended, so one request goes.
    await page.page.dblclick("#stop")
    await expect(page.actions("stop", accepted=True)).to_have_count(1)
    await page.wait_for_turn_end()
    stack.gate("stop").release()
    await expect(page.actions("stop")).to_have_count(1)

    snapshot = await stack.idle_snapshot(page.session_id, turns=1)
    assert [message.role for message in snapshot.messages] == ["user", "user"]
    assert snapshot.messages[-1].text == TURN_CANCELLED_NOTE
    await expect(page.stored_replies()).to_have_count(0)
    # The page shows the turn as stopped: its note, and the text it streamed, not sent.
    stopped = page.page.locator("#transcript .message.note.stopped")
    await expect(stopped).to_contain_text("turn stopped")
    await expect(page.page.locator("#transcript .message.stopped-text")).to_contain_text("Let")
    await expect(page.page.locator("#stop")).to_be_disabled()
    # The session goes on with the next message.
    await page.send("where is order 7?")
    await page.wait_for_turn_end()
    await expect(page.stored_replies().last).to_have_text(_ORDER_7)
    assert page.errors == []


async def test_steer_while_a_turn_runs(browser: Any, stack: ChatStack, chat: RunningChat) -> None:
    page = await ChatPage.open(browser, chat)
    await page.send("slow:steer where is order 7?")
    await stack.gate("steer").wait_until_reached()
    await page.steer("Actually, where is order 8?")
    # Steering waits for the running model call; the page shows the steered message.
    await expect(page.page.locator("#transcript .message.queued")).to_contain_text(
        "Actually, where is order 8?"
    )
    stack.gate("steer").release()

    await expect(page.stored_replies().last).to_have_text(
        "Order 8 is two espresso cups, in transit."
    )
    await page.wait_for_turn_end()
    await expect(page.user_messages()).to_have_text(
        ["slow:steer where is order 7?", "Actually, where is order 8?"]
    )
    snapshot = await stack.idle_snapshot(page.session_id, turns=2)
    assert not any((message.text or "").startswith("Order 7") for message in snapshot.messages)
    assert page.errors == []


async def test_reload_after_the_turn_ended_shows_the_same_conversation(
    browser: Any, chat: RunningChat
) -> None:
    page = await ChatPage.open(browser, chat)
    await page.send("where is order 7?")
    await page.wait_for_turn_end()
    await expect(page.stored_replies()).to_have_text(["Let me look up order 7.", _ORDER_7])
    before = await page.transcript()
    session_id = page.session_id

    await page.page.reload()
    await page.wait_until_live()
    assert page.session_id == session_id
    await expect(page.stored_replies()).to_have_text(["Let me look up order 7.", _ORDER_7])
    assert await page.transcript() == before

    # A second tab on the same session sees it too, and the next turn reaches both.
    other = await ChatPage.open(browser, chat, session_id)
    await expect(other.stored_replies()).to_have_text(["Let me look up order 7.", _ORDER_7])
    await page.send("and order 8?")
    for tab in (page, other):
        await expect(tab.stored_replies().last).to_have_text(
            "Order 8 is two espresso cups, in transit."
        )
    assert page.errors == [] and other.errors == []


async def test_the_page_reconnects_with_last_event_id_after_the_server_drops_the_stream(
    browser: Any, stack: ChatStack
) -> None:
    async with serving_chat(stack, max_event_stream_duration=timedelta(seconds=2)) as chat:
        page = await ChatPage.open(browser, chat)
        await page.send("slow:drop where is order 7?")
        await stack.gate("drop").wait_until_reached()
        await expect(page.live_text()).to_have_text(["Let "])
        # The server ends each event response after 2 s; the EventSource comes back by itself,
        # naming the last event it had. Counted on the server: on a loaded machine the first
        # response can end before "Let " came, and that reconnect names no event.
        await _wait_for_resumed_requests(chat, 2)
        await expect(page.page.locator("body")).to_have_attribute("data-reconnects", _AT_LEAST_2)
        # No event came twice: the held call's text is still its one word.
        await expect(page.live_text()).to_have_text(["Let "])
        stack.gate("drop").release()

        await page.wait_for_turn_end()
        await expect(page.stored_replies()).to_have_text(["Let me look up order 7.", _ORDER_7])
        # Each reconnect named the last event the page had, a token of this session's Stream.
        resumed = _resumed_event_ids(chat)
        page_of_events = await stack.stack.client.list_stream_messages(
            page.session_id, stack.flow.agent_events, 1000
        )
        assert set(resumed) <= {message.resume_token for message in page_of_events.messages}
        assert page.errors == []


def _resumed_event_ids(chat: RunningChat) -> list[str]:
    """The ``Last-Event-ID`` of every events request that had one, oldest first."""
    return [
        headers["last-event-id"]
        for headers in chat.event_stream_requests
        if headers.get("last-event-id")
    ]


async def _wait_for_resumed_requests(chat: RunningChat, count: int) -> None:
    """Wait (up to 30 s) until ``count`` events requests named the last event they had."""
    deadline = asyncio.get_running_loop().time() + 30
    while len(_resumed_event_ids(chat)) < count:
        assert asyncio.get_running_loop().time() < deadline, chat.event_stream_requests
        await asyncio.sleep(0.05)


async def test_a_worker_killed_while_the_page_is_open_is_replaced_and_the_turn_completes(
    browser: Any, stack: ChatStack, chat: RunningChat
) -> None:
    page = await ChatPage.open(browser, chat)
    await page.send("slow:crash where is order 7?")
    gate = stack.gate("crash")
    await gate.wait_until_reached()
    await expect(page.live_text()).to_have_attribute("data-attempt", "1")

    stack.workers[-1].kill()
    await stack.start_worker()
    await gate.wait_until_reached(count=2)
    # The retried model call's text replaces the first attempt's, never adds to it.
    await expect(page.live_text()).to_have_attribute("data-attempt", "2")
    await expect(page.live_text()).to_have_text(["Let "])
    await expect(page.page.locator("body")).to_have_attribute("data-connection", "live")
    gate.release()

    await page.wait_for_turn_end()
    await expect(page.stored_replies()).to_have_text(["Let me look up order 7.", _ORDER_7])
    assert page.errors == []


async def test_a_refund_lost_to_a_worker_kill_shows_confirmed_after_the_restart(
    browser: Any, stack: ChatStack, chat: RunningChat
) -> None:
    gates = stack.tmp_path / "gates"
    gates.mkdir(parents=True, exist_ok=True)
    (gates / "hold-refund-7").touch()  # the refund stops at its gate once the ledger has it
    page = await ChatPage.open(browser, chat)
    await page.send("Please refund order 7")
    await page.prompt("approval").locator("button.approve").click()
    gate = stack.gate("refund-7")
    await gate.wait_until_reached()
    card = page.tool_call("refund_order")
    await expect(card).to_have_attribute("data-status", "approved")  # the record, while it runs

    stack.workers[-1].kill()  # the refund's one attempt is lost after it took effect
    await stack.start_worker()
    gate.release()  # a wrongly repeated refund would pass it and run twice

    await page.wait_for_turn_end()
    await expect(page.stored_replies().last).to_contain_text(
        "Refund result: Refunded 25.99 USD on order 7"
    )
    await expect(card).to_have_attribute("data-outcome-check", "applied")
    await expect(card.locator(".outcome-check")).to_have_text("confirmed after a restart")
    assert gate.reached_count == 1  # the check confirmed it; the refund never ran again

    # The turn ended, so its records are gone: the stored result keeps the answer for a reload.
    snapshot = await stack.idle_snapshot(page.session_id, turns=1)
    assert snapshot.tool_calls == ()
    checks = {
        message.tool_name: message.outcome_check
        for message in snapshot.messages
        if message.tool_output is not None
    }
    # Only the call whose attempt was lost carries an answer.
    assert checks == {"lookup_order": None, "refund_order": ToolOutcomeCheckStatus.APPLIED}
    await page.page.reload()
    await page.wait_until_live()
    await expect(card).to_have_attribute("data-outcome-check", "applied")
    await expect(card.locator(".outcome-check")).to_have_text("confirmed after a restart")
    assert page.errors == []


async def test_a_refund_whose_check_fails_after_a_worker_kill_shows_outcome_unknown(
    browser: Any, stack: ChatStack, chat: RunningChat
) -> None:
    gates = stack.tmp_path / "gates"
    gates.mkdir(parents=True, exist_ok=True)
    (gates / "hold-refund-8").touch()
    page = await ChatPage.open(browser, chat)
    await page.send("Please refund order 8")
    await page.prompt("approval").locator("button.approve").click()
    gate = stack.gate("refund-8")
    await gate.wait_until_reached()

    stack.workers[-1].kill()
    ledger = gates / "refunds.json"
    kept = ledger.read_text()
    ledger.write_text("the ledger is being migrated")  # every look-up now fails
    try:
        await stack.start_worker()
        gate.release()
        await page.wait_for_turn_end()
    finally:
        ledger.write_text(kept)
    card = page.tool_call("refund_order")
    await expect(card).to_have_attribute("data-outcome-check", "check_failed")
    await expect(card.locator(".outcome-check")).to_have_text(
        "outcome unknown after a restart: the check failed"
    )
    await expect(page.stored_replies().last).to_contain_text(
        "Refund result: The outcome of this tool call is unknown"
    )
    assert gate.reached_count == 1
    await page.page.reload()
    await page.wait_until_live()
    await expect(card).to_have_attribute("data-outcome-check", "check_failed")
    await expect(card.locator(".outcome-check")).to_have_text(
        "outcome unknown after a restart: the check failed"
    )
    assert page.errors == []


async def test_without_a_stream_store_the_page_polls_the_snapshot(
    browser: Any, tmp_path: Path
) -> None:
    """A Dex Server with ``streamStore.backend: disabled`` keeps no events: the snapshot's token
    is empty and the stream yields only keep-alives, so the page polls the snapshot, and a turn
    with an approval still plays out in it, without live text."""
    async with (
        chat_stack(tmp_path, stream_store_disabled=True) as stack,
        serving_chat(stack) as chat,
    ):
        page = await ChatPage.open(browser, chat)
        await expect(page.page.locator("body")).to_have_attribute("data-polling", "true")
        await page.send("Please refund order 7")
        approval = page.prompt("approval")
        await expect(approval).to_contain_text("Approve refund_order?")
        await approval.locator("button.approve").click()
        await page.wait_for_turn_end()
        await expect(page.stored_replies().last).to_contain_text(
            "Refund result: Refunded 25.99 USD on order 7"
        )
        await expect(page.page.locator("body")).to_have_attribute("data-polling", "true")
        assert await page.live_text().count() == 0
        assert page.errors == []


DOCS_SCREENSHOTS_ENV = "DEX_WEB_CHAT_DOCS_SCREENSHOTS"
"""A directory where the following test saves its screenshots (the repository's ``docs/``)."""


def _screenshot_path(tmp_path: Path, name: str) -> Path:
    directory = os.environ.get(DOCS_SCREENSHOTS_ENV)
    return Path(directory) / name if directory else tmp_path / name


async def _scroll_y(page: ChatPage) -> float:
    value: float = await page.page.evaluate("window.scrollY")
    return value


async def test_the_page_follows_the_newest_content_unless_the_reader_scrolled_up(
    browser: Any, stack: ChatStack, chat: RunningChat, tmp_path: Path
) -> None:
    """In an 800 px-high window: each new reply and the approval prompt come into view; after
    the reader scrolled up, new content leaves the page where it is and a "new messages" button
    brings them down. State labels are words; call and interrupt IDs sit behind a toggle."""
    page = await ChatPage.open(browser, chat, viewport=SHORT_VIEWPORT)
    status = page.page.locator("#session-status")
    new_messages = page.page.locator("#new-messages")
    for number in range(1, 5):
        await page.send(f"where is order 7? ({number})")
        await page.wait_for_turn_end()
        await expect(page.stored_replies().last).to_be_in_viewport()
    heights = await page.page.evaluate("[document.scrollingElement.scrollHeight, innerHeight]")
    assert heights[0] > heights[1], heights  # the conversation is taller than the window
    await expect(status).to_have_text("waiting for your message")

    await page.send("Please refund order 7")
    approval = page.prompt("approval")
    # The prompt is below a conversation taller than the window: it was scrolled into view.
    await expect(approval.locator("button.reject")).to_be_in_viewport()
    await expect(status).to_have_text("running tools (turn 5)")
    await expect(status).to_have_attribute("data-status", "running_tools")
    card = page.tool_call("refund_order")
    await expect(card.locator("details.ids")).not_to_have_attribute("open", "")
    await expect(card.locator("details.ids code")).not_to_be_visible()
    await page.page.screenshot(path=_screenshot_path(tmp_path, "web-chat-follows.png"))
    await approval.locator("button.reject").click()
    await page.wait_for_turn_end()
    await expect(page.stored_replies().last).to_be_in_viewport()
    # The action log names what was done; the interrupt ID is behind the toggle.
    entry = page.actions("reject", accepted=True)
    await expect(entry.locator(".action-text")).to_have_text("reject refund_order: sent")
    ids = entry.locator("details.ids")
    await expect(ids.locator("code")).not_to_be_visible()
    await ids.locator("summary").click()
    await expect(ids.locator("code")).to_be_visible()
    await expect(ids.locator("code")).to_contain_text("interrupt ")

    # The reader scrolls up; the next turn (sent from elsewhere) does not move the page. A
    # snapshot read lands in the same task as the scroll, before its scroll event: the page must
    # take the reader's position as it is, not as the last scroll event left it.
    await page.page.evaluate(
        """async () => {
            const { snapshot } = await api(sessionPath("/snapshot"));
            window.scrollTo(0, 0);
            setSnapshot(snapshot);
        }"""
    )
    assert await _scroll_y(page) == 0
    await expect(new_messages).to_be_hidden()
    replies = await page.stored_replies().count()
    assert await stack.sessions.send_user_message(page.session_id, "where is order 7? (6)")
    await expect(page.stored_replies()).to_have_count(replies + 2)
    await expect(new_messages).to_be_visible()
    await expect(page.stored_replies().last).not_to_be_in_viewport()
    assert await _scroll_y(page) == 0
    await page.page.screenshot(path=_screenshot_path(tmp_path, "web-chat-new-messages.png"))
    await new_messages.click()
    await expect(page.stored_replies().last).to_be_in_viewport()
    await expect(new_messages).to_be_hidden()
    assert page.errors == []
