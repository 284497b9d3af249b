"""Start a child process as a terminal starts a foreground job, whatever the test run inherited."""

from __future__ import annotations

import signal


def default_interrupt_signal() -> None:
    """A ``preexec_fn``: the child starts with SIGINT at its default, as a shell's foreground job.

    A child inherits an ignored or blocked SIGINT (a test run started in the background of a
    non-interactive shell ignores it), and Python keeps an inherited ignored SIGINT, so without
    this a Ctrl+C test's child could never see its SIGINT.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
