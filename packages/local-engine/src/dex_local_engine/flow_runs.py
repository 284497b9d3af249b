"""The engine's Flow runs by Flow ID, their lookups, and what SearchFlows sees of them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

from dex.dexpb import dex_pb2 as pb

from dex_local_engine import errors
from dex_local_engine.blob_values import BlobStore
from dex_local_engine.flow_state import FlowRun, load_run
from dex_local_engine.search_query import FlowSearchRecord, IndexedValue, indexed_value_from_write
from dex_local_engine.store import Store

__all__ = ["FlowRuns"]

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

    def __init__(self, store: Store, blobs: BlobStore) -> None:
        self._store = store
        self._blobs = blobs
        self._latest: dict[str, FlowRun] = {}
        stored_indexes = store.get_meta(_INDEX_META_KEY)
        self.attribute_index_types: dict[str, int] = (
            json.loads(stored_indexes) if stored_indexes else {}
        )

    def load(self) -> None:
        """Load every stored run (the latest of each Flow ID wins)."""
        for row in self._store.load_flows():
            run = load_run(row)
            if row.is_latest or run.flow_id not in self._latest:
                self._latest[run.flow_id] = run

    def __iter__(self) -> Iterator[FlowRun]:
        return iter(list(self._latest.values()))

    def find(self, flow_id: str) -> FlowRun | None:
        """The latest run of ``flow_id``, or None."""
        return self._latest.get(flow_id)

    def is_latest(self, run: FlowRun) -> bool:
        """Whether ``run`` is still the latest run of its Flow ID."""
        return self._latest.get(run.flow_id) is run

    def add(self, run: FlowRun) -> None:
        """Make ``run`` the latest run of its Flow ID."""
        self._latest[run.flow_id] = run

    def get_run(self, flow_id: str, run_id: str = "") -> FlowRun:
        """The Flow's latest run (or the named run if it is the latest)."""
        if not flow_id:
            raise errors.invalid_argument("flow_id is required")
        run = self._latest.get(flow_id)
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
