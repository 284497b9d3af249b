"""``--dist loadgroup`` really groups tests: a test of an ``xdist_group`` carries the group in
its nodeid, the mark by which the scheduler sends the whole group to one xdist worker (pytest 9.2
drops pytest-xdist 3.8's suffix, pytest-xdist#1386: the workspace keeps pytest below 9.2, and the
root conftest stops a run whose grouped tests lost their group)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("xdist-group-check")


def test_a_grouped_test_carries_its_group_in_its_nodeid(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not an xdist worker of --dist loadgroup (e.g. -n 0)")
    assert request.node.nodeid.endswith(
        "::test_a_grouped_test_carries_its_group_in_its_nodeid@xdist-group-check"
    )
