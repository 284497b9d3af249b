"""Session-ID prefixes: how tests that share an engine and a Worker keep apart.

Each test of a shared stack starts its sessions under a prefix of its own (``t<12 hex>-``), so
a search, a gate or an invocation log can tell which test a session belongs to without a
process of its own. ``PrefixedSessionClient`` adds the prefix to every session ID a test names.
"""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import Callable
from typing import Any

from dex import Flow

from dex_agents._session.client import AgentSessionClient

__all__ = ["PrefixedSessionClient", "new_session_prefix", "session_prefix_of"]

_PREFIX = re.compile(r"^(t[0-9a-f]{12}-)")


def new_session_prefix() -> str:
    """A new, unique session-ID prefix, such as ``t3f9a2b1c0d4e-``.

    Example:
        >>> prefix = new_session_prefix()
        >>> session_prefix_of(prefix + "chat") == prefix
        True
    """
    return f"t{uuid.uuid4().hex[:12]}-"


def session_prefix_of(session_id: str) -> str | None:
    """The prefix ``new_session_prefix`` gave ``session_id``, or ``None`` when it has none.

    Example:
        >>> session_prefix_of("chat") is None
        True
    """
    match = _PREFIX.match(session_id)
    return match.group(1) if match else None


class PrefixedSessionClient(AgentSessionClient):
    """An ``AgentSessionClient`` whose session IDs all carry a test's prefix, so a test names its
    sessions ``chat`` while the engine and Worker it shares with other tests see ``<prefix>chat``.

    Every public method whose first parameter is ``session_id`` is wrapped, so a method added to
    the client later is prefixed too; an ID that already carries the prefix (the client's own
    methods call each other) is left alone. Every scoped ID is added to ``session_ids`` (a set the
    caller may share between clients), so a fixture can stop a test's sessions when it ends.

    Example:
        >>> import asyncio
        >>> from dex_agents.testing import in_process_worker
        >>> async def prefixed_session() -> tuple[str, list[str]]:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         sessions = PrefixedSessionClient(dex.client, flow, "t0123456789ab-")
        ...         await sessions.start_session("chat", "Hi")
        ...         # The engine knows the session only by its prefixed ID.
        ...         info = await dex.client.describe_flow("t0123456789ab-chat")
        ...         return info.flow_type, sorted(sessions.session_ids)
        >>> asyncio.run(prefixed_session())
        ('SupportAgent', ['t0123456789ab-chat'])
    """

    def __init__(
        self,
        client: Any,
        flow: Flow[Any],
        prefix: str,
        session_ids: set[str] | None = None,
    ) -> None:
        super().__init__(client, flow)
        self.prefix = prefix
        self.session_ids: set[str] = session_ids if session_ids is not None else set()

    def scoped(self, session_id: str) -> str:
        """``session_id`` under this client's prefix."""
        scoped = session_id if session_id.startswith(self.prefix) else self.prefix + session_id
        self.session_ids.add(scoped)
        return scoped


def _prefixed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    def call(self: PrefixedSessionClient, session_id: str, *args: Any, **kwargs: Any) -> Any:
        return method(self, self.scoped(session_id), *args, **kwargs)

    call.__name__ = name
    # The summary only: the method's examples run (and are tested) on AgentSessionClient itself.
    summary = inspect.cleandoc(method.__doc__ or "").split("\n\n")[0]
    call.__doc__ = (
        f"{summary}\n\n``AgentSessionClient.{name}`` with ``session_id`` under this client's "
        "prefix."
    )
    return call


def _takes_session_id(method: object) -> bool:
    if not callable(method):
        return False
    parameters = list(inspect.signature(method).parameters)
    return parameters[1:2] == ["session_id"]


for _name, _method in inspect.getmembers(AgentSessionClient):
    if not _name.startswith("_") and _takes_session_id(_method):
        setattr(PrefixedSessionClient, _name, _prefixed(_name, _method))
