"""Benchmark: what a Worker pays before a Step starts to hydrate its task, by loaded values.

dex-python-sdk 1.23.0's hydrator copies a task's request and every loaded value into the copy,
blob reference or not. ``dex_agents`` lets a task of inline values pass through
(``_sdk_task_hydration.holds_only_inline_values``). This script times, in one process, the SDK's
own ``execute_request``, ``wait_for_request`` and ``rpc_request`` against the installed ones on
requests shaped like a session's tasks: one Attribute per stored message (a JSON object of about
200 bytes, as ``AgentMessage`` values are), a few small Attributes and a queued Channel message.
The two are timed alternately, round by round; the figures are medians of the rounds.

Usage::

    uv run python benchmarks/worker_task_hydration.py [--values 100,500,1000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from dex._async_value_hydrator import AsyncValueHydrator
from dex.dexpb import dex_pb2 as pb
from dex_agents._sdk_task_hydration import install_sdk_hydrator_patches

_Request = pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest | pb.InvokeWorkerRPCRequest
_Hydrate = Callable[[AsyncValueHydrator, Any], Awaitable[Any]]
_METHODS = {
    "execute_request": pb.InvokeExecuteMethodRequest,
    "wait_for_request": pb.InvokeWaitForMethodRequest,
    "rpc_request": pb.InvokeWorkerRPCRequest,
}


def _message_value(sequence: int) -> pb.Value:
    text = json.dumps(
        {
            "sequence": sequence,
            "role": "assistant" if sequence % 2 else "user",
            "turn_id": f"turn-{sequence // 5 + 1}",
            "text": "a reply of about the length the benchmarks' scripted models give " * 2,
        },
        sort_keys=True,
    )
    return pb.Value(obj_value=pb.EncodedObject(encoding="json", payload=text.encode()))


def _request(method: str, values: int) -> _Request:
    request = _METHODS[method]()
    request.context.flow_id = "session-1"
    if isinstance(request, pb.InvokeWorkerRPCRequest):
        request.input.CopyFrom(pb.Value(string_value="{}"))
    else:
        request.step_input.CopyFrom(pb.Value(string_value="turn-1"))
    for sequence in range(values):
        request.attributes.add(
            key=f"AGENT_MESSAGES/{sequence:010d}", value=_message_value(sequence)
        )
    for name in ("AGENT_STATE", "AGENT_USAGE", "SESSION_SETTINGS"):
        request.attributes.add(key=name, value=pb.Value(string_value="{}"))
    queued = request.loaded_channel_messages["QUEUED_USER_MESSAGES"]
    queued.messages.add(message_id="m-1", value=pb.Value(string_value="next question"))
    # What a Worker holds: the request as parsed from the wire.
    parsed: _Request = type(request).FromString(request.SerializeToString())
    return parsed


async def _time(hydrate: _Hydrate, request: _Request, calls: int) -> float:
    hydrator = AsyncValueHydrator(None, None)  # type: ignore[arg-type]  # inline values only
    started = time.perf_counter()
    for _ in range(calls):
        await hydrate(hydrator, request)
    return (time.perf_counter() - started) / calls * 1e6


async def _run(counts: list[int], rounds: int) -> None:
    install_sdk_hydrator_patches()
    print(
        f"{'method':<18}{'values':>8}{'task KiB':>10}{'SDK µs':>10}{'installed µs':>14}{'ratio':>8}"
    )
    for method in _METHODS:
        installed: _Hydrate = getattr(AsyncValueHydrator, method)
        sdk: _Hydrate = installed.__wrapped__  # type: ignore[attr-defined]
        for count in counts:
            request = _request(method, count)
            calls = max(20, 20_000 // (count + 10))
            sdk_times: list[float] = []
            installed_times: list[float] = []
            for _ in range(rounds):
                sdk_times.append(await _time(sdk, request, calls))
                installed_times.append(await _time(installed, request, calls))
            before, after = statistics.median(sdk_times), statistics.median(installed_times)
            print(
                f"{method:<18}{count:>8}{request.ByteSize() / 1024:>10.1f}{before:>10.0f}"
                f"{after:>14.0f}{after / before:>8.2f}"
            )
    print(f"rounds {rounds}, load average {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", default="100,500,1000", help="loaded message values per task")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (default 7)")
    arguments = parser.parse_args()
    counts = [int(part) for part in arguments.values.split(",")]
    asyncio.run(_run(counts, arguments.rounds))


if __name__ == "__main__":
    main()
