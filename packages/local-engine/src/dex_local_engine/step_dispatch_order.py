"""The order in which Step tasks waiting for a free pull Worker slot are offered one.

Dex says nothing about the order in which a server hands waiting Step tasks to Workers; this is
the local engine's choice. First come, first served by the moment a Step became ready made a
session that resumes after a person (an approval) queue behind the Steps of every turn that
started meanwhile: at 1,000 sessions on one engine the approved write waited about twice as long
as before the engine tracked its Workers' free slots (issue 33). So waiting Steps are served by
the age of the *work* they belong to, not by their own:

- Each Step execution carries ``work_started_at``: when the work it continues started. A Flow's
  start Step gets the run's start; a Step moved to by a Step's decision gets that Step's.
- A waiting Step keeps its own when its wait ends by what the run's Steps did (a Channel message
  or an Attribute a Step wrote).
- When something outside ends the wait (a client's write, an RPC, a Timer, a SubFlow's end) of a
  run with no other Step execution, the run had nothing under way: this is new work (the next
  message of a session), ``work_started_at`` is *now*, and it queues behind the work under way.
- When something outside ends the wait of a run whose other Steps are under way (a turn waiting
  for its tool results gets its approval), the run *resumes* work under way: a person (or a
  Timer) waited on it, so it is served first, as the oldest work the bound below allows
  (``work_started_at`` is :data:`RESUMED_WORK_STARTED_AT`), and so are the Steps it moves to
  until the run waits for new work again.
- No starvation: a Step is never served before a Step that started waiting more than
  ``max_overtake_seconds`` earlier. A waiting Step's order is
  ``max(work_started_at, waiting_since - max_overtake_seconds)``, lowest first (ties: first come),
  so work under way overtakes only Steps that started waiting within that window before it, and
  a new run's Step still gets a slot however much work under way keeps coming.

RPCs are not ordered this way: they wait apart and are offered before Steps (a client waits on
them), first come, first served.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

DEFAULT_MAX_OVERTAKE_SECONDS = 30.0
"""How long work under way may keep overtaking a waiting Step of newer work (seconds)."""

RESUMED_WORK_STARTED_AT = 0.0
"""``work_started_at`` of work resumed from outside while under way: the oldest there is, so its
Steps go first among the Steps that started waiting within ``max_overtake_seconds``."""

_Item = TypeVar("_Item")


@dataclass(frozen=True)
class StepDispatchOrder:
    """Orders waiting Step tasks by the age of their work, with an overtaking bound.

    Args:
        max_overtake_seconds: a Step that starts waiting later than this after another is never
            served before it (0: plain arrival order).

    Example:
        >>> order = StepDispatchOrder(max_overtake_seconds=30.0)
        >>> order.key(work_started_at=100.0, waiting_since=110.0)
        100.0
        >>> order.key(work_started_at=100.0, waiting_since=200.0)
        170.0
        >>> order.key(work_started_at=None, waiting_since=110.0)
        110.0
    """

    max_overtake_seconds: float = DEFAULT_MAX_OVERTAKE_SECONDS

    def key(self, *, work_started_at: float | None, waiting_since: float) -> float:
        """The waiting Step's place (lower first); ``None`` work: its arrival (wall seconds)."""
        if work_started_at is None:
            return waiting_since
        return max(work_started_at, waiting_since - self.max_overtake_seconds)


class OrderedWaiters(Generic[_Item]):
    """Items kept in the order of their keys (ties: first added first), removable by identity.

    Example:
        >>> waiting: OrderedWaiters[str] = OrderedWaiters()
        >>> waiting.add("new", 5.0)
        >>> waiting.add("under way", 1.0)
        >>> list(waiting)
        ['under way', 'new']
    """

    def __init__(self) -> None:
        self._entries: list[tuple[float, int, _Item]] = []
        self._places: dict[_Item, tuple[float, int]] = {}
        self._sequence = itertools.count()

    def add(self, item: _Item, key: float) -> None:
        place = (key, next(self._sequence))
        self._places[item] = place
        bisect.insort(self._entries, (*place, item), key=_place)

    def discard(self, item: _Item) -> None:
        place = self._places.pop(item, None)
        if place is not None:
            del self._entries[bisect.bisect_left(self._entries, place, key=_place)]

    def __contains__(self, item: object) -> bool:
        return item in self._places

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[_Item]:
        """A snapshot, lowest key first (the caller may add or discard while iterating)."""
        return iter([*map(_ITEM, self._entries)])


_ITEM = operator.itemgetter(2)
"""The item of an entry (C-level: a full match lists every waiting Step on every task's end)."""


def _place(entry: tuple[float, int, object]) -> tuple[float, int]:
    return entry[0], entry[1]
