"""The bare gRPC transport benchmark still runs end to end (tiny sizes; the figures are not
checked)."""

from __future__ import annotations

import importlib.util
import re
import subprocess

import pytest
from benchmark_support import run_benchmark


def _run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return run_benchmark("grpc_transport_floor.py", "--calls", "20", *arguments, timeout=120)


@pytest.mark.parametrize(
    ("arguments", "transport"),
    [((), "TCP loopback"), (("--unix",), "a Unix socket"), (("--sync", "--unix"), "a Unix socket")],
)
def test_the_transport_floor_prints_both_measurements(
    arguments: tuple[str, ...], transport: str
) -> None:
    done = _run(*arguments)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f" on {transport}, server GRPC_POLL_STRATEGY" in done.stdout
    for kind in ("unary InvokeRPC", "stream frame pair"):
        assert re.search(
            rf"{kind} +server CPU +\d+ us per call, round trip median +\d+ us", done.stdout
        ), done.stdout


@pytest.mark.skipif(
    importlib.util.find_spec("grpclib") is not None, reason="grpclib is installed here"
)
def test_grpclib_without_grpclib_says_how_to_run_it() -> None:
    done = _run("--grpclib")
    assert done.returncode != 0
    assert "uv run --with grpclib" in done.stderr
