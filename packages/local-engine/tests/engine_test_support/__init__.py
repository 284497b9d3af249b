"""Shared support for the local engine's tests: real processes, gates and invocation records.

- :class:`EngineProcess` - the engine as a process: start, SIGKILL, restart on the same database.
- :class:`WorkerLauncher` / :class:`WorkerProcess` - SDK pull Workers (``dex.Worker`` or
  ``dex.AsyncWorker``) in child processes running a Registry named ``package.module:name``.
- :class:`GateBoard` / :func:`pass_gate` - file gates to stop a handler at an exact point.
- :class:`InvocationLog` / :func:`record_invocation` - counts real handler runs across processes.
- :class:`PullTestServer` - the real pull dispatcher plus a TEST STUB FlowService, in-process.
- :mod:`engine_test_support.sample_flows` - ``ProbeFlow``, which uses all of the above.
- :mod:`engine_test_support.dispatch_tasks` - DispatchTasks to drive a dispatcher directly.
- :func:`pull_client` - an SDK ``AsyncClient`` of the test's engine whose Flows run on pull Workers.

Fixtures (``packages/local-engine/tests/conftest.py``): ``gates``, ``invocation_log``,
``workers``, ``pull_server``, ``engine``.
"""

from engine_test_support.child_process import ChildProcess, child_environment
from engine_test_support.dispatch_tasks import execute_task, rpc_task, string_value
from engine_test_support.engine_process import EngineProcess, engine_command
from engine_test_support.gates import GATES_DIR_ENV, GateBoard, pass_gate
from engine_test_support.invocation_log import (
    INVOCATION_LOG_ENV,
    Invocation,
    InvocationLog,
    record_invocation,
)
from engine_test_support.pull_test_server import PullTestServer
from engine_test_support.sdk_clients import pull_client
from engine_test_support.stub_flow_service import StubFlowService
from engine_test_support.worker_process import WorkerLauncher, WorkerMode, WorkerProcess

__all__ = [
    "GATES_DIR_ENV",
    "INVOCATION_LOG_ENV",
    "ChildProcess",
    "EngineProcess",
    "GateBoard",
    "Invocation",
    "InvocationLog",
    "PullTestServer",
    "StubFlowService",
    "WorkerLauncher",
    "WorkerMode",
    "WorkerProcess",
    "child_environment",
    "engine_command",
    "execute_task",
    "pass_gate",
    "pull_client",
    "record_invocation",
    "rpc_task",
    "string_value",
]
