"""Which Steps of a Flow ran, and with which attempt, read from the engine's history."""

from __future__ import annotations

import asyncio
import json
import subprocess
from dataclasses import dataclass

from dex_agents.exceptions import DexAgentsError
from dex_agents.testing._engine_process import local_engine_command

EXECUTE_COMPLETED_EVENT = "step_execute_completed"
"""``event_type`` of a Step whose Execute completed."""

EXECUTE_FAILED_EVENT = "step_execute_failed"
"""``event_type`` of a Step whose Execute failed after its last attempt."""

WAIT_FOR_COMPLETED_EVENT = "step_wait_for_completed"
"""``event_type`` of a Step whose WaitFor completed."""

WAIT_FOR_FAILED_EVENT = "step_wait_for_failed"
"""``event_type`` of a Step whose WaitFor failed."""

_HISTORY_TIMEOUT_SECONDS = 60.0


class StepHistoryError(DexAgentsError, RuntimeError):
    """The history of a Flow could not be read."""


@dataclass(frozen=True)
class StepHistoryEntry:
    """One Step method event of a Flow's history.

    Attributes:
        event_type: ``step_execute_completed``, ``step_execute_failed``,
            ``step_wait_for_completed`` or ``step_wait_for_failed``.
        step_type: The Step type, such as ``RunModel`` or ``CallTool``.
        step_execution_id: The Step execution, shared by all its attempts.
        final_attempt: The attempt that produced the event (1 for a first try).
    """

    event_type: str
    step_type: str
    step_execution_id: str
    final_attempt: int


async def read_step_history(server_address: str, flow_id: str) -> list[StepHistoryEntry]:
    """Read the Step method events of ``flow_id``, oldest first.

    Uses ``dex-local-engine history``, which reads the history through the
    FlowService ``GetHistoryEvents`` RPC, so it works against any Dex server,
    the embedded engine or ``dexcli dev``.

    Raises:
        StepHistoryError: The command failed or printed something that is not
            a history line; the message carries its output.

    Example:
        >>> import asyncio
        >>> from dex_agents.testing import in_process_worker, wait_for_agent_snapshot
        >>> async def completed_steps() -> list[str]:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         sessions = dex.sessions(flow)
        ...         await sessions.start_session("history-example", "Hi")
        ...         await wait_for_agent_snapshot(sessions, "history-example",
        ...             lambda snapshot: snapshot.state and snapshot.state.turn_count == 1
        ...             and snapshot.state.active_turn_id is None)
        ...     history = await read_step_history(server_address, "history-example")
        ...     return [entry.step_type for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]
        >>> asyncio.run(completed_steps())
        ['StartAgentSession', 'RunModel']
    """
    command = [*local_engine_command(), "history", "--address", server_address, flow_id]
    try:
        result = await asyncio.to_thread(
            subprocess.run, command, capture_output=True, timeout=_HISTORY_TIMEOUT_SECONDS
        )
    except (OSError, subprocess.TimeoutExpired) as failure:
        raise StepHistoryError(f"cannot read the history of {flow_id}: {failure}") from failure
    stdout = result.stdout.decode(errors="replace")
    if result.returncode != 0:
        stderr = result.stderr.decode(errors="replace").strip()
        raise StepHistoryError(
            f"dex-local-engine history exited with status {result.returncode} for "
            f"{flow_id}: {stderr or stdout or '(no output)'}"
        )
    return [_parse_line(line, flow_id) for line in stdout.splitlines() if line.strip()]


def _parse_line(line: str, flow_id: str) -> StepHistoryEntry:
    try:
        event = json.loads(line)
        return StepHistoryEntry(
            event_type=str(event["event_type"]),
            step_type=str(event["step_type"]),
            step_execution_id=str(event["step_execution_id"]),
            final_attempt=int(event["attempt"]),
        )
    except (ValueError, KeyError, TypeError) as failure:
        raise StepHistoryError(
            f"unexpected history line for {flow_id}: {line!r} ({failure})"
        ) from failure
