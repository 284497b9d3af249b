"""``dex-local-engine history``: JSON lines from GetHistoryEvents pages; clear errors."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import subprocess
from collections.abc import Iterator
from concurrent import futures
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from dex_local_engine import errors
from dex_local_engine.history_cli import run_history
from engine_test_support import (
    EngineProcess,
    GateBoard,
    WorkerLauncher,
    engine_command,
    pull_client,
)
from grpc_status import rpc_status
from history_sample_flows import (
    RETRY_REGISTRY,
    STUCK_FOURTH_ATTEMPT_GATE,
    StuckFlow,
    retry_registry,
)


def _context(step_type: str, number: int, attempt: int, source: str) -> pb.StepMethodEventContext:
    return pb.StepMethodEventContext(
        step_type=step_type,
        step_execution_id=f"{step_type}-{number}",
        final_attempt=attempt,
        from_step_execution_id=source,
    )


PAGES = [
    [
        pb.FlowHistoryEvent(
            event_id=1, flow_started_or_continued=pb.FlowStartedOrContinuedHistoryEvent()
        ),
        pb.FlowHistoryEvent(
            event_id=2,
            step_wait_for_completed=pb.StepWaitForCompletedEvent(
                context=_context("AwaitUserMessage", 1, 1, "")
            ),
        ),
    ],
    [
        pb.FlowHistoryEvent(
            event_id=3,
            step_execute_failed=pb.StepExecuteFailedEvent(
                context=_context("RunModel", 1, 2, "AwaitUserMessage-1")
            ),
        ),
        pb.FlowHistoryEvent(
            event_id=4,
            step_execute_completed=pb.StepExecuteCompletedEvent(
                context=_context("RunModel", 1, 3, "AwaitUserMessage-1")
            ),
        ),
        pb.FlowHistoryEvent(event_id=5, flow_closed=pb.FlowClosedHistoryEvent()),
    ],
]


class _HistoryService(dex_pb2_grpc.FlowServiceServicer):
    def __init__(self) -> None:
        self.requests: list[pb.GetHistoryEventsRequest] = []

    def GetHistoryEvents(
        self, request: pb.GetHistoryEventsRequest, context: grpc.ServicerContext
    ) -> pb.GetHistoryEventsResponse:
        self.requests.append(request)
        if request.flow_id != "session-1":
            status = errors.flow_not_found(request.flow_id).to_status()
            context.abort_with_status(rpc_status.to_status(status))
        page = int(request.next_page_token or b"0")
        token = str(page + 1).encode() if page + 1 < len(PAGES) else b""
        return pb.GetHistoryEventsResponse(events=PAGES[page], next_page_token=token)


@pytest.fixture
def served() -> Iterator[tuple[_HistoryService, str]]:
    service = _HistoryService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    dex_pb2_grpc.add_FlowServiceServicer_to_server(service, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield service, f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def test_prints_one_json_line_per_step_method_event_across_pages(
    served: tuple[_HistoryService, str],
) -> None:
    service, address = served
    out, err = io.StringIO(), io.StringIO()
    assert run_history(address, "session-1", steps_only=True, out=out, err=err) == 0
    lines = out.getvalue().splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "event_id": 2,
            "event_type": "step_wait_for_completed",
            "step_type": "AwaitUserMessage",
            "step_execution_id": "AwaitUserMessage-1",
            "attempt": 1,
            "from_step_execution_id": "",
        },
        {
            "event_id": 3,
            "event_type": "step_execute_failed",
            "step_type": "RunModel",
            "step_execution_id": "RunModel-1",
            "attempt": 2,
            "from_step_execution_id": "AwaitUserMessage-1",
        },
        {
            "event_id": 4,
            "event_type": "step_execute_completed",
            "step_type": "RunModel",
            "step_execution_id": "RunModel-1",
            "attempt": 3,
            "from_step_execution_id": "AwaitUserMessage-1",
        },
    ]
    assert lines[0].startswith('{"event_id": 2, "event_type": "step_wait_for_completed"')
    assert [request.next_page_token for request in service.requests] == [b"", b"1"]
    assert err.getvalue() == ""


def test_prints_every_event_with_what_it_says(served: tuple[_HistoryService, str]) -> None:
    _, address = served
    out, err = io.StringIO(), io.StringIO()
    assert run_history(address, "session-1", out=out, err=err) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["event_id"], line["event_type"]) for line in lines] == [
        (1, "flow_started_or_continued"),
        (2, "step_wait_for_completed"),
        (3, "step_execute_failed"),
        (4, "step_execute_completed"),
        (5, "flow_closed"),
    ]
    assert {key for line in lines for key in ("time", "run_attempt") if key in line} == {
        "time",
        "run_attempt",
    }
    assert lines[2]["step_execution_id"] == "RunModel-1" and lines[2]["attempt"] == 2
    assert lines[4]["status"] == "UNSPECIFIED"
    assert err.getvalue() == ""


def test_unknown_flow_is_a_clear_error_and_exit_1(served: tuple[_HistoryService, str]) -> None:
    _, address = served
    out, err = io.StringIO(), io.StringIO()
    assert run_history(address, "nope", out=out, err=err) == 1
    assert out.getvalue() == ""
    assert "flow 'nope' does not exist" in err.getvalue()


def test_unreachable_server_is_a_clear_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    err = io.StringIO()
    assert run_history(f"127.0.0.1:{port}", "session-1", out=io.StringIO(), err=err) == 1
    assert "cannot reach a Dex server at 127.0.0.1:" in err.getvalue()


# --- The real command against the real engine ------------------------------------------------


async def _run_cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [*engine_command(), "history", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_history_of_a_real_flow_shows_each_step_and_its_final_attempt(
    engine: EngineProcess, workers: WorkerLauncher, tmp_path: Path
) -> None:
    await workers.start(RETRY_REGISTRY, engine.address)
    async with pull_client(retry_registry(), engine.address, tmp_path) as client:
        await client.start_flow(client.registry.flows[0], "hist-1", "h")
        result = await client.wait_for_flow("hist-1", timedelta(seconds=30))
        assert result.single_output(str) == "h:done"

    done = await _run_cli("--address", engine.address, "--steps-only", "hist-1")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    event_ids = [event.pop("event_id") for event in events]
    assert event_ids == sorted(event_ids) and len(set(event_ids)) == len(event_ids)
    assert events == [
        {
            "event_type": "step_execute_completed",
            "step_type": "Flaky",
            "step_execution_id": "Flaky-1",
            "attempt": 2,
            "from_step_execution_id": "__start__",
        },
        {
            "event_type": "step_execute_completed",
            "step_type": "Finish",
            "step_execution_id": "Finish-1",
            "attempt": 1,
            "from_step_execution_id": "Flaky-1",
        },
    ]

    every = await _run_cli("--address", engine.address, "hist-1")
    assert every.returncode == 0, every.stderr
    lines = [json.loads(line) for line in every.stdout.splitlines()]
    assert [line["event_id"] for line in lines] == list(range(1, len(lines) + 1))
    summary = [
        (line["event_type"], line.get("step_execution_id"), line.get("attempt")) for line in lines
    ]
    # The failed first attempt of Flaky-1 is there, with its error, before the one that worked.
    assert summary == [
        ("flow_started_or_continued", None, None),
        ("step_execute_pending", "Flaky-1", 1),
        ("step_execute_completed", "Flaky-1", 2),
        ("step_execute_completed", "Finish-1", 1),
        ("flow_closed", None, None),
    ]
    assert "h: first attempt fails" in lines[1]["error"]
    assert lines[1]["error_type"] == "builtins.RuntimeError"
    assert lines[2]["next_steps"] == ["Finish"]
    assert lines[3]["close"] == "GRACEFUL_COMPLETE"
    assert lines[4]["status"] == "COMPLETED"

    missing = await _run_cli("--address", engine.address, "no-such-flow")
    assert missing.returncode == 1
    assert missing.stdout == ""
    assert "flow 'no-such-flow' does not exist" in missing.stderr


async def test_the_history_of_a_stuck_flow_shows_each_failed_attempt_and_why(
    engine: EngineProcess, workers: WorkerLauncher, gates: GateBoard, tmp_path: Path
) -> None:
    gates.hold(STUCK_FOURTH_ATTEMPT_GATE)
    await workers.start(RETRY_REGISTRY, engine.address)
    registry = retry_registry()
    (stuck,) = (flow for flow in registry.flows if isinstance(flow, StuckFlow))
    async with pull_client(registry, engine.address, tmp_path) as client:
        await client.start_flow(stuck, "stuck-1", "s")
        # The engine dispatches attempt 4 only after it recorded the failure of attempt 3.
        await gates.wait_arrived(STUCK_FOURTH_ATTEMPT_GATE)
        done = await _run_cli("--address", engine.address, "stuck-1")
        steps_only = await _run_cli("--address", engine.address, "--steps-only", "stuck-1")
        gates.release(STUCK_FOURTH_ATTEMPT_GATE)
        await client.stop_flow("stuck-1")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["event_type"] for line in lines] == [
        "flow_started_or_continued",
        *["step_execute_pending"] * 3,
    ]
    retried = lines[1:]
    assert [line["step_execution_id"] for line in retried] == ["Stuck-1"] * 3
    assert [line["attempt"] for line in retried] == [1, 2, 3]
    assert [line["error"] for line in retried] == [
        f"s: the ledger is locked (attempt {attempt})" for attempt in (1, 2, 3)
    ]
    assert {line["error_type"] for line in retried} == {"builtins.RuntimeError"}
    # A Step method that never finished is not among the Step method events.
    assert steps_only.returncode == 0 and steps_only.stdout == ""
