"""The ``DEXCLI`` path of AgentTestStack, against a stand-in dexcli that serves the embedded engine.

A real ``dexcli`` cannot be installed here; this checks the command line, the
processCrashSafe config file, the dex-server-zd lookup, readiness and teardown.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
from core_testing_support.gated_flow import GatedFlow
from dex_agents.testing import DEXCLI_ENV, AgentTestStack, EngineStartError

TESTS_DIR = Path(__file__).resolve().parent


def _install_fake_dexcli(directory: Path, *, with_server_zd: bool = True) -> Path:
    directory.mkdir()
    dexcli = directory / "dexcli"
    dexcli.write_text(
        f"#!/bin/sh\nFAKE_DEXCLI_RECORD={directory / 'dexcli-call.json'} exec {sys.executable} "
        f'{TESTS_DIR / "core_testing_support" / "fake_dexcli.py"} "$@"\n'
    )
    dexcli.chmod(dexcli.stat().st_mode | stat.S_IEXEC)
    if with_server_zd:
        (directory / "dex-server-zd").write_text("")
    return dexcli


async def test_dexcli_dev_runs_with_a_process_crash_safe_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dexcli = _install_fake_dexcli(tmp_path / "bin")
    monkeypatch.setenv(DEXCLI_ENV, str(dexcli))
    monkeypatch.delenv("DEX_SERVER_ZD_BINARY", raising=False)

    async with AgentTestStack(tmp_path / "stack", [GatedFlow()], "unused.worker") as stack:
        assert await stack.client.health_check()
        address = stack.server_address
        call = json.loads((tmp_path / "bin" / "dexcli-call.json").read_text())

    assert "durabilityMode: processCrashSafe" in call["zd_config"]
    assert call["server_zd_binary"] == str(tmp_path / "bin" / "dex-server-zd")
    assert "--open=false" in call["arguments"]
    dex_port = call["arguments"][call["arguments"].index("--dex-port") + 1]
    assert address == f"127.0.0.1:{dex_port}"


async def test_a_missing_dex_server_zd_names_the_variable_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        DEXCLI_ENV, str(_install_fake_dexcli(tmp_path / "bin", with_server_zd=False))
    )
    monkeypatch.delenv("DEX_SERVER_ZD_BINARY", raising=False)

    with pytest.raises(EngineStartError, match="set DEX_SERVER_ZD_BINARY"):
        async with AgentTestStack(tmp_path / "stack", [GatedFlow()], "unused.worker"):
            pass
