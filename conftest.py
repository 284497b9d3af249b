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


# ``--dist loadgroup`` sends the tests of one ``xdist_group`` to one xdist worker, so the group's
# warm parent (LiteLLM, the MCP servers, the demo CLI) is imported once, not once per worker.
# pytest-xdist 3.8 marks a group by appending ``@<group>`` to the nodeid through the ``_nodeid``
# field, which pytest 9.2 no longer reads (its nodeid is the structured ``_id``): the groups were
# silently dealt out like ``--dist load`` (pytest-dev/pytest-xdist#1386). This hook adds the
# suffix where xdist's did not take. Only core's groups: tests-shared's runner groups would put
# each runner's whole share on one worker, a change of the suite's schedule still to be measured.
_GROUPED_TESTS = ("packages/core/tests/",)


def _xdist_group(item: pytest.Item) -> str:
    """The item's group name as pytest-xdist forms it: its groups sorted and joined, or ''."""
    names = {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }
    return "_".join(sorted(names))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):  # set on xdist workers of loadgroup only
        return
    for item in items:
        group = _xdist_group(item)
        nodeid = item.nodeid
        if not group or not nodeid.startswith(_GROUPED_TESTS) or nodeid.endswith(f"@{group}"):
            continue
        parse = getattr(type(getattr(item, "_id", None)), "parse", None)  # pytest 9.2's NodeId
        if parse is not None:
            item._id = parse(f"{nodeid}@{group}")
