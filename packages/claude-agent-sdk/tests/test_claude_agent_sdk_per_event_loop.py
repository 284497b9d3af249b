"""PerEventLoop: the model relay and the shared fake server are made and started once per loop."""

from __future__ import annotations

import asyncio

import pytest
from dex_agents_claude_agent_sdk._per_event_loop import PerEventLoop


class _Server:
    def __init__(self) -> None:
        self.starts = 0

    async def start(self) -> None:
        self.starts += 1
        await asyncio.sleep(0)  # a real start awaits its socket: let the other callers in
        if self.starts == 1 and _Server.fail_first:
            raise OSError("port taken")

    fail_first = False


async def test_callers_at_the_same_time_share_one_started_object() -> None:
    servers = PerEventLoop(_Server, _Server.start)

    first, second, third = await asyncio.gather(servers.get(), servers.get(), servers.get())

    assert first is second is third
    assert first.starts == 1


async def test_a_failed_start_is_tried_again_by_the_next_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_Server, "fail_first", True)
    servers = PerEventLoop(_Server, _Server.start)

    with pytest.raises(OSError, match="port taken"):
        await servers.get()
    server = await servers.get()

    assert server.starts == 2


def test_each_event_loop_has_its_own() -> None:
    servers = PerEventLoop(_Server, _Server.start)

    first = asyncio.run(servers.get())
    second = asyncio.run(servers.get())

    assert first is not second
