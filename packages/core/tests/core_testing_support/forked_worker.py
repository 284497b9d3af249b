"""A stand-in Worker child for the fork server: it reports how it was started, then serves nothing.

``preload_worker()`` records which process ran it (and starts a thread when
``FORKED_WORKER_PRELOAD_THREAD=1``, which makes forking unsafe). The child writes a JSON report to
``FORKED_WORKER_REPORT``, starts a grandchild in its process group and says it is ready.
"""

import gc
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from dex_agents.testing._worker_process import READY_FILE_ENV

import core_testing_support


def preload_worker() -> None:
    """Record this process as the warm parent, where a forked child finds it."""
    core_testing_support.forked_worker_preloaded_in = os.getpid()  # type: ignore[attr-defined]
    if os.environ.get("FORKED_WORKER_PRELOAD_THREAD") == "1":
        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()


if __name__ == "__main__":
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    report = {
        "pid": os.getpid(),
        "parent": os.getppid(),
        "preloaded_in": getattr(core_testing_support, "forked_worker_preloaded_in", None),
        "grandchild": grandchild.pid,
        "cwd": os.getcwd(),
        "argv0": sys.argv[0],
        "frozen_objects": gc.get_freeze_count(),
    }
    Path(os.environ["FORKED_WORKER_REPORT"]).write_text(json.dumps(report))
    if os.environ.get("FORKED_WORKER_FAIL"):
        sys.exit(f"forked worker refused to start: {os.environ['FORKED_WORKER_FAIL']}")
    Path(os.environ[READY_FILE_ENV]).touch()
    while True:
        time.sleep(1)
