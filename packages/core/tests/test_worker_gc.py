"""``freeze_worker_startup_objects``: on by default, off by its environment variable, and once per
process. The Worker entry points' own tests check a started Worker froze its objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from dex_agents._worker_gc import (
    WORKER_GC_FREEZE_ENV,
    freeze_worker_startup_objects,
    worker_gc_freeze_enabled,
)


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_it_freezes_what_is_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKER_GC_FREEZE_ENV, raising=False)
    alive = [object() for _ in range(1000)]  # tracked by the collector: a list of objects
    freeze_worker_startup_objects()
    assert gc.get_freeze_count() > len(alive)
    assert not any(alive is tracked for tracked in gc.get_objects())  # frozen ones are not listed


@pytest.mark.parametrize("value", ["0", "false", "No", " off "])
def test_the_environment_variable_turns_it_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(WORKER_GC_FREEZE_ENV, value)
    assert not worker_gc_freeze_enabled()
    freeze_worker_startup_objects()
    assert gc.get_freeze_count() == 0


def test_any_other_value_leaves_it_on() -> None:
    assert worker_gc_freeze_enabled({WORKER_GC_FREEZE_ENV: "1"})
    assert worker_gc_freeze_enabled({})


def test_a_process_that_froze_already_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKER_GC_FREEZE_ENV, raising=False)
    gc.freeze()
    before = gc.get_freeze_count()
    later = [[] for _ in range(1000)]
    freeze_worker_startup_objects()
    # Not frozen again: the new lists are still tracked, and no more objects are frozen (fewer
    # may be, when another thread of this test process frees frozen ones meanwhile).
    assert gc.get_freeze_count() <= before
    assert any(later is tracked for tracked in gc.get_objects())
