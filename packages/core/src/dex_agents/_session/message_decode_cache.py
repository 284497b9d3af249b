"""Decoded stored messages and message chunks of recent sessions, kept by one Worker process.

Each ``RunModel`` hands the runner every stored message, and ``get_agent_snapshot`` returns up to
200 of them, so without a cache every Step decodes the whole window and every chunk again: work
that grows with the session. A stored ``AgentMessages`` or ``AgentMessageChunks`` instance never
changes while its key exists in one run of a Flow (new messages get new sequences, a chunk is
written once under its first sequence; a message leaves the window only by moving into a chunk,
a chunk leaves only by retention), so its decoded value can be reused for as long as the key
exists. A new run of the same Flow ID (ID reuse, time travel, continue-as-new) has a new run ID
and starts empty.

Only invocations that read before they write messages may use the cache: a value read back from
the invocation's own uncommitted writes must never be kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from typing import Final, TypeAlias, TypeVar, cast

from dex_agents.exceptions import ConfigurationError

__all__ = ["DEFAULT_CACHED_MESSAGES", "DEFAULT_CACHED_SESSIONS", "MessageDecodeCache"]

DEFAULT_CACHED_SESSIONS: Final = 256
"""Sessions whose messages a cache keeps; the least recently read one is dropped first."""
DEFAULT_CACHED_MESSAGES: Final = 50_000
"""Messages a cache keeps over all sessions (a chunk counts as its messages)."""

_ValueT = TypeVar("_ValueT")
# An instance's decoded value and its weight (the messages it holds).
_Entry: TypeAlias = tuple[object, int]


class MessageDecodeCache:
    """Decoded AttributeMap instances per Flow run, reused by later reads of the same run.

    Least recently read runs are dropped first once more than ``max_sessions`` runs or
    ``max_messages`` messages are kept; a run heavier than ``max_messages`` alone is not kept.
    Thread-safe: synchronous RPC handlers may read while an async Step does.

    Args:
        max_sessions: How many Flow runs to keep; at least 1.
        max_messages: How many messages to keep over all runs; at least 1.

    Raises:
        ConfigurationError: When a limit is not a positive int.

    Example:
        >>> from dex_agents import AgentMessage, MessageRole
        >>> decoded = []
        >>> def decode(key: str) -> AgentMessage:
        ...     decoded.append(key)
        ...     return AgentMessage(int(key), MessageRole.USER, "{}")
        >>> cache = MessageDecodeCache()
        >>> keys = ["000000000001"]
        >>> cache.read("flow-1", "run-1", "AGENT_MESSAGES", keys, decode, existing_keys=keys)
        {'000000000001': AgentMessage(sequence=1, ...)}
        >>> _ = cache.read("flow-1", "run-1", "AGENT_MESSAGES", keys, decode, existing_keys=keys)
        >>> decoded  # the second read came from the cache
        ['000000000001']
    """

    def __init__(
        self,
        max_sessions: int = DEFAULT_CACHED_SESSIONS,
        max_messages: int = DEFAULT_CACHED_MESSAGES,
    ) -> None:
        for name, limit in (("max_sessions", max_sessions), ("max_messages", max_messages)):
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ConfigurationError(f"{name} must be a positive int, got {limit!r}")
        self._max_sessions = max_sessions
        self._max_messages = max_messages
        # (flow ID, run ID) -> AttributeMap name -> instance key -> entry.
        self._sessions: OrderedDict[tuple[str, str], dict[str, dict[str, _Entry]]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def read(
        self,
        flow_id: str,
        run_id: str,
        map_name: str,
        keys: Iterable[str],
        decode: Callable[[str], _ValueT],
        *,
        existing_keys: Collection[str],
        weigh: Callable[[_ValueT], int] = lambda value: 1,
    ) -> dict[str, _ValueT]:
        """Return the value of every key in ``keys``, decoding only the keys not cached.

        Afterwards keeps, for this run and map, the values of ``existing_keys`` (every instance
        the map holds now) it knows, so instances that were moved or deleted are forgotten.
        Without a run ID (a server that sends none) nothing is kept.

        Args:
            flow_id: The session's Flow ID.
            run_id: The Flow run the invocation belongs to.
            map_name: The AttributeMap, so each map's keys and value type stay apart.
            keys: The instances to return.
            decode: Reads one instance through the invocation's Context.
            existing_keys: Every instance key of the map as the invocation sees it.
            weigh: The number of messages a value holds (1 for a message).

        Raises:
            Whatever ``decode`` raises; nothing is kept then.
        """
        wanted = list(keys)
        if not run_id:
            return {key: decode(key) for key in wanted}
        session = (flow_id, run_id)
        with self._lock:
            known = self._sessions.get(session, {}).get(map_name, {})
        # Decoding runs outside the lock; two readers of one run may both decode a key, and
        # they decode the same committed value.
        values: dict[str, _ValueT] = {}
        kept: dict[str, _Entry] = {key: known[key] for key in existing_keys if key in known}
        for key in wanted:
            entry = known.get(key)
            if entry is None:
                value = decode(key)
                entry = (value, weigh(value))
            values[key] = cast(_ValueT, entry[0])
            kept[key] = entry
        with self._lock:
            self._keep(session, map_name, kept)
        return values

    def _keep(self, session: tuple[str, str], map_name: str, kept: dict[str, _Entry]) -> None:
        maps = self._sessions.setdefault(session, {})
        self._weight -= _weight_of(maps.get(map_name, {}))
        maps[map_name] = kept
        self._weight += _weight_of(kept)
        self._sessions.move_to_end(session)
        own_weight = sum(_weight_of(entries) for entries in maps.values())
        if own_weight > self._max_messages:
            # Keeping it would push every other run out and still not fit.
            del self._sessions[session]
            self._weight -= own_weight
        while self._sessions and (
            len(self._sessions) > self._max_sessions or self._weight > self._max_messages
        ):
            _, dropped = self._sessions.popitem(last=False)
            self._weight -= sum(_weight_of(entries) for entries in dropped.values())


def _weight_of(entries: dict[str, _Entry]) -> int:
    return sum(weight for _, weight in entries.values())
