"""Shared pieces of the Strands adapter's tests: a private engine with an in-process Worker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from dex_agents import AgentSessionFlow
from dex_agents.testing import EngineLogs, EngineProcess, InProcessWorker, in_process_worker


@asynccontextmanager
async def served(
    flows: Sequence[AgentSessionFlow], directory: Path
) -> AsyncIterator[InProcessWorker]:
    """A private engine and an in-process Worker serving ``flows``."""
    engine = await EngineProcess.start_local(
        directory / "engine.db", EngineLogs.in_directory(directory)
    )
    try:
        async with in_process_worker(flows, engine.server_address, directory / "cache") as worker:
            yield worker
    finally:
        await engine.stop()
