"""The engine's Flow runs by Flow ID, their lookups, and what SearchFlows sees of them.

Running runs live in memory. A run leaves memory once its close is committed: the journal hands
it to :meth:`FlowRuns.retire`, and from then on it is read from the database on demand
(:meth:`FlowRuns.find`), so a long-lived engine holds only the runs that still run, plus a few
recently read closed ones (``closed_run_cache``), however many runs it has served. A closed run's
search record is written with its close, so SearchFlows lists closed runs without loading them.
"""

from __future__ import annotations

import json
import pickle
from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime

from dex.dexpb import dex_pb2 as pb

from dex_local_engine import errors
from dex_local_engine.blob_values import BlobStore
from dex_local_engine.flow_state import FlowRun, load_run
from dex_local_engine.search_query import FlowSearchRecord, IndexedValue, indexed_value_from_write
from dex_local_engine.store import Store

__all__ = ["DEFAULT_CLOSED_RUN_CACHE", "FlowRuns"]

DEFAULT_CLOSED_RUN_CACHE = 64
"""Closed runs kept in memory after they closed or were read (most recently used)."""

_INDEX_META_KEY = "attribute_index_types"


def _timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class FlowRuns:
    """The latest run of each Flow ID, and the Attribute index keys Workers declared.

    Example::

        runs = FlowRuns(store, BlobStore(store))
        run = runs.get_running("order-7")

    Raises (from lookups): :class:`~dex_local_engine.errors.EngineError`.
    """

    def __init__(
        self, store: Store, blobs: BlobStore, closed_run_cache: int = DEFAULT_CLOSED_RUN_CACHE
    ) -> None:
        self._store = store
        self._blobs = blobs
        self._running: dict[str, FlowRun] = {}
        self._closed: OrderedDict[str, FlowRun] = OrderedDict()
        self._closed_run_cache = max(0, closed_run_cache)
        stored_indexes = store.get_meta(_INDEX_META_KEY)
        self.attribute_index_types: dict[str, int] = (
            json.loads(stored_indexes) if stored_indexes else {}
        )

    def load(self) -> None:
        """Load the running runs from the store (closed ones stay there)."""
        for row in self._store.load_flows(running_only=True):
            run = load_run(row)
            if run.is_running:
                self._running[run.flow_id] = run
            else:
                # Written before closed runs left memory: mark it, once, and leave it there.
                self._store.mark_closed(run.run_id, self.closed_record(run))

    def running(self) -> list[FlowRun]:
        """The runs that are running, in memory."""
        return list(self._running.values())

    @property
    def in_memory(self) -> int:
        """How many runs are held in memory (running ones and cached closed ones)."""
        return len(self._running) + len(self._closed)

    def find(self, flow_id: str) -> FlowRun | None:
        """The latest run of ``flow_id`` (a closed one read from the store), or None."""
        run = self._running.get(flow_id)
        if run is not None:
            return run
        run = self._closed.get(flow_id)
        if run is not None:
            self._closed.move_to_end(flow_id)
            return run
        stored = self._store.load_latest(flow_id)
        if stored is None:
            return None
        run = load_run(stored)
        self._remember_closed(run)
        return run

    def is_latest(self, run: FlowRun) -> bool:
        """Whether ``run`` is the running latest run of its Flow ID."""
        return self._running.get(run.flow_id) is run

    def add(self, run: FlowRun) -> None:
        """Make the new ``run`` the latest run of its Flow ID."""
        self._running[run.flow_id] = run
        self._closed.pop(run.flow_id, None)

    def discard(self, run: FlowRun, previous: FlowRun) -> None:
        """Forget the never-committed new ``run``: ``previous`` is its Flow ID's latest run again."""
        if self._running.get(run.flow_id) is run:
            del self._running[run.flow_id]
        if previous.is_running:
            self._running[previous.flow_id] = previous
        else:
            self._remember_closed(previous)

    def retire(self, run: FlowRun) -> None:
        """``run``'s close was committed: it leaves the running runs (cached for a while)."""
        if self._running.get(run.flow_id) is run:
            del self._running[run.flow_id]
            self._remember_closed(run)

    def get_run(self, flow_id: str, run_id: str = "") -> FlowRun:
        """The Flow's latest run (or the named run if it is the latest)."""
        if not flow_id:
            raise errors.invalid_argument("flow_id is required")
        run = self.find(flow_id)
        if run is None or (run_id and run.run_id != run_id):
            raise errors.flow_not_found(flow_id)
        return run

    def get_running(self, flow_id: str, run_id: str = "") -> FlowRun:
        """The Flow's run if it is still running."""
        run = self.get_run(flow_id, run_id)
        if not run.is_running:
            raise errors.flow_not_active(flow_id)
        return run

    def sync_attribute_indexes(self, indexes: dict[str, int]) -> None:
        """Remember the Attribute index keys Workers declared (kept across restarts)."""
        self.attribute_index_types.update(indexes)
        self._store.set_meta(_INDEX_META_KEY, json.dumps(self.attribute_index_types).encode())

    def search_records(self) -> Iterator[FlowSearchRecord]:
        """What SearchFlows sees of every Flow ID's latest run."""
        running = self.running()
        for run in running:
            yield self.search_record(run)
        running_ids = {run.flow_id for run in running}
        for payload in self._store.closed_search_records():
            record = pickle.loads(payload)
            if isinstance(record, FlowSearchRecord) and record.flow_id not in running_ids:
                yield record

    def closed_record(self, run: FlowRun) -> bytes:
        """The stored form of a closed run's search record."""
        return pickle.dumps(self.search_record(run), protocol=pickle.HIGHEST_PROTOCOL)

    def search_record(self, run: FlowRun) -> FlowSearchRecord:
        """What SearchFlows sees of ``run``: system keys, indexed Attributes, active Steps."""
        indexed: dict[str, IndexedValue] = {}
        for key, value in run.attributes.items():
            config = run.attribute_indexes.get(key)
            if config is None:
                index_type = self.attribute_index_types.get(key)
                if index_type is None:
                    continue
                config = pb.IndexConfig(enable=True, type=index_type)  # type: ignore[arg-type]
            found = indexed_value_from_write(
                pb.AttributeWrite(key=key, value=self._blobs.resolve(value), index_config=config)
            )
            if found is not None and found[1] is not None:
                indexed[found[0]] = found[1]
        return FlowSearchRecord(
            flow_id=run.flow_id,
            run_id=run.run_id,
            flow_type=run.flow_type,
            status=run.status,
            start_time=_timestamp(run.started_at),
            close_time=None if run.closed_at is None else _timestamp(run.closed_at),
            active_step_types=_active_step_types(run),
            indexed_attributes=indexed,
            parent_flow_id=run.parent_flow_id,
        )

    def _remember_closed(self, run: FlowRun) -> None:
        if self._closed_run_cache == 0:
            return
        self._closed[run.flow_id] = run
        self._closed.move_to_end(run.flow_id)
        while len(self._closed) > self._closed_run_cache:
            self._closed.popitem(last=False)


def _active_step_types(run: FlowRun) -> tuple[str, ...]:
    mode = run.config.active_step_search_mode
    if mode == pb.ACTIVE_STEP_SEARCH_MODE_DISABLED:
        return ()
    every = mode == pb.ACTIVE_STEP_SEARCH_MODE_ENABLED_FOR_ALL
    return tuple(
        sorted(
            {
                step.step_type
                for step in run.steps.values()
                if every or not step.options.skip_wait_for
            }
        )
    )
