"""Decoded ``AgentMessages`` instances of recent sessions, kept by one Worker process.

Each ``RunModel`` hands the runner every stored message, and ``get_agent_snapshot`` returns up to
200 of them, so without a cache every Step decodes the whole window again: work that grows with
the session. A stored message never changes while its key exists in one run of a Flow (new
messages get new sequences; a message leaves the window only by moving into a chunk or by
retention), so its decoded value can be reused for as long as the key is in the window. A new run
of the same Flow ID (ID reuse, time travel, continue-as-new) has a new run ID and starts empty.

Only invocations that read the window before they write messages may use the cache: a value read
back from this invocation's own uncommitted writes must never be kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Final

from dex_agents.agent_session_values import AgentMessage

__all__ = ["MessageDecodeCache"]

#: Sessions whose window a cache keeps; the least recently read one is dropped first.
DEFAULT_CACHED_SESSIONS: Final = 256


class MessageDecodeCache:
    """Decoded window messages per Flow run, reused by later reads of the same run.

    Thread-safe: synchronous RPC handlers may read while an async Step does.

    Args:
        max_sessions: How many Flow runs to keep; at least 1.

    Raises:
        ValueError: When ``max_sessions`` is not a positive int.

    Example:
        >>> cache = MessageDecodeCache()
        >>> keys = ["000000000001"]
        >>> cache.read("flow-1", "run-1", keys, lambda key: message_1, window_keys=keys)
        {'000000000001': message_1}
    """

    def __init__(self, max_sessions: int = DEFAULT_CACHED_SESSIONS) -> None:
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ValueError(f"max_sessions must be a positive int, got {max_sessions!r}")
        self._max_sessions = max_sessions
        self._sessions: OrderedDict[tuple[str, str], dict[str, AgentMessage]] = OrderedDict()
        self._lock = threading.Lock()

    def read(
        self,
        flow_id: str,
        run_id: str,
        keys: Iterable[str],
        decode: Callable[[str], AgentMessage],
        *,
        window_keys: Collection[str],
    ) -> Mapping[str, AgentMessage]:
        """Return the message of every key in ``keys``, decoding only the keys not cached.

        Afterwards keeps, for this run, the messages of ``window_keys`` (every key the window
        holds now) it knows, so messages that left the window are forgotten. Without a run ID
        (a server that sends none) nothing is kept.

        Raises:
            Whatever ``decode`` raises; nothing is kept then.
        """
        wanted = list(keys)
        if not run_id:
            return {key: decode(key) for key in wanted}
        session = (flow_id, run_id)
        with self._lock:
            known = self._sessions.get(session, {})
        # Decoding runs outside the lock; two readers of one run may both decode a key, and
        # they decode the same committed value.
        messages: dict[str, AgentMessage] = {}
        for key in wanted:
            cached = known.get(key)
            messages[key] = cached if cached is not None else decode(key)
        kept = {key: known[key] for key in window_keys if key in known}
        kept.update(messages)
        with self._lock:
            self._sessions[session] = kept
            self._sessions.move_to_end(session)
            while len(self._sessions) > self._max_sessions:
                self._sessions.popitem(last=False)
        return messages
