"""Benchmark: one agent turn without durability, on dex-agents, and on durable peers, side by side.

The turn: the user asks about order 7; a model that sleeps ``--model-latency-ms`` on every call
asks for ``lookup_order`` (a READ tool), then for ``add_order_note`` (a non-idempotent WRITE tool,
no approval), then answers. Three model calls and two tool calls, the same script in every
framework (``adapter_agents.next_model_action``). No network, no API key: every model is the
framework's own scripted or function model.

Contestants (``--only`` takes a comma-separated subset; all by default):

- ``baseline``: the Stepwise runner's calls in process, no durability (what every overhead is
  measured above);
- ``dex-agents``: the Stepwise agent as a durable session on ``dex-local-engine serve`` (WAL,
  ``synchronous=OFF``: process-crash-safe, its default) with a Worker child process;
- ``dex-agents-pydantic-ai``, ``dex-agents-langgraph``: the Pydantic AI and LangGraph agents on
  the same engine, through our adapters;
- ``pydantic-ai``, ``langgraph``: those two frameworks in process, no durability (each durable
  peer's overhead is also shown above its own framework);
- ``dbos``: the Pydantic AI agent with DBOS's ``DBOSDurability`` capability, each turn one
  ``@DBOS.workflow``, the two tools ``@DBOS.step``s, DBOS's SQLite system database;
- ``langgraph-sqlite``: the LangGraph graph compiled with ``AsyncSqliteSaver``, one thread,
  ``durability="sync"`` (each checkpoint written before the next step, the mode that never runs
  a finished node again); ``langgraph-sqlite-async``: the same with LangGraph's default
  ``durability="async"``;
- ``openai-agents``, ``dex-agents-openai-agents``, ``dbos-openai-agents``: the OpenAI Agents SDK
  agent in process, through our adapter, and run by ``dbos_openai_agents.DBOSRunner`` in one
  ``@DBOS.workflow`` per turn (tools ``@DBOS.step``s);
- ``google-adk``, ``dex-agents-google-adk``, ``dbos-google-adk``: the Google ADK agent in process
  (one in-memory session), through our adapter, and with ``dbos_google_adk.DBOSPlugin`` on its
  Runner in one ``@DBOS.workflow`` per turn (tools ``@DBOS.step``s);
- ``strands``, ``dex-agents-strands``: the Strands agent in process (``Agent.invoke_async``, its
  own loop keeping the conversation) and through our adapter (no durable Strands peer here);
- ``claude-agent-sdk``, ``dex-agents-claude-agent-sdk``: the Claude Agent SDK (the real CLI
  against a local fake API) in process (a CLI per turn, resuming its own session) and through our
  adapter; its benchmark agent has only the READ turn (two model calls, one tool call), so
  compare these two rows with each other only;
- ``restate``: the Pydantic AI agent as ``restate.ext.pydantic.RestateAgent`` (model calls and,
  with ``auto_wrap_tools``, tool calls journaled) in a Virtual Object that keeps the conversation,
  served by hypercorn in this process, behind a ``restate-server`` process. The server is an npm
  package (``npm install --prefix DIR @restatedev/restate-server``); pass its binary with
  ``--restate-server`` or put ``restate-server`` on PATH, or the row is skipped.

SQLite settings (``--peer-sqlite``): ``matched`` (default) gives the peers our engine's settings,
WAL and ``synchronous=OFF`` (every commit reaches the OS, no fsync: survives a killed process, not
an OS crash), and Restate ``rocksdb-disable-wal-fsync``; ``shipped`` leaves each peer as it ships
(DBOS: rollback journal, ``synchronous=FULL``; LangGraph: WAL, ``synchronous=FULL``; Restate: WAL
fsync on). Our engine stays at its default either way (``AgentTestStack`` starts it
process-crash-safe), so only ``matched`` compares like with like.

Every conversation keeps its history across turns, as a durable session does. It prints, for
each contestant, the median turn, its overhead above the baseline and above its own framework in
process, and the ratio of its overhead to dex-agents' (Stepwise, and the same framework).

The peers need the ``peers`` dependency group (not installed by default)::

    uv sync --all-packages --group peers
    uv run --group peers python benchmarks/peers.py
    uv run --group peers python benchmarks/peers.py --turns 30 --restate-server PATH
    uv run python benchmarks/peers.py --only baseline,dex-agents --turns 2   # no peers group
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import shlex
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from adapter_agents import TurnShape
from adapter_turns import MeasuredTurns, Options, load_agent, measure_durable, time_turns

if TYPE_CHECKING:
    from langgraph.graph import MessagesState
    from pydantic_ai.messages import ModelMessage

RunTurn = Callable[[str], Awaitable[str]]
_SHAPE: Final = TurnShape.READ_WRITE
_PEERS_GROUP_HINT: Final = "install the peers group: uv sync --all-packages --group peers"
_RESTATE_START_SECONDS: Final = 60.0


class PeerSqlite(StrEnum):
    """How the peers' SQLite (and Restate's log) make commits durable."""

    MATCHED = "matched"
    SHIPPED = "shipped"


@dataclass(frozen=True)
class PeerOptions:
    """The parsed command line."""

    turns: int
    warmup: int
    model_latency_ms: float
    only: tuple[str, ...]
    peer_sqlite: PeerSqlite
    restate_server: str | None

    def turn_options(self, framework: str, shape: TurnShape = _SHAPE) -> Options:
        """``adapter_turns``' options for ``framework``'s turn (read-write unless ``shape``)."""
        return Options(framework, self.turns, self.warmup, self.model_latency_ms, shape)


class Skipped(Exception):
    """A contestant cannot run here; the message says why and what would make it run."""


@dataclass(frozen=True)
class Contestant:
    """One row of the table.

    Attributes:
        name: Its ``--only`` name.
        description: What runs, for the table's legend.
        framework_baseline: The contestant whose in-process run is this one's framework without
            durability (``None`` for the baselines themselves).
        ours: The dex-agents contestant of the same framework, for the same-framework ratio.
        measure: Its measured turns: wall seconds each, and CPU seconds of all its processes.
        shape: Its turn's tools.
    """

    name: str
    description: str
    framework_baseline: str | None
    ours: str | None
    measure: Callable[[PeerOptions, Path], Awaitable[MeasuredTurns]]
    shape: TurnShape = _SHAPE
    """Its turn; only a read-write contestant is compared with the (read-write) baseline."""


@dataclass
class Result:
    """A contestant's measured turns, or why it did not run, and notes on what it recorded."""

    contestant: Contestant
    durations: list[float] = field(default_factory=list)
    cpu_seconds: float = 0.0
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def median(self) -> float | None:
        return statistics.median(self.durations) if self.durations else None

    @property
    def cpu_per_turn(self) -> float | None:
        return self.cpu_seconds / len(self.durations) if self.durations else None


_NOTES: list[str] = []
"""Notes the running contestant adds (what its durability recorded); moved into its Result."""


def _progress(text: str) -> None:
    print(f"... {text}", file=sys.stderr, flush=True)


def _import_peer(module: str) -> Any:
    """Import a module of the peers group, or skip the contestant with the install hint."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as missing:
        raise Skipped(f"{missing}; {_PEERS_GROUP_HINT}") from missing


# --- in process and dex-agents -----------------------------------------------------------------


def _in_process(
    framework: str, shape: TurnShape = _SHAPE
) -> Callable[[PeerOptions, Path], Awaitable[MeasuredTurns]]:
    async def measure(options: PeerOptions, state_dir: Path) -> MeasuredTurns:
        turn_options = options.turn_options(framework, shape)
        agent = load_agent(framework, options.model_latency_ms, shape)
        return await time_turns(agent.run_in_process, turn_options, f"{framework} in process:")

    return measure


def _dex_agents(
    framework: str, shape: TurnShape = _SHAPE
) -> Callable[[PeerOptions, Path], Awaitable[MeasuredTurns]]:
    async def measure(options: PeerOptions, state_dir: Path) -> MeasuredTurns:
        turn_options = options.turn_options(framework, shape)
        agent = load_agent(framework, options.model_latency_ms, shape)
        return await measure_durable(agent, turn_options, state_dir)

    return measure


# --- peers -------------------------------------------------------------------------------------


def _matched_pragmas(connection: sqlite3.Connection) -> None:
    """Our engine's settings: WAL, and commits handed to the OS without fsync."""
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=OFF")


def _sqlite_settings(path: Path) -> str:
    """The journal mode and synchronous level a new connection to ``path`` reports."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        journal = connection.execute("PRAGMA journal_mode").fetchone()[0]
    return f"journal_mode={journal}"


@contextlib.contextmanager
def _dbos_launched(options: PeerOptions, state_dir: Path, name: str) -> Iterator[Any]:
    """DBOS on a SQLite system database in ``state_dir``, launched after the body registers its
    functions (call the yielded ``launch``); destroyed afterwards. Notes the SQLite settings."""
    dbos = _import_peer("dbos")
    sqlalchemy = _import_peer("sqlalchemy")
    database = state_dir / "dbos.sqlite"
    synchronous: list[int] = []

    def on_connect(connection: sqlite3.Connection, record: object) -> None:
        if options.peer_sqlite is PeerSqlite.MATCHED:
            _matched_pragmas(connection)
        synchronous.append(connection.execute("PRAGMA synchronous").fetchone()[0])

    # DBOS builds its own SQLAlchemy engine; a class-level listener reaches its connections.
    sqlalchemy.event.listen(sqlalchemy.Engine, "connect", on_connect)
    dbos.DBOS(
        config={
            "name": name,
            "system_database_url": f"sqlite:///{database}",
            "log_level": "WARNING",
        }
    )
    try:
        yield dbos
        _NOTES.append(
            f"SQLite {_sqlite_settings(database)}, synchronous={sorted(set(synchronous))} "
            "(0 OFF, 1 NORMAL, 2 FULL)"
        )
    finally:
        dbos.DBOS.destroy(destroy_registry=True)
        sqlalchemy.event.remove(sqlalchemy.Engine, "connect", on_connect)


async def _time_dbos_turns(
    dbos: Any,
    workflow: Callable[[str], Awaitable[str]],
    options: PeerOptions,
    framework: str,
    label: str,
) -> MeasuredTurns:
    """Time turns that each run ``workflow`` under a fresh workflow ID; note the last one's steps."""
    DBOS = dbos.DBOS
    workflow_ids: list[str] = []

    async def run_turn(text: str) -> str:
        workflow_id = f"peers-turn-{len(workflow_ids) + 1}"
        workflow_ids.append(workflow_id)
        with dbos.SetWorkflowID(workflow_id):
            return await workflow(text)

    measured = await time_turns(run_turn, options.turn_options(framework), label)
    steps = await DBOS.list_workflow_steps_async(workflow_ids[-1])
    names = ", ".join(str(step["function_name"]) for step in steps)
    _NOTES.append(f"the last turn's workflow recorded {len(steps)} steps: {names}")
    return measured


async def _measure_dbos(options: PeerOptions, state_dir: Path) -> MeasuredTurns:
    """The Pydantic AI agent with ``DBOSDurability``: one DBOS workflow per turn, on SQLite."""
    _import_peer("dbos")  # first: without the peers group, skipped before Pydantic AI's import
    durability = _import_peer("pydantic_ai.durable_exec.dbos")
    from adapter_agents.pydantic_ai import build_agent

    with _dbos_launched(options, state_dir, "peers-benchmark") as dbos:
        DBOS = dbos.DBOS
        agent = build_agent(
            options.model_latency_ms / 1000.0,
            _SHAPE,
            name="peers_benchmark",
            wrap_tool=DBOS.step(),
            capabilities=[durability.DBOSDurability()],
        )
        history: list[ModelMessage] = []

        async def run_agent(
            text: str, history: list[ModelMessage]
        ) -> tuple[str, list[ModelMessage]]:
            result = await agent.run(text, message_history=history)
            return result.output, result.all_messages()

        turn: Callable[..., Awaitable[tuple[str, list[ModelMessage]]]]
        turn = DBOS.workflow(name="peers_benchmark_turn")(run_agent)
        DBOS.launch()

        async def run_workflow(text: str) -> str:
            output, messages = await turn(text, history)
            history[:] = messages
            return str(output)

        return await _time_dbos_turns(dbos, run_workflow, options, "dbos", "dbos:")


async def _measure_dbos_openai_agents(options: PeerOptions, state_dir: Path) -> MeasuredTurns:
    """The OpenAI Agents SDK agent run by ``DBOSRunner`` in one DBOS workflow per turn."""
    runner = _import_peer("dbos_openai_agents")
    from adapter_agents.openai_agents import RUN_CONFIG, build_agent

    with _dbos_launched(options, state_dir, "peers-benchmark-openai-agents") as dbos:
        DBOS = dbos.DBOS
        agent = build_agent(options.model_latency_ms / 1000.0, _SHAPE, wrap_tool=DBOS.step())
        history: list[Any] = []

        async def run_agent(items: list[Any]) -> tuple[str, list[Any]]:
            result = await runner.DBOSRunner.run(agent, items, run_config=RUN_CONFIG)
            return str(result.final_output), result.to_input_list()

        turn: Callable[..., Awaitable[tuple[str, list[Any]]]]
        turn = DBOS.workflow(name="peers_benchmark_openai_agents_turn")(run_agent)
        DBOS.launch()

        async def run_workflow(text: str) -> str:
            output, items = await turn([*history, {"role": "user", "content": text}])
            history[:] = items
            return output

        return await _time_dbos_turns(
            dbos, run_workflow, options, "openai-agents", "dbos-openai-agents:"
        )


async def _measure_dbos_google_adk(options: PeerOptions, state_dir: Path) -> MeasuredTurns:
    """The Google ADK agent with ``DBOSPlugin`` on its Runner, one DBOS workflow per turn."""
    plugin = _import_peer("dbos_google_adk")
    from adapter_agents.google_adk import APP_NAME, USER_ID, build_llm_agent, run_adk_turn
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService

    with _dbos_launched(options, state_dir, "peers-benchmark-google-adk") as dbos:
        DBOS = dbos.DBOS
        agent = build_llm_agent(options.model_latency_ms / 1000.0, _SHAPE, wrap_tool=DBOS.step())
        runner = Runner(
            app_name=APP_NAME,
            agent=agent,
            plugins=[plugin.DBOSPlugin()],
            session_service=InMemorySessionService(),
        )
        session_id = "peers-benchmark"

        async def run_agent(text: str) -> str:
            return await run_adk_turn(runner, session_id, text)

        turn: Callable[[str], Awaitable[str]]
        turn = DBOS.workflow(name="peers_benchmark_google_adk_turn")(run_agent)
        DBOS.launch()
        await runner.session_service.create_session(
            app_name=APP_NAME, user_id=USER_ID, session_id=session_id
        )
        return await _time_dbos_turns(dbos, turn, options, "google-adk", "dbos-google-adk:")


def _langgraph_sqlite(
    durability: Literal["sync", "async"],
) -> Callable[[PeerOptions, Path], Awaitable[MeasuredTurns]]:
    async def measure(options: PeerOptions, state_dir: Path) -> MeasuredTurns:
        """The LangGraph graph with ``AsyncSqliteSaver``: one thread keeps the conversation."""
        aio = _import_peer("langgraph.checkpoint.sqlite.aio")
        aiosqlite = _import_peer("aiosqlite")
        from adapter_agents.langgraph import build_graph
        from langchain_core.messages import HumanMessage

        database = state_dir / f"langgraph-{durability}.sqlite"
        async with aiosqlite.connect(database) as connection:
            saver = aio.AsyncSqliteSaver(connection)
            await saver.setup()
            if options.peer_sqlite is PeerSqlite.MATCHED:
                await connection.execute("PRAGMA synchronous=OFF")
            async with connection.execute("PRAGMA synchronous") as cursor:
                synchronous = (await cursor.fetchone())[0]
            graph = build_graph(options.model_latency_ms / 1000.0, _SHAPE).compile(
                checkpointer=saver
            )
            config: Any = {"configurable": {"thread_id": "peers-benchmark"}}

            async def run_turn(text: str) -> str:
                turn_input: MessagesState = {"messages": [HumanMessage(content=text)]}
                state = await graph.ainvoke(turn_input, config, durability=durability)
                return str(state["messages"][-1].text)

            label = f"langgraph-sqlite ({durability}):"
            measured = await time_turns(run_turn, options.turn_options("langgraph"), label)
            checkpoints = [checkpoint async for checkpoint in saver.alist(config)]
            turns = options.warmup + options.turns
            _NOTES.append(
                f"{len(checkpoints)} checkpoints over {turns} turns "
                f"({len(checkpoints) / turns:g} per turn)"
            )
        _NOTES.append(f"SQLite {_sqlite_settings(database)}, synchronous={synchronous}")
        return measured

    return measure


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _restate_binary(options: PeerOptions) -> str:
    binary = options.restate_server or shutil.which("restate-server")
    if binary is None or not Path(binary).exists():
        raise Skipped(
            "no restate-server (it is the npm package @restatedev/restate-server: "
            "npm install --prefix DIR @restatedev/restate-server, then --restate-server "
            "DIR/node_modules/.bin/restate-server or put it on PATH)"
        )
    return binary


def _restate_config(options: PeerOptions, ports: Mapping[str, int]) -> str:
    """Restate's configuration: local ports, no telemetry, and the WAL fsync setting."""
    lines = [
        "disable-telemetry = true",
        f'bind-address = "127.0.0.1:{ports["node"]}"',
        "[admin]",
        f'bind-address = "127.0.0.1:{ports["admin"]}"',
        "disable-web-ui = true",
        "[ingress]",
        f'bind-address = "127.0.0.1:{ports["ingress"]}"',
    ]
    if options.peer_sqlite is PeerSqlite.MATCHED:
        # Our engine does not fsync its commits by default; neither does Restate's log then.
        lines += [
            "[bifrost.local]",
            "rocksdb-disable-wal-fsync = true",
            "[log-server]",
            "rocksdb-disable-wal-fsync = true",
        ]
    return "\n".join(lines) + "\n"


@contextlib.asynccontextmanager
async def _restate_server(options: PeerOptions, state_dir: Path) -> AsyncIterator[dict[str, int]]:
    """A ``restate-server`` process on free local ports, in its own process group."""
    httpx = _import_peer("httpx")
    binary = _restate_binary(options)
    ports = {name: _free_port() for name in ("node", "admin", "ingress")}
    config = state_dir / "restate.toml"
    config.write_text(_restate_config(options, ports))
    log = (state_dir / "restate.log").open("wb")
    # Its invokers make temp directories they leave behind (24 a run): keep them in the state dir.
    temp_dir = state_dir / "tmp"
    temp_dir.mkdir()
    process = subprocess.Popen(
        [binary, "-c", str(config), "--base-dir", str(state_dir / "restate"), "--no-logo"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(temp_dir)},
    )
    try:
        deadline = time.monotonic() + _RESTATE_START_SECONDS
        async with httpx.AsyncClient() as client:
            while True:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"restate-server exited with {process.returncode}; see its log "
                        f"{state_dir / 'restate.log'}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"http://127.0.0.1:{ports['admin']}/health")).is_success:
                        break
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"restate-server did not answer in {_RESTATE_START_SECONDS}s"
                    )
                await asyncio.sleep(0.2)
        yield ports
    finally:
        # The npm launcher runs the real binary as its child: end the whole group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


async def _measure_restate(options: PeerOptions, state_dir: Path) -> MeasuredTurns:
    """The Pydantic AI agent as a ``RestateAgent`` in a Virtual Object that keeps the history."""
    restate = _import_peer("restate")
    restate_pydantic = _import_peer("restate.ext.pydantic")
    hypercorn_asyncio = _import_peer("hypercorn.asyncio")
    hypercorn_config = _import_peer("hypercorn.config")
    httpx = _import_peer("httpx")
    from adapter_agents.pydantic_ai import build_agent
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    class HistorySerde(_import_peer("restate.serde").Serde):  # type: ignore[misc]
        def serialize(self, obj: list[ModelMessage] | None) -> bytes:
            return ModelMessagesTypeAdapter.dump_json(obj or [])

        def deserialize(self, buf: bytes) -> list[ModelMessage] | None:
            return ModelMessagesTypeAdapter.validate_json(buf) if buf else None

    agent = restate_pydantic.RestateAgent(
        build_agent(options.model_latency_ms / 1000.0, _SHAPE), auto_wrap_tools=True
    )
    conversation = restate.VirtualObject("PeersConversation")
    serde = HistorySerde()

    async def turn(context: Any, text: str) -> str:
        history = await context.get("history", serde=serde) or []
        result = await agent.run(text, message_history=history)
        context.set("history", result.all_messages(), serde=serde)
        return str(result.output)

    conversation.handler(name="turn")(turn)

    service_port = _free_port()
    config = hypercorn_config.Config()
    config.bind = [f"127.0.0.1:{service_port}"]
    # Quiet: hypercorn warns that Restate's ASGI app has no lifespan protocol.
    config.loglevel = "ERROR"
    stop = asyncio.Event()
    server = asyncio.create_task(
        hypercorn_asyncio.serve(restate.app([conversation]), config, shutdown_trigger=stop.wait)
    )
    try:
        async with (
            _restate_server(options, state_dir) as ports,
            httpx.AsyncClient(timeout=60) as client,
        ):
            registered = await client.post(
                f"http://127.0.0.1:{ports['admin']}/deployments",
                json={"uri": f"http://127.0.0.1:{service_port}"},
            )
            registered.raise_for_status()
            url = f"http://127.0.0.1:{ports['ingress']}/PeersConversation/peers-benchmark/turn"

            async def run_turn(text: str) -> str:
                response = await client.post(url, json=text)
                response.raise_for_status()
                return str(response.json())

            measured = await time_turns(run_turn, options.turn_options("restate"), "restate:")
            _NOTES.append(await _restate_journal_note(client, ports["admin"]))
            fsync = "off" if options.peer_sqlite is PeerSqlite.MATCHED else "on (as shipped)"
            _NOTES.append(f"restate-server {_restate_version(options)}, RocksDB WAL fsync {fsync}")
            return measured
    finally:
        stop.set()
        await server


async def _restate_journal_note(client: Any, admin_port: int) -> str:
    """How many journal entries the last invocation of the turn handler recorded."""
    query = (
        "SELECT j.id, count(*) AS entries, array_agg(j.entry_type ORDER BY j.index) AS kinds,"
        " max(i.created_at) AS created FROM sys_journal j JOIN sys_invocation i ON i.id = j.id"
        " WHERE i.target_handler_name = 'turn' GROUP BY j.id ORDER BY created DESC LIMIT 1"
    )
    response = await client.post(
        f"http://127.0.0.1:{admin_port}/query",
        json={"query": query},
        headers={"accept": "application/json"},
    )
    if not response.is_success:
        return f"journal not read ({response.status_code}: {response.text[:200]})"
    rows = response.json().get("rows", [])
    if not rows:
        return "no journal of the turn handler found"
    kinds = ", ".join(str(kind) for kind in rows[0]["kinds"])
    return f"the last turn's invocation journaled {rows[0]['entries']} entries: {kinds}"


def _restate_version(options: PeerOptions) -> str:
    done = subprocess.run(
        [_restate_binary(options), "--version"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip().removeprefix("restate-server ") or "(version unknown)"


CONTESTANTS: Final = (
    Contestant(
        "baseline",
        "Stepwise runner calls in process, no durability",
        None,
        None,
        _in_process("stepwise"),
    ),
    Contestant(
        "dex-agents",
        "Stepwise session on dex-local-engine + Worker child",
        "baseline",
        None,
        _dex_agents("stepwise"),
    ),
    Contestant(
        "pydantic-ai",
        "Pydantic AI Agent.run in process, no durability",
        None,
        None,
        _in_process("pydantic-ai"),
    ),
    Contestant(
        "dex-agents-pydantic-ai",
        "Pydantic AI agent as a dex-agents session",
        "pydantic-ai",
        None,
        _dex_agents("pydantic-ai"),
    ),
    Contestant(
        "dbos",
        "Pydantic AI + DBOSDurability, DBOS SQLite system database",
        "pydantic-ai",
        "dex-agents-pydantic-ai",
        _measure_dbos,
    ),
    Contestant(
        "restate",
        "Pydantic AI RestateAgent in a Virtual Object, restate-server",
        "pydantic-ai",
        "dex-agents-pydantic-ai",
        _measure_restate,
    ),
    Contestant(
        "langgraph",
        "LangGraph StateGraph in process, no checkpointer",
        None,
        None,
        _in_process("langgraph"),
    ),
    Contestant(
        "dex-agents-langgraph",
        "LangGraph graph as a dex-agents session",
        "langgraph",
        None,
        _dex_agents("langgraph"),
    ),
    Contestant(
        "langgraph-sqlite",
        'LangGraph + AsyncSqliteSaver, durability="sync"',
        "langgraph",
        "dex-agents-langgraph",
        _langgraph_sqlite("sync"),
    ),
    Contestant(
        "langgraph-sqlite-async",
        'LangGraph + AsyncSqliteSaver, durability="async" (its default)',
        "langgraph",
        "dex-agents-langgraph",
        _langgraph_sqlite("async"),
    ),
    Contestant(
        "openai-agents",
        "OpenAI Agents SDK Runner.run in process, no durability",
        None,
        None,
        _in_process("openai-agents"),
    ),
    Contestant(
        "dex-agents-openai-agents",
        "OpenAI Agents SDK agent as a dex-agents session",
        "openai-agents",
        "dex-agents-openai-agents",
        _dex_agents("openai-agents"),
    ),
    Contestant(
        "dbos-openai-agents",
        "OpenAI Agents SDK + dbos-openai-agents DBOSRunner, DBOS SQLite system database",
        "openai-agents",
        "dex-agents-openai-agents",
        _measure_dbos_openai_agents,
    ),
    Contestant(
        "google-adk",
        "Google ADK Runner in process (in-memory session), no durability",
        None,
        None,
        _in_process("google-adk"),
    ),
    Contestant(
        "dex-agents-google-adk",
        "Google ADK agent as a dex-agents session",
        "google-adk",
        "dex-agents-google-adk",
        _dex_agents("google-adk"),
    ),
    Contestant(
        "dbos-google-adk",
        "Google ADK Runner + dbos-google-adk DBOSPlugin, DBOS SQLite system database",
        "google-adk",
        "dex-agents-google-adk",
        _measure_dbos_google_adk,
    ),
    Contestant(
        "strands",
        "Strands Agent.invoke_async in process, no durability",
        None,
        None,
        _in_process("strands"),
    ),
    Contestant(
        "dex-agents-strands",
        "Strands agent as a dex-agents session",
        "strands",
        "dex-agents-strands",
        _dex_agents("strands"),
    ),
    Contestant(
        "claude-agent-sdk",
        "Claude Agent SDK client in process (the CLI, a local fake API); READ turn only",
        None,
        None,
        _in_process("claude-agent-sdk", TurnShape.READ),
        TurnShape.READ,
    ),
    Contestant(
        "dex-agents-claude-agent-sdk",
        "Claude Agent SDK agent as a dex-agents session; READ turn only",
        "claude-agent-sdk",
        "dex-agents-claude-agent-sdk",
        _dex_agents("claude-agent-sdk", TurnShape.READ),
        TurnShape.READ,
    ),
)
_BY_NAME: Final = {contestant.name: contestant for contestant in CONTESTANTS}
_OURS: Final = "dex-agents"
_BASELINE: Final = "baseline"


async def run_contestant(contestant: Contestant, options: PeerOptions) -> Result:
    """Measure one contestant in a fresh state directory; a ``Skipped`` becomes its row's note."""
    _progress(f"{contestant.name}: {contestant.description}")
    result = Result(contestant)
    with tempfile.TemporaryDirectory(prefix=f"peers-{contestant.name}-") as state_dir:
        try:
            measured = await contestant.measure(options, Path(state_dir))
            result.durations, result.cpu_seconds = measured.durations, measured.cpu_seconds
        except Skipped as skipped:
            result.skipped = str(skipped)
            _progress(f"{contestant.name}: skipped: {skipped}")
    result.notes, _NOTES[:] = list(_NOTES), []
    if result.median is not None:
        _progress(f"{contestant.name}: median {result.median * 1000:.1f} ms")
    return result


# --- report ------------------------------------------------------------------------------------


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.1f}"


def _overhead(results: Mapping[str, Result], name: str, above: str | None) -> float | None:
    """``name``'s median minus ``above``'s, where both ran."""
    if above is None or name not in results or above not in results:
        return None
    mine, theirs = results[name].median, results[above].median
    return None if mine is None or theirs is None else mine - theirs


def _ratio(mine: float | None, ours: float | None) -> str:
    if mine is None or ours is None or ours <= 0:
        return "n/a"
    return f"{mine / ours:.2f}"


def report_rows(results: Mapping[str, Result]) -> list[list[str]]:
    """The table: one row per contestant that was asked for."""
    ours = _overhead(results, _OURS, _BASELINE)
    rows = []
    for name, result in results.items():
        contestant = result.contestant
        comparable = name != _BASELINE and contestant.shape is _SHAPE
        above_baseline = _overhead(results, name, _BASELINE) if comparable else None
        above_framework = _overhead(results, name, contestant.framework_baseline)
        ours_same = (
            _overhead(results, contestant.ours, contestant.framework_baseline)
            if contestant.ours
            else None
        )
        durable = contestant.framework_baseline is not None
        rows.append(
            [
                name,
                "skipped" if result.skipped else _ms(result.median),
                _ms(result.cpu_per_turn),
                _ms(above_baseline) if durable or name != _BASELINE else "-",
                _ms(above_framework) if durable else "-",
                _ratio(above_baseline, ours) if durable else "-",
                _ratio(above_framework, ours_same) if contestant.ours else "-",
            ]
        )
    return rows


_HEADER: Final = [
    "contestant",
    "median turn ms",
    "CPU ms/turn",
    "overhead ms (above baseline)",
    "overhead ms (above own framework)",
    "ratio to dex-agents' overhead",
    "ratio, same framework",
]


def print_report(options: PeerOptions, results: Mapping[str, Result]) -> None:
    rows = [_HEADER, *report_rows(results)]
    widths = [max(len(row[column]) for row in rows) for column in range(len(_HEADER))]
    print()
    print(
        f"peers: model latency {options.model_latency_ms:g} ms, {options.turns} turns measured "
        f"after {options.warmup} warm-up, 3 model calls + 2 tool calls (read, write) per turn, "
        f"peer SQLite {options.peer_sqlite.value}"
    )
    for index, row in enumerate(rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            print("  ".join("-" * width for width in widths))
    print()
    for name, result in results.items():
        print(f"{name}: {result.contestant.description}")
        if result.skipped:
            print(f"  skipped: {result.skipped}")
        for note in result.notes:
            print(f"  {note}")
    print()
    print(
        "overhead = median turn - median of the row named; ratio = that overhead / dex-agents' "
        "(Stepwise) overhead above the baseline, or, same framework, / our adapter's overhead "
        "above that framework in process; CPU = user + system CPU of this process and every "
        "process under it (engine, Worker, restate-server) over the measured turns, per turn "
        "(hardly changed by other load, unlike the wall times)"
    )
    print(
        f"command: {shlex.join(['python', *sys.argv])} | cores {os.cpu_count()}, load average "
        f"{_load_average()} at the end | {platform.python_implementation()} "
        f"{platform.python_version()}"
    )


def _load_average() -> str:
    try:
        return " ".join(f"{load:.2f}" for load in os.getloadavg())
    except OSError:
        return "unknown"


def run(options: PeerOptions) -> dict[str, Result]:
    """Measure the contestants asked for, in the table's order, each on a fresh event loop.

    A fresh loop each: DBOS makes its own thread pool the loop's default executor and shuts it
    down on ``DBOS.destroy``, which would break any later ``run_in_executor`` (LangGraph's).
    """
    results: dict[str, Result] = {}
    for contestant in CONTESTANTS:
        if contestant.name in options.only:
            results[contestant.name] = asyncio.run(run_contestant(contestant, options))
    return results


def parse_arguments(argv: Sequence[str] | None) -> PeerOptions:
    parser = argparse.ArgumentParser(
        description="Time one agent turn in process, on dex-agents and on durable peers."
    )
    parser.add_argument("--turns", type=int, default=20, help="measured turns (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up turns (default 3)")
    parser.add_argument(
        "--model-latency-ms", type=float, default=100.0, help="model sleep per call (default 100)"
    )
    parser.add_argument(
        "--only",
        default=",".join(contestant.name for contestant in CONTESTANTS),
        help=f"comma-separated contestants (default all: {', '.join(_BY_NAME)})",
    )
    parser.add_argument(
        "--peer-sqlite",
        choices=[mode.value for mode in PeerSqlite],
        default=PeerSqlite.MATCHED.value,
        help="matched: the peers get our engine's WAL + synchronous=OFF (and Restate no WAL "
        "fsync); shipped: each peer's own defaults (default matched)",
    )
    parser.add_argument(
        "--restate-server",
        help="the restate-server binary (npm package @restatedev/restate-server); "
        "default: restate-server on PATH",
    )
    arguments = parser.parse_args(argv)
    if arguments.turns < 2 or arguments.warmup < 0 or arguments.model_latency_ms < 0:
        parser.error("--turns must be at least 2, --warmup and --model-latency-ms not negative")
    only = tuple(name.strip() for name in arguments.only.split(",") if name.strip())
    unknown = [name for name in only if name not in _BY_NAME]
    if unknown:
        parser.error(f"unknown contestant {', '.join(unknown)}; known: {', '.join(_BY_NAME)}")
    return PeerOptions(
        arguments.turns,
        arguments.warmup,
        arguments.model_latency_ms,
        only,
        PeerSqlite(arguments.peer_sqlite),
        arguments.restate_server,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table; exit status 0."""
    options = parse_arguments(argv)  # an unknown contestant is told before the imports below
    if set(options.only) - {_BASELINE, _OURS}:
        # Imported before any framework's turn is measured: a framework that imports lazily what
        # these import would charge it to its first turn (its CPU per turn with --warmup 0).
        import langgraph.graph  # noqa: F401
        import pydantic_ai.messages  # noqa: F401

    print_report(options, run(options))
    return 0


if __name__ == "__main__":
    sys.exit(main())
