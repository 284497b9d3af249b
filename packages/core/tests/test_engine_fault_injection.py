"""The engine SIGKILLed at random points under sessions with tool calls, Workers too: nothing lost.

Sessions of the scenario agent (Stepwise) each run a few turns; every turn's model calls four
tools at once: ``lookup`` (a read), ``upsert`` (an idempotent write), ``send_once`` (a
non-idempotent write) and ``pay_again`` (a non-idempotent write with an outcome check that looks
its idempotency key up in the scenario ledger and runs it again when it was not applied).
Meanwhile a fault task SIGKILLs, at random moments, the engine (and restarts it on the same
database and address), the Worker child (and starts another), or both; the sessions' starts are
spread over the faults, so each fault lands among running sessions.
Clients keep going through it: a send that failed because the engine was down is checked against
the session before it is sent again, so a message is never sent twice on purpose.

At the end, with no more faults, every session must show:

- the user messages are exactly the turns' messages, in order, each once;
- every turn completed (the model's ``done: ...`` reply after all four tool results), or shows
  the seed's outcome of a Step whose every attempt was lost to faults (its retry policy allows
  three): the turn failed with that error and its failure note, and the next turn runs;
- no committed message lost: every message any snapshot showed during the run is still there,
  unchanged;
- ``lookup`` and ``upsert`` answered ``ok`` (a killed attempt repeats them), or, when faults took
  every attempt of their Step, the tool error naming the lost attempt, which the model sees (the
  turn goes on);
- ``send_once`` ran at most once per call (``InvocationLog`` counts every real call by its
  idempotency key), and either answered ``ok`` (then it ran exactly once) or carries the seed's
  outcome for an interrupted non-idempotent write, ``OUTCOME_UNKNOWN_TOOL_RESULT``;
- ``pay_again`` took effect (its key in the ledger) at most once; it answered ``ok`` when it did,
  and otherwise ``failed`` (its check found it not applied after its one more run, or its Step
  never reached a Worker); and a ``pay_again`` that never started is never outcome-unknown: its
  check answers for it.

A ``send_once`` whose attempt was lost before its tool started runs again (start claims, core
README "Lost attempts: start claims"): an outcome-unknown ``send_once`` that never ran must have
sent its start claim (the Worker logs every claim before it sends it, and its answer, in
``claims.log``), so it was lost in the instant between Dex committing the claim and the tool's
first line, where the claim rightly says "may have started" (its answer may not even have reached
the Worker). The test asserts that and counts those calls.

The default suite runs a short variant (40 sessions, 3 turns, 12 faults), and the same checks
under load (issue 33): 50 sessions at once over 2 Worker processes, one Worker SIGKILLed and
restarted once 25 turns have ended (``benchmarks/load.py`` measures the larger configurations).
``DEX_AGENTS_LONG_TESTS=1`` runs 100 sessions of 3 turns under 40 faults, and the large fault
under load: 1,000 sessions of 2 turns at once over 4 Workers, one Worker SIGKILLed once 500 turns
ended and the engine once 1,000 did, both restarted (``DEX_AGENTS_FAULT_LOAD_SESSIONS`` sets
another number of sessions). ``DEX_AGENTS_FAULT_SEED`` repeats a run's fault
schedule (its seed is in every failure message); the moments the faults hit still depend on timing.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

import grpc
import pytest
from agent_session_test_support.claim_agent import CLAIM_SENT, claim_log
from dex import (
    AsyncClient,
    BlobCacheConfig,
    ClientOptions,
    DexServiceError,
    FlowAlreadyStartedError,
    Registry,
    WorkerTarget,
    open_blob_cache,
)
from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    TOOL_CALL_NOT_APPLIED_ERROR_PREFIX,
    TOOL_CALL_NOT_RUN_ERROR_PREFIX,
    TURN_FAILURE_NOTE_HEADER,
    AgentMessage,
    AgentSessionClient,
    AgentSnapshot,
    MessageRole,
    agent_codec_registry,
    tool_call_idempotency_key,
)
from dex_agents.testing import (
    EngineDurability,
    EngineLogs,
    EngineProcess,
    WorkerProcess,
    turns_have_ended,
    wait_until,
)
from dex_agents.testing.scenarios import (
    LEDGER_INVOCATION,
    ScenarioCall,
    ScenarioCommand,
    invocation_log,
    outcome_check_invocation,
)
from engine_fault_worker import STATE_DIR_ENV, build_fault_flow

TESTS_DIR = Path(__file__).resolve().parent
LONG_TESTS = os.environ.get("DEX_AGENTS_LONG_TESTS") == "1"
SEED_ENV = "DEX_AGENTS_FAULT_SEED"
TOOLS = ("lookup", "upsert", "send_once", "pay_again")
NON_IDEMPOTENT_TOOL = "send_once"
CHECKED_TOOL = "pay_again"
"""A non-idempotent write with an outcome check (the scenario ledger) that runs it again."""
LOST_ATTEMPT_ERRORS = ("the engine stopped while this attempt was in flight", "on Worker")
"""What a turn's error, or a tool's error result, says when faults took every attempt of a Step."""
_POLL_SECONDS = 0.25
_TURN_TIMEOUT_SECONDS = 180.0
_CLIENT_BLOB_CACHE_BYTES = 64 * 1024 * 1024

ValueT = TypeVar("ValueT")


class Fault(StrEnum):
    ENGINE = "engine"
    WORKER = "worker"
    BOTH = "engine and worker"


@dataclass(frozen=True)
class FaultPlan:
    """How many sessions run how many turns, and how many faults hit them how often."""

    sessions: int
    turns: int
    concurrency: int
    faults: int
    fault_interval_seconds: tuple[float, float]
    workers: int = 1
    """Worker processes serving the Flow; a Worker fault kills and restarts the first."""
    turns_before_faults: tuple[int, ...] = ()
    """Turns (of all sessions) that must have ended before the first, second... fault: under
    load, each fault then lands mid-run however fast the machine runs the sessions."""

    kinds: tuple[Fault, ...] = tuple(Fault)
    """The kinds of fault the plan injects."""
    shuffled: bool = True
    """Whether the faults come in random order (or ``kinds``' order)."""
    poll_seconds: float = 0.25
    """How often a driver reads a session's snapshot while it waits for a turn's end."""
    turn_timeout_seconds: float = 180.0
    """How long a driver waits for one turn's end."""

    def schedule(self, rng: random.Random) -> list[Fault]:
        """Every kind of fault once, then random ones, in random order (unless not shuffled)."""
        kinds = [*self.kinds]
        kinds += rng.choices(kinds, k=max(0, self.faults - len(kinds)))
        if self.shuffled:
            rng.shuffle(kinds)
        return kinds


SHORT_PLAN = FaultPlan(
    sessions=40, turns=3, concurrency=8, faults=12, fault_interval_seconds=(0.5, 1.5)
)
LONG_PLAN = FaultPlan(
    sessions=100, turns=3, concurrency=10, faults=40, fault_interval_seconds=(0.3, 1.5)
)
UNDER_LOAD_PLAN = FaultPlan(
    sessions=50,
    turns=2,
    concurrency=50,
    faults=1,
    fault_interval_seconds=(0.0, 0.5),
    workers=2,
    turns_before_faults=(25,),
    kinds=(Fault.WORKER,),
)
"""Faults under load: 50 sessions at once over 2 Workers, one Worker SIGKILLed mid-run."""
LOAD_SESSIONS_ENV = "DEX_AGENTS_FAULT_LOAD_SESSIONS"
_LOAD_SESSIONS = int(os.environ.get(LOAD_SESSIONS_ENV) or 1000)
LARGE_UNDER_LOAD_PLAN = FaultPlan(
    sessions=_LOAD_SESSIONS,
    turns=2,
    concurrency=_LOAD_SESSIONS,
    faults=2,
    fault_interval_seconds=(0.0, 0.5),
    workers=4,
    turns_before_faults=(_LOAD_SESSIONS // 2, _LOAD_SESSIONS),
    kinds=(Fault.WORKER, Fault.ENGINE),
    shuffled=False,
    poll_seconds=10.0,  # a snapshot read is an RPC a Worker answers: 100 a second at 1,000
    turn_timeout_seconds=1800.0,
)
"""Issue 33's large fault under load: 1,000 sessions at once over 4 Workers; one Worker SIGKILLed
once a quarter of the turns ended, then the engine once half did; both restarted."""


@dataclass
class _Cluster:
    """The engine and Worker processes of one test, replaced as faults kill them."""

    tmp_path: Path
    state_dir: Path
    address: str = ""
    engine: EngineProcess | None = None
    workers: list[WorkerProcess] = field(default_factory=list)
    generation: int = 0
    faults: list[Fault] = field(default_factory=list)
    injected: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def start_engine(self) -> None:
        self.generation += 1
        self.engine = await EngineProcess.start_local(
            self.tmp_path / "engine" / "engine.db",
            EngineLogs.in_directory(self.tmp_path / "engine", f"engine-{self.generation}"),
            durability=EngineDurability.PROCESS_CRASH_SAFE,
            address=self.address or "127.0.0.1:0",
        )
        self.address = self.engine.server_address

    async def start_workers(self, count: int) -> None:
        for _ in range(count):
            self.workers.append(await self._new_worker())

    async def _new_worker(self) -> WorkerProcess:
        self.generation += 1
        return await WorkerProcess.start(
            "engine_fault_worker",
            server_address=self.address,
            state_dir=self.tmp_path / "workers" / f"worker-{self.generation}",
            cwd=TESTS_DIR,
            env={STATE_DIR_ENV: str(self.state_dir)},
            preload_env={},  # a restart forks from a warm parent instead of importing again
        )

    async def inject(self, fault: Fault) -> None:
        """SIGKILL what ``fault`` names and start it again."""
        if fault in (Fault.ENGINE, Fault.BOTH) and self.engine is not None:
            self.engine.process.kill()
            await asyncio.to_thread(self.engine.process.wait)
        if fault in (Fault.WORKER, Fault.BOTH) and self.workers:
            self.workers[0].kill()
        if fault in (Fault.ENGINE, Fault.BOTH):
            await self.start_engine()
        if fault in (Fault.WORKER, Fault.BOTH):
            self.workers[0] = await self._new_worker()
        async with self.injected:
            self.faults.append(fault)
            self.injected.notify_all()

    async def wait_for_faults(self, count: int) -> None:
        """Until ``count`` faults have been injected."""
        async with self.injected:
            await self.injected.wait_for(lambda: len(self.faults) >= count)

    async def close(self) -> None:
        for worker in self.workers:
            worker.kill()
        if self.engine is not None:
            await self.engine.stop()


@dataclass
class _SessionRecord:
    """What the test sent to one session and every message it saw there."""

    session_id: str
    texts: list[str] = field(default_factory=list)
    seen: dict[int, AgentMessage] = field(default_factory=dict)
    resends: int = 0
    failed_turns: dict[int, str] = field(default_factory=dict)
    """Turn number -> the turn's error, for turns that ended failed."""
    ended_turns: int = 0

    def observe(self, snapshot: AgentSnapshot) -> None:
        for message in snapshot.messages:
            self.seen.setdefault(message.sequence, message)


def _turn_text(session_id: str, turn: int) -> str:
    """The turn's command for the scenario model, tagged with the session and turn."""
    command = json.loads(
        ScenarioCommand(calls=tuple(ScenarioCall(tool) for tool in TOOLS)).to_message()
    )
    command["tag"] = f"{session_id}/turn-{turn}"
    return json.dumps(command)


def _engine_down(error: Exception) -> bool:
    """Whether ``error`` says the engine could not be reached (it was killed or restarting)."""
    if isinstance(error, DexServiceError):
        return error.code is grpc.StatusCode.UNAVAILABLE
    return isinstance(error, grpc.RpcError) and error.code() is grpc.StatusCode.UNAVAILABLE


async def _through_faults(call: Callable[[], Awaitable[ValueT]], what: str) -> ValueT:
    """``call()``, repeated while the engine is down; other errors propagate."""

    async def attempt() -> tuple[ValueT] | None:
        try:
            return (await call(),)
        except (DexServiceError, grpc.RpcError) as error:
            if _engine_down(error):
                await asyncio.sleep(_POLL_SECONDS)
                return None
            raise

    (value,) = await wait_until(what, attempt, _TURN_TIMEOUT_SECONDS)
    return value


def _is_failure_note(message: AgentMessage) -> bool:
    return message.role is MessageRole.USER and (message.text or "").startswith(
        TURN_FAILURE_NOTE_HEADER
    )


def _sent_texts(messages: Sequence[AgentMessage]) -> list[str]:
    """The user messages the test sent (not the session's own turn-failure notes)."""
    return [
        m.text or "" for m in messages if m.role is MessageRole.USER and not _is_failure_note(m)
    ]


def _user_texts(snapshot: AgentSnapshot) -> list[str]:
    return _sent_texts(snapshot.messages) + [queued.text for queued in snapshot.queued_messages]


class _Driver:
    """Runs one session's turns through engine restarts."""

    def __init__(self, sessions: AgentSessionClient, plan: FaultPlan) -> None:
        self._sessions = sessions
        self._plan = plan

    async def run(self, record: _SessionRecord) -> None:
        for turn in range(1, self._plan.turns + 1):
            text = _turn_text(record.session_id, turn)
            record.texts.append(text)
            await self._deliver(record, text, turn)
            await self._wait_for_turn(record, turn)

    async def snapshot(self, record: _SessionRecord) -> AgentSnapshot:
        snapshot = await _through_faults(
            lambda: self._sessions.get_agent_snapshot(record.session_id),
            f"a snapshot of {record.session_id}",
        )
        record.observe(snapshot)
        return snapshot

    async def _deliver(self, record: _SessionRecord, text: str, turn: int) -> None:
        while True:
            try:
                if turn == 1:
                    await self._sessions.start_session(record.session_id, text)
                else:
                    assert await self._sessions.send_user_message(record.session_id, text)
                return
            except FlowAlreadyStartedError:
                return  # the start committed before the engine went down
            except (DexServiceError, grpc.RpcError) as error:
                if not _engine_down(error):
                    raise
            # Unknown whether it committed: the session says, once the engine answers again.
            if turn > 1 and text in _user_texts(await self.snapshot(record)):
                return
            record.resends += 1
            await asyncio.sleep(_POLL_SECONDS)

    async def _wait_for_turn(self, record: _SessionRecord, turn: int) -> None:
        """Until turn ``turn`` ended, completed or failed (recorded in ``failed_turns``)."""

        async def ended() -> AgentSnapshot | None:
            snapshot = await self.snapshot(record)
            state = snapshot.state
            if turns_have_ended(state, turn) and not snapshot.queued_messages:
                return snapshot
            await asyncio.sleep(self._plan.poll_seconds)
            return None

        snapshot = await wait_until(
            f"turn {turn} of {record.session_id} to end", ended, self._plan.turn_timeout_seconds
        )
        assert snapshot.state is not None
        record.ended_turns += 1
        if snapshot.state.last_turn_error is not None:
            record.failed_turns[turn] = snapshot.state.last_turn_error


def _turns_ended(records: Sequence[_SessionRecord]) -> int:
    return sum(record.ended_turns for record in records)


async def _wait_for_turns_ended(
    records: Sequence[_SessionRecord], turns: int, plan: FaultPlan, before: str
) -> None:
    def enough() -> bool:
        return _turns_ended(records) >= turns

    await wait_until(f"{turns} turns to end before {before}", enough, plan.turn_timeout_seconds)


async def _inject_faults(
    cluster: _Cluster,
    plan: FaultPlan,
    rng: random.Random,
    schedule: list[Fault],
    records: Sequence[_SessionRecord],
) -> None:
    for number, fault in enumerate(schedule):
        if number < len(plan.turns_before_faults):
            turns = plan.turns_before_faults[number]
            await _wait_for_turns_ended(records, turns, plan, f"fault {number + 1}")
        await asyncio.sleep(rng.uniform(*plan.fault_interval_seconds))
        await cluster.inject(fault)


async def _timed(work: Awaitable[None], started: float) -> float:
    """Await ``work``; how many seconds after ``started`` it ended."""
    await work
    return time.monotonic() - started


async def _drive_all(
    sessions: AgentSessionClient, plan: FaultPlan, records: list[_SessionRecord], cluster: _Cluster
) -> None:
    """Run every session, ``plan.concurrency`` at a time, their starts spread over the faults.

    Session ``i`` starts once ``i * faults // sessions`` faults were injected, so the faults
    land among running sessions however fast this machine runs them.
    """
    driver = _Driver(sessions, plan)
    pending = iter(enumerate(records))

    async def lane() -> None:
        for number, record in pending:
            await cluster.wait_for_faults(number * plan.faults // plan.sessions)
            await driver.run(record)

    await asyncio.gather(*(lane() for _ in range(plan.concurrency)))


@dataclass(frozen=True)
class _Runs:
    """What really ran, by idempotency key, from the Workers' ``InvocationLog``."""

    sends: Counter[str]
    """Runs of ``send_once``."""
    payments: Counter[str]
    """Runs of ``pay_again`` (a run that died before its ledger write did not take effect)."""
    ledger: Counter[str]
    """``pay_again`` writes that took effect."""
    checks: Counter[str]
    """Runs of ``pay_again``'s outcome check (each after a lost attempt)."""
    sent_claims: frozenset[str]
    """``<flow_id>/<tool_call_id>`` of every start claim a Worker sent."""
    granted_claims: frozenset[str]
    """``<flow_id>/<tool_call_id>`` of every start claim whose answer, granted, came back."""

    @classmethod
    def read(cls, state_dir: Path) -> _Runs:
        log = invocation_log(state_dir)
        return cls(
            Counter(log.keys(NON_IDEMPOTENT_TOOL)),
            Counter(log.keys(CHECKED_TOOL)),
            Counter(log.keys(LEDGER_INVOCATION)),
            Counter(log.keys(outcome_check_invocation(CHECKED_TOOL))),
            frozenset(claim_log(state_dir).keys(CLAIM_SENT)),
            frozenset(claim_log(state_dir).keys("granted")),
        )


def _claim_key(idempotency_key: str) -> str:
    """``<flow_id>/<tool_call_id>`` of ``<flow_id>/<turn_id>/<tool_call_id>``."""
    flow_id, _turn_id, tool_call_id = idempotency_key.rsplit("/", 2)
    return f"{flow_id}/{tool_call_id}"


def _check_session(record: _SessionRecord, final: AgentSnapshot, runs: _Runs, context: str) -> None:
    messages = list(final.messages)
    assert messages and messages[0].sequence == 1, f"{context}: messages start at 1"
    by_sequence = {message.sequence: message for message in messages}
    for sequence, seen in record.seen.items():
        assert by_sequence.get(sequence) == seen, (
            f"{context}: committed message {sequence} changed or was lost: {seen!r}"
        )
    users = _sent_texts(messages)
    assert users == record.texts, f"{context}: user messages {users!r}"
    assert final.state is not None and final.state.turn_count == len(record.texts), context
    assert (final.state.last_turn_error is None) == (
        len(record.texts) not in record.failed_turns
    ), f"{context}: last turn error {final.state.last_turn_error!r}"
    for turn in range(1, len(record.texts) + 1):
        _check_turn(
            record,
            turn,
            [m for m in messages if m.turn_id == f"turn-{turn}"],
            runs,
            f"{context} turn-{turn}",
        )


def _check_turn(
    record: _SessionRecord, turn: int, of_turn: list[AgentMessage], runs: _Runs, context: str
) -> None:
    """A completed turn: ``done: ...`` and all four tool results. A failed one (the seed's
    outcome when faults took every attempt of a Step): its error names the lost attempt, and
    whichever tool results it stored obey the same rules."""
    tool_results = [m for m in of_turn if m.role is MessageRole.TOOL]
    names = sorted(m.tool_name or "" for m in tool_results)
    error = record.failed_turns.get(turn)
    if error is None:
        replies = [m.text or "" for m in of_turn if m.role is MessageRole.ASSISTANT and m.text]
        assert replies and replies[-1].startswith("done: "), f"{context}: {replies!r}"
        assert names == sorted(TOOLS), f"{context}: tool results {names}"
    else:
        assert _names_lost_attempt(error), f"{context}: {error!r}"
        assert len(names) == len(set(names)) <= len(TOOLS), f"{context}: tool results {names}"
    for message in tool_results:
        _check_tool_result(record, message, runs, context)


def _check_tool_result(
    record: _SessionRecord, message: AgentMessage, runs: _Runs, context: str
) -> None:
    tool, output = message.tool_name, message.tool_output or ""
    ok = f"{tool} ungated ok"
    if tool not in (NON_IDEMPOTENT_TOOL, CHECKED_TOOL):
        # A killed attempt runs again; only a Step whose three attempts all were lost records
        # the tool as failed, with the last lost attempt's error.
        lost = output.startswith("Error: ") and _names_lost_attempt(output)
        assert output == ok or lost, f"{context}: {tool} answered {output!r}"
        return
    key = _key(record, message)
    if tool == NON_IDEMPOTENT_TOOL:
        sent = runs.sends[key]
        if output == ok:
            assert sent == 1, f"{context}: send_once answered ok after {sent} runs"
        else:
            assert OUTCOME_UNKNOWN_TOOL_RESULT in output, f"{context}: send_once said {output!r}"
            assert sent <= 1, f"{context}: send_once ran {sent} times"
        return
    applied = runs.ledger[key]
    assert applied <= 1, f"{context}: pay_again took effect {applied} times"
    if output == ok:
        assert applied == 1, f"{context}: pay_again answered ok but took effect {applied} times"
    elif OUTCOME_UNKNOWN_TOOL_RESULT in output:
        # Only a check that could not answer leaves it unknown; never for a call that never ran.
        assert runs.payments[key] > 0, f"{context}: pay_again never ran but is outcome-unknown"
    else:
        # Its check found it not applied (after one more run), or its Step never reached a Worker.
        assert any(
            prefix in output
            for prefix in (TOOL_CALL_NOT_APPLIED_ERROR_PREFIX, TOOL_CALL_NOT_RUN_ERROR_PREFIX)
        ), f"{context}: pay_again answered {output!r}"
        assert applied == 0, f"{context}: pay_again reported not applied but took effect"


def _names_lost_attempt(text: str) -> bool:
    return any(lost in text for lost in LOST_ATTEMPT_ERRORS)


def _key(record: _SessionRecord, message: AgentMessage) -> str:
    assert message.tool_call_id is not None and message.turn_id is not None, message
    return tool_call_idempotency_key(record.session_id, message.turn_id, message.tool_call_id)


def _outcome_unknown_keys(
    records: Sequence[_SessionRecord], finals: Sequence[AgentSnapshot], tool: str
) -> list[str]:
    return [
        _key(record, message)
        for record, final in zip(records, finals, strict=True)
        for message in final.messages
        if message.tool_name == tool and OUTCOME_UNKNOWN_TOOL_RESULT in (message.tool_output or "")
    ]


async def _run_plan(tmp_path: Path, plan: FaultPlan) -> None:
    seed = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(1 << 32))
    rng = random.Random(seed)
    schedule = plan.schedule(rng)
    state_dir = tmp_path / "state"
    cluster = _Cluster(tmp_path, state_dir)
    flow = build_fault_flow(state_dir)
    records = [_SessionRecord(f"fault-{number:03d}") for number in range(plan.sessions)]
    cache = open_blob_cache(
        BlobCacheConfig(str(tmp_path / "client-blob-cache"), _CLIENT_BLOB_CACHE_BYTES)
    )
    try:
        await cluster.start_engine()
        await cluster.start_workers(plan.workers)
        registry = Registry([flow], agent_codec_registry(), allow_async_handlers=True)
        options = ClientOptions(
            server_address=cluster.address, worker_target=WorkerTarget(pull=True)
        )
        async with AsyncClient(registry, cache, options) as client:
            sessions = AgentSessionClient(client, flow)
            started = time.monotonic()
            faults_took, sessions_took = await asyncio.gather(
                _timed(_inject_faults(cluster, plan, rng, schedule, records), started),
                _timed(_drive_all(sessions, plan, records, cluster), started),
            )
            driver = _Driver(sessions, plan)
            finals = [await driver.snapshot(record) for record in records]
    finally:
        await cluster.close()
        cache.close()
    runs = _Runs.read(state_dir)
    context = f"seed {seed} ({SEED_ENV}), faults {[str(f) for f in cluster.faults]}"
    assert cluster.faults == schedule, context
    twice = {key: count for key, count in runs.sends.items() if count > 1}
    assert not twice, f"{context}: non-idempotent writes ran twice: {twice}"
    for record, final in zip(records, finals, strict=True):
        _check_session(record, final, runs, f"{context}, {record.session_id}")
    # An outcome-unknown write that never ran was lost after it sent its claim, never before.
    unknown = _outcome_unknown_keys(records, finals, NON_IDEMPOTENT_TOOL)
    never_ran = [key for key in unknown if runs.sends[key] == 0]
    unclaimed = [key for key in never_ran if _claim_key(key) not in runs.sent_claims]
    assert not unclaimed, f"{context}: never-started writes recorded outcome-unknown: {unclaimed}"
    answered = sum(_claim_key(key) in runs.granted_claims for key in never_ran)
    checked_unknown = _outcome_unknown_keys(records, finals, CHECKED_TOOL)
    print(
        f"{context}: {plan.sessions} sessions x {plan.turns} turns; "
        f"{sum(runs.sends.values())} send_once runs, {len(unknown)} outcome-unknown results "
        f"({len(never_ran)} of them never ran, each after it sent its start claim, "
        f"{answered} after its claim was granted); {sum(runs.payments.values())} pay_again runs, "
        f"{sum(runs.ledger.values())} applied, {len(runs.checks)} lost and checked, "
        f"{len(checked_unknown)} outcome-unknown; "
        f"{sum(r.resends for r in records)} resent messages, "
        f"{sum(len(r.failed_turns) for r in records)} turns failed by lost attempts; "
        f"the faults took {faults_took:.1f} s, the sessions {sessions_took:.1f} s"
    )


async def test_engine_and_worker_kills_lose_nothing_and_repeat_no_write(tmp_path: Path) -> None:
    await _run_plan(tmp_path, SHORT_PLAN)


@pytest.mark.dex_own_stack  # its own engine and two Worker processes, one SIGKILLed
async def test_a_worker_killed_under_load_of_50_sessions_over_2_workers_loses_nothing(
    tmp_path: Path,
) -> None:
    """Issue 33's small fault under load: 50 sessions at once, 2 Workers, one killed mid-run."""
    await _run_plan(tmp_path, UNDER_LOAD_PLAN)


@pytest.mark.dex_own_stack
@pytest.mark.skipif(not LONG_TESTS, reason="set DEX_AGENTS_LONG_TESTS=1 for 1,000 sessions")
async def test_1000_sessions_over_4_workers_lose_nothing_to_a_worker_then_an_engine_kill(
    tmp_path: Path,
) -> None:
    """The large fault under load (``DEX_AGENTS_FAULT_LOAD_SESSIONS`` sessions, 1,000 unless set)."""
    await _run_plan(tmp_path, LARGE_UNDER_LOAD_PLAN)


@pytest.mark.skipif(not LONG_TESTS, reason="set DEX_AGENTS_LONG_TESTS=1 for 100 sessions")
async def test_100_sessions_under_40_engine_and_worker_kills_lose_nothing(
    tmp_path: Path,
) -> None:
    await _run_plan(tmp_path, LONG_PLAN)
