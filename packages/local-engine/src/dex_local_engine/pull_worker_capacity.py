"""What the engine knows of one pull Worker's free capacity.

A pull Worker runs at most ``--task-slots`` tasks at once and keeps one of them for RPCs, but it
does not say how many: it declines (``NO_CAPACITY``) a Step that arrives when its Step slots are
full, and an RPC when every slot is. Offering each waiting task to a Worker at its bound and
reading its decline cost the engine most of its CPU once tasks queued at the Workers' bound (issue
33's load benchmark). So the engine learns each Worker's bounds from its declines, one for Steps
and one for RPCs: the tasks the Worker held (by the engine's count: offered and not yet ended or
declined) when it last declined a task of that kind for lack of capacity. While it holds that
many, its streams are offered no task of that kind; a task that ends frees a slot, and the next
waiting task goes there at once, with no decline.

A bound is only the engine's guess, so a Worker's decline still works as before: the declined
task waits for another stream, and the bound drops to what the Worker holds. A bound learned too
low (the declining stream was retiring, or the Worker had not finished its bookkeeping of a task
that just ended) does not stick: one task of the kind is offered beyond the bound once per probe
delay (2 ms after a decline that lowered the bound, doubling with each decline at the bound, at
most ``retry_seconds``), and a probe the Worker runs raises the bound by one. That is one probe
per Worker, not one per waiting task.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FIRST_PROBE_SECONDS = 0.002


@dataclass
class LearnedBound:
    """How many tasks a Worker may hold before it declines one more of one kind (learned)."""

    value: int | None = None
    """The Worker's task count at its last decline of this kind; None: not known."""
    probe_at: float = 0.0
    """From then on, one task of this kind may be offered beyond the bound (monotonic time)."""
    probe_delay: float = 0.0
    """The wait after a decline at the bound; doubles with each such decline."""

    def allows(self, in_flight: int, now: float) -> bool:
        """Whether a Worker holding ``in_flight`` tasks may be offered one more of the kind."""
        return self.value is None or in_flight < self.value or now >= self.probe_at

    def declined(self, in_flight: int, now: float, retry_seconds: float) -> None:
        """The Worker, holding ``in_flight`` tasks, declined one of the kind."""
        first = min(FIRST_PROBE_SECONDS, retry_seconds)
        if self.value is not None and in_flight < self.value:
            # It holds fewer than at its last decline: maybe the stream's own state. Probe soon,
            # keeping the delay reached, so a Worker that is at its bound goes back to it.
            wait = first
        else:
            self.probe_delay = (
                first if self.probe_delay == 0 else min(self.probe_delay * 2, retry_seconds)
            )
            wait = self.probe_delay
        self.value = in_flight
        self.probe_at = now + wait


@dataclass
class WorkerCapacity:
    """The tasks one pull Worker holds and the bounds learned from its declines.

    Args:
        retry_seconds: the longest wait between probes of a Worker at a bound.

    Example:
        >>> capacity = WorkerCapacity(retry_seconds=1.0)
        >>> capacity.offered(0.0, is_step=True)
        False
        >>> capacity.released()
        >>> capacity.declined(0.0, is_step=True)
        >>> capacity.takes(0.001, is_step=True), capacity.takes(0.001, is_step=False)
        (False, True)
        >>> capacity.takes(0.002, is_step=True)
        True
    """

    retry_seconds: float
    in_flight: int = 0
    """Tasks bound to its streams: offered, running, or being cancelled."""
    step_bound: LearnedBound = field(default_factory=LearnedBound)
    rpc_bound: LearnedBound = field(default_factory=LearnedBound)

    def _bound(self, is_step: bool) -> LearnedBound:
        return self.step_bound if is_step else self.rpc_bound

    def takes(self, now: float, *, is_step: bool) -> bool:
        """Whether a Step (or an RPC) may be offered now: below the bound, or a probe is due."""
        return self._bound(is_step).allows(self.in_flight, now)

    def next_probe_at(self, now: float) -> float | None:
        """When the Worker, at a bound now, may be offered a probe; None if it takes both kinds."""
        waits = [
            bound.probe_at
            for bound in (self.step_bound, self.rpc_bound)
            if not bound.allows(self.in_flight, now)
        ]
        return min(waits, default=None)

    def offered(self, now: float, *, is_step: bool) -> bool:
        """A task was bound to one of its streams; True when it goes beyond the bound (a probe)."""
        bound = self._bound(is_step)
        is_probe = bound.value is not None and self.in_flight >= bound.value
        if is_probe:
            # No second probe until this one's answer, or the delay passed (a stream that ends).
            bound.probe_at = now + max(bound.probe_delay, FIRST_PROBE_SECONDS)
        self.in_flight += 1
        return is_probe

    def released(self) -> None:
        """A task left one of its streams (final frame, decline, stream end, or never written)."""
        self.in_flight -= 1

    def declined(self, now: float, *, is_step: bool) -> None:
        """The Worker declined a task for lack of capacity (call after :meth:`released`)."""
        self._bound(is_step).declined(self.in_flight, now, self.retry_seconds)

    def took_probe(self, now: float, *, is_step: bool) -> None:
        """The Worker ran a task offered beyond its bound: the bound was too low by one at least.

        Raised by one, not forgotten: a forgotten bound let every idle stream of the Worker be
        offered a task at once, and it declined all but a few. The next probe may come soon.
        """
        bound = self._bound(is_step)
        if bound.value is not None:
            bound.value += 1
            bound.probe_at = now + min(FIRST_PROBE_SECONDS, self.retry_seconds)
