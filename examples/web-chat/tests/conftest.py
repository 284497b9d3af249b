"""Fixtures of the web chat tests: one engine, Worker and browser per module; one app per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from web_chat_test_support import (
    ChatStack,
    RunningChat,
    chat_stack,
    launch_chromium,
    serving_chat,
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ChatStack]:
    async with chat_stack(tmp_path_factory.mktemp("web-chat")) as value:
        yield value


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Any]:
    async with launch_chromium() as value:
        yield value


@pytest_asyncio.fixture(loop_scope="module")
async def chat(stack: ChatStack) -> AsyncIterator[RunningChat]:
    async with serving_chat(stack) as value:
        yield value
