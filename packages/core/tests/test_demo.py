"""``dex-agents demo`` driven as a real process (forked from a warm parent unless it reads the
keyboard): approve, SIGKILL, reattach, finish."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from demo_cli_child import fork_demo_cli
from dex_agents._demo import APPROVAL_PENDING_EXIT_STATUS, DemoRefunds
from dex_agents.testing._fork_server import ForkedProcess
from foreground_job import default_interrupt_signal
from warm_workers import fork_servers_off

_TIMEOUT_SECONDS = 60.0
# One xdist worker runs them all, so their demo runs fork from one warm parent (demo_cli_child).
pytestmark = pytest.mark.xdist_group("demo-cli-scripted")


class _Demo:
    """One ``dex-agents demo`` process with its output (stdout and stderr) read line by line.

    ``keyboard`` gives it a stdin to answer at (``answer``), open until ``wait``; without it,
    stdin is at its end and the process forks from a warm parent (``demo_cli_child``).
    ``own_group`` runs it in a process group of its own, as a terminal's foreground job.
    """

    def __init__(
        self, directory: Path, *arguments: str, keyboard: bool = False, own_group: bool = False
    ) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        forked = None
        # Beside the demo's directory, so it holds only what the demo wrote.
        outputs = directory.parent / f"{directory.name}-cli"
        output_path = outputs / f"run-{len(list(outputs.glob('run-*')))}.log"
        if not keyboard and not own_group:
            forked = fork_demo_cli(
                ["demo", *arguments], env=os.environ, cwd=directory, output_path=output_path
            )
            assert forked is not None or fork_servers_off(), "demo_cli_child's preload failed"
        if forked is not None:
            self.process: ForkedProcess | subprocess.Popen[str] = forked
            self._stdin = None
            threading.Thread(target=self._tail, args=(output_path,), daemon=True).start()
            return
        popen = subprocess.Popen(
            [sys.executable, "-m", "dex_agents.cli", "demo", *arguments],
            cwd=directory,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # A process group of its own stands for a terminal's foreground group, which Ctrl+C
            # signals as a whole.
            start_new_session=own_group,
            preexec_fn=default_interrupt_signal,
        )
        self.process, self._stdin = popen, popen.stdin
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert isinstance(self.process, subprocess.Popen) and self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def _tail(self, path: Path) -> None:
        """Lines of the forked child's output file as it writes them, then ``None`` at its exit."""
        pending = ""
        while not path.exists() and self.process.poll() is None:
            time.sleep(0.01)
        with path.open(encoding="utf-8", errors="replace") as output:
            while True:
                exited = self.process.poll() is not None
                chunk = output.read()
                *lines, pending = (pending + chunk).split("\n")
                for line in lines:
                    self._queue.put(line)
                if exited and not chunk:
                    break
                if not chunk:
                    time.sleep(0.01)
        if pending:
            self._queue.put(pending)
        self._queue.put(None)

    def expect(self, pattern: str) -> re.Match[str]:
        """Wait for the next output line matching ``pattern``; fail with the output so far."""
        deadline = time.monotonic() + _TIMEOUT_SECONDS
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self._queue.get(timeout=max(remaining, 0.01))
            except queue.Empty:
                line = None
                remaining = 0
            if line is None:
                raise AssertionError(
                    f"no line matching {pattern!r} (remaining {remaining:.0f} s); output:\n"
                    + "\n".join(self.lines)
                )
            self.lines.append(line)
            match = re.search(pattern, line)
            if match:
                return match

    def answer(self, text: str) -> None:
        assert self._stdin is not None, "started without keyboard=True"
        self._stdin.write(text + "\n")
        self._stdin.flush()

    def wait(self) -> int:
        if self._stdin is not None:
            self._stdin.close()
        status = self.process.wait(timeout=_TIMEOUT_SECONDS)
        while (line := self._queue.get(timeout=_TIMEOUT_SECONDS)) is not None:
            self.lines.append(line)
        self._queue.put(None)  # expect() after wait() still sees the end
        return status

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


def test_the_demo_survives_a_kill_while_an_approval_waits_and_finishes_on_reattach(
    tmp_path: Path,
) -> None:
    first = _Demo(tmp_path, keyboard=True)
    session_id = first.expect(r"Session ID: (\S+)").group(1)
    first.expect(r"dex-agents demo --session " + re.escape(session_id))
    first.expect(r"running lookup_order")
    first.expect(r"Approve refund_order\(.*\)\? Answer y or n:")
    intruder = _Demo(tmp_path, "--session", session_id)
    assert intruder.wait() == 1  # one database, one demo
    assert "another dex-agents demo" in intruder.output

    first.process.send_signal(signal.SIGKILL)  # mid-session, with the approval pending
    first.process.wait(timeout=_TIMEOUT_SECONDS)

    second = _Demo(tmp_path, "--session", session_id, keyboard=True)
    second.expect(r"Conversation so far:")
    second.expect(r"tool lookup_order: .*ceramic teapot")
    second.expect(r"Approve refund_order\(.*\)\? Answer y or n:")  # still pending, shown again
    second.answer("y")
    second.expect(r"running refund_order")
    second.expect(r"assistant: Done\. Refunded 25\.99 USD on order 7")
    second.expect(r"Turn finished")
    assert second.wait() == 0
    assert "running lookup_order" not in second.output  # the lookup did not run again

    third = _Demo(tmp_path, "--session", session_id)
    third.expect(r"assistant: Done\. Refunded 25\.99 USD")
    third.expect(r"its turn finished")
    assert third.wait() == 0


def test_without_an_answer_the_approval_waits_for_a_flag(tmp_path: Path) -> None:
    first = _Demo(tmp_path, "--message", "Order 7 broke, refund please")
    session_id = first.expect(r"Session ID: (\S+)").group(1)
    first.expect(r"Approve refund_order")
    assert first.wait() == APPROVAL_PENDING_EXIT_STATUS  # stdin closed: no answer
    assert f"dex-agents demo --session {session_id} --approve (or --reject)" in first.output

    second = _Demo(tmp_path, "--session", session_id, "--reject")
    second.expect(r"rejecting \(--reject\)")
    second.expect(r"<- refund_order: rejected")
    second.expect(r"Turn finished")
    assert second.wait() == 0
    assert "running refund_order" not in second.output


def test_reattaching_to_an_unknown_session_says_what_to_do(tmp_path: Path) -> None:
    demo = _Demo(tmp_path, "--session", "no-such-session")

    assert demo.wait() == 1
    assert re.search(
        r"no session no-such-session .*Start a new one with: dex-agents demo", demo.output
    )
    # Its engine started and stopped, and left nothing beside the demo's directory.
    assert [path.name for path in tmp_path.iterdir()] == [".dex-agents"]


def test_a_session_continues_with_the_next_message(tmp_path: Path) -> None:
    """``--session X --message ...`` sends the next user message and follows the turn it starts."""
    first = _Demo(tmp_path, "--message", "Order 7 broke, refund please", "--approve")
    session_id = first.expect(r"Session ID: (\S+)").group(1)
    first.expect(r"Turn finished\. .*--session " + re.escape(session_id) + r' --message "\.\.\."')
    assert first.wait() == 0

    second = _Demo(tmp_path, "--session", session_id, "--message", "Where is order 7 now?")
    second.expect(r"Conversation so far:")
    second.expect(r"assistant: Done\. Refunded 25\.99 USD")  # the first turn, as stored
    second.expect(r"user: Where is order 7 now\?")
    second.expect(r"-- turn-2 started")
    second.expect(r"running lookup_order")
    second.expect(r"assistant: Done\. .*ceramic teapot")  # no refund asked: no approval
    second.expect(r"-- turn-2 completed")
    second.expect(r"Turn finished")
    assert second.wait() == 0
    assert "refund_order" not in second.output.split("user: Where is order 7 now?")[1]


def test_ctrl_c_stops_the_demo_quietly(tmp_path: Path) -> None:
    """SIGINT while an approval waits: one line that says how to resume, no traceback, and no
    Worker complaining about an engine that died first (the engine has its own process group)."""
    demo = _Demo(tmp_path, own_group=True)
    session_id = demo.expect(r"Session ID: (\S+)").group(1)
    demo.expect(r"Approve refund_order\(.*\)\? Answer y or n:")
    os.killpg(demo.process.pid, signal.SIGINT)  # Ctrl+C: the whole foreground group
    status = demo.wait()

    assert status == 130, demo.output
    assert f"Interrupted. Resume with: dex-agents demo --session {session_id}" in demo.output
    tail = demo.output.split("Interrupted.")[1]
    assert "Traceback" not in demo.output
    assert "disconnected" not in tail and "UNAVAILABLE" not in tail
    assert tail.strip().count("\n") == 0, tail  # nothing after the one line


def test_a_refund_lost_to_a_kill_is_confirmed_by_its_outcome_check_on_reattach(
    tmp_path: Path,
) -> None:
    first = _Demo(tmp_path, "--approve")
    session_id = first.expect(r"Session ID: (\S+)").group(1)
    first.expect(r"running refund_order")
    refunds = DemoRefunds(tmp_path / ".dex-agents" / "refunds.json")
    deadline = time.monotonic() + _TIMEOUT_SECONDS
    while not refunds.all():  # the provider took the refund; its confirmation is a second away
        assert time.monotonic() < deadline, first.output
        time.sleep(0.02)
    first.process.send_signal(signal.SIGKILL)  # mid-refund: the tool Step's attempt is lost
    first.process.wait(timeout=_TIMEOUT_SECONDS)

    second = _Demo(tmp_path, "--session", session_id)
    # Followed live or, when the check was faster, in the conversation so far.
    second.expect(r"refund_order: .*\(confirmed after a restart: the order store has it\)")
    second.expect(r"assistant: Done\. Refunded 25\.99 USD on order 7")
    assert second.wait() == 0
    assert "running refund_order" not in second.output  # the check ran, not the refund
    assert len(refunds.all()) == 1
