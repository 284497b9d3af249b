"""Read a Flow's stored Attributes through the Dex wire protocol, for tests and benchmarks.

The SDK's ``AsyncClient`` has no Attribute reader, so this calls the FlowService
``GetAttributes`` RPC with the SDK's own protobuf stubs, which works against any Dex server. It
answers two questions a test of message storage asks: which Attribute instances a session keeps,
and how many bytes its Flow state holds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc

from dex_agents.exceptions import ConfigurationError
from dex_agents.testing._engine_channel import engine_channel

__all__ = ["FlowAttributes", "read_flow_attributes"]


@dataclass(frozen=True)
class FlowAttributes:
    """Every stored Attribute of one Flow, as the server returned it.

    Attributes:
        values: The encoded ``Value`` of each physical Attribute name (``NAME`` or
            ``NAME/instance``).
    """

    values: dict[str, pb.Value]

    @property
    def total_bytes(self) -> int:
        """Bytes of every stored Attribute value, as encoded on the wire."""
        return sum(value.ByteSize() for value in self.values.values())

    def bytes_of(self, name: str) -> int:
        """Bytes of the Attribute ``name`` and of every instance of the AttributeMap ``name``."""
        return sum(self.values[key].ByteSize() for key in self.instance_keys(name, physical=True))

    def instance_keys(self, name: str, *, physical: bool = False) -> list[str]:
        """The stored instance keys of AttributeMap ``name``, ascending (or the physical names)."""
        prefix = f"{name}/"
        keys = sorted(key for key in self.values if key.startswith(prefix))
        if name in self.values:
            keys.insert(0, name)
        return keys if physical else [key[len(prefix) :] for key in keys if key != name]

    def json_of(self, key: str) -> object | None:
        """The JSON value stored under physical name ``key``, or ``None`` when it is unset.

        Raises:
            ConfigurationError: When the value is not JSON, such as a blob reference.
        """
        value = self.values.get(key)
        if value is None:
            return None
        kind = value.WhichOneof("kind")
        if kind == "obj_value":
            decoded: object = json.loads(value.obj_value.payload.decode("utf-8"))
            return decoded
        if kind == "string_value":
            return value.string_value
        if kind == "null_value":
            return None
        raise ConfigurationError(f"Attribute {key} holds a {kind}, not JSON")


async def read_flow_attributes(
    server_address: str, flow_id: str, keys: Sequence[str] | None = None
) -> FlowAttributes:
    """Return the stored Attributes of ``flow_id`` through FlowService ``GetAttributes``.

    ``keys`` selects physical names (such as ``AGENT_STATE``); ``None`` returns every Attribute.

    Raises:
        grpc.aio.AioRpcError: When the server refuses the call, such as for an unknown Flow.

    Example:
        >>> import asyncio
        >>> from dex_agents.testing import in_process_worker, wait_for_agent_snapshot
        >>> async def stored_messages() -> list[str]:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         sessions = dex.sessions(flow)
        ...         await sessions.start_session("attributes-example", "Hi")
        ...         await wait_for_agent_snapshot(sessions, "attributes-example",
        ...             lambda snapshot: len(snapshot.messages) == 2)
        ...     attributes = await read_flow_attributes(server_address, "attributes-example")
        ...     return attributes.instance_keys("AGENT_MESSAGES")
        >>> asyncio.run(stored_messages())
        ['000000000001', '000000000002']
    """
    async with engine_channel(server_address) as channel:
        stub = pb_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        request = (
            pb.GetAttributesRequest(flow_id=flow_id, all_keys=True)
            if keys is None
            else pb.GetAttributesRequest(flow_id=flow_id, keys=list(keys))
        )
        response = await stub.GetAttributes(request)
    return FlowAttributes({entry.key: entry.value for entry in response.attributes})
