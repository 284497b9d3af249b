"""The chat page as the browser tests use it: Playwright locators and the steps a person takes."""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import parse_qs, urlparse

from playwright.async_api import Locator, Page, expect
from web_chat_test_support import PAGE_TIMEOUT_MS, TOKEN, RunningChat

VIEWPORT: Final = {"width": 900, "height": 820}
SHORT_VIEWPORT: Final = {"width": 900, "height": 800}
"""The 800 px-high window of the following tests: a few turns overflow it."""

expect.set_options(timeout=PAGE_TIMEOUT_MS)


class ChatPage:
    """One browser tab on the chat; it records the page's script errors."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.set_default_timeout(PAGE_TIMEOUT_MS)

    @classmethod
    async def open(
        cls,
        browser: Any,
        chat: RunningChat,
        session_id: str | None = None,
        *,
        viewport: dict[str, int] = VIEWPORT,
    ) -> ChatPage:
        """Log in with the token and open the page: a new session, or ``session_id``."""
        context = await browser.new_context(viewport=viewport)
        chat.closers.append(context.close)
        chat_page = cls(await context.new_page())
        await chat_page.page.goto(f"{chat.base_url}/login?token={TOKEN}")
        if session_id is not None:
            await chat_page.page.goto(f"{chat.base_url}/?session={session_id}")
        await chat_page.wait_until_live()
        return chat_page

    @property
    def session_id(self) -> str:
        return parse_qs(urlparse(self.page.url).query)["session"][0]

    async def wait_until_live(self) -> None:
        await expect(self.page.locator("body")).to_have_attribute("data-connection", "live")

    async def send(self, text: str) -> None:
        """Type ``text`` and press Send; waits until the server accepted it."""
        await self._type_and_press(text, "#send", "send")

    async def steer(self, text: str) -> None:
        """Type ``text`` and press Steer; waits until the server accepted it."""
        await self._type_and_press(text, "#steer", "steer")

    async def _type_and_press(self, text: str, button: str, action: str) -> None:
        accepted = self.actions(action, accepted=True)
        before = await accepted.count()
        await self.page.fill("#composer", text)
        await self.page.click(button)
        await expect(accepted).to_have_count(before + 1)

    def actions(self, action: str, *, accepted: bool | None = None) -> Locator:
        """The entries the page logged for presses of ``action``."""
        selector = f'#actions li[data-action="{action}"]'
        if accepted is not None:
            selector += f'[data-accepted="{str(accepted).lower()}"]'
        return self.page.locator(selector)

    def stored_replies(self) -> Locator:
        """The assistant messages rendered from the snapshot's stored messages."""
        return self.page.locator("#transcript .message.assistant:not(.live):not(.stopped-text)")

    def live_text(self) -> Locator:
        """The live text segments of unfinished turns."""
        return self.page.locator("#transcript .message.live")

    def user_messages(self) -> Locator:
        return self.page.locator('#transcript .message[data-role="user"]:not(.queued)')

    def tool_call(self, tool_name: str) -> Locator:
        return self.page.locator(f'#transcript .tool-call[data-tool-name="{tool_name}"]')

    def prompt(self, kind: str) -> Locator:
        return self.page.locator(f'#prompts .prompt[data-kind="{kind}"]')

    async def wait_for_turn_end(self) -> None:
        """The page shows no running turn and no live text."""
        status = self.page.locator("#session-status")
        await expect(status).to_have_attribute("data-status", "waiting_for_user_message")
        await expect(self.live_text()).to_have_count(0)

    async def transcript(self) -> str:
        return await self.page.inner_text("#transcript")
