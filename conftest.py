"""Workspace-wide pytest settings that apply to every member's tests."""

from __future__ import annotations

import os

import pytest

# Most of the suite's wall time is tests waiting on engines, Worker children and model sleeps,
# not CPU, so two xdist workers more than there are cores keep the cores busy (measured on 2
# cores: `-n 3` 551 s against `-n 2` 632-643 s; since the warm fork servers cut the CPU of each
# Worker start, `-n 4` 530 s against `-n 3` 613 s, fresh clones, one run each). Four at most:
# every xdist worker holds an engine and a warm fork server per runner.
_MAX_XDIST_WORKERS = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many xdist workers ``-n auto`` starts: the usable cores plus two, at most four."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min((cores or 1) + 2, _MAX_XDIST_WORKERS)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Stop the run when pytest-xdist ignored the ``xdist_group`` marks, as it does with pytest
    9.2: each group would then start its engine and Workers on every xdist worker, unnoticed.

    Raises:
        pytest.UsageError: A grouped test's node ID has no group suffix under ``--dist loadgroup``.
    """
    if not getattr(session.config.option, "loadgroup", False):
        return  # not an xdist worker of --dist loadgroup
    ungrouped = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("xdist_group") is not None and not _has_group_suffix(item.nodeid)
    ]
    if ungrouped:
        raise pytest.UsageError(
            f"pytest-xdist ignored the xdist_group mark of {len(ungrouped)} tests "
            f"(first: {ungrouped[0]}); use a pytest version it supports (pyproject.toml's dev group)"
        )


def _has_group_suffix(nodeid: str) -> bool:
    # pytest-xdist's own rule (LoadGroupScheduling._split_scope): an "@" after any "]".
    return nodeid.rfind("@") > nodeid.rfind("]")
