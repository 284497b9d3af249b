"""``KeptDecodes``: a runner's decoded stored items, kept per process and handed out as copies.

Every ``RunModel`` of a runner that stores the framework's own items rebuilds the framework's
history from all the session's stored messages, so a session at turn 100 decodes hundreds of items
per model call, each a pydantic validation of 10 to 100 µs. A stored ``framework_item`` never
changes, so a process can decode each one once; a framework may edit the objects it is given, so
each caller gets a copy: by default one that ``fresh_copier`` planned when the item was decoded
(copies of every list, dict, dataclass and pydantic model in it), or the runner's own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Final, Generic, TypeVar

from dex_agents.adapters._fresh_copies import fresh_copier

__all__ = ["KeptDecodes"]

_DecodedT = TypeVar("_DecodedT")

_DEFAULT_MAX_ITEMS: Final = 1024
_DEFAULT_MAX_ITEM_CHARS: Final = 16 * 1024


class KeptDecodes(Generic[_DecodedT]):
    """Decodes stored ``framework_item`` texts once per process and hands out copies.

    Args:
        decode: Builds the framework's object from one stored item; what it raises propagates
            (and nothing is kept for that item).
        copy: Makes the copy a caller gets of a kept object: deep enough that whatever the
            framework edits in place is the caller's own. Without it, each kept object is copied
            by the plan ``fresh_copier`` made when it was decoded.
        max_items: Items kept, the least recently used dropped first.
        max_item_chars: Longer items are decoded every time, so the kept ones take at most about
            ``max_items * max_item_chars`` characters.

    Example:
        >>> import json
        >>> kept = KeptDecodes(json.loads, lambda value: dict(value))
        >>> first = kept('{"role": "user"}')
        >>> first["role"] = "edited"
        >>> kept('{"role": "user"}')
        {'role': 'user'}
        >>> KeptDecodes(json.loads)('{"parts": [{"text": "hi"}]}')
        {'parts': [{'text': 'hi'}]}
    """

    def __init__(
        self,
        decode: Callable[[str], _DecodedT],
        copy: Callable[[_DecodedT], _DecodedT] | None = None,
        *,
        max_items: int = _DEFAULT_MAX_ITEMS,
        max_item_chars: int = _DEFAULT_MAX_ITEM_CHARS,
    ) -> None:
        self._decode = decode
        self._max_item_chars = max_item_chars

        def maker(item: str) -> Callable[[], _DecodedT]:
            decoded = decode(item)
            return fresh_copier(decoded) if copy is None else functools.partial(copy, decoded)

        # A kept item is held as what makes its copies.
        self._makers = functools.lru_cache(maxsize=max_items)(maker)

    def __call__(self, item: str) -> _DecodedT:
        """A fresh object for ``item``, decoded at most once while it is kept.

        Raises:
            Exception: Whatever ``decode`` raises for ``item``.
        """
        if len(item) > self._max_item_chars:
            return self._decode(item)
        return self._makers(item)()

    def clear(self) -> None:
        """Forgets every kept object."""
        self._makers.cache_clear()
