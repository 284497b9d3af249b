"""AgentEventWriter: event stamping, payload JSON, dropped late writes, and thread safety."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from dex_agents import (
    AgentEvent,
    AgentEventType,
    AgentEventWriter,
    AgentToolCallStatus,
    ConfigurationError,
    ConfigurationTypeError,
)
from dex_agents._events import (
    encode_event_payload,
)
from seed_documentation import SEED_ENUM_VALUES


class RecordingSink:
    """Collects events and the thread that delivered each."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []
        self.threads: list[int] = []
        self._lock = threading.Lock()

    def __call__(self, event: AgentEvent) -> None:
        with self._lock:
            self.events.append(event)
            self.threads.append(threading.get_ident())


def _writer(sink: RecordingSink, attempt: int = 2) -> AgentEventWriter:
    return AgentEventWriter(sink, turn_id="turn-3", step_execution_id="RunModel-7", attempt=attempt)


def test_event_types_are_the_documented_list() -> None:
    documented = list(SEED_ENUM_VALUES["AgentEventType"])
    assert [event_type.value for event_type in AgentEventType] == documented  # in this order


def test_typed_writes_are_stamped_with_turn_step_and_attempt() -> None:
    sink = RecordingSink()
    writer = _writer(sink)
    writer.write_text_delta("Hel")
    writer.write_reasoning_delta("thinking")
    writer.write_tool_call_started("call_1", "search")
    writer.write_tool_call_finished("call_1", "search", AgentToolCallStatus.SUCCEEDED)
    writer.write_event("vercel_ai.step_finished", {"b": 1, "a": [True, None]})
    assert [(event.type, event.payload) for event in sink.events] == [
        ("text_delta", '{"text":"Hel"}'),
        ("reasoning_delta", '{"text":"thinking"}'),
        ("tool_call_started", '{"tool_call_id":"call_1","tool_name":"search"}'),
        (
            "tool_call_finished",
            '{"status":"succeeded","tool_call_id":"call_1","tool_name":"search"}',
        ),
        ("vercel_ai.step_finished", '{"a":[true,null],"b":1}'),
    ]
    for event in sink.events:
        assert (event.turn_id, event.step_execution_id, event.attempt) == (
            "turn-3",
            "RunModel-7",
            2,
        )
        assert type(event.type) is str
    assert sink.events[3].payload_json() == {
        "status": "succeeded",
        "tool_call_id": "call_1",
        "tool_name": "search",
    }


def test_empty_deltas_are_ignored() -> None:
    sink = RecordingSink()
    writer = _writer(sink)
    writer.write_text_delta("")
    writer.write_reasoning_delta("")
    assert sink.events == []


def test_writes_after_close_are_dropped() -> None:
    sink = RecordingSink()
    writer = _writer(sink)
    writer.write_text_delta("kept")
    writer.close()
    assert writer.is_closed
    writer.write_text_delta("late")
    writer.write_event(AgentEventType.USAGE_RECORDED, {"recorded": {}})
    writer.write_tool_call_started("c", "t")
    assert [event.payload for event in sink.events] == ['{"text":"kept"}']


def test_payload_that_is_not_json_raises_type_error_and_writes_nothing() -> None:
    sink = RecordingSink()
    writer = _writer(sink)
    with pytest.raises(
        ConfigurationTypeError, match="event payload value of type object is not JSON"
    ):
        writer.write_event("x.custom", {"value": object()})
    with pytest.raises(ConfigurationTypeError, match="not valid JSON"):
        writer.write_event("x.custom", {"value": float("nan")})
    with pytest.raises(ConfigurationTypeError, match="keys must be strings"):
        writer.write_event("x.custom", {1: "one"})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationTypeError, match="must be a JSON object"):
        writer.write_event("x.custom", ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="non-blank"):
        writer.write_event("  ", {})
    with pytest.raises(ConfigurationError, match="'done'"):
        writer.write_tool_call_finished("c", "t", "done")
    assert sink.events == []


def test_payload_encodes_enums_datetimes_and_non_ascii_text() -> None:
    from datetime import UTC, datetime

    payload = encode_event_payload(
        {
            "deadline": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
            "kind": AgentEventType.TURN_FAILED,
            "t": "é",
        }
    )
    assert payload == '{"deadline":"2026-01-02T03:04:05+00:00","kind":"turn_failed","t":"é"}'


def test_sink_failure_is_logged_and_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[AgentEvent] = []

    def failing_sink(event: AgentEvent) -> None:
        calls.append(event)
        raise RuntimeError("stream unavailable")

    writer = AgentEventWriter(failing_sink, turn_id=None, step_execution_id=None, attempt=1)
    with caplog.at_level(logging.DEBUG, logger="dex_agents.events"):
        writer.write_text_delta("a")
        writer.write_text_delta("b")
    assert len(calls) == 2
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "sink failed" in warnings[0].getMessage()


def test_attempt_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="attempt must be at least 1"):
        AgentEventWriter(RecordingSink(), turn_id=None, step_execution_id=None, attempt=0)


def test_discarding_writer_accepts_writes() -> None:
    writer = AgentEventWriter.discarding(turn_id="turn-1", attempt=3)
    writer.write_text_delta("ignored")
    assert (writer.turn_id, writer.attempt, writer.step_execution_id) == ("turn-1", 3, None)


def test_concurrent_writes_from_many_threads_each_arrive_once_in_thread_order() -> None:
    sink = RecordingSink()
    writer = _writer(sink)
    thread_count, writes_per_thread = 8, 200
    start = threading.Barrier(thread_count)

    def write_many(worker: int) -> None:
        start.wait()
        for index in range(writes_per_thread):
            writer.write_event("test.write", {"worker": worker, "index": index})

    threads = [threading.Thread(target=write_many, args=(n,)) for n in range(thread_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    payloads = [event.payload_json() for event in sink.events]
    assert len(payloads) == thread_count * writes_per_thread
    for worker in range(thread_count):
        indexes = [payload["index"] for payload in payloads if payload["worker"] == worker]
        assert indexes == list(range(writes_per_thread))


async def test_writes_from_other_threads_are_delivered_on_the_owning_loop() -> None:
    sink = RecordingSink()
    writer = _writer(sink)  # built inside the running loop, so it belongs to it
    loop_thread = threading.get_ident()

    def write_from_thread() -> None:
        for index in range(50):
            writer.write_event("test.write", {"index": index})

    await asyncio.to_thread(write_from_thread)
    writer.write_text_delta("from the loop")
    # Thread writes are queued with call_soon_threadsafe; let the loop run them.
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(sink.events) == 51
    assert set(sink.threads) == {loop_thread}
    assert [event.payload_json().get("index") for event in sink.events[:50]] == list(range(50))


async def test_thread_write_queued_before_close_but_run_after_is_dropped() -> None:
    sink = RecordingSink()
    writer = _writer(sink)
    queued = threading.Event()

    def write_then_signal() -> None:
        writer.write_text_delta("queued")
        queued.set()

    thread = threading.Thread(target=write_then_signal)
    thread.start()
    thread.join()
    assert queued.is_set()
    # The runner call returned: the Step closes the writer before the loop runs the queued write.
    writer.close()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert sink.events == []


async def test_stray_thread_writing_after_the_step_returned_never_reaches_the_sink() -> None:
    sink = RecordingSink()
    writer = _writer(sink)
    release = threading.Event()
    done = threading.Event()

    def stray_runner_thread() -> None:
        release.wait()
        for _ in range(100):
            writer.write_text_delta("late")
        done.set()

    thread = threading.Thread(target=stray_runner_thread)
    thread.start()
    writer.write_text_delta("on time")
    writer.close()
    release.set()
    await asyncio.to_thread(done.wait)
    thread.join()
    for _ in range(5):
        await asyncio.sleep(0)
    assert [event.payload for event in sink.events] == ['{"text":"on time"}']
