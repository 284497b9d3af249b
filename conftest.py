"""Workspace-wide pytest settings that apply to every member's tests."""

from __future__ import annotations

import os

import pytest

# Most of the suite's wall time is tests waiting on engines, Worker children and model sleeps,
# not CPU, so one xdist worker more than there are cores keeps the cores busy (measured on 2 cores:
# `-n 3` 551 s against `-n 2` 632-643 s). Four at most: every xdist worker holds an engine and
# a Worker child per runner.
_MAX_XDIST_WORKERS = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many xdist workers ``-n auto`` starts: the usable cores plus one, at most four."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min((cores or 1) + 1, _MAX_XDIST_WORKERS)
