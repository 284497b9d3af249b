from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from dex_agents import ConfigurationError
from dex_agents.testing import InvocationLog

_APPENDER = """
import sys
from dex_agents.testing import InvocationLog
log = InvocationLog(sys.argv[1])
for n in range(int(sys.argv[3])):
    log.record(sys.argv[2], key=f"{sys.argv[2]}-{n}" + "x" * 5000)
"""


def test_concurrent_appends_from_several_processes_are_all_counted(tmp_path: Path) -> None:
    path = tmp_path / "invocations.jsonl"
    appenders = [
        subprocess.Popen([sys.executable, "-c", _APPENDER, str(path), name, "150"])
        for name in ("lookup", "lookup", "refund", "refund")
    ]
    assert [appender.wait(timeout=60) for appender in appenders] == [0, 0, 0, 0]

    log = InvocationLog(path)

    assert log.count("lookup") == 300
    assert log.count("refund") == 300
    assert log.count("model") == 0
    assert len({record.process_id for record in log.records()}) == 4
    assert sorted(set(log.keys("refund"))) == sorted(f"refund-{n}" + "x" * 5000 for n in range(150))


def test_an_empty_log_counts_nothing(tmp_path: Path) -> None:
    log = InvocationLog(tmp_path / "missing" / "invocations.jsonl")

    assert log.count("anything") == 0
    assert log.records() == []


def test_records_keep_order_and_keys(tmp_path: Path) -> None:
    log = InvocationLog(tmp_path / "invocations.jsonl")
    log.record("upsert", key="flow/turn/call-1")
    log.record("model")
    log.record("upsert", key="flow/turn/call-1")

    assert log.keys("upsert") == ["flow/turn/call-1", "flow/turn/call-1"]
    assert [record.name for record in log.records()] == ["upsert", "model", "upsert"]


def test_a_record_needs_a_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="non-empty name"):
        InvocationLog(tmp_path / "log.jsonl").record("")
