from __future__ import annotations

import pytest
from dex_agents.testing import WaitTimeoutError, wait_until


async def test_wait_until_returns_the_first_truthy_value_of_a_sync_probe() -> None:
    values = iter([None, 0, "", "ready", "later"])

    assert await wait_until("the third value", lambda: next(values)) == "ready"


async def test_wait_until_awaits_an_async_probe() -> None:
    calls: list[int] = []

    async def probe() -> int | None:
        calls.append(1)
        return len(calls) if len(calls) == 3 else None

    assert await wait_until("three calls", probe) == 3


async def test_wait_until_names_the_description_when_the_deadline_passes() -> None:
    with pytest.raises(WaitTimeoutError, match="waiting for the impossible") as raised:
        await wait_until("the impossible", lambda: False, timeout=0.1)

    assert raised.value.description == "the impossible"
    assert raised.value.last_value is False
    assert isinstance(raised.value, TimeoutError)


async def test_wait_until_lets_a_probe_error_through_at_once() -> None:
    def probe() -> bool:
        raise LookupError("broken probe")

    with pytest.raises(LookupError, match="broken probe"):
        await wait_until("anything", probe, timeout=30)


def test_the_harness_exports_stepwise_scripted_model_client() -> None:
    from dex_agents import stepwise, testing

    assert testing.ScriptedModelClient is stepwise.ScriptedModelClient
