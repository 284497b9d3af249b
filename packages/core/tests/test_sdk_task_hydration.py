"""A Worker task's values reach its Step unchanged: a task of inline values as it came, and every
loaded Channel message with its own value, even where dex-python-sdk 1.23.0's hydrator would pair
them crosswise.

The SDK's hydrators collect loaded Channel values in the iteration order of the task request's
``loaded_channel_messages`` map and write them back in that of its ``CopyFrom`` copy. Under upb
the two orders differ for some pairs of Channel names, and which pairs depends on the process's
hash seed, so the session's two message Channels crossed in about one Worker process in a
hundred: ``get_agent_snapshot`` then listed the steered message's text as queued (the shared
suite's ``test_steer_a_queued_message_and_delete_another`` saw ``['steered by id']``). These tests
search this process for such a pair of names, so the fault shows every time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import metadata
from typing import Any

import pytest
from agent_session_test_support import ScriptedRunner
from dex import (
    AsyncContext,
    Channel,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    dead_end,
    rpc,
)
from dex._async_value_hydrator import AsyncValueHydrator
from dex._value_hydrator import ValueHydrator
from dex.dexpb import dex_pb2 as pb
from dex_agents import AgentSessionFlow
from dex_agents._sdk_task_hydration import (
    FAULTY_SDK_VERSIONS,
    holds_only_inline_values,
    repair_channel_values,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from turn_control_test_support import echo_user_messages

_METHODS = ("wait_for_request", "execute_request", "rpc_request")
_Request = pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest | pb.InvokeWorkerRPCRequest
_REQUEST_TYPES: dict[str, Callable[[], _Request]] = {
    "wait_for_request": lambda: pb.InvokeWaitForMethodRequest(
        step_input=pb.Value(string_value="input")
    ),
    "execute_request": lambda: pb.InvokeExecuteMethodRequest(
        step_input=pb.Value(string_value="input")
    ),
    "rpc_request": lambda: pb.InvokeWorkerRPCRequest(input=pb.Value(string_value="input")),
}


def _orders_cross(names: tuple[str, str]) -> bool:
    """Whether a request loading ``names``, parsed from the wire as a Worker does, iterates them
    in another order than its copy."""
    request = pb.InvokeWorkerRPCRequest(
        loaded_channel_messages={name: pb.ChannelValues() for name in names}
    )
    parsed = pb.InvokeWorkerRPCRequest.FromString(request.SerializeToString())
    copy = pb.InvokeWorkerRPCRequest()
    copy.CopyFrom(parsed)
    return list(parsed.loaded_channel_messages) != list(copy.loaded_channel_messages)


def _crossing_names() -> tuple[str, str]:
    for index in range(20_000):
        names = (f"FIRST_{index}", f"SECOND_{index}")
        if _orders_cross(names):
            return names
    pytest.fail("no two Channel names iterate crosswise in this process; the search needs more")


_FIRST, _SECOND = _crossing_names()
_EXPECTED = {
    _FIRST: [("first-1", "first one"), ("first-2", "first two")],
    _SECOND: [("second-1", "second one")],
}


def _request(method: str) -> _Request:
    request = _REQUEST_TYPES[method]()
    request.context.flow_id = "flow-1"
    for name, messages in _EXPECTED.items():
        loaded = request.loaded_channel_messages[name]
        for message_id, text in messages:
            loaded.messages.add(
                channel_name=name, message_id=message_id, value=pb.Value(string_value=text)
            )
    # What the Worker gets: the request as parsed from the wire.
    return type(request).FromString(request.SerializeToString())


def _seen(request: _Request) -> dict[str, list[tuple[str, str]]]:
    return {
        name: [(m.message_id, m.value.string_value) for m in channel_values.messages]
        for name, channel_values in request.loaded_channel_messages.items()
    }


def _sync_hydrator() -> ValueHydrator:
    # Only inline values: the hydrator never calls the service or the blob cache.
    return ValueHydrator(None, None)  # type: ignore[arg-type]


def _async_hydrator() -> AsyncValueHydrator:
    return AsyncValueHydrator(None, None)  # type: ignore[arg-type]


def _scripted_flow() -> AgentSessionFlow:
    return AgentSessionFlow(ScriptedRunner(echo_user_messages), flow_type="ChannelValuesAgent")


@pytest.mark.parametrize("method", _METHODS)
async def test_a_task_of_inline_values_reaches_its_step_as_it_came(method: str) -> None:
    _scripted_flow()  # a session Flow installs the patches
    sync_request, async_request = _request(method), _request(method)
    sync_result = getattr(_sync_hydrator(), method)(sync_request)
    async_result = await getattr(_async_hydrator(), method)(async_request)
    assert sync_result is sync_request
    assert async_result is async_request
    assert _seen(sync_result) == _EXPECTED
    assert _seen(async_result) == _EXPECTED


@pytest.mark.parametrize("method", _METHODS)
async def test_the_repair_puts_each_hydrated_value_back_on_its_message(method: str) -> None:
    """What a task holding a blob reference gets: the SDK's hydrated copy, then the repair."""
    _scripted_flow()
    request = _request(method)
    result = await getattr(AsyncValueHydrator, method).__wrapped__(_async_hydrator(), request)
    repair_channel_values(request, result)
    assert _seen(result) == _EXPECTED


def _blob_reference() -> pb.Value:
    return pb.Value(internal_blob_id_for_obj_value="blob-1")


@pytest.mark.parametrize(
    ("request_with", "inline"),
    [
        (lambda: _request("execute_request"), True),
        (lambda: pb.InvokeWorkerRPCRequest(input=pb.Value(double_value=1.5)), False),
        (lambda: pb.InvokeWorkerRPCRequest(), False),  # no input: the SDK refuses it
        (lambda: pb.InvokeWorkerRPCRequest(input=_blob_reference()), False),
        (
            lambda: pb.InvokeWaitForMethodRequest(
                step_input=pb.Value(string_value="input"),
                attributes=[pb.KV(key="big", value=_blob_reference())],
            ),
            False,
        ),
        (
            lambda: pb.InvokeExecuteMethodRequest(
                step_input=pb.Value(string_value="input"),
                step_exe_locals=[pb.KV(key="local", value=_blob_reference())],
            ),
            False,
        ),
        (
            lambda: pb.InvokeExecuteMethodRequest(
                context=pb.Context(last_heartbeat_value=_blob_reference())
            ),
            False,
        ),
        (
            lambda: pb.InvokeExecuteMethodRequest(
                condition_results=pb.ConditionResults(
                    channel_results=[pb.ChannelResult(values=[_blob_reference()])]
                )
            ),
            False,
        ),
        (
            lambda: pb.InvokeExecuteMethodRequest(
                condition_results=pb.ConditionResults(
                    sub_flow_results=[
                        pb.FlowResult(
                            results=[
                                pb.StepCompletionOutput(completed_step_output=_blob_reference())
                            ]
                        )
                    ]
                )
            ),
            False,
        ),
        (
            lambda: pb.InvokeWorkerRPCRequest(
                input=pb.Value(string_value="input"),
                loaded_channel_messages={
                    "QUEUED": pb.ChannelValues(
                        messages=[pb.ChannelMessage(value=_blob_reference())]
                    )
                },
            ),
            False,
        ),
    ],
    ids=[
        "inline",
        "double",
        "no-input",
        "rpc-input",
        "attribute",
        "step-local",
        "heartbeat",
        "condition",
        "sub-flow",
        "channel",
    ],
)
def test_only_a_task_of_inline_values_skips_the_sdk_hydrator(
    request_with: Callable[[], _Request], inline: bool
) -> None:
    assert holds_only_inline_values(request_with()) is inline


@pytest.mark.parametrize("method", _METHODS)
async def test_the_sdk_alone_pairs_these_channels_crosswise(method: str) -> None:
    """The repair is not dead code: without it, SDK 1.23.0 hands over the other values."""
    _scripted_flow()
    assert metadata.version("dex-python-sdk") in FAULTY_SDK_VERSIONS, (
        "a new dex-python-sdk: when test_each_hydrator_keeps_every_value_on_its_message passes "
        "without the repair, drop it; else add the version to FAULTY_SDK_VERSIONS"
    )
    sync_method: Any = getattr(ValueHydrator, method).__wrapped__
    async_method: Any = getattr(AsyncValueHydrator, method).__wrapped__
    sync_result = sync_method(_sync_hydrator(), _request(method))
    async_result = await async_method(_async_hydrator(), _request(method))
    assert _seen(sync_result) != _EXPECTED
    assert _seen(async_result) != _EXPECTED
    # The IDs stay with their Channel; only the values moved.
    assert {n: [i for i, _ in m] for n, m in _seen(sync_result).items()} == {
        n: [i for i, _ in m] for n, m in _EXPECTED.items()
    }


class _Idle(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dead_end()


def _two_channel_flow() -> Flow[str]:
    first = Channel(_FIRST, str)
    second = Channel(_SECOND, str)

    class TwoChannelFlow(Flow[str]):
        def get_flow_type(self) -> str:
            return "TwoChannels"

        def get_steps(self) -> StepList[str]:
            return StepList.start_step(_Idle())

        def get_persistence_schema(self) -> PersistenceSchema:
            return PersistenceSchema.of(first, second)

        @rpc(is_transactional=True)
        def publish(self, context: Context) -> RPCResult[bool]:
            for channel in (first, second):
                for _, text in _EXPECTED[channel.name]:
                    channel.publish(context, text)
            return RPCResult(True)

        @rpc(load_channels=(first, second))
        def pending(self, context: Context, padding: str) -> RPCResult[str]:
            listed = {
                channel.name: [m.value for m in channel.pending_messages(context)]
                for channel in (first, second)
            }
            return RPCResult(json.dumps(listed))

    return TwoChannelFlow()


@pytest.mark.parametrize("padding_bytes", [0, 300 * 1024], ids=["inline", "blob-input"])
async def test_an_rpc_loading_two_channels_reads_each_with_its_own_messages(
    dex_in_process_worker: InProcessWorkerFactory, padding_bytes: int
) -> None:
    """Through the local engine and an SDK Worker, as ``get_agent_snapshot`` reads the queued and
    the steered messages. An input over the engine's 256 KiB blob threshold arrives as a blob
    reference, so that task goes through the SDK's hydrator and the repair."""
    flow = _two_channel_flow()
    _scripted_flow()
    async with dex_in_process_worker([flow]) as dex:
        client, flow_id = dex.client, dex.scoped("two-channels")
        await client.start_flow(flow, flow_id, "start")
        assert await client.invoke_rpc(flow.publish, flow_id)  # type: ignore[attr-defined]
        listed = json.loads(
            await client.invoke_rpc(flow.pending, flow_id, "x" * padding_bytes)  # type: ignore[attr-defined]
        )
    assert listed == {name: [text for _, text in messages] for name, messages in _EXPECTED.items()}
