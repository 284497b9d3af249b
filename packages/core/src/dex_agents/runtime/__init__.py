"""A local runtime for scripts, notebooks and development: an engine, a Worker, session clients.

:class:`LocalRuntime` serves the given Flows with a pull Worker in this process, on the embedded
engine (started on ``.dex-agents/engine.db``, or reused when one already runs there) or on an
engine at an address, and hands out ``AgentSessionClient``\\ s. For a deployment, run the engine
and ``dex-agents worker module:flows`` processes instead, and give the application a plain
``AsyncClient`` (see the README's Deploying section).

Example:
    >>> import asyncio
    >>> async def ask() -> str:
    ...     async with LocalRuntime([flow], directory=tmp_path / "runtime-doc") as runtime:
    ...         result = await runtime.sessions().run_turn("runtime-doc", "Hi")
    ...         return result.status
    >>> asyncio.run(ask())
    <TurnStatus.COMPLETED: 'completed'>
"""

from dex_agents.runtime._local_runtime import (
    DEFAULT_RUNTIME_DIRECTORY,
    ENGINE_ADDRESS_FILE,
    LocalRuntime,
    LocalRuntimeError,
)

__all__ = [
    "DEFAULT_RUNTIME_DIRECTORY",
    "ENGINE_ADDRESS_FILE",
    "LocalRuntime",
    "LocalRuntimeError",
]
